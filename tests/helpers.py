"""The checks every keras_vit layer and model goes through, on whichever backend the suite runs.

`run_model_test` checks a model's Keras contract end to end, `run_layer_test` runs it on a model of one layer,
`run_keras_hub_layer_test` runs keras-hub's own layer contract, and `run_quantization_test` checks `model.quantize`.
"""

import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
import warnings

import keras
import numpy as np

from keras_vit.utils import keras_compat

BACKEND = keras.backend.backend()
# (major, minor): a few tests assert what Keras 3.15 lacks and 3.16 fixed.
KERAS_VERSION = tuple(int(part) for part in keras.__version__.split(".")[:2])
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A framework log line or third-party warning on stderr: tests/test_quiet.py asserts that no command prints one.
FRAMEWORK_NOISE = re.compile(
    r"absl::InitializeLog|^[IWEF]\d{4} |cuda|cuInit|cudart|cpu_feature_guard|oneDNN|XLA|"
    r"WARNING:(tensorflow|absl|root|tf2onnx)|tf2onnx|Warning:|ran out of data",
    re.IGNORECASE | re.MULTILINE,
)
# What tests/conftest.py (and the Makefile) set for the suite and a user's shell does not.
SUITE_ONLY_VARIABLES = (
    "TF_CPP_MIN_LOG_LEVEL",
    "KERAS_VIT_VERBOSE",
    "KERAS_VIT_TESTS_RUN_FOLDER",
    "JAX_COMPILATION_CACHE_DIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
)


def user_environment(**extra):
    """`os.environ` as a user's shell has it (without `SUITE_ONLY_VARIABLES`), plus `extra`."""
    environment = {name: value for name, value in os.environ.items() if name not in SUITE_ONLY_VARIABLES}
    return {**environment, **extra}


def import_tensorflow_if_installed():
    """Imports TensorFlow where it is installed, as a tf.data pipeline does on every backend."""
    if importlib.util.find_spec("tensorflow") is not None:
        import tensorflow  # noqa: F401


def random_inputs(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype("float32")


def randomize_weights(model, seed=0):
    """Random values for every weight: zero-initialised ones (class token, head) would hide broken wiring."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.2, size=tuple(variable.shape)).astype(variable.dtype))


def write_images(folder, classes, count, suffix, seed, sizes=((24, 20),)):
    """`count` random images per class (24x20, or `sizes` in turn), in one subfolder per class (an image folder)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for name in classes:
        os.makedirs(os.path.join(folder, name), exist_ok=True)
        for index in range(count):
            pixels = rng.integers(0, 256, (*sizes[index % len(sizes)], 3), dtype=np.uint8)
            Image.fromarray(pixels).save(os.path.join(folder, name, f"{index}{suffix}"))


def pixel_images(*sizes, seed=0):
    """Random [0, 255] float32 channels-last images of `sizes` (`(height, width)` each)."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(0, 255, (*size, 3)).astype("float32") for size in sizes]


def naflex_batch(images, patch, length=None):
    """The NaFlex dict of channels-last `images`, each a whole number of `patch` px patches (an empty one: all
    padding), as SigLIP 2's processor lays it out: (row, col, channel) in a patch, `length` (the most) patches."""
    grids = [(image.shape[0] // patch, image.shape[1] // patch) for image in images]
    length, width = length or max(rows * cols for rows, cols in grids), patch * patch * images[0].shape[-1]
    batch = dict(patches=np.zeros((len(images), length, width), "float32"), spatial_shapes=np.array(grids, "int32"))
    batch["mask"] = np.zeros((len(images), length), bool)
    for index, (image, (rows, cols)) in enumerate(zip(images, grids)):
        cut = image.reshape(rows, patch, cols, patch, image.shape[-1]).swapaxes(1, 2).reshape(rows * cols, width)
        batch["patches"][index, : rows * cols], batch["mask"][index, : rows * cols] = cut, True
    return batch


def as_list(outputs):
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def to_numpy(outputs):
    if isinstance(outputs, dict):
        return {name: keras.ops.convert_to_numpy(output) for name, output in outputs.items()}
    if isinstance(outputs, (list, tuple)):
        return [keras.ops.convert_to_numpy(output) for output in outputs]
    return keras.ops.convert_to_numpy(outputs)


def reference_outputs(model, inputs):
    """The model's outputs as a list of arrays: a compiled `predict` on JAX (eager JAX compiles op by op)."""
    outputs = model.predict(inputs, verbose=0) if BACKEND == "jax" else model(inputs, training=False)
    return as_list(to_numpy(outputs))


def assert_same_config(got, expected):
    assert json.dumps(got.get_config(), sort_keys=True) == json.dumps(expected.get_config(), sort_keys=True)


def assert_config_round_trip(obj):
    """`from_config(get_config())` gives the same config; returns the revived object."""
    revived = obj.__class__.from_config(copy.deepcopy(obj.get_config()))  # Functional.from_config consumes it
    assert_same_config(revived, obj)
    return revived


def trainable_gradients(model, inputs):
    """Gradients of a fixed random linear function of the outputs: one inference call, then one training call."""
    shapes = [tuple(keras.ops.shape(output)) for output in as_list(model(inputs))]
    projections = [keras.ops.convert_to_tensor(random_inputs(shape, seed=1)) for shape in shapes]

    def objective(outputs):
        pairs = zip(as_list(outputs), projections)
        return sum(keras.ops.sum(keras.ops.cast(output, "float32") * projection) for output, projection in pairs)

    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = objective(model(inputs, training=True))
        return to_numpy(tape.gradient(loss, model.trainable_variables))
    if BACKEND == "jax":
        import jax

        non_trainable = [variable.value for variable in model.non_trainable_variables]

        def loss(trainable):
            outputs, _ = model.stateless_call(trainable, non_trainable, inputs, training=True)
            return objective(outputs)

        trainable = [variable.value for variable in model.trainable_variables]
        return to_numpy(jax.jit(jax.grad(loss))(trainable))
    for variable in model.trainable_variables:
        variable.value.grad = None
    objective(model(inputs, training=True)).backward()
    return [variable.value.grad.detach().cpu().numpy() for variable in model.trainable_variables]


# Loads a `.keras` file as a user's script does: an interpreter that imported keras_vit and built no model itself.
FRESH_PROCESS_SCRIPT = """
import sys
import keras
import numpy as np
import keras_vit
from tests.helpers import reference_outputs
model = keras.saving.load_model(sys.argv[1], safe_mode=True)
np.savez(sys.argv[3], *reference_outputs(model, np.load(sys.argv[2])))
"""


def predict_in_fresh_process(model_path, inputs, workdir, backend=BACKEND):
    """The outputs (a list of arrays) of a `.keras` file loaded with `safe_mode=True` in a fresh process."""
    inputs_path = os.path.join(workdir, "inputs.npy")
    np.save(inputs_path, inputs)
    environment = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    environment["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, environment.get("PYTHONPATH", "")])
    command = [sys.executable, "-c", FRESH_PROCESS_SCRIPT, model_path, inputs_path, model_path + ".npz"]
    result = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    with np.load(model_path + ".npz") as saved:
        return [saved[f"arr_{index}"] for index in range(len(saved.files))]


def run_model_saving_test(model, inputs, workdir, fresh_process=False):
    """`.keras` save -> `load_model(safe_mode=True)` gives the same config and identical outputs."""
    expected = reference_outputs(model, inputs)
    path = os.path.join(workdir, "model.keras")
    model.save(path)
    revived = keras.saving.load_model(path, safe_mode=True)
    assert_same_config(revived, model)
    np.testing.assert_equal(reference_outputs(revived, inputs), expected)
    if fresh_process:
        np.testing.assert_equal(predict_in_fresh_process(path, inputs, str(workdir)), expected)


def run_precision_test(build_model, inputs, float32_outputs=True):
    """Under `mixed_bfloat16` and `mixed_float16` every sublayer carries the policy (the float32 head excepted) and
    the outputs are finite, in float32 when `float32_outputs`."""
    for policy in ("mixed_bfloat16", "mixed_float16"):
        keras.config.set_dtype_policy(policy)
        model = build_model()
        keras.config.set_dtype_policy("float32")  # the suite's policy (tests/conftest.py restores it after a failure)
        for layer in keras_compat.sublayers(model):
            if not isinstance(layer, keras.layers.InputLayer):
                float32_layer = layer.name in ("head", "predictions", "class_names")  # kept in float32 by keras_vit
                expected = "float32" if float32_layer else policy
                assert layer.dtype_policy.name == expected, layer.path
        randomize_weights(model)
        for output in reference_outputs(model, inputs):
            assert np.all(np.isfinite(output.astype("float32")))
            expected = "float32" if float32_outputs else policy.split("_")[1]
            assert keras.backend.standardize_dtype(output.dtype) == expected


def assert_jit_fit_and_predict(model, inputs):
    """`compile(jit_compile=True)`, two epochs of `fit` and a `predict` give finite losses and outputs."""
    outputs = as_list(model.compute_output_spec(keras.KerasTensor(inputs.shape)))
    targets = [random_inputs(tuple(output.shape), seed=2) for output in outputs]
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse", jit_compile=True)
    history = model.fit(
        inputs, targets if len(targets) > 1 else targets[0], batch_size=len(inputs), epochs=2, verbose=0
    )
    assert np.all(np.isfinite(history.history["loss"]))
    predictions = as_list(to_numpy(model.predict(inputs, batch_size=len(inputs), verbose=0)))
    assert [prediction.shape for prediction in predictions] == [tuple(output.shape) for output in outputs]
    assert all(np.all(np.isfinite(prediction)) for prediction in predictions)


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
    """Runs every contract check on the model `build_model()` returns: config round trip, symbolic and eager output
    shapes, weight counts, a finite non-zero gradient for every trainable weight, `.keras` save and reload, mixed
    precision, and `fit`/`predict` with `jit_compile=True`.

    Args:
        build_model: a function of no arguments returning a fresh model (called again under each mixed policy).
        input_shape: the batch shape of the test inputs.
        expected_output_shape: the output shape, or a list of shapes for several outputs.
        expected_num_params: the total parameter count, if pinned.
        expected_num_trainable_weights: the number of trainable tensors, if pinned.
        workdir: a folder for the saved model (pytest's `tmp_path`); None skips saving.
        float32_outputs: whether the outputs stay float32 under mixed precision (the classifiers' logits).
        fresh_process: whether the saved model is also reloaded in a fresh interpreter.
        jit: whether to `fit` and `predict` with `jit_compile=True`.
        mixed_precision: whether to run `run_precision_test`.

    Returns:
        The model, with random weights.
    """
    model = build_model()
    inputs = random_inputs(input_shape)
    expected = expected_output_shape if isinstance(expected_output_shape, list) else [expected_output_shape]
    assert_config_round_trip(model)
    symbolic = as_list(model.compute_output_spec(keras.KerasTensor(input_shape)))
    randomize_weights(model)
    computed = reference_outputs(model, inputs)
    assert [tuple(s.shape) for s in symbolic] == [c.shape for c in computed] == [tuple(s) for s in expected]
    if expected_num_params is not None:
        assert model.count_params() == expected_num_params
    if expected_num_trainable_weights is not None:
        assert len(model.trainable_weights) == expected_num_trainable_weights
    gradients = trainable_gradients(model, inputs)
    assert len(gradients) == len(model.trainable_variables) > 0
    for variable, gradient in zip(model.trainable_variables, gradients):
        assert np.all(np.isfinite(gradient)) and np.any(gradient != 0), variable.path
    if workdir is not None:
        run_model_saving_test(model, inputs, str(workdir), fresh_process=fresh_process)
    if mixed_precision:
        run_precision_test(build_model, inputs, float32_outputs)
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
    """Checks a layer's config round trip and output shape, then `run_model_test` on a model of just that layer.

    By default the outputs follow the mixed policy, the saved model is reloaded in this process only, and torch
    skips `jit_compile` (torch.compile takes minutes per graph on a CPU; the model tests cover it).
    """
    layer = layer_cls(**init_kwargs)
    assert_config_round_trip(layer)
    expected = expected_output_shape[0] if isinstance(expected_output_shape, list) else expected_output_shape
    assert tuple(layer.compute_output_shape(input_shape)) == tuple(expected)

    def build_model():
        inputs = keras.Input(batch_shape=input_shape)
        outputs = layer_cls(**init_kwargs)(inputs, **(call_kwargs or {}))
        return keras.Model(inputs, as_list(outputs) if isinstance(outputs, tuple) else outputs)

    model_test_kwargs.setdefault("float32_outputs", False)
    model_test_kwargs.setdefault("fresh_process", False)
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


def run_keras_hub_layer_test(
    layer_cls,
    init_kwargs,
    input_shape,
    expected_output_shape,
    expected_num_trainable_weights,
    expected_num_non_trainable_variables=0,
):
    """keras-hub's `TestCase.run_layer_test`, as its own layers pass it: config and serialization round trips, build,
    symbolic and eager calls in the layer's dtype, a compiled `fit`, and under `mixed_float16`, `mixed_bfloat16` and
    `bfloat16` every float output, output spec (`compute_output_spec` on float32 inputs), weight and sublayer in the
    policy's dtypes (keras-hub skips that precision check on torch without CUDA)."""
    from keras_hub.src.tests.test_case import TestCase

    inputs = keras.ops.convert_to_tensor(random_inputs(input_shape))  # a backend tensor, as keras-hub's tests pass
    TestCase("run_layer_test").run_layer_test(
        layer_cls,
        init_kwargs,
        inputs,
        expected_output_shape,
        expected_num_trainable_weights=expected_num_trainable_weights,
        expected_num_non_trainable_variables=expected_num_non_trainable_variables,
    )


def quantizable_layers(model):
    dense = (keras.layers.Dense, keras.layers.EinsumDense)
    return [layer for layer in keras_compat.sublayers(model) if isinstance(layer, dense)]


def run_quantization_test(build_model, input_shape, workdir, modes=("int8", "float8", "int4"), fresh_process=True):
    """`model.quantize(mode)` for each mode (those `Dense.quantize` takes without calibration data): every Dense is
    quantized, the outputs are finite, `from_config` keeps the modes, and a `.keras` reload (`from_config` and the
    weights; here, and in a fresh process when `fresh_process`) gives identical outputs.

    Returns:
        `{mode: max |quantized - float| / max |float|}` on random weights.
    """
    inputs = random_inputs(input_shape)
    float_model = build_model()
    randomize_weights(float_model)  # seeded: every mode starts from these float weights
    float_outputs = reference_outputs(float_model, inputs)
    scale = max(float(np.max(np.abs(output))) for output in float_outputs) or 1.0
    errors = {}
    for mode in modes:
        model = build_model()
        randomize_weights(model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # Keras warns about every layer with nothing to quantize
            model.quantize(mode)
        layers = quantizable_layers(model)
        assert layers and all(layer.quantization_mode == mode for layer in layers)
        predicted = as_list(to_numpy(model.predict(inputs, verbose=0)))
        assert all(np.all(np.isfinite(output)) for output in predicted)
        errors[mode] = max(float(np.max(np.abs(q - f))) for q, f in zip(predicted, float_outputs)) / scale

        revived = assert_config_round_trip(model)
        assert all(layer.quantization_mode == mode for layer in quantizable_layers(revived))
        folder = os.path.join(str(workdir), mode)
        os.makedirs(folder)
        run_model_saving_test(model, inputs, folder, fresh_process=fresh_process)
    return errors
