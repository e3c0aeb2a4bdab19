"""Every public layer through the shared contract helper, plus its behaviour."""

import keras
import numpy as np
import pytest

from keras_vit import layers
from tests.helpers import (
    assert_config_round_trip,
    randomize_weights,
    run_keras_hub_layer_test,
    run_layer_test,
    to_numpy,
)

HIDDEN = 16


ATTENTION_PARAMS = HIDDEN * 3 * HIDDEN + 3 * HIDDEN + HIDDEN * HIDDEN + HIDDEN
MLP_PARAMS = HIDDEN * 32 + 32 + 32 * HIDDEN + HIDDEN
CONTRACTS = {
    # Non-square and padded: 16x10 images, 4x4 patches -> a 4x3 grid.
    "patch_embedding": (
        layers.PatchEmbedding,
        dict(hidden_dim=HIDDEN, patch_size=4),
        (2, 16, 10, 3),
        (2, 4, 3, HIDDEN),
        2,
        4 * 4 * 3 * HIDDEN + HIDDEN,
    ),
    "class_token": (layers.ClassToken, {}, (2, 5, HIDDEN), (2, 6, HIDDEN), 1, HIDDEN),
    "position_embedding": (
        layers.PositionEmbedding,
        dict(grid_size=(2, 3)),
        (2, 7, HIDDEN),
        (2, 7, HIDDEN),
        1,
        7 * HIDDEN,
    ),
    "mlp_block": (
        layers.MLPBlock,
        dict(mlp_dim=32, activation="gelu_tanh"),
        (2, 5, HIDDEN),
        (2, 5, HIDDEN),
        4,
        MLP_PARAMS,
    ),
    "transformer_block": (
        layers.TransformerBlock,
        dict(num_heads=2, mlp_dim=32, drop_path_rate=0.1),
        (2, 5, HIDDEN),
        (2, 5, HIDDEN),
        12,
        4 * HIDDEN + ATTENTION_PARAMS + MLP_PARAMS,
    ),
}


@pytest.mark.parametrize("name", CONTRACTS)
def test_layer_contract(name, tmp_path):
    layer, kwargs, input_shape, output_shape, num_weights, num_params = CONTRACTS[name]
    run_layer_test(
        layer, kwargs, input_shape, output_shape, num_weights, expected_num_params=num_params, workdir=tmp_path
    )


def test_attention_contract_with_scores(tmp_path):
    run_layer_test(
        layers.MultiHeadSelfAttention,
        dict(num_heads=4),
        (2, 5, HIDDEN),
        [(2, 5, HIDDEN), (2, 4, 5, 5)],
        4,
        expected_num_params=ATTENTION_PARAMS,
        call_kwargs=dict(return_attention_scores=True),
        workdir=tmp_path,
    )


# keras-hub's layer contract for every public layer: kwargs, input shape, output shape, trainable weights, and
# non-trainable variables (a seed generator's state).
KERAS_HUB_CONTRACTS = {
    "PatchEmbedding": (dict(hidden_dim=HIDDEN, patch_size=4), (2, 16, 10, 3), (2, 4, 3, HIDDEN), 2, 0),
    "PatchTokens": ({}, (2, 2, 3, HIDDEN), (2, 6, HIDDEN), 0, 0),
    "ClassToken": ({}, (2, 5, HIDDEN), (2, 6, HIDDEN), 1, 0),
    "PositionEmbedding": (dict(grid_size=(2, 3)), (2, 7, HIDDEN), (2, 7, HIDDEN), 1, 0),
    "PatchFeatureMap": (dict(grid_size=2), (2, 5, HIDDEN), (2, 2, 2, HIDDEN), 0, 0),
    "DropPath": (dict(rate=0.2, seed=3), (2, 5, HIDDEN), (2, 5, HIDDEN), 0, 1),
    "PatchDropout": (dict(rate=0.25, num_prefix_tokens=2, seed=7), (2, 6, HIDDEN), (2, 6, HIDDEN), 0, 1),
    "MultiHeadSelfAttention": (dict(num_heads=2), (2, 5, HIDDEN), (2, 5, HIDDEN), 4, 0),
    "MLPBlock": (dict(mlp_dim=32), (2, 5, HIDDEN), (2, 5, HIDDEN), 4, 0),
    "TransformerBlock": (dict(num_heads=2, mlp_dim=32, drop_path_rate=0.1), (2, 5, HIDDEN), (2, 5, HIDDEN), 12, 1),
    "TokenPooling": (dict(mode="gap"), (2, 5, HIDDEN), (2, HIDDEN), 0, 0),
    "AttentionPooling": (dict(num_heads=2, mlp_dim=32), (2, 5, HIDDEN), (2, HIDDEN), 13, 0),
    "PixelScaling": (dict(scale=1 / 127.5, offset=-1.0), (2, 4, 4, 3), (2, 4, 4, 3), 0, 0),
    "StandardizedConv2D": (dict(filters=8, kernel_size=3, strides=2), (2, 8, 8, 3), (2, 4, 4, 8), 1, 0),
    # GroupNorm(32) needs 32 channels at least.
    "BottleneckUnit": (dict(filters=32, strides=2), (2, 8, 8, 16), (2, 4, 4, 128), 12, 0),
    "ResNetBackbone": (dict(stage_depths=(1,), width=32), (2, 32, 16, 3), (2, 8, 4, 128), 15, 0),
    "HybridPatchEmbedding": (
        dict(hidden_dim=HIDDEN, patch_size=2, stage_depths=(1,), width=32),
        (2, 32, 16, 3),
        (2, 4, 2, HIDDEN),
        17,
        0,
    ),
}


# keras-hub's contract fits a layer to its outputs, which RoPE's integer pairing index cannot be:
# tests/test_rotary.py runs it through tests/helpers.run_model_test instead.
OUTSIDE_KERAS_HUB_CONTRACT = ("RotaryEmbedding",)


def test_every_public_layer_has_a_keras_hub_contract():
    public = [name for name in layers.__all__ if isinstance(getattr(layers, name), type)]
    assert all(issubclass(getattr(layers, name), keras.layers.Layer) for name in public)
    assert sorted(public) == sorted([*KERAS_HUB_CONTRACTS, *OUTSIDE_KERAS_HUB_CONTRACT])


@pytest.mark.parametrize("name", KERAS_HUB_CONTRACTS)
def test_keras_hub_layer_contract(name):
    run_keras_hub_layer_test(getattr(layers, name), *KERAS_HUB_CONTRACTS[name])


@pytest.mark.parametrize(
    "layer, kwargs",
    [
        (layers.TokenPooling, dict(mode="gap")),
        (layers.PatchTokens, {}),
        (layers.DropPath, dict(rate=0.2, seed=3)),
        (layers.PatchDropout, dict(rate=0.25, num_prefix_tokens=2, seed=7)),
        (layers.PatchFeatureMap, dict(grid_size=2)),
        (layers.PixelScaling, dict(scale=1 / 127.5, offset=-1.0, name="rescaling")),
        # Their weights, shapes and saving are checked by the hybrid patch embedding's contract (test_resnet.py).
        (layers.StandardizedConv2D, dict(filters=8, kernel_size=3, strides=2)),
        (layers.BottleneckUnit, dict(filters=32, strides=2)),
        (layers.ResNetBackbone, dict(stage_depths=(1, 1))),
    ],
)
def test_config_round_trip_by_registered_name(layer, kwargs):
    original = layer(**kwargs)
    assert_config_round_trip(original)
    serialized = keras.saving.serialize_keras_object(original)
    assert serialized["registered_name"] == f"keras_vit>{layer.__name__}"
    assert type(keras.saving.deserialize_keras_object(serialized)) is layer


def test_weightless_layers_in_a_functional_model_and_patch_tokens_row_major():
    inputs = keras.Input((2, 3, HIDDEN))
    tokens = layers.ClassToken()(layers.PatchTokens()(inputs))
    assert tuple(layers.PatchFeatureMap()(tokens, patch_grid=inputs).shape) == (None, 2, 3, HIDDEN)
    assert tuple(layers.TokenPooling("token")(tokens).shape) == (None, HIDDEN)
    assert tuple(layers.PatchTokens().compute_output_shape((None, None, 4, HIDDEN))) == (None, None, HIDDEN)
    grid = np.arange(2 * 3 * 4 * HIDDEN, dtype="float32").reshape(2, 3, 4, HIDDEN)
    np.testing.assert_array_equal(to_numpy(layers.PatchTokens()(grid)), grid.reshape(2, 12, HIDDEN))
    assert tuple(layers.PatchTokens()(grid[:0]).shape) == (0, 12, HIDDEN)


# Behaviour ----------------------------------------------------------------


def _attention_reference(x, qkv_kernel, qkv_bias, out_kernel, out_bias, num_heads):
    batch, length, dim = x.shape
    head_dim = dim // num_heads
    qkv = (x @ qkv_kernel + qkv_bias).reshape(batch, length, 3, num_heads, head_dim)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    attended = (weights @ v).transpose(0, 2, 1, 3).reshape(batch, length, dim)
    return attended @ out_kernel + out_bias, weights


def test_attention_matches_numpy_and_both_paths_agree():
    layer = layers.MultiHeadSelfAttention(num_heads=4)
    x = np.random.default_rng(0).normal(size=(2, 7, HIDDEN)).astype("float32")
    layer.build(x.shape)
    fused = to_numpy(layer(x))
    explicit, weights = to_numpy(layer(x, return_attention_scores=True))
    expected, expected_weights = _attention_reference(
        x.astype("float64"), *[np.asarray(w, "float64") for w in to_numpy(layer.weights)], num_heads=4
    )
    np.testing.assert_allclose(fused, expected, atol=1e-5)
    np.testing.assert_allclose(explicit, expected, atol=1e-5)
    np.testing.assert_allclose(weights, expected_weights, atol=1e-6)


def test_transformer_block_is_pre_layer_norm_residual():
    block = layers.TransformerBlock(num_heads=2, mlp_dim=32)
    x = np.random.default_rng(1).normal(size=(2, 5, HIDDEN)).astype("float32")
    block.build(x.shape)
    randomize_weights(keras.Sequential([keras.Input((5, HIDDEN)), block]))
    h = x + to_numpy(block.attention(block.norm1(x)))
    expected = h + to_numpy(block.mlp(block.norm2(h)))
    np.testing.assert_allclose(to_numpy(block(x)), expected, atol=1e-5)
    assert block.norm1.epsilon == block.norm2.epsilon == 1e-6
    dense_layers = [block.attention.qkv, block.attention.output_projection, block.mlp.fc1, block.mlp.fc2]
    assert all(isinstance(dense.kernel_initializer, keras.initializers.GlorotUniform) for dense in dense_layers)


def test_gelu_switch_selects_exact_or_tanh_gelu():
    from math import erf

    x = np.linspace(-3, 3, 7).astype("float32")
    exact_gelu = np.array([0.5 * v * (1 + erf(v / np.sqrt(2))) for v in x.astype("float64")])
    tanh_gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x.astype("float64") ** 3)))
    for activation, expected in (("gelu", exact_gelu), ("gelu_tanh", tanh_gelu)):
        block = layers.MLPBlock(7, activation=activation)
        block.build((1, 1, 7))
        # Identity projections make the block's output the activation itself.
        block.set_weights([np.eye(7), np.zeros(7), np.eye(7), np.zeros(7)])
        np.testing.assert_allclose(to_numpy(block(x[None, None]))[0, 0], expected, atol=1e-6)
    assert np.abs(exact_gelu - tanh_gelu).max() > 1e-4  # the two really differ


def test_drop_path_is_per_sample_and_unbiased():
    layer = layers.DropPath(0.5, seed=7)
    x = np.ones((4000, 3, 2), "float32")
    y = to_numpy(layer(x, training=True))
    per_sample = y.reshape(4000, -1)
    # Each sample is either dropped entirely or scaled by 1 / keep.
    assert set(np.unique(per_sample)) <= {0.0, 2.0}
    assert np.all(per_sample.min(1) == per_sample.max(1))
    assert abs(y.mean() - 1.0) < 0.06
    np.testing.assert_array_equal(to_numpy(layer(x, training=False)), x)


def test_patch_embedding_is_row_major_hwio_and_pads_bottom_right_with_zeros():
    # timm's dynamic_img_pad: a 5x7 image is a 6x8 image with zero rows/columns at the bottom/right.
    layer = layers.PatchEmbedding(hidden_dim=4, patch_size=2)
    images = np.random.default_rng(3).normal(size=(2, 5, 7, 3)).astype("float32")
    padded = np.zeros((2, 6, 8, 3), "float32")
    padded[:, :5, :7] = images
    grid = to_numpy(layer(images))
    np.testing.assert_allclose(grid, to_numpy(layer(padded)), atol=1e-6)
    kernel, bias = to_numpy(layer.weights)
    assert kernel.shape == (2, 2, 3, 4)
    # Grid row 1, column 2: pixels [2:4, 4:6].
    np.testing.assert_allclose(grid[0, 1, 2], np.einsum("hwc,hwcd->d", images[0, 2:4, 4:6], kernel) + bias, atol=1e-5)
    assert tuple(layer.compute_output_shape((None, 5, None, 3))) == (None, 3, None, 4)


def test_position_embedding_follows_the_patch_grid():
    layer = layers.PositionEmbedding((2, 3), resample_method="bilinear")
    tokens = np.zeros((1, 1 + 4 * 5, 2), "float32")
    out = to_numpy(layer(tokens, patch_grid=np.zeros((1, 4, 5, 2))))
    from keras_vit.layers.resampling import resample_position_embedding

    expected = resample_position_embedding(to_numpy(layer.embedding), (2, 3), (4, 5), method="bilinear")
    np.testing.assert_allclose(out, expected, atol=1e-6)
    # On the stored grid nothing is resampled.
    native = to_numpy(layer(np.zeros((1, 7, 2), "float32"), patch_grid=np.zeros((1, 2, 3, 2))))
    np.testing.assert_array_equal(native, to_numpy(layer.embedding))


def _called_twice(layer, first, second):
    """Builds `layer` on zeros of shape `first`, then calls it on zeros of shape `second`."""
    layer(np.zeros(first, "float32"))
    return layer(np.zeros(second, "float32"))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: layers.PatchEmbedding(hidden_dim=0, patch_size=4), "hidden_dim=0"),
        (lambda: layers.PatchEmbedding(hidden_dim=8, patch_size=(4, 0)), r"patch_size=\(4, 0\)"),
        (lambda: layers.MultiHeadSelfAttention(num_heads=3).build((1, 5, 16)), "num_heads=3"),
        (lambda: layers.TransformerBlock(2, 8, drop_path_rate=1.0), r"rate=1\.0"),
        (lambda: layers.PatchDropout(1.0), r"rate=1\.0"),
        (lambda: layers.TokenPooling("min"), "mode='min'"),
        (lambda: layers.PositionEmbedding((2, 2))(np.zeros((1, 4, 8))), r"\(1, 4, 8\)"),
        (lambda: _called_twice(layers.PositionEmbedding((2, 2)), (1, 5, 8), (1, 10, 8)), r"\(1, 10, 8\)"),
        (lambda: layers.PositionEmbedding((2, 2), resample_antialias=True), "resample_method='official'"),
        (lambda: layers.MLPBlock(8, activation="relu"), "activation='relu'"),
        (lambda: layers.ResNetBackbone((3, 0)), "stage_depths"),
        (lambda: layers.ResNetBackbone((), width=48), "width=48"),
        (lambda: layers.TransformerBlock(num_heads=2, mlp_dim=8, remat="yes"), "remat='yes'"),
    ],
)
def test_bad_arguments_name_the_value(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_float16_attention_compiles_and_matches_eager():
    # JAX's fused attention asked XLA's CPU backend for a float16 x float16 -> float32 product it does not have.
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs = keras.Input((5, 8))
        model = keras.Model(inputs, layers.MultiHeadSelfAttention(num_heads=2)(inputs))
    finally:
        keras.config.set_dtype_policy(previous)
    randomize_weights(model)
    tokens = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    compiled = model.predict(tokens, verbose=0)
    assert compiled.dtype == np.float16
    np.testing.assert_allclose(compiled.astype("float32"), to_numpy(model(tokens)).astype("float32"), atol=2e-2)


@pytest.mark.parametrize("shape", [(2, 5, HIDDEN), (0, 5, HIDDEN), (3, HIDDEN), (2, 2, 3, HIDDEN)])
def test_dense_over_tokens_is_the_dense(shape):
    from keras_vit.layers.transformer import dense_over_tokens

    dense = keras.layers.Dense(7)
    dense.build((None, HIDDEN))
    randomize_weights(dense)
    tokens = keras.ops.convert_to_tensor(np.random.default_rng(0).normal(size=shape).astype("float32"))
    flattened = to_numpy(dense_over_tokens(dense, tokens))
    assert flattened.shape == shape[:-1] + (7,)
    np.testing.assert_allclose(flattened, to_numpy(dense(tokens)), rtol=1e-6, atol=1e-6)
    symbolic = dense_over_tokens(dense, keras.Input(shape[1:]))  # a functional model's input: the batch unknown
    assert tuple(symbolic.shape) == (None, *shape[1:-1], 7)


def test_block_gradients_copy_no_activation_gradient_into_a_transposed_layout():
    # XLA's CPU compiler fused later blocks' backward into transposed copies of a 3-D Dense's output gradient.
    if keras.backend.backend() != "jax":
        pytest.skip("XLA's CPU program through JAX: the jax run")
    import re

    import jax

    batch, tokens = 4, 17
    inputs = keras.Input((tokens, HIDDEN))
    block = dict(num_heads=2, mlp_dim=4 * HIDDEN)
    outputs = layers.TransformerBlock(**block)(layers.TransformerBlock(**block)(inputs))
    model = keras.Model(inputs, outputs)

    def loss(trainable, non_trainable, x):
        y, _ = model.stateless_call(trainable, non_trainable, x, training=True)
        return (y**2).mean()

    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables])
    x = np.random.default_rng(0).normal(size=(batch, tokens, HIDDEN)).astype("float32")
    program = jax.jit(jax.grad(loss)).lower(*state, x).compile().as_text()
    assert " dot(" in program or "fusion(" in program  # a compiled program, read as text
    # An array of (features, batch * tokens): a token-major activation or gradient laid out transposed.
    transposed = re.findall(rf"= f32\[\d+,{batch * tokens}\]\{{1,0\}} (?:fusion|copy|transpose)\(", program)
    assert transposed == []


@pytest.mark.parametrize(
    "scale, offset", [(1 / 127.5, -1.0), ([0.5, 0.25, 2.0], [1.0, 0.0, -1.0])], ids=["scalars", "per_channel"]
)
def test_pixel_scaling_computes_what_rescaling_computes(scale, offset):
    pixels = np.random.default_rng(0).uniform(0, 255, size=(2, 5, 4, 3)).astype("float32")
    mine = layers.PixelScaling(scale, offset=offset)
    assert isinstance(mine, keras.layers.Rescaling)
    for inputs in (pixels, pixels.astype("uint8")):  # integers are cast to the compute dtype first
        np.testing.assert_array_equal(to_numpy(mine(inputs)), to_numpy(keras.layers.Rescaling(scale, offset)(inputs)))
