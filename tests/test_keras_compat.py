"""One test per Keras internal that keras_vit.utils.keras_compat uses, failing with a message that names the change.

Run on every backend: each backend has its own optimizer base class.
"""

import json
import os
import random

import keras
import numpy as np
import pytest

from keras_vit.utils import keras_compat


def _built_adamw():
    optimizer = keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5)
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    kernel = keras.Variable(np.ones((2,), "float32"), name="kernel")
    bias = keras.Variable(np.ones((2,), "float32"), name="bias")
    optimizer.build([kernel, bias])
    return optimizer, kernel, bias


def test_optimizer_use_weight_decay_and_get_variable_index():
    optimizer, kernel, bias = _built_adamw()
    decays = (keras_compat.uses_weight_decay(optimizer, kernel), keras_compat.uses_weight_decay(optimizer, bias))
    assert decays == (True, False), (
        "BaseOptimizer._use_weight_decay no longer follows exclude_from_weight_decay: "
        "keras_compat.uses_weight_decay needs another way to ask"
    )
    indices = (keras_compat.variable_index(optimizer, kernel), keras_compat.variable_index(optimizer, bias))
    assert indices == (0, 1), (
        "BaseOptimizer._get_variable_index no longer returns the position in optimizer.build(variables): "
        "keras_compat.variable_index needs another way"
    )


def test_optimizer_apply_weight_decay_is_the_global_decay_step():
    class NoGlobalDecay(keras_compat.PerVariableWeightDecay, keras.optimizers.AdamW):
        pass

    results = []
    for optimizer_class in (keras.optimizers.AdamW, NoGlobalDecay):
        optimizer = optimizer_class(learning_rate=0.1, weight_decay=0.5)
        variable = keras.Variable(np.ones((2,), "float32"), name="kernel")
        # A zero gradient moves Adam by exactly 0: any change is the weight decay.
        optimizer.apply_gradients([(keras.ops.zeros((2,)), variable)])
        results.append(keras.ops.convert_to_numpy(variable))
    decayed, skipped = results
    assert np.all(decayed < 1.0), "AdamW no longer applies decoupled weight decay as this test expects."
    np.testing.assert_array_equal(
        skipped,
        np.ones(2),
        err_msg="Keras no longer applies weight decay through BaseOptimizer._apply_weight_decay(variables) "
        "before update_step (or renamed it): keras_compat.PerVariableWeightDecay must override the new step, "
        "or layer-wise AdamW decays twice.",
    )


def test_sgd_update_step_and_momentum_buffers():
    class Recorded(keras.optimizers.SGD):
        def _backend_update_step(self, grads, trainable_variables, learning_rate):
            calls.append(len(grads))
            return super()._backend_update_step(grads, trainable_variables, learning_rate)

    calls = []
    optimizer = Recorded(learning_rate=0.1, momentum=0.9)
    kernel, bias = keras.Variable(np.ones((2, 2), "float32")), keras.Variable(np.ones((2,), "float32"))
    optimizer.apply_gradients([(keras.ops.ones((2, 2)), kernel), (keras.ops.ones((2,)), bias)])
    assert calls == [2], (
        "Keras no longer updates all variables through BaseOptimizer._backend_update_step(grads, variables, "
        "learning_rate) (or renamed it): keras_compat.SyncFreeSGDUpdate must override the new step."
    )
    assert [tuple(buffer.shape) for buffer in optimizer.momentums] == [(2, 2), (2,)], (
        "SGD.momentums is no longer one buffer per variable in build order: keras_compat.SyncFreeSGDUpdate reads it."
    )
    # m = -lr * g after one step from zero: the buffer it reads is the one Keras updates.
    np.testing.assert_allclose(keras.ops.convert_to_numpy(optimizer.momentums[1]), [-0.1, -0.1], rtol=1e-6)


def test_backup_and_restore_save_model(tmp_path):
    calls = []

    class Recording(keras_compat.AtomicBackupWrites, keras.callbacks.BackupAndRestore):
        def write_backup(self, weights_path, metadata_path, metadata):
            calls.append((weights_path, metadata_path, metadata))
            self.model.save_weights(weights_path)
            with open(metadata_path, "w") as file:
                json.dump(metadata, file)

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((4, 3), "float32"), np.ones((4, 1), "float32")
    backup = Recording(str(tmp_path), delete_checkpoint=False)
    model.fit(x, y, epochs=2, batch_size=2, verbose=0, callbacks=[backup])
    assert len(calls) == 2, (
        "keras.callbacks.BackupAndRestore no longer saves through _save_model() at each epoch end: "
        "keras_compat.AtomicBackupWrites must hook the new method."
    )
    weights_path, metadata_path, metadata = calls[-1]
    assert metadata == {"epoch": 2, "batch": 0}, (
        "BackupAndRestore's _current_epoch/_last_batch_seen changed meaning; "
        f"keras_compat.AtomicBackupWrites wrote {metadata}."
    )
    # Keras must read back what we wrote, from the same paths: a new run resumes after epoch 2.
    assert os.path.isfile(weights_path) and os.path.isfile(metadata_path)
    epochs = []
    resumed = keras.callbacks.BackupAndRestore(str(tmp_path), delete_checkpoint=False)
    record = keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: epochs.append(epoch))
    model.fit(x, y, epochs=3, batch_size=2, verbose=0, callbacks=[resumed, record])
    assert epochs == [2], (
        "BackupAndRestore no longer resumes from _weights_path/_training_metadata_path as "
        f"keras_compat.AtomicBackupWrites writes them (epochs run: {epochs})."
    )


def test_layer_flatten_layers_lists_nested_sublayers():
    from keras_vit.layers import TransformerBlock

    block = TransformerBlock(num_heads=2, mlp_dim=8)
    block.build((1, 3, 4))
    assert hasattr(block, "_flatten_layers"), (
        "Keras removed Layer._flatten_layers: find the new way to list a layer's sublayers recursively "
        "and update keras_compat.sublayers (serialization.dtype_config uses it)."
    )
    paths = {layer.path.split("/", 1)[1] for layer in keras_compat.sublayers(block)}
    assert {"attention", "attention/qkv", "attention/output", "mlp/fc1", "mlp/fc2"} <= paths, paths


def test_the_installed_keras_is_in_the_tested_range():
    specifiers = pytest.importorskip("packaging.specifiers")
    pyproject = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "pyproject.toml")).read()
    assert f'"keras{keras_compat.TESTED_KERAS}"' in pyproject, "pyproject.toml must pin the tested Keras range"
    assert specifiers.SpecifierSet(keras_compat.TESTED_KERAS).contains(keras.__version__), (
        f"keras {keras.__version__} is outside the tested range {keras_compat.TESTED_KERAS}: run "
        "tests/test_keras_compat.py on it, then widen the range in pyproject.toml and keras_compat."
    )


def test_global_seed_set_without_tensorflow():
    # `keras_compat.set_random_seed` writes Keras's global seed itself (no TensorFlow import on jax / torch):
    # the same initial weights as after Keras's own set_random_seed, on every backend.
    def initial_weights(seed_function):
        seed_function(3)
        return keras.ops.convert_to_numpy(keras.layers.Dense(4, name="probe")(np.ones((1, 2))))

    np.testing.assert_array_equal(
        initial_weights(keras_compat.set_random_seed), initial_weights(keras.utils.set_random_seed)
    )
    keras_compat.set_random_seed(5)
    drawn = (random.random(), np.random.rand())
    random.seed(5)
    np.random.seed(5)
    assert drawn == (random.random(), np.random.rand())
    with pytest.raises(ValueError, match="seed=1.5"):
        keras_compat.set_random_seed(1.5)


# The fresh process is a jax one whatever the run's backend (~3.5 s of CPU): it runs on the jax run only.
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="a jax process on every run: the jax run")
def test_serializer_tensorflow_check_imports_no_tensorflow():
    # The command line's hook: on jax a layer's config is read without importing TensorFlow; without it, Keras
    # imports TensorFlow.
    import subprocess
    import sys

    code = (
        "import sys, keras\n"
        "from keras.src.saving import serialization_lib\n"
        "from keras_vit.utils import keras_compat\n"
        "lazy = serialization_lib.tf\n"
        "keras_compat.serializer_imports_no_tensorflow()\n"
        "keras.layers.Dense(2).get_config()\n"
        "print('tensorflow' in sys.modules)\n"
        "serialization_lib.tf = lazy\n"
        "keras.layers.Dense(2).get_config()\n"
        "print('tensorflow' in sys.modules)\n"
    )
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.stdout.split()[:1] == ["False"], result.stderr[-2000:]
    assert result.stdout.split() == ["False", "True"], (
        "Keras's serializer no longer imports TensorFlow on jax: drop keras_compat.serializer_imports_no_tensorflow"
    )


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow types: the tensorflow run")
def test_tensorflow_types_still_serialize_through_the_deferred_check():
    # TensorFlow types still serialize once TensorFlow is imported.
    import tensorflow as tf
    from keras.src.saving import serialization_lib

    keras_compat.serializer_imports_no_tensorflow()
    assert isinstance(serialization_lib.tf, keras_compat._ImportedTensorFlow), "Keras renamed serialization_lib.tf"
    assert serialization_lib.serialize_keras_object(tf.TensorShape([2, 3])) == [2, 3]


def test_dot_product_attention_keeps_torch_compile_graphs_whole():
    if keras.backend.backend() != "torch":
        pytest.skip("torch.compile's graphs: the torch run")
    import torch

    query = keras.random.normal((1, 5, 2, 4), seed=0)

    def breaks(attention):
        try:
            return torch._dynamo.explain(lambda query: attention(query, query, query))(query).graph_break_count
        finally:
            torch._dynamo.reset()

    assert breaks(keras_compat.dot_product_attention) == 0
    assert breaks(keras.ops.dot_product_attention) >= 1, (
        "Keras's torch dot_product_attention no longer breaks torch.compile's graph when it chooses the kernel "
        "itself: keras_compat.dot_product_attention can call it again"
    )


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the padded fused attention is JAX's")
@pytest.mark.parametrize("multiple", [2, 8])
def test_padded_fused_attention_computes_the_unpadded_attention(multiple):
    import jax
    import jax.numpy as jnp

    query, key, value, cotangent = (
        jax.random.normal(seed, (2, 197, 3, 16)) for seed in jax.random.split(jax.random.key(0), 4)
    )

    def loss(attention):
        return jax.value_and_grad(lambda *qkv: jnp.sum(attention(*qkv) * cotangent), argnums=(0, 1, 2))

    expected_loss, expected_grads = loss(jax.nn.dot_product_attention)(query, key, value)
    padded = lambda *qkv: keras_compat.padded_fused_attention(*qkv, implementation="xla", multiple=multiple)  # noqa: E731
    padded_loss, padded_grads = loss(padded)(query, key, value)
    np.testing.assert_allclose(padded_loss, expected_loss, rtol=1e-6)
    for grad, expected in zip(padded_grads, expected_grads):
        np.testing.assert_allclose(grad, expected, atol=1e-6)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the padded fused attention is JAX's")
def test_dot_product_attention_pads_odd_training_calls_on_a_gpu(monkeypatch):
    import jax

    padded_calls = []
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(
        keras_compat, "padded_fused_attention", lambda *qkv, **kwargs: padded_calls.append(kwargs) or qkv[0]
    )
    odd, even = np.ones((1, 5, 2, 4), "float32"), np.ones((1, 4, 2, 4), "float32")
    keras_compat.dot_product_attention(odd, odd, odd, training=True)
    assert padded_calls == [{"implementation": "cudnn"}]
    monkeypatch.setattr(keras.ops, "dot_product_attention", lambda *qkv, **kwargs: qkv[0])
    keras_compat.dot_product_attention(even, even, even, training=True)
    keras_compat.dot_product_attention(odd, odd, odd)  # inference: cuDNN takes odd lengths
    monkeypatch.setattr(keras.config, "is_flash_attention_enabled", lambda: False)
    keras_compat.dot_product_attention(odd, odd, odd, training=True)  # the user's global choice stands
    assert len(padded_calls) == 1


def _saved_activation_bytes(function, *inputs):
    """Bytes of the distinct storages autograd keeps for the backward pass of `function(*inputs)` (torch)."""
    import torch

    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        function(*inputs)
    return sum(storages.values())


def test_dot_product_attention_is_keras_op_without_its_copies(monkeypatch):
    batch, tokens, heads, head_dim = 2, 7, 3, 4
    qkv = keras.random.normal((batch, tokens, 3, heads, head_dim), seed=1)
    query, key, value = keras.ops.unstack(qkv, num=3, axis=2)
    expected = keras.ops.dot_product_attention(query, key, value)
    attended = keras_compat.dot_product_attention(query, key, value, training=True)
    assert tuple(attended.shape) == (batch, tokens, heads, head_dim)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(attended), keras.ops.convert_to_numpy(expected), rtol=1e-6, atol=1e-6
    )
    if keras.backend.backend() != "torch":
        return
    import torch

    # What a block keeps: the token-major qkv (one storage), the attention output and its log-sum-exp, and the
    # projection's input, a view of that output. Keras's op keeps copies of the query, key and value and of the
    # output besides.
    qkv = torch.randn(batch, tokens, 3, heads, head_dim, requires_grad=True)
    projection = torch.randn(heads * head_dim, heads * head_dim, requires_grad=True)

    def block(attention):
        def run(qkv):
            query, key, value = qkv.unbind(2)
            attended = attention(query, key, value)
            return attended.reshape(batch, tokens, heads * head_dim) @ projection

        return run

    unit = batch * tokens * heads * head_dim * 4  # one (batch, tokens, hidden) float32 tensor
    kept = _saved_activation_bytes(block(keras_compat.dot_product_attention), qkv)
    kept_by_keras = _saved_activation_bytes(block(keras.ops.dot_product_attention), qkv)
    assert kept <= 4 * unit + projection.nbytes + batch * heads * tokens * 4
    assert kept_by_keras >= kept + unit, (
        "Keras's torch dot_product_attention no longer copies its inputs and output: "
        "keras_compat.dot_product_attention can call keras.ops.dot_product_attention on every backend"
    )
    # A forced flash kernel is Keras's to check and refuse (it does on a CPU): passed on as it is.
    monkeypatch.setattr(keras.config, "is_flash_attention_enabled", lambda: True)
    with pytest.raises(RuntimeError):
        keras_compat.dot_product_attention(query, key, value)


def _torch_ops(function):
    """The names of the aten ops `function()` runs (torch's profiler), and its result."""
    import torch.profiler

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        result = function()
    return [event.key for event in profile.key_averages()], result


def _built_dense(units=5, features=6, **kwargs):
    layer = keras.layers.Dense(units, **kwargs)
    layer.build((None, features))
    if layer.use_bias:
        layer.bias.assign(np.linspace(-1, 1, units).astype(layer.variable_dtype))
    return layer


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 6), (0, 3, 6)], ids=["matrix", "tokens", "empty batch"])
def test_dense_is_keras_dense_with_the_bias_fused_on_torch(shape):
    layer = _built_dense()
    matrix = np.random.default_rng(0).normal(size=shape).astype("float32")
    got = keras.ops.convert_to_numpy(keras_compat.dense(layer, keras.ops.convert_to_tensor(matrix)))
    expected = keras.ops.convert_to_numpy(layer(matrix))
    assert got.shape == shape[:-1] + (5,)
    if keras.backend.backend() != "torch":
        np.testing.assert_array_equal(got, expected)
        return
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    import torch

    matrix = torch.tensor(matrix, requires_grad=True)
    fused_ops, fused = _torch_ops(lambda: keras_compat.dense(layer, matrix))
    keras_ops, unfused = _torch_ops(lambda: layer.call(matrix))
    assert "aten::addmm" in fused_ops and "aten::add" not in fused_ops and "aten::mm" not in fused_ops
    assert "aten::clone" not in fused_ops, "contiguous inputs fold into rows as a view"
    assert "aten::add" in keras_ops, (
        "Keras's torch Dense now adds its bias inside the product: keras_compat.dense can call the layer as it is"
    )
    # The same gradients, for the input and both weights.
    weights = [layer.kernel.value, layer.bias.value]
    for got_grad, want_grad in zip(
        torch.autograd.grad(fused.square().sum(), [matrix, *weights]),
        torch.autograd.grad(unfused.square().sum(), [matrix, *weights]),
    ):
        np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [None, "float32", "bfloat16", "float64"])
def test_uniform_is_keras_uniform_drawn_in_place_on_torch(dtype):
    def values(tensor):
        return keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32"))

    for shape in [(), (7,), (4, 9)]:
        np.testing.assert_array_equal(
            values(keras_compat.uniform(shape, -2.0, 3.0, dtype=dtype, seed=1)),
            values(keras.random.uniform(shape, -2.0, 3.0, dtype=dtype, seed=1)),
            err_msg=f"Keras's {keras.backend.backend()} uniform draws other numbers now: keras_compat.uniform must too",
        )
    if keras.backend.backend() != "torch":
        return
    import torch.profiler

    def ops_on_the_result(function):  # the seed's own scalar arithmetic aside
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as profile:
            function()
        events = profile.key_averages(group_by_input_shape=True)
        return {event.key for event in events if [64, 32] in event.input_shapes}

    mine = ops_on_the_result(lambda: keras_compat.uniform((64, 32), -1.0, 1.0, dtype=dtype, seed=2))
    keras_own = ops_on_the_result(lambda: keras.random.uniform((64, 32), -1.0, 1.0, dtype=dtype, seed=2))
    assert {"aten::mul_", "aten::add_"} <= mine and not {"aten::mul", "aten::add"} & mine, mine
    assert {"aten::mul", "aten::add"} <= keras_own, (
        f"Keras's torch random.uniform now scales in place ({keras_own}): keras_compat.uniform can call it as it is"
    )


@pytest.mark.parametrize(
    "case", ["activation", "no bias", "lora", "int8", "float64 input", "subclass", "remat scope", "symbolic"]
)
def test_dense_leaves_every_other_dense_to_the_layer(case):
    if keras.backend.backend() != "torch":
        pytest.skip("the fused Dense is torch's")

    class Subclass(keras.layers.Dense):
        pass

    if case == "remat scope":
        with keras.RematScope(mode="full"):
            layer = _built_dense()
    elif case == "subclass":
        layer = Subclass(5)
        layer.build((None, 6))
    else:
        layer = _built_dense(**{"activation": dict(activation="relu"), "no bias": dict(use_bias=False)}.get(case, {}))
    if case == "lora":
        layer.enable_lora(2)
        layer.lora_kernel_b.assign(np.ones((2, 5), "float32"))  # B starts at zero: a LoRA that changes the output
    if case == "int8":
        layer.quantize("int8")
    matrix = np.random.default_rng(0).normal(size=(4, 6)).astype("float64" if case == "float64 input" else "float32")
    if case == "symbolic":
        assert keras_compat.dense(layer, keras.KerasTensor((None, 6))).shape == (None, 5)
        return
    expected = keras.ops.convert_to_numpy(keras_compat.call_sublayer(layer, keras.ops.convert_to_tensor(matrix)))
    import torch

    ops, got = _torch_ops(lambda: keras_compat.dense(layer, torch.tensor(matrix)))
    assert "aten::addmm" not in ops, f"{case}: the layer's own call must run"
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(got), expected)


def test_dense_under_mixed_precision_fuses_in_the_compute_dtype(monkeypatch):
    # Inside a block, Keras's autocast scope reads the float32 weights as bfloat16: the fused product sees one dtype.
    from keras_vit.layers import MLPBlock

    block = MLPBlock(mlp_dim=16, dtype="mixed_bfloat16")
    tokens = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    block.build(tokens.shape)
    fused = block(tokens)
    assert keras.backend.standardize_dtype(fused.dtype) == "bfloat16"
    if keras.backend.backend() == "torch":
        ops, _ = _torch_ops(lambda: block(tokens))
        assert "aten::addmm" in ops and "aten::mm" not in ops
    monkeypatch.setattr(keras_compat, "dense", keras_compat.call_sublayer)
    unfused = block(tokens)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(keras.ops.cast(fused, "float32")),
        keras.ops.convert_to_numpy(keras.ops.cast(unfused, "float32")),
        atol=2e-2,
    )


def test_torch_checkpoint_early_stop_exception():
    if keras.backend.backend() != "torch":
        pytest.skip("torch's checkpointing: the torch run")
    import torch.utils.checkpoint

    assert hasattr(torch.utils.checkpoint, "_StopRecomputationError"), (
        "torch.utils.checkpoint._StopRecomputationError is gone: keras_compat.remat must catch its new name"
    )


def test_jax_backends_initialized():
    if keras.backend.backend() != "jax":
        pytest.skip("JAX's backends: the jax run")
    keras.ops.convert_to_numpy(keras.ops.ones(2))  # JAX computes: its backends exist now
    # Failing here: jax._src.xla_bridge.backends_are_initialized changed; keras_vit.training.xla_memory uses it.
    assert keras_compat.jax_backends_initialized()


def _count_layer_calls(monkeypatch):
    calls = []
    original = keras.layers.Layer.__call__

    def counted(layer, *args, **kwargs):
        calls.append(type(layer).__name__)
        return original(layer, *args, **kwargs)

    monkeypatch.setattr(keras.layers.Layer, "__call__", counted)
    return calls


def test_a_blocks_sublayers_skip_layer_call_and_compute_the_same(monkeypatch):
    # Keras's `Layer.__call__` is most of a small ViT's eager time (about 150 us of Python a call); a block's
    # sublayers go through `call_sublayer`, and only the block itself through `__call__`.
    from keras_vit.layers import TransformerBlock

    inputs = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    block = TransformerBlock(num_heads=2, mlp_dim=16)
    expected = keras.ops.convert_to_numpy(block(inputs))
    calls = _count_layer_calls(monkeypatch)
    got = keras.ops.convert_to_numpy(block(inputs))
    assert calls == ["TransformerBlock"]
    np.testing.assert_array_equal(got, expected)
    # Each sublayer run on its own through `__call__` gives the same result as inside the block.
    dense = block.mlp.fc1
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(keras_compat.call_sublayer(dense, inputs)),
        keras.ops.convert_to_numpy(dense(inputs)),
    )


def test_call_sublayer_leaves_symbolic_inputs_and_remat_scopes_to_layer_call(monkeypatch):
    symbolic = keras.KerasTensor((2, 5, 8))
    dense = keras.layers.Dense(4)
    assert keras_compat.call_sublayer(dense, symbolic).shape == (2, 5, 4)  # `call` would fail on a KerasTensor
    with keras.RematScope(mode="full"):
        scoped = keras.layers.Dense(4)
    inputs = np.ones((2, 8), "float32")
    scoped.build(inputs.shape)
    calls = _count_layer_calls(monkeypatch)
    keras_compat.call_sublayer(scoped, inputs)
    assert calls == ["Dense"], "a layer under Keras's RematScope must be rematerialized by its __call__"
