"""One test per Keras internal that keras_vit.utils.keras_compat uses (each backend has its own optimizer base)."""

import functools
import json
import os
import random

import keras
import numpy as np
import pytest

from keras_vit.utils import keras_compat
from tests.helpers import KERAS_VERSION


def test_optimizer_weight_decay_and_sgd_update_internals():
    optimizer = keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5)
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    kernel = keras.Variable(np.ones((2,), "float32"), name="kernel")
    bias = keras.Variable(np.ones((2,), "float32"), name="bias")
    optimizer.build([kernel, bias])
    assert keras_compat.uses_weight_decay(optimizer, kernel) and not keras_compat.uses_weight_decay(optimizer, bias)
    assert [keras_compat.variable_index(optimizer, variable) for variable in (kernel, bias)] == [0, 1]

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
    assert np.all(decayed < 1.0)
    # Keras still decays through `_apply_weight_decay`: the mixin's override skips it (no double decay).
    np.testing.assert_array_equal(skipped, np.ones(2))

    class Recorded(keras.optimizers.SGD):
        def _backend_update_step(self, grads, trainable_variables, learning_rate):
            calls.append(len(grads))
            return super()._backend_update_step(grads, trainable_variables, learning_rate)

    calls = []
    optimizer = Recorded(learning_rate=0.1, momentum=0.9)
    kernel, bias = keras.Variable(np.ones((2, 2), "float32")), keras.Variable(np.ones((2,), "float32"))
    optimizer.apply_gradients([(keras.ops.ones((2, 2)), kernel), (keras.ops.ones((2,)), bias)])
    assert calls == [2]  # one `_backend_update_step` for all the variables
    assert [tuple(buffer.shape) for buffer in optimizer.momentums] == [(2, 2), (2,)]
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
    assert len(calls) == 2  # `_save_model` at each epoch end
    assert calls[-1][2] == {"epoch": 2, "batch": 0}
    # Keras reads back what was written, from the same paths: a new run resumes after epoch 2.
    epochs = []
    resumed = keras.callbacks.BackupAndRestore(str(tmp_path), delete_checkpoint=False)
    record = keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: epochs.append(epoch))
    model.fit(x, y, epochs=3, batch_size=2, verbose=0, callbacks=[resumed, record])
    assert epochs == [2]


def test_the_installed_keras_is_in_the_tested_range():
    specifiers = pytest.importorskip("packaging.specifiers")
    pyproject = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "pyproject.toml")).read()
    assert f'"keras{keras_compat.TESTED_KERAS}"' in pyproject
    assert specifiers.SpecifierSet(keras_compat.TESTED_KERAS).contains(keras.__version__, prereleases=True)


def test_global_seed_set_without_tensorflow():
    # The same initial weights as after Keras's own set_random_seed, without importing TensorFlow on jax / torch.
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


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the padded fused attention is JAX's")
def test_padded_fused_attention_computes_the_unpadded_attention_for_odd_training_calls_on_a_gpu(monkeypatch):
    import jax
    import jax.numpy as jnp

    query, key, value, cotangent = (
        jax.random.normal(seed, (2, 197, 3, 16)) for seed in jax.random.split(jax.random.key(0), 4)
    )

    def loss(attention):
        return jax.value_and_grad(lambda *qkv: jnp.sum(attention(*qkv) * cotangent), argnums=(0, 1, 2))

    expected_loss, expected_grads = loss(jax.nn.dot_product_attention)(query, key, value)
    for multiple in (2, 8):
        padded = functools.partial(keras_compat.padded_fused_attention, implementation="xla", multiple=multiple)
        padded_loss, padded_grads = loss(padded)(query, key, value)
        np.testing.assert_allclose(padded_loss, expected_loss, rtol=1e-6)
        for grad, expected in zip(padded_grads, expected_grads):
            np.testing.assert_allclose(grad, expected, atol=1e-6)
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

    # A block keeps the qkv (one storage), the attention output and its log-sum-exp; Keras's op copies besides.
    qkv = torch.randn(batch, tokens, 3, heads, head_dim, requires_grad=True)
    projection = torch.randn(heads * head_dim, heads * head_dim, requires_grad=True)

    def kept_by(attention):
        def block(qkv):
            attended = attention(*qkv.unbind(2))
            return attended.reshape(batch, tokens, heads * head_dim) @ projection

        return _saved_activation_bytes(block, qkv)

    unit = batch * tokens * heads * head_dim * 4  # one (batch, tokens, hidden) float32 tensor
    kept, kept_by_keras = kept_by(keras_compat.dot_product_attention), kept_by(keras.ops.dot_product_attention)
    assert kept <= 4 * unit + projection.nbytes + batch * heads * tokens * 4
    assert kept_by_keras >= kept + unit  # Keras's op copies its inputs and output

    def graph_breaks(attention):
        try:
            return torch._dynamo.explain(lambda query: attention(query, query, query))(query).graph_break_count
        finally:
            torch._dynamo.reset()

    assert graph_breaks(keras_compat.dot_product_attention) == 0
    # torch.compile's graph broken by Keras 3.15's op (3.16's traces whole).
    assert (graph_breaks(keras.ops.dot_product_attention) >= 1) == (KERAS_VERSION < (3, 16))
    # A forced flash kernel is Keras's to check and refuse (it does on a CPU): passed on as it is.
    monkeypatch.setattr(keras.config, "is_flash_attention_enabled", lambda: True)
    with pytest.raises(RuntimeError):
        keras_compat.dot_product_attention(query, key, value)


def _torch_ops(function, input_shape=None):
    """The names of the aten ops `function()` runs (on an input of `input_shape`, if given), and its result."""
    import torch.profiler

    by_shape = input_shape is not None
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=by_shape) as profile:
        result = function()
    events = profile.key_averages(group_by_input_shape=by_shape)
    return [event.key for event in events if not by_shape or input_shape in event.input_shapes], result


def test_torch_and_jax_private_names():
    if keras.backend.backend() == "torch":
        import torch.utils.checkpoint

        assert hasattr(torch.utils.checkpoint, "_StopRecomputationError")
    if keras.backend.backend() == "jax":
        keras.ops.convert_to_numpy(keras.ops.ones(2))  # JAX computes: its backends exist now
        assert keras_compat.jax_backends_initialized()


def test_sublayers_reaches_every_nested_layer():
    from keras_vit.layers import TransformerBlock

    block = TransformerBlock(num_heads=2, mlp_dim=16)
    block.build((2, 5, 8))
    paths = {layer.path.split("/", 1)[1] for layer in keras_compat.sublayers(block)}
    assert {"attention", "attention/qkv", "attention/output", "mlp/fc1", "mlp/fc2"} <= paths, paths
