"""The one test helper every keras_vit layer and model goes through.

`run_layer_test` wraps a layer in a functional model and hands it to
`run_model_test`, which checks the Keras contract end to end:

- config round trip: `get_config` -> `from_config` -> `get_config` is
  JSON-identical (for the layer itself and for the model);
- symbolic and eager output shapes agree and equal the expected shape;
- weight counts (trainable tensors and total parameters);
- every trainable weight gets a finite, non-zero gradient;
- `.keras` save -> `load_model(safe_mode=True)` in this process and in a
  fresh one -> identical outputs;
- under `mixed_bfloat16` and `mixed_float16` every sublayer carries the
  policy (the float32 head excepted) and the outputs are finite, with
  logits in float32;
- `compile(jit_compile=True)` then `fit` and `predict` work.

Gradients are taken with each backend's own machinery, so the same test
runs on TensorFlow, JAX and PyTorch.
"""

import copy
import json
import os
import re
import subprocess
import sys
import tempfile

import keras
import numpy as np

BACKEND = keras.backend.backend()
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What a framework log line or third-party warning looks like on stderr (absl / TensorFlow / CUDA / XLA,
# Python warnings, Keras's "ran out of data"): tests/test_quiet.py asserts that no command prints one.
FRAMEWORK_NOISE = re.compile(
    r"absl::InitializeLog|^[IWEF]\d{4} |cuda|cuInit|cudart|cpu_feature_guard|oneDNN|XLA|"
    r"WARNING:(tensorflow|absl|root|tf2onnx)|tf2onnx|Warning:|ran out of data",
    re.IGNORECASE | re.MULTILINE,
)

# What the suite sets for itself and a user's shell does not (tests/conftest.py): TensorFlow's quieting, and the
# run's own compile caches (JAX's reader may warn when it meets an entry another process is writing). Its TMPDIR is
# kept: where temporary files go changes nothing a command prints.
SUITE_ONLY_VARIABLES = (
    "TF_CPP_MIN_LOG_LEVEL",
    "KERAS_VIT_VERBOSE",
    "KERAS_VIT_TESTS_RUN_FOLDER",
    "JAX_COMPILATION_CACHE_DIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
)


def user_environment(**extra):
    """`os.environ` as a user's shell has it (none of `SUITE_ONLY_VARIABLES`), plus `extra`: for a process whose
    default-verbosity output a test reads."""
    return {**{k: v for k, v in os.environ.items() if k not in SUITE_ONLY_VARIABLES}, **extra}


# Layers that keras_vit keeps in float32 on purpose under mixed precision.
FLOAT32_LAYER_NAMES = ("head", "predictions", "class_names")  # class_names: keras_vit.models.metadata.ClassNames


def import_tensorflow_if_installed():
    """Imports TensorFlow where it is installed, as a tf.data input pipeline does on every backend: some Keras code
    behaves differently once it is imported."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is not None:
        import tensorflow  # noqa: F401


def random_inputs(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype("float32")


def randomize_weights(model, seed=0):
    """Gives every weight random values: zero-initialised ones (class token,
    head) would hide broken wiring and zero the gradients upstream."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.2, size=tuple(variable.shape)).astype(variable.dtype))


def to_numpy(outputs):
    if isinstance(outputs, (list, tuple)):
        return [keras.ops.convert_to_numpy(o) for o in outputs]
    return keras.ops.convert_to_numpy(outputs)


def _flat(outputs):
    return outputs if isinstance(outputs, list) else [outputs]


def assert_config_round_trip(obj):
    config = obj.get_config()
    expected = json.dumps(config, sort_keys=True)
    # Functional.from_config consumes the dict it is given.
    revived = obj.__class__.from_config(copy.deepcopy(config))
    assert json.dumps(revived.get_config(), sort_keys=True) == expected


def trainable_gradients(model, inputs):
    """Gradients of a fixed random linear function of the outputs."""
    outputs = model(inputs)
    projections = [
        keras.ops.convert_to_tensor(random_inputs(tuple(keras.ops.shape(o)), seed=1)) for o in _flat(outputs)
    ]

    def objective(outs):
        return sum(keras.ops.sum(keras.ops.cast(o, "float32") * p) for o, p in zip(_flat(outs), projections))

    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = objective(model(inputs, training=True))
        return [keras.ops.convert_to_numpy(g) for g in tape.gradient(loss, model.trainable_variables)]
    if BACKEND == "jax":
        import jax

        trainable = [v.value for v in model.trainable_variables]
        non_trainable = [v.value for v in model.non_trainable_variables]

        def loss_fn(trainable):
            outs, _ = model.stateless_call(trainable, non_trainable, inputs, training=True)
            return objective(outs)

        # Compiled: un-jitted jax.grad dispatches (and compiles) op by op, about twice as slow on a tiny model.
        return [np.asarray(g) for g in jax.jit(jax.grad(loss_fn))(trainable)]
    if BACKEND == "torch":
        for variable in model.trainable_variables:
            variable.value.grad = None
        objective(model(inputs, training=True)).backward()
        return [v.value.grad.detach().cpu().numpy() for v in model.trainable_variables]
    raise NotImplementedError(BACKEND)


def assert_gradients(model, inputs):
    grads = trainable_gradients(model, inputs)
    assert len(grads) == len(model.trainable_variables) > 0
    for variable, grad in zip(model.trainable_variables, grads):
        assert grad is not None, f"no gradient for {variable.path}"
        assert np.all(np.isfinite(grad)), f"non-finite gradient for {variable.path}"
        assert np.any(grad != 0), f"zero gradient for {variable.path}"


# The reviving interpreter: it imports keras_vit as a user's script would and
# loads each `.keras` file it is sent, never having built a model itself. One
# per test process serves every fresh-process check (an interpreter start
# costs ~15 s with TensorFlow installed); a check that kills it starts another.
_REVIVER_SCRIPT = """
import gc, json, sys, traceback
import numpy as np, keras
import keras_vit  # registers the layers, as a user's import would
from tests.helpers import reference_outputs
gc.freeze()  # clear_session's collection then skips what the imports made (tests/conftest.py says why)
for line in sys.stdin:
    request = json.loads(line)
    try:
        inputs = np.load(request["inputs"], allow_pickle=False)
        for model_path, outputs_path in request["pairs"]:
            keras.backend.clear_session(free_memory=False)  # no full gc pass per model: 0.1-0.2 s of CPU
            model = keras.saving.load_model(model_path, safe_mode=True)
            outputs = reference_outputs(model, inputs)
            outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
            np.savez(outputs_path, *[keras.ops.convert_to_numpy(o) for o in outputs])
        reply = {"ok": True}
    except Exception:
        reply = {"ok": False, "error": traceback.format_exc()}
    print(json.dumps(reply), flush=True)
"""
_reviver = None
_reviver_log = None


def _reviving_interpreter():
    global _reviver, _reviver_log
    if _reviver is None or _reviver.poll() is not None:
        _reviver_log = tempfile.TemporaryFile("w+")
        env = dict(os.environ, KERAS_BACKEND=BACKEND, TF_CPP_MIN_LOG_LEVEL="3")
        env["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, env.get("PYTHONPATH", "")])
        _reviver = subprocess.Popen(
            [sys.executable, "-c", _REVIVER_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=_reviver_log,
            text=True,
            env=env,
        )
    return _reviver


def predict_in_fresh_process(model_paths, inputs, workdir):
    """Loads each `.keras` file with `safe_mode=True` in another interpreter,
    one that imported keras_vit and never built a model, and returns each
    model's outputs (a list of arrays per path; one path may be passed as a
    string)."""
    single = isinstance(model_paths, str)
    model_paths = [model_paths] if single else list(model_paths)
    inputs_path = os.path.join(workdir, "inputs.npy")
    outputs_paths = [os.path.join(workdir, f"outputs_{index}.npz") for index in range(len(model_paths))]
    np.save(inputs_path, inputs)
    reviver = _reviving_interpreter()
    reviver.stdin.write(json.dumps({"inputs": inputs_path, "pairs": list(zip(model_paths, outputs_paths))}) + "\n")
    reviver.stdin.flush()
    line = reviver.stdout.readline()
    if not line:
        _reviver_log.seek(0)
        raise AssertionError("the reviving interpreter died:\n" + _reviver_log.read()[-4000:])
    reply = json.loads(line)
    assert reply["ok"], reply["error"][-4000:]
    outputs = []
    for outputs_path in outputs_paths:
        with np.load(outputs_path, allow_pickle=False) as data:
            outputs.append([data[f"arr_{i}"] for i in range(len(data.files))])
    return outputs[0] if single else outputs


def reference_outputs(model, inputs):
    """A model's outputs as the contract checks read them (shapes, precision, revived models bit for bit, here and
    in the reviving interpreter), computed the cheapest way for the backend. An eager call on JAX compiles each op
    on its first use: the tiny hybrid's ~115 ops took 8 s, and its mixed-precision checks 224 compiles (17 s),
    where one compiled predict takes 1-1.5 s; it runs the same traced layer code, as `fit` does. TensorFlow traces
    a graph for predict, which costs more than the eager call; torch's predict is its eager call."""
    if BACKEND == "jax":
        return _flat(to_numpy(model.predict(inputs, verbose=0)))
    return _flat(to_numpy(model(inputs, training=False)))


def assert_save_and_load(model, inputs, workdir, fresh_process=True):
    expected = reference_outputs(model, inputs)
    path = os.path.join(workdir, "model.keras")
    model.save(path)
    revived = keras.saving.load_model(path, safe_mode=True)
    assert json.dumps(revived.get_config(), sort_keys=True) == json.dumps(model.get_config(), sort_keys=True)
    for got, want in zip(reference_outputs(revived, inputs), expected):
        np.testing.assert_array_equal(got, want)
    if fresh_process:
        for got, want in zip(predict_in_fresh_process(path, inputs, workdir), expected):
            np.testing.assert_array_equal(got, want)


def assert_mixed_precision(build_model, inputs, float32_outputs):
    for policy in ("mixed_bfloat16", "mixed_float16"):
        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy(policy)
        try:
            model = build_model()
        finally:
            keras.config.set_dtype_policy(previous)
        for layer in model._flatten_layers(include_self=False, recursive=True):
            if isinstance(layer, keras.layers.InputLayer):
                continue
            expected = "float32" if layer.name in FLOAT32_LAYER_NAMES else policy
            assert layer.dtype_policy.name == expected, (
                f"{layer.path or layer.name} has policy {layer.dtype_policy.name}, expected {expected}"
            )
        randomize_weights(model)
        # Compiled on JAX (reference_outputs): where float16 once failed on JAX/CPU while eager calls ran.
        for output in reference_outputs(model, inputs):
            assert np.all(np.isfinite(output.astype("float32")))
            want = "float32" if float32_outputs else policy.split("_")[1]
            assert keras.backend.standardize_dtype(output.dtype) == want


def run_precision_test(build_model, inputs, float32_outputs=True):
    """keras-hub's `run_precision_test`: under `mixed_bfloat16` and
    `mixed_float16` every sublayer carries the policy and the outputs are
    finite (logits in float32)."""
    assert_mixed_precision(build_model, inputs, float32_outputs)


def run_model_saving_test(model, inputs, workdir, fresh_process=False):
    """keras-hub's `run_model_saving_test`: `.keras` save ->
    `load_model(safe_mode=True)` gives the same config and identical outputs."""
    assert_save_and_load(model, inputs, str(workdir), fresh_process=fresh_process)


def assert_jit_fit_and_predict(model, inputs):
    # The output shapes, symbolically: an eager call would compile every op one by one on jax only to read them
    # (run_model_test checks that the eager shapes equal these).
    outputs = _flat(model.compute_output_spec(keras.KerasTensor(inputs.shape)))
    targets = [random_inputs(tuple(keras.ops.shape(o)), seed=2) for o in outputs]
    targets = targets if len(targets) > 1 else targets[0]
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse", jit_compile=True)
    history = model.fit(inputs, targets, batch_size=len(inputs), epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
    predictions = _flat(to_numpy(model.predict(inputs, batch_size=len(inputs), verbose=0)))
    for prediction, output in zip(predictions, outputs):
        assert prediction.shape == tuple(keras.ops.shape(output))
        assert np.all(np.isfinite(prediction))


def run_model_test(
    build_model,
    input_shape,
    expected_output_shape,
    expected_num_params=None,
    expected_num_trainable_weights=None,
    workdir=None,
    float32_outputs=True,
    fresh_process=True,
    jit=True,
    mixed_precision=True,
):
    """Runs every contract check on the model `build_model()` returns.

    Args:
        build_model: a function of no arguments returning a fresh model (it
            is called again under each mixed-precision policy).
        input_shape: the batch shape of the test inputs.
        expected_output_shape: the output shape, or a list for several.
        expected_num_params: the total parameter count, if pinned.
        expected_num_trainable_weights: the number of trainable tensors.
        workdir: a temporary directory for the saved files (pytest's
            `tmp_path`).
        float32_outputs: whether outputs stay float32 under mixed
            precision (the classification models' logits).
        mixed_precision: False where the caller runs `run_precision_test`
            as a test of its own (a model whose checks together would pass
            the per-test time limit).
    """
    model = build_model()
    inputs = random_inputs(input_shape)
    expected = expected_output_shape if isinstance(expected_output_shape, list) else [expected_output_shape]

    assert_config_round_trip(model)
    symbolic = _flat(model.compute_output_spec(keras.KerasTensor(input_shape)))
    randomize_weights(model)
    computed = reference_outputs(model, inputs)
    assert [tuple(s.shape) for s in symbolic] == [c.shape for c in computed] == [tuple(s) for s in expected]
    if expected_num_params is not None:
        assert model.count_params() == expected_num_params
    if expected_num_trainable_weights is not None:
        assert len(model.trainable_weights) == expected_num_trainable_weights

    assert_gradients(model, inputs)
    if workdir is not None:
        assert_save_and_load(model, inputs, str(workdir), fresh_process=fresh_process)
    if mixed_precision:
        assert_mixed_precision(build_model, inputs, float32_outputs)
    if jit:
        assert_jit_fit_and_predict(model, inputs)
    return model


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_shape,
    expected_output_shape,
    expected_num_trainable_weights,
    expected_num_params=None,
    call_kwargs=None,
    workdir=None,
    **model_test_kwargs,
):
    """Checks a layer's own config round trip, then runs the model checks on
    a functional model made of just that layer."""
    layer = layer_cls(**init_kwargs)
    assert_config_round_trip(layer)
    assert tuple(layer.compute_output_shape(input_shape)) == tuple(
        expected_output_shape if not isinstance(expected_output_shape, list) else expected_output_shape[0]
    )

    def build_model():
        inputs = keras.Input(batch_shape=input_shape)
        outputs = layer_cls(**init_kwargs)(inputs, **(call_kwargs or {}))
        return keras.Model(inputs, list(outputs) if isinstance(outputs, tuple) else outputs)

    model_test_kwargs.setdefault("float32_outputs", False)
    # A fresh interpreter costs seconds per check; the classifier's model test
    # revives every keras_vit layer in one, so layers are checked in-process.
    model_test_kwargs.setdefault("fresh_process", False)
    # torch.compile (Keras's jit_compile on torch) spends minutes per graph on a
    # CPU; the model tests exercise torch's compiled path with every layer.
    model_test_kwargs.setdefault("jit", BACKEND != "torch")
    return run_model_test(
        build_model,
        input_shape,
        expected_output_shape,
        expected_num_params=expected_num_params,
        expected_num_trainable_weights=expected_num_trainable_weights,
        workdir=workdir,
        **model_test_kwargs,
    )


# The modes `keras.layers.Dense.quantize` takes without a calibration hook.
# "gptq" and "awq" calibrate through `get_quantization_layer_structure` on
# token-id batches (`keras.src.quantizers.gptq_core.get_dataloader` casts the
# data to int32 sequences), which images are not; see the README.
QUANTIZATION_MODES = ("int8", "float8", "int4")


def quantizable_layers(model):
    return [
        layer
        for layer in model._flatten_layers(include_self=False, recursive=True)
        if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense))
    ]


def assert_weights_by_path(source, target):
    """Copies `source`'s weights into `target` matching variable paths (a
    quantized layer's variables come in another order once rebuilt)."""
    values = {variable.path: keras.ops.convert_to_numpy(variable) for variable in source.weights}
    assert sorted(values) == sorted(variable.path for variable in target.weights)
    for variable in target.weights:
        variable.assign(values[variable.path])


def run_quantization_test(build_model, input_shape, workdir, modes=QUANTIZATION_MODES, fresh_process=True):
    """`model.quantize(mode)` for each mode: every Dense (the fused QKV
    projection included) is quantized, the model predicts finite outputs
    near the float ones, `get_config` -> `from_config` is JSON-identical and
    predicts the same, and a `.keras` file reloads with `safe_mode=True`
    (here and in a fresh process) to identical outputs.

    Returns:
        `{mode: max |quantized - float| / max |float|}` on random weights.
    """
    import warnings

    inputs = random_inputs(input_shape)
    errors, saved = {}, {}
    float_outputs = None
    for mode in modes:
        model = build_model()
        randomize_weights(model)  # seeded: every mode starts from the same float weights
        if float_outputs is None:
            float_outputs = _flat(to_numpy(model(inputs, training=False)))
        with warnings.catch_warnings():
            # Keras warns about every layer that has nothing to quantize.
            warnings.simplefilter("ignore", UserWarning)
            model.quantize(mode)
        layers = quantizable_layers(model)
        assert layers and all(layer.quantization_mode == mode for layer in layers), [
            (layer.path, layer.quantization_mode) for layer in layers
        ]
        # One compiled predict per mode (XLA on tensorflow and jax); the revivals below compare eager calls,
        # which cost no compile each.
        predicted = _flat(to_numpy(model.predict(inputs, verbose=0)))
        scale = max(float(np.max(np.abs(f))) for f in float_outputs) or 1.0
        errors[mode] = max(float(np.max(np.abs(o - f))) for o, f in zip(predicted, float_outputs)) / scale
        assert all(np.all(np.isfinite(o)) for o in predicted)
        outputs = _flat(to_numpy(model(inputs, training=False)))
        assert all(np.all(np.isfinite(o)) for o in outputs)

        config = model.get_config()
        revived = model.__class__.from_config(copy.deepcopy(config))
        assert json.dumps(revived.get_config(), sort_keys=True) == json.dumps(config, sort_keys=True)
        assert all(layer.quantization_mode == mode for layer in quantizable_layers(revived))
        assert_weights_by_path(model, revived)
        for got, want in zip(_flat(to_numpy(revived(inputs, training=False))), outputs):
            np.testing.assert_array_equal(got, want)

        mode_dir = os.path.join(str(workdir), mode)
        os.makedirs(mode_dir, exist_ok=True)
        assert_save_and_load(model, inputs, mode_dir, fresh_process=False)
        saved[os.path.join(mode_dir, "model.keras")] = reference_outputs(model, inputs)
    if fresh_process:
        # One interpreter reloads every mode's file: each costs seconds to start.
        for got_outputs, want_outputs in zip(
            predict_in_fresh_process(list(saved), inputs, str(workdir)), saved.values()
        ):
            for got, want in zip(got_outputs, want_outputs):
                np.testing.assert_array_equal(got, want)
    return errors
