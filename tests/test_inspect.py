"""keras_vit.inspection: attention maps against NumPy, the analyses on hand-made inputs, the plots and `keras-vit
inspect`."""

import math
import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import inspection
from keras_vit.layers.rotary import apply_rotary
from keras_vit.models.applications import CONSTRUCTORS

# Non-square images and grid (4 x 3 patches of 8 px) catch transposed grids.
IMAGE_SHAPE = (32, 24, 3)
GRID = (4, 3)
PATCH = 8
TINY = dict(patch_size=PATCH, hidden_dim=16, num_heads=2, mlp_dim=32)


def tiny_model(include_top=False, pooling=None, num_layers=2, seed=0, **kwargs):
    kwargs = {"input_shape": IMAGE_SHAPE, "include_preprocessing": False, "classes": 5, **kwargs}  # images: [-1, 1]
    model = keras_vit.VisionTransformer(
        **TINY, num_layers=num_layers, include_top=include_top, pooling=pooling, **kwargs
    )
    # Random values everywhere, large enough for attention far from uniform.
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.3, size=tuple(variable.shape)).astype(variable.dtype))
    return model


def images(batch=3, seed=1):
    return np.random.default_rng(seed).uniform(-1, 1, size=(batch,) + IMAGE_SHAPE).astype("float32")


def weight(layer):
    return np.asarray(keras.ops.convert_to_numpy(layer), dtype="float64")


def layer_norm(x, layer):
    mean = x.mean(-1, keepdims=True)
    variance = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-6) * weight(layer.gamma) + weight(layer.beta)


def numpy_forward(model, pixels):
    """The ViT forward pass in float64 NumPy: every block's attention and the last block's tokens."""
    embed = model.get_layer("patch_embedding").projection
    kernel = weight(embed.kernel)  # HWIO
    batch, (height, width, channels) = len(pixels), IMAGE_SHAPE
    patches = pixels.astype("float64").reshape(batch, height // PATCH, PATCH, width // PATCH, PATCH, channels)
    patches = patches.transpose(0, 1, 3, 2, 4, 5).reshape(batch, -1, PATCH * PATCH * channels)
    x = patches @ kernel.reshape(-1, kernel.shape[-1]) + weight(embed.bias)
    prefix = [weight(model.get_layer("class_token").token)]
    if model.num_register_tokens:
        prefix.append(weight(model.get_layer("register_tokens").token))
    prefix = np.broadcast_to(np.concatenate(prefix, axis=1), (batch, model.num_prefix_tokens, x.shape[-1]))
    x = np.concatenate([prefix, x], axis=1)
    if model.position_embedding:
        x = x + weight(model.get_layer("position_embedding").embedding)
    rotation = None
    if model.rope is not None:
        # The layer's own tables (tests/test_rotary.py checks them against timm), applied here in NumPy.
        grid = np.zeros((1, height // PATCH, width // PATCH, x.shape[-1]), "float32")
        cos, sin = model.get_layer("rotary_embedding")(grid)
        rotation = lambda t: np.asarray(keras.ops.convert_to_numpy(apply_rotary(t, cos, sin)))  # noqa: E731
    erf = np.vectorize(math.erf)
    attention = []
    for block in [layer for layer in model.layers if layer.name.startswith("encoder_block_")]:
        heads = block.num_heads
        head_dim = x.shape[-1] // heads
        h = layer_norm(x, block.norm1)
        qkv = h @ weight(block.attention.qkv.kernel) + weight(block.attention.qkv.bias)
        qkv = qkv.reshape(batch, x.shape[1], 3, heads, head_dim)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        if rotation is not None:
            q, k = rotation(q), rotation(k)
        logits = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(head_dim)
        logits -= logits.max(-1, keepdims=True)
        weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        attention.append(weights)
        attended = np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(x.shape)
        projection = block.attention.output_projection
        x = x + attended @ weight(projection.kernel) + weight(projection.bias)
        h = layer_norm(x, block.norm2) @ weight(block.mlp.fc1.kernel) + weight(block.mlp.fc1.bias)
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = x + h @ weight(block.mlp.fc2.kernel) + weight(block.mlp.fc2.bias)
    return np.stack(attention), x


def test_attention_maps_and_features_equal_numpy_reference_and_leave_the_model_unchanged():
    model, pixels = tiny_model(include_top=True, pooling="token", num_layers=3), images()
    config = model.get_config()
    before = keras.ops.convert_to_numpy(model(pixels))
    attention = inspection.attention_maps(model, pixels, batch_size=2)  # two chunks
    expected, reference_tokens = numpy_forward(model, pixels)
    assert attention.shape == (3, 3, 2, 13, 13) and attention.dtype == np.float32
    np.testing.assert_allclose(attention, expected, atol=1e-5, rtol=0)
    assert np.abs(expected - 1 / 13).max() > 0.05  # the reference is not uniform attention
    every = inspection.intermediate_features(model, pixels)
    assert [f.shape for f in every] == [(3, 13, 16)] * 3
    np.testing.assert_allclose(every[-1], reference_tokens, atol=1e-4)
    last_and_first = inspection.intermediate_features(model, pixels, layers=[-1, 0])
    np.testing.assert_array_equal(np.stack(last_and_first), np.stack([every[2], every[0]]))
    maps = inspection.intermediate_features(model, pixels, layers=np.int64(1), reshape=True)
    # Row-major patches: patch (row 1, column 2) is token 1 + 1 * 3 + 2.
    assert maps.shape == (3, 4, 3, 16)
    np.testing.assert_array_equal(maps[:, 1, 2], every[1][:, 1 + 1 * 3 + 2])
    with pytest.raises(ValueError, match=r"\[-3, 2\]"):
        inspection.intermediate_features(model, pixels, layers=3)
    # The model's own call and config are untouched.
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(pixels)), before)
    assert model.get_config() == config


def test_a_rope_model_with_registers_is_inspected_and_reported(tmp_path):
    # DINOv3's position scheme: four registers, no position table, RoPE on the non-square 4 x 3 grid.
    rope = dict(rope_type="dinov3", temperature=100.0, rotate_half=True)
    model = tiny_model(include_top=True, pooling="token", num_register_tokens=4, position_embedding=False, rope=rope)
    pixels = images(batch=2)
    attention = inspection.attention_maps(model, pixels)
    expected, reference_tokens = numpy_forward(model, pixels)
    assert attention.shape == (2, 2, 2, 17, 17)
    np.testing.assert_allclose(attention, expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(inspection.intermediate_features(model, pixels, layers=-1), reference_tokens, atol=1e-4)
    maps = inspection.attention_rollout(model, pixels)
    np.testing.assert_allclose(maps, inspection.rollout_map(attention, GRID, num_prefix_tokens=5))
    with pytest.raises(ValueError, match="no learned position embedding"):
        inspection.position_embedding_similarity(model)
    pytest.importorskip("matplotlib")
    import keras_vit_cli as cli

    model.save(tmp_path / "rope.keras")
    argv = ["inspect", inspection.sample_image_path(), "--model", str(tmp_path / "rope.keras")]
    assert cli.main([*argv, "--out", str(tmp_path / "report"), "--dpi", "30"]) == 0
    # Every file of the report; the similarity figure says why it has none.
    assert sorted(os.listdir(tmp_path / "report")) == sorted(inspection.REPORT_FILES)


def test_bad_inputs_raise_clear_errors():
    model = tiny_model()
    with pytest.raises(ValueError, match=r"\(2, 32, 32, 3\)"):
        inspection.attention_maps(model, np.zeros((2, 32, 32, 3)))
    with pytest.raises(ValueError, match=r"image\[None\]"):
        inspection.attention_maps(model, np.zeros(IMAGE_SHAPE))
    with pytest.raises(ValueError, match="batch_size"):
        inspection.attention_maps(model, images(), batch_size=0)
    inputs = keras.Input(IMAGE_SHAPE)
    other = keras.Model(inputs, keras.layers.Conv2D(4, 8)(inputs))
    for not_a_vit in ("vit", other):
        with pytest.raises(ValueError, match="no keras_vit Vision Transformer"):
            inspection.attention_maps(not_a_vit, images())
    # A layer forward_intermediates would skip (here an activation before the patches).
    scaled = keras.layers.Activation("tanh", name="scale")(inputs)
    with_preprocessing = keras_vit.VisionTransformer(**TINY, num_layers=1, input_tensor=scaled)
    with pytest.raises(ValueError, match="input_tensor"):
        inspection.attention_maps(with_preprocessing, images())


def _twin(model, **kwargs):
    """A classifier built with other arguments that holds `model`'s weights."""
    twin = tiny_model(include_top=True, pooling="token", **kwargs)
    twin.set_weights(model.get_weights())
    return twin


def test_patch_dropout_channels_first_any_size_reloaded_and_mixed_precision_models_are_inspected(tmp_path):
    model, pixels = tiny_model(include_top=True, pooling="token"), images(batch=2)
    expected = inspection.attention_maps(model, pixels)
    # Patch dropout is the identity at inference (a model trained with `--patch-dropout` is inspected as is).
    dropped = _twin(model, patch_dropout_rate=0.5)
    np.testing.assert_allclose(inspection.attention_maps(dropped, pixels), expected, atol=1e-6)
    # The model's own input size, 30x20: zero-padded to whole patches, as the model itself pads it.
    between = _twin(model, input_shape=(30, 20, 3))
    padded = np.zeros_like(pixels)
    padded[:, :30, :20] = pixels[:, :30, :20]
    np.testing.assert_allclose(
        inspection.attention_maps(between, pixels[:, :30, :20]), inspection.attention_maps(model, padded), atol=1e-6
    )
    # A channels-first model takes its images channels-first, here as in prediction.
    keras.config.set_image_data_format("channels_first")
    try:
        first = _twin(model, input_shape=(3, *IMAGE_SHAPE[:2]))
    finally:
        keras.config.set_image_data_format("channels_last")
    channels_first = np.transpose(pixels, (0, 3, 1, 2))
    np.testing.assert_allclose(inspection.attention_maps(first, channels_first), expected, atol=1e-6)
    np.testing.assert_allclose(
        inspection.position_embedding_similarity(first), inspection.position_embedding_similarity(model), atol=1e-6
    )
    with pytest.raises(ValueError, match=r"\(batch, 3, 32, 24\)"):
        inspection.attention_maps(first, pixels)
    # A model that takes any size: the images' own grid, 5x3 patches of 40x24 images (not the stored 4x3).
    any_size = tiny_model(input_shape=(None, None, 3), embedding_grid=GRID)
    tall = images(batch=2, seed=3).repeat(2, axis=1)[:, :40]
    assert inspection.attention_rollout(any_size, tall).shape == (2, 5, 3)
    assert inspection.mean_attention_distance(any_size, tall).shape == (2, 2)
    # Reloaded from a `.keras` file, and under mixed precision (float32 maps).
    model.save(tmp_path / "tiny.keras")
    reloaded = keras.saving.load_model(tmp_path / "tiny.keras", safe_mode=True)
    np.testing.assert_allclose(inspection.attention_maps(reloaded, pixels), expected, atol=1e-6)
    keras.config.set_dtype_policy("mixed_float16")
    attention = inspection.attention_maps(_twin(model), pixels)
    assert attention.dtype == np.float32
    np.testing.assert_allclose(attention, expected, atol=2e-2)


def test_rollout_of_random_identity_uniform_and_hand_computed_attention():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 2, 4, 7, 7))
    attention = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    for head_fusion in inspection.HEAD_FUSIONS:
        for discard_ratio in (0.0, 0.5, 0.9):
            rolled = inspection.rollout(attention, head_fusion, discard_ratio)
            assert rolled.shape == (2, 7, 7) and rolled.min() >= 0
            np.testing.assert_allclose(rolled.sum(-1), 1.0, atol=1e-12)
    tokens, num_layers = 1 + 2 * 3, 3
    identity = np.broadcast_to(np.eye(tokens), (num_layers, 1, 2, tokens, tokens))
    # Every token attends to itself only: the rollout is the identity, the class token's map empty.
    np.testing.assert_allclose(inspection.rollout(identity)[0], np.eye(tokens))
    np.testing.assert_allclose(inspection.rollout_map(identity, (2, 3)), np.zeros((1, 2, 3)))
    # Uniform attention: each step is (U + I) / 2, so after L layers the map is (1 - 0.5**L) / tokens.
    uniform = np.full((num_layers, 1, 2, tokens, tokens), 1 / tokens)
    class_map = inspection.rollout_map(uniform, (2, 3))
    np.testing.assert_allclose(class_map, np.full((1, 2, 3), (1 - 0.5**num_layers) / tokens))
    # By hand: one class token and two patches; two heads, two layers.
    head_a = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    head_b = np.array([[0.5, 0.0, 0.5], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    layer = np.stack([head_a, head_b])[None]  # (batch 1, heads 2, 3, 3)
    attention = np.stack([layer, layer])  # (layers 2, ...)
    # Mean fusion: row 0 = [0.5, 0.25, 0.25]; + I and halved: [0.75, 0.125, 0.125]; the
    # patch rows stay [0, 1, 0] and [0, 0, 1]. Two layers: class row
    # [0.75**2, 0.125 * 0.75 + 0.125, same] = [0.5625, 0.21875, 0.21875].
    np.testing.assert_allclose(inspection.rollout(attention)[0, 0], [0.5625, 0.21875, 0.21875])
    np.testing.assert_allclose(inspection.rollout_map(attention, (1, 2)), [[[0.21875, 0.21875]]])
    # Max fusion: row 0 = [0.5, 0.5, 0.5] + [1, 0, 0] = [1.5, 0.5, 0.5] / 2.5 = [0.6, 0.2, 0.2];
    # two layers: [0.36, 0.2 * 0.6 + 0.2, same] = [0.36, 0.32, 0.32].
    np.testing.assert_allclose(inspection.rollout(attention, "max")[0, 0], [0.36, 0.32, 0.32])
    # Min fusion: row 0 = [0.5, 0, 0]: the class token keeps everything.
    np.testing.assert_allclose(inspection.rollout(attention, "min")[0, 0], [1.0, 0.0, 0.0])
    # discard_ratio 3/9 zeroes the 3 lowest weights but the class token's own (0.01): 0.05, 0.10 and 0.25.
    weights = np.array([[0.01, 0.59, 0.40], [0.30, 0.60, 0.10], [0.25, 0.05, 0.70]])
    kept = np.array([[0.01, 0.59, 0.40], [0.30, 0.60, 0.0], [0.0, 0.0, 0.70]]) + np.eye(3)
    rolled = inspection.rollout(weights[None, None, None], discard_ratio=3 / 9)[0]
    np.testing.assert_allclose(rolled, kept / kept.sum(-1, keepdims=True))
    for bad in (dict(head_fusion="median"), dict(discard_ratio=1.0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            inspection.rollout(attention, **bad)
    with pytest.raises(ValueError, match="num_layers, batch, num_heads"):
        inspection.rollout(attention[0])
    with pytest.raises(ValueError, match="2x2 grid"):
        inspection.rollout_map(attention, (2, 2))


def pattern_attention(grid, target_of, class_weight=0.0):
    """Attention (1, 1, 1, T, T) where each patch query attends to one key patch."""
    grid_h, grid_w = grid
    tokens = 1 + grid_h * grid_w
    attention = np.zeros((1, 1, 1, tokens, tokens))
    attention[..., 0, 0] = 1.0
    for row in range(grid_h):
        for col in range(grid_w):
            target_row, target_col = target_of(row, col)
            query, key = 1 + row * grid_w + col, 1 + target_row * grid_w + target_col
            attention[..., query, 0] = class_weight
            attention[..., query, key] = 1.0 - class_weight
    return attention


def test_attention_distance_of_hand_made_patterns():
    grid = (2, 3)
    itself = pattern_attention(grid, lambda r, c: (r, c))
    np.testing.assert_allclose(inspection.attention_distance(itself, grid, 16), [[0.0]])
    # Each patch looks at the one in the other row: 16 px away, whatever weight the class token also gets.
    other_row = pattern_attention(grid, lambda r, c: (1 - r, c), class_weight=0.5)
    np.testing.assert_allclose(inspection.attention_distance(other_row, grid, 16), [[16.0]])
    # Non-square patches (16 high, 8 wide): one column over is 8 px, diagonally hypot(16, 8).
    beside = pattern_attention(grid, lambda r, c: (r, 1 if c != 1 else 0))
    np.testing.assert_allclose(inspection.attention_distance(beside, grid, (16, 8)), [[8.0]])
    diagonal = pattern_attention(grid, lambda r, c: (1 - r, 1 if c != 1 else 0))
    np.testing.assert_allclose(inspection.attention_distance(diagonal, grid, (16, 8)), [[math.hypot(16, 8)]])
    grid = (1, 3)
    # Uniform over three patches: ((0 + 16 + 32) + (16 + 0 + 16) + (32 + 16 + 0)) / 9 = 128 / 9.
    uniform = np.full((1, 1, 1, 4, 4), 0.25)
    itself = pattern_attention(grid, lambda r, c: (r, c))
    layers = np.concatenate([np.concatenate([uniform, itself], axis=2)] * 2)  # (2 layers, 1, 2 heads)
    np.testing.assert_allclose(inspection.attention_distance(layers, grid, 16), [[128 / 9, 0.0], [128 / 9, 0.0]])


def test_position_embedding_similarity_and_embedding_filters():
    model = tiny_model()
    similarity = inspection.position_embedding_similarity(model)
    assert similarity.shape == GRID + GRID
    flat = similarity.reshape(12, 12)
    np.testing.assert_allclose(np.diag(flat), 1.0, atol=1e-12)
    np.testing.assert_allclose(flat, flat.T, atol=1e-12)
    assert np.all(np.abs(flat) <= 1 + 1e-12)
    # Patch (0, 1) is (0, 0) scaled, (1, 0) orthogonal to it and (1, 1) opposite; the class token is left out.
    embedding = np.zeros((1, 13, 16), "float32")
    embedding[0, 0] = 5.0
    embedding[0, 1, 0], embedding[0, 2, 0], embedding[0, 4, 1], embedding[0, 5, 0] = 1.0, 3.0, 1.0, -2.0
    embedding[0, 6:, 2] = 1.0
    model.get_layer("position_embedding").embedding.assign(embedding)
    similarity = inspection.position_embedding_similarity(model)
    np.testing.assert_allclose(similarity[0, 0, :2, :2], [[1.0, 1.0], [0.0, -1.0]], atol=1e-12)
    # The embedding filters' principal components are orthonormal.
    result = inspection.embedding_filters(model, num_components=10)
    assert result.components.shape == (10, PATCH, PATCH, 3)
    flat = result.components.reshape(10, -1)
    np.testing.assert_allclose(flat @ flat.T, np.eye(10), atol=1e-10)
    ratio = result.explained_variance_ratio
    assert np.all(np.diff(ratio) <= 1e-12) and 0 < ratio.sum() <= 1
    # Filters that differ along one direction only: it is the first component, explaining all the variance.
    rng = np.random.default_rng(0)
    direction = rng.normal(size=PATCH * PATCH * 3)
    direction /= np.linalg.norm(direction)
    kernel = rng.normal(size=PATCH * PATCH * 3)[:, None] + direction[:, None] * rng.normal(size=16)[None]
    projection = model.get_layer("patch_embedding").projection
    projection.kernel.assign(kernel.reshape(PATCH, PATCH, 3, 16).astype("float32"))
    first = inspection.embedding_filters(model, num_components=1)
    np.testing.assert_allclose(np.abs(first.components.reshape(-1)), np.abs(direction), atol=1e-5)
    np.testing.assert_allclose(first.explained_variance_ratio, [1.0], atol=1e-6)
    with pytest.raises(ValueError, match=r"\[1, 16\]"):
        inspection.embedding_filters(model, num_components=28)


def png_size(path):
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "PNG"
        assert np.asarray(image.convert("RGB"), dtype="float64").std() > 5  # not a blank canvas
    return image.size


def test_rollout_and_distance_of_a_model_and_the_plots_refuse_bad_arrays(tmp_path):
    model, pixels = tiny_model(), images(batch=2)
    attention = inspection.attention_maps(model, pixels)
    maps = inspection.attention_rollout(model, pixels, head_fusion="max", discard_ratio=0.2)
    np.testing.assert_allclose(maps, inspection.rollout_map(attention, GRID, "max", 0.2))
    assert np.all(maps > 0) and np.all(maps.sum(axis=(1, 2)) < 1)
    distances = inspection.mean_attention_distance(model, pixels)
    np.testing.assert_allclose(distances, inspection.attention_distance(attention, GRID, PATCH))
    assert distances.shape == (2, 2) and np.all(distances > 0) and np.all(distances < math.hypot(24, 16))
    pytest.importorskip("matplotlib")
    # One row of three 3-inch panels per image, 0.4 inch for the title (the report draws one image).
    inspection.plot_attention_rollout(pixels, maps, tmp_path / "rollout.png", dpi=40)
    assert png_size(tmp_path / "rollout.png") == (9 * 40, round(6.4 * 40))
    # The heat map is upsampled channels-last whatever the global image format says.
    keras.config.set_image_data_format("channels_first")
    try:
        inspection.plot_attention_rollout(pixels, maps, tmp_path / "first.png", dpi=40)
    finally:
        keras.config.set_image_data_format("channels_last")
    assert (tmp_path / "first.png").read_bytes() == (tmp_path / "rollout.png").read_bytes()
    os.remove(tmp_path / "first.png")
    with pytest.raises(ValueError, match="one map per image"):
        inspection.plot_attention_rollout(pixels, np.ones((3,) + GRID), tmp_path / "x.png")
    with pytest.raises(ValueError, match="grid_h, grid_w, grid_h, grid_w"):
        inspection.plot_position_embedding_similarity(np.ones((4, 3, 3, 4)), tmp_path / "x.png")
    with pytest.raises(ValueError, match="layer"):
        inspection.plot_class_token_attention(pixels[0], np.ones((2, 2, 13, 13)), GRID, tmp_path / "x.png", layer=2)
    assert os.listdir(tmp_path) == ["rollout.png"]


def test_rollout_without_a_class_token_is_the_patch_tokens_mean(tmp_path):
    # One register and two patches, attention from the hand-made layer above: patch rows stay one-hot.
    layer = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]])[None, None]
    attention = np.stack([layer, layer])
    rolled = inspection.rollout(attention)[0]
    expected = rolled[1:, 1:].mean(axis=0).reshape(1, 1, 2)
    np.testing.assert_allclose(inspection.rollout_map(attention, (1, 2), class_token=False), expected)
    model = tiny_model(class_token=False, num_register_tokens=2, pooling="gap")
    pixels = images(batch=2)
    maps = inspection.attention_rollout(model, pixels)
    full = inspection.rollout(inspection.attention_maps(model, pixels))
    np.testing.assert_allclose(maps.reshape(2, -1), full[:, 2:, 2:].mean(axis=1))
    pytest.importorskip("matplotlib")
    paths = inspection.write_report(model, (pixels[0] + 1) * 127.5, tmp_path, preprocess=lambda x: x / 127.5 - 1)
    assert sorted(os.path.basename(path) for path in paths.values()) == sorted(inspection.REPORT_FILES)


def test_cli_inspect_writes_every_png_for_the_bundled_image(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    import keras_vit_cli as cli

    model_path = str(tmp_path / "tiny.keras")
    tiny_model(include_top=True, pooling="token").save(model_path)
    out = tmp_path / "report"
    argv = ["inspect", inspection.sample_image_path(), "--model", model_path, "--out", str(out)]
    assert cli.main(argv + ["--weights", "x"]) == 2  # a saved model has its own weights
    assert "--weights" in capsys.readouterr().err
    assert cli.main(["inspect", "--model", "ViT-Q/99", "--out", str(out)]) == 2
    assert "ViT-Q/99" in capsys.readouterr().err
    assert not out.exists()
    assert cli.main(argv + ["--dpi", "50"]) == 0
    # The figure sizes in inches times the dpi: 2 heads (3 panels of 2.2 in), 16 filters (3 rows of 7).
    expected = {
        "attention_rollout.png": (9.0, 3.4),
        "class_token_attention.png": (3 * 2.2, 2.2 + 0.4),
        "mean_attention_distance.png": (6.0, 4.5),
        "position_embedding_similarity.png": (7.0, 6.5),
        "embedding_filters.png": (7.2, 3.5),
    }
    assert sorted(os.listdir(out)) == sorted(expected) == sorted(inspection.REPORT_FILES)
    for name, (width, height) in expected.items():
        assert png_size(out / name) == (round(width * 50), round(height * 50))
    # A constructor's name: `--weights` and `--image-size` go to it.
    calls = []

    def fake_constructor(weights=None, **kwargs):
        calls.append((weights, kwargs))
        return tiny_model(include_top=True, pooling="token")

    fake_constructor.variant = "S/16"
    monkeypatch.setitem(CONSTRUCTORS, "ViTS16", fake_constructor)
    out = tmp_path / "constructor"
    argv = ["inspect", "--model", "S/16", "--weights", "ckpt.npz", "--image-size", "32", "--out", str(out)]
    assert cli.main(argv + ["--num-components", "3", "--dpi", "30"]) == 0
    assert calls == [("ckpt.npz", {"input_shape": (32, 32, 3)})]
    assert sorted(os.listdir(out)) == sorted(inspection.REPORT_FILES)
