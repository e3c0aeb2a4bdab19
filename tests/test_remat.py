"""`remat=True`: the same loss, gradients and training as without it, the block really recomputed."""

import collections
import gc

import keras
import numpy as np
import pytest

import keras_vit
from tests.helpers import (
    BACKEND,
    KERAS_VERSION,
    random_inputs,
    randomize_weights,
    run_model_saving_test,
    to_numpy,
    trainable_gradients,
)

TINY = dict(patch_size=4, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32, input_shape=(8, 12, 3), classes=3)
# With dropout and stochastic depth the recomputation must draw the masks of the forward pass.
RANDOM = dict(dropout_rate=0.2, attention_dropout_rate=0.2, drop_path_rate=0.3)
# The blocks' positions pass through the recomputation too (learned per-block frequencies: a gradient each).
ROPE = dict(position_embedding=False, rope=dict(rope_type="mixed", temperature=10.0))


def _pair(**options):
    """A model without remat and one with, holding the same weights and seed-generator states."""
    plain = keras_vit.VisionTransformer(**TINY, **options)
    randomize_weights(plain)
    remat = keras_vit.VisionTransformer(**TINY, **options, remat=True)
    _assign(remat, [to_numpy(v) for v in plain.variables])  # `variables`: the seed generators' states too
    return plain, remat


def _assign(model, values):
    for variable, value in zip(model.variables, values, strict=True):
        variable.assign(value)


@pytest.mark.parametrize(
    ("policy", "options"),
    [("float32", {}), ("float32", RANDOM), ("mixed_bfloat16", {}), ("float32", ROPE)],
    ids=["deterministic", "dropout", "mixed_bfloat16", "rope"],
)
def test_remat_gives_the_same_loss_and_gradients(policy, options):
    keras.config.set_dtype_policy(policy)
    try:
        plain, remat = _pair(**options)
    finally:
        keras.config.set_dtype_policy("float32")
    inputs = random_inputs((3, 8, 12, 3))
    labels = np.array([0, 2, 1])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=False)
    states = [to_numpy(v) for v in plain.variables]
    losses, gradients = [], []
    for model in (plain, remat):
        # Unseeded dropout on torch draws from torch's global generator (torch.utils.checkpoint replays it).
        keras.utils.set_random_seed(1)
        losses.append(float(loss(labels, model(inputs, training=True))))
        _assign(model, states)  # the forward pass advanced the seed generators
        keras.utils.set_random_seed(2)
        gradients.append(trainable_gradients(model, inputs))
    assert abs(losses[0] - losses[1]) <= (1e-5 if policy == "float32" else 1e-2)
    for got, want in zip(gradients[1], gradients[0], strict=True):
        assert got.dtype == want.dtype == np.float32  # the variables stay float32
        atol = 1e-5 if policy == "float32" else 1e-2 * max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=0, atol=atol)
    # Both generators advanced alike: embedding dropout, per block three dropouts and (but the first) drop path.
    assert len(plain.non_trainable_variables) == (8 if "dropout_rate" in options else 0)
    for got, want in zip(remat.non_trainable_variables, plain.non_trainable_variables, strict=True):
        np.testing.assert_array_equal(to_numpy(got), to_numpy(want))


def test_remat_trains_like_without(tmp_path):
    """Two compiled `fit` epochs (XLA on tensorflow and jax) with dropout: the same weights and losses."""
    inputs, labels = random_inputs((4, 8, 12, 3)), np.array([0, 1, 2, 1])
    results = []
    for model in _pair(**RANDOM):
        keras.utils.set_random_seed(1)  # torch's global generator, which unseeded dropout draws from there
        model.compile(
            optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy", jit_compile=BACKEND != "torch"
        )
        history = model.fit(inputs, labels, batch_size=2, epochs=2, shuffle=False, verbose=0)
        results.append((history.history["loss"], [to_numpy(v) for v in model.variables]))
    (plain_loss, plain_weights), (remat_loss, remat_weights) = results
    np.testing.assert_allclose(remat_loss, plain_loss, rtol=0, atol=1e-5)
    for got, want in zip(remat_weights, plain_weights):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def _forward_calls_in_one_gradient(model, block, inputs):
    calls = []
    original = block._forward

    def counted(*args):
        calls.append(1)
        return original(*args)

    block._forward = counted
    try:
        trainable_gradients(model, inputs)
    finally:
        del block._forward
    return len(calls)


def test_the_backward_pass_recomputes_the_block():
    plain, model = _pair()
    inputs = random_inputs((2, 8, 12, 3))
    if BACKEND != "jax":
        # trainable_gradients runs one inference call, then one training call whose gradient is taken.
        assert _forward_calls_in_one_gradient(plain, plain.get_layer("encoder_block_0"), inputs) == 2
        assert _forward_calls_in_one_gradient(model, model.get_layer("encoder_block_0"), inputs) == 3
        return
    import jax  # jax.checkpoint traces once: the gradient's jaxpr shows it

    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def loss(trainable):
        outputs, _ = model.stateless_call(trainable, non_trainable, inputs, training=True)
        return keras.ops.sum(outputs)

    jaxpr = str(jax.make_jaxpr(jax.grad(loss))(trainable))
    assert jaxpr.count("remat") + jaxpr.count("checkpoint") >= TINY["num_layers"]


def test_remat_is_in_the_config_and_the_saved_model(tmp_path):
    model = keras_vit.VisionTransformer(**TINY, remat=True)
    randomize_weights(model)
    run_model_saving_test(model, random_inputs((2, 8, 12, 3)), tmp_path)
    loaded = keras.saving.load_model(tmp_path / "model.keras", safe_mode=True)
    for built in (model, loaded):
        assert built.remat and all(built.get_layer(f"encoder_block_{i}").remat for i in range(TINY["num_layers"]))


def test_a_remat_training_step_leaves_nothing_for_the_cyclic_collector():
    # torch.utils.checkpoint's early stop (an exception) must not keep the recomputed activations in cycles.
    model = keras_vit.VisionTransformer(**TINY, remat=True)
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy())
    inputs, labels = random_inputs((3, 8, 12, 3)), np.array([0, 2, 1])
    left = _cyclic_garbage_of(lambda: model.train_on_batch(inputs, labels))
    assert not {name: count for name, count in left.items() if "Tensor" in name or "Error" in name}, left


def _cyclic_garbage_of(step):
    """The types of what the second `step()` leaves for the cyclic collector, by count."""
    step()  # builds and traces outside the measurement
    # Until nothing is left: one collection can free what makes more garbage.
    while gc.collect():
        pass
    gc.disable()
    try:
        gc.set_debug(gc.DEBUG_SAVEALL)
        step()
        gc.collect()
        return collections.Counter(type(found).__name__ for found in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.skipif(BACKEND != "torch", reason="torch.utils.checkpoint's early stop")
def test_the_early_stop_leaves_nothing_behind_when_it_passes_through_keras_layer_calls(monkeypatch):
    # A rematerialized function whose layers run through `Layer.__call__` and its traceback filter.
    import torch

    from keras_vit.utils import keras_compat

    first, second = keras.layers.Dense(8), keras.layers.Dense(8)
    inputs = torch.randn(4, 8, requires_grad=True)

    def garbage():
        rematerialized = keras_compat.remat(lambda x: second(keras.ops.relu(first(x))))

        def step():
            keras.ops.sum(rematerialized(inputs) ** 2).backward()

        left = _cyclic_garbage_of(step)
        return {name: count for name, count in left.items() if "Tensor" in name or "Error" in name}

    assert not garbage()
    # The same without clearing the early stop's frames: what the clearing is for on Keras 3.15 (3.16 leaves none).
    monkeypatch.setattr(keras_compat, "_clear_traceback_frames", lambda error: None)
    assert bool(garbage().get("_StopRecomputationError")) == (KERAS_VERSION < (3, 16))


@pytest.mark.skipif(BACKEND != "torch", reason="torch.compile")
def test_torch_compile_of_a_remat_training_call_computes_the_eager_call(policy="float32"):
    """Keras's layer calls inside `torch.utils.checkpoint` break the graph (its name scopes write global state):
    the compiled call still computes the eager one, gradients included."""
    import torch

    keras.config.set_dtype_policy(policy)
    try:
        model = keras_vit.VisionTransformer(**TINY, remat=True)
    finally:
        keras.config.set_dtype_policy("float32")
    randomize_weights(model)
    inputs = keras.ops.convert_to_tensor(random_inputs((2, 8, 12, 3)))

    def loss_and_gradients(call):
        loss = keras.ops.sum(keras.ops.cast(call(inputs), "float32") ** 2)
        return [loss, *torch.autograd.grad(loss, [v.value for v in model.trainable_variables])]

    try:  # dynamo's capture and AOT autograd are what remat meets, not inductor's code generation
        compiled = loss_and_gradients(torch.compile(lambda images: model(images, training=True), backend="aot_eager"))
    finally:
        torch._dynamo.reset()
    tolerance = 1e-5 if policy == "float32" else 2e-2
    for got, want in zip(compiled, loss_and_gradients(lambda images: model(images, training=True)), strict=True):
        np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=tolerance, atol=tolerance)
