"""`RotaryEmbedding` and `apply_rotary` against timm's `Eva` RoPE, and the layer's Keras contract."""

import keras
import numpy as np
import pytest

from keras_vit.layers.rotary import RotaryEmbedding, apply_rotary
from tests.helpers import assert_config_round_trip, random_inputs, run_model_test, to_numpy
from tests.timm_reference import import_timm

HEAD_DIM, HEADS = 16, 2
# The published models of each family (timm `models/eva.py`), shrunk to 2 heads of 16, and the arguments that give
# their RoPE here. timm builds them with `dynamic_img_size=True`, so that its RoPE follows the grid as this one does.
FAMILIES = {
    "vit_small_patch16_dinov3": dict(rope_type="dinov3", num_prefix_tokens=5, temperature=100.0, rotate_half=True),
    "eva02_tiny_patch14_224": dict(rope_type="cat", ref_grid=16),
    "vit_pe_core_tiny_patch16_384": dict(rope_type="cat", grid_offset=1.0, grid_indexing="xy", ref_grid=24),
    "vit_small_patch16_rope_224": dict(rope_type="cat", temperature=100.0, grid_indexing="xy"),
    "vit_small_patch16_rope_mixed_224": dict(rope_type="mixed", temperature=10.0, grid_indexing="xy", depth=2),
    "vit_medium_patch16_rope_reg1_gap_256": dict(rope_type="cat", ref_grid=16),
}


@pytest.mark.parametrize("grid", [(4, 4), (3, 5)])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_rotation_matches_timm(name, grid):
    import torch

    timm = import_timm()
    from timm.layers import apply_rot_embed_cat

    model = timm.create_model(
        name, pretrained=False, embed_dim=HEADS * HEAD_DIM, num_heads=HEADS, depth=2, dynamic_img_size=True
    )
    layer = RotaryEmbedding(HEAD_DIM, HEADS, **FAMILIES[name])
    assert layer.num_prefix_tokens == model.num_prefix_tokens
    if layer.rope_type == "mixed":
        layer.build((1, *grid, 8))
        layer.freqs.assign(model.rope.freqs.detach().numpy())  # timm's random initialisation
    cos, sin = layer(np.zeros((1, *grid, 8), "float32"))
    query = random_inputs((2, layer.num_prefix_tokens + grid[0] * grid[1], HEADS, HEAD_DIM))
    prefix = layer.num_prefix_tokens
    with torch.no_grad():
        embeds = model.rope.get_embed(shape=grid)
        for block in range(layer.depth or 1):
            embed = embeds[block] if layer.rope_type == "mixed" else embeds
            q = torch.from_numpy(query).transpose(1, 2)  # timm's (batch, heads, tokens, head_dim), as EvaAttention
            rotated = apply_rot_embed_cat(q[:, :, prefix:], embed, half=layer.rotate_half)
            expected = torch.cat([q[:, :, :prefix], rotated], dim=2).transpose(1, 2).numpy()
            got = apply_rotary(query, cos[block : block + 1], sin[block : block + 1])
            np.testing.assert_allclose(to_numpy(got), expected, rtol=0, atol=1e-5)


def test_mixed_initialisation_follows_timm():
    timm = import_timm()
    reference = timm.layers.RotaryEmbeddingMixed(HEADS * HEAD_DIM, depth=3, num_heads=HEADS, temperature=10.0)
    layer = RotaryEmbedding(HEAD_DIM, HEADS, rope_type="mixed", temperature=10.0, depth=3)
    layer.build((1, 2, 2, 8))
    freqs, expected = layer.freqs.numpy(), reference.freqs.detach().numpy()
    assert freqs.shape == expected.shape
    # Random rotations of the same magnitudes, and the y frequencies a quarter turn ahead of the x ones.
    np.testing.assert_allclose(np.hypot(freqs[0], freqs[1]), np.hypot(expected[0], expected[1]), rtol=1e-6)
    quarter = HEAD_DIM // 4
    np.testing.assert_allclose(freqs[0, ..., quarter:], -freqs[1, ..., :quarter], atol=1e-6)
    assert np.std(np.arctan2(freqs[1, :, :, 0], freqs[0, :, :, 0])) > 0.1


@pytest.mark.parametrize(
    "kwargs", [dict(), dict(rope_type="dinov3", rotate_half=True, num_prefix_tokens=0), dict(ref_grid=(3, 2))]
)
def test_weightless_contract(kwargs):
    layer = RotaryEmbedding(HEAD_DIM, HEADS, **kwargs)
    assert_config_round_trip(layer)
    spec = layer.compute_output_spec(keras.KerasTensor((2, 3, 4, 8)))
    outputs = to_numpy(layer(random_inputs((2, 3, 4, 8))))
    assert [(tuple(s.shape), s.dtype) for s in spec] == [(o.shape, o.dtype.name) for o in outputs]
    width = HEAD_DIM // 2 if layer.rotate_half else HEAD_DIM
    assert outputs[0].shape == (1, layer.num_prefix_tokens + 12, 1, width) and not layer.weights
    # The prefix rows are the identity.
    np.testing.assert_equal(outputs[0][:, : layer.num_prefix_tokens], 1.0)
    np.testing.assert_equal(outputs[1][:, : layer.num_prefix_tokens], 0.0)


def test_mixed_layer_contract(tmp_path):
    # The tables are float32 under any policy, which the helper's mixed-precision check would refuse; every model
    # test runs the layer compiled, so the helper's jit fit is left out (10-15 s a backend).
    table = (2, 13, HEADS, HEAD_DIM)
    layer = RotaryEmbedding(HEAD_DIM, HEADS, rope_type="mixed", temperature=10.0, depth=2)
    assert layer.compute_output_shape((2, 3, 4, 8)) == (table, table)

    def build_model():
        inputs = keras.Input(batch_shape=(2, 3, 4, 8))
        return keras.Model(inputs, list(RotaryEmbedding.from_config(layer.get_config())(inputs)))

    model = run_model_test(
        build_model,
        (2, 3, 4, 8),
        [table, table],
        expected_num_params=2 * 2 * HEADS * HEAD_DIM // 2,
        expected_num_trainable_weights=1,
        workdir=tmp_path,
        fresh_process=False,
        mixed_precision=False,
        jit=False,
    )
    assert model.weights[0].path.endswith("freqs")


@pytest.mark.parametrize("rope_type", ["cat", "dinov3", "mixed"])
def test_a_dynamic_grid_runs_at_two_sizes(rope_type):
    kwargs = {"cat": dict(ref_grid=16), "dinov3": {}, "mixed": dict(depth=2)}[rope_type]
    inputs = keras.Input((None, None, 8))
    layer = RotaryEmbedding(HEAD_DIM, HEADS, rope_type, num_prefix_tokens=2, **kwargs)
    model = keras.Model(inputs, list(layer(inputs)))
    assert model.outputs[0].shape[1] is None
    for grid in [(2, 3), (4, 4)]:
        patches = random_inputs((1, *grid, 8))
        predicted = model.predict(patches, verbose=0)  # compiled: a dynamic grid where the backend gives one
        for got, expected in zip(predicted, to_numpy(layer(patches))):
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
        assert predicted[0].shape[1] == 2 + grid[0] * grid[1]


def test_mixed_precision_keeps_the_tables_in_float32_and_the_rotation_in_the_input_dtype():
    patches = random_inputs((1, 4, 4, 8))
    reference = RotaryEmbedding(HEAD_DIM, HEADS, rope_type="mixed", depth=1)
    expected = to_numpy(reference(patches))
    keras.config.set_dtype_policy("mixed_bfloat16")
    layer = RotaryEmbedding(HEAD_DIM, HEADS, rope_type="mixed", depth=1)
    layer.build(patches.shape)
    layer.freqs.assign(reference.freqs)
    cos, sin = layer(patches)
    keras.config.set_dtype_policy("float32")
    assert [keras.backend.standardize_dtype(t.dtype) for t in (cos, sin)] == ["float32", "float32"]
    # The learned frequencies are read in float32 too (in bfloat16 they were off by up to 1e-3 here).
    np.testing.assert_allclose(to_numpy(sin), expected[1], rtol=0, atol=1e-6)
    query = keras.ops.cast(random_inputs((1, 17, HEADS, HEAD_DIM)), "bfloat16")
    assert keras.backend.standardize_dtype(apply_rotary(query, cos, sin).dtype) == "bfloat16"


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(head_dim=6),
        dict(rope_type="axial"),
        dict(grid_indexing="yx"),
        dict(temperature=0),
        dict(depth=2),
        dict(rope_type="mixed"),
        dict(rope_type="mixed", depth=2, rotate_half=True),
        dict(rope_type="dinov3", ref_grid=16),
        dict(ref_grid=(0, 4)),
    ],
)
def test_bad_arguments_raise_one_line_errors(kwargs):
    with pytest.raises(ValueError, match="Received: ") as error:
        RotaryEmbedding(**{"head_dim": HEAD_DIM, "num_heads": HEADS, **kwargs})
    assert "\n" not in str(error.value)
