"""NaFlex batches (`VisionTransformer(max_num_patches=N)`): padding changes no image's output, the per-image position
resize equals the per-grid one, masked attention on both paths, and the model's Keras contract."""

import collections

import keras
import numpy as np
import pytest

from keras_vit.layers import MultiHeadSelfAttention
from keras_vit.models.vit import VisionTransformer
from tests import helpers
from tests.helpers import BACKEND, naflex_batch, pixel_images, reference_outputs, to_numpy

PATCH = 4
TINY = dict(patch_size=PATCH, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32, input_shape=(None, None, 3))
# Per channel: the patches' (row, col, channel) order must meet the images' channels.
TINY.update(include_top=False, embedding_grid=(3, 3), pixel_mean=(0.48, 0.46, 0.41), pixel_std=(0.27, 0.26, 0.28))
DINOV3_ROPE = dict(rope_type="dinov3", temperature=100.0, rotate_half=True)
DINOV3 = dict(position_embedding=False, num_register_tokens=4, rope=DINOV3_ROPE)


def build(options, max_num_patches, weights=None):
    model = VisionTransformer(**dict(TINY, **options), max_num_patches=max_num_patches)
    helpers.randomize_weights(model) if weights is None else model.set_weights(weights)
    return model


# Each pooling and each position scheme, with and without prefix tokens, and each table resize.
OPTIONS = {
    "map-bilinear-antialias": dict(pooling="map", resample_method="bilinear", resample_antialias=True),
    "gap": dict(pooling="gap", class_token=False),
    "token-registers-bicubic": dict(pooling="token", num_register_tokens=2, resample_method="bicubic"),
    "max-official-no-embed-class": dict(pooling="max", resample_method="official", no_embed_class=True),
    "sequence": dict(return_sequence=True, num_register_tokens=1),
    "dinov3": dict(DINOV3, pooling="token"),
    "eva-cat-table": dict(pooling="gap", rope=dict(rope_type="cat", ref_grid=3), resample_method="bicubic"),
}


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS)
def test_padding_changes_no_image_output(options):
    batch = pixel_images((16, 20), (8, 12), (12, 8))
    model = build(options, 24)
    padded = reference_outputs(model, naflex_batch([*batch, np.zeros((0, 0, 3))], PATCH, 24))[0]
    assert np.all(np.isfinite(padded))  # the last image is padding alone
    for index, image in enumerate(batch):
        length = image.shape[0] * image.shape[1] // PATCH**2
        alone = reference_outputs(build(options, length, model.get_weights()), naflex_batch([image], PATCH, length))
        # A sequence output's padding tokens are the padded batch's own.
        got = padded[index, : model.num_prefix_tokens + length] if padded.ndim == 3 else padded[index]
        np.testing.assert_allclose(got, alone[0][0], rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", [*OPTIONS, "channels-first"])
def test_a_full_grid_gives_the_image_models_output(name):
    options = OPTIONS.get(name, dict(pooling="gap", input_shape=(3, None, None)))
    data_format = "channels_first" if name == "channels-first" else "channels_last"
    # 4 x 5 patches against the table's 3 x 3: the per-token resize against the per-grid one.
    image = pixel_images((16, 20))[0]
    keras.config.set_image_data_format(data_format)
    try:  # PixelScaling reads the format at call time too
        model = build(options, 20)
        plain = VisionTransformer(**dict(TINY, **options))
        plain.set_weights(model.get_weights())
        pixels = image.transpose(2, 0, 1) if data_format == "channels_first" else image
        expected = reference_outputs(plain, pixels[None])[0]
        got = reference_outputs(model, naflex_batch([image], PATCH, 20))[0]
    finally:
        keras.config.set_image_data_format("channels_last")
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_fused_and_einsum_attention_agree_under_a_mask():
    layer = MultiHeadSelfAttention(num_heads=2)
    tokens = np.random.default_rng(0).normal(size=(3, 7, 16)).astype("float32")
    mask = np.array([[True] * 7, [True] * 4 + [False] * 3, [False] * 7])
    fused = to_numpy(layer(tokens, padding_mask=mask))
    einsum, weights = to_numpy(layer(tokens, padding_mask=mask, return_attention_scores=True))
    assert np.all(np.isfinite(fused)) and np.all(np.isfinite(einsum))
    np.testing.assert_allclose(fused[:2], einsum[:2], rtol=0, atol=1e-5)
    np.testing.assert_equal(weights[1, :, :, 4:], 0.0)
    # The valid tokens of the padded image are what its 4 tokens give alone.
    np.testing.assert_allclose(fused[1, :4], to_numpy(layer(tokens[1:2, :4]))[0], rtol=0, atol=1e-5)


def test_config_round_trip_and_keras_file(tmp_path):
    model = build(dict(pooling="map", num_register_tokens=1), 12)
    assert model.max_num_patches == 12 and set(model.input) == {"patches", "spatial_shapes", "mask"}
    helpers.assert_config_round_trip(model)
    helpers.run_model_saving_test(model, naflex_batch(pixel_images((8, 12), (12, 16)), PATCH, 12), tmp_path)


def test_remat_recomputes_under_the_mask():
    batch = naflex_batch(pixel_images((8, 12), (4, 4)), PATCH, 12)
    plain = build(dict(pooling="gap"), 12)
    remat = build(dict(pooling="gap", remat=True), 12, plain.get_weights())
    gradients = [helpers.trainable_gradients(model, batch) for model in (remat, plain)]
    for got, want in zip(*gradients, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_fit_and_predict_compile_once_for_batches_of_other_grids(monkeypatch):
    # The fixed length and the mask keep the shapes static: XLA (TensorFlow, JAX) traces the train and predict steps
    # once for a batch of other grids, and torch.compile takes the whole model as one graph.
    model = build(dict(DINOV3, pooling="map", include_top=True, classes=3, dropout_rate=0.1, num_layers=1), 12)
    grids = (((8, 12), (12, 16), (4, 4)), ((16, 12), (4, 8), (8, 8)))
    batches = [naflex_batch(pixel_images(*sizes), PATCH, 12) for sizes in grids]
    traces = collections.Counter()
    for name in ("train_step", "predict_step") if BACKEND != "torch" else ():
        step = getattr(model, name)
        # Python runs a compiled step's body only when it traces it.
        monkeypatch.setattr(model, name, lambda *args, step=step, name=name: traces.update([name]) or step(*args))
    before = [np.array(weight) for weight in model.get_weights()]
    model.compile(keras.optimizers.SGD(0.1), "sparse_categorical_crossentropy", jit_compile=BACKEND != "torch")
    for batch in batches:
        history = model.fit(batch, np.array([0, 1, 2]), batch_size=3, epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"][0])
        assert np.all(np.isfinite(model.predict(batch, batch_size=3, verbose=0)))
    assert any(not np.allclose(old, new) for old, new in zip(before, model.get_weights()))
    if BACKEND != "torch":
        assert traces == {"train_step": 1, "predict_step": 1}
        return
    import torch

    try:
        explanation = torch._dynamo.explain(model)(keras.tree.map_structure(keras.ops.convert_to_tensor, batches[1]))
    finally:
        torch._dynamo.reset()
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons


REFUSED = {
    "zero": dict(max_num_patches=0, pooling="gap"),
    "hybrid": dict(max_num_patches=8, pooling="gap", resnet_stages=(1,), resnet_width=32),
    "patch-dropout": dict(max_num_patches=8, pooling="gap", patch_dropout_rate=0.5),
    "feature-map": dict(max_num_patches=8),
    "mixed-rope": dict(max_num_patches=8, pooling="gap", rope=dict(rope_type="mixed")),
    "input-tensor": dict(max_num_patches=8, pooling="gap", input_tensor=keras.Input((8, 8, 3))),
}


@pytest.mark.parametrize("options", REFUSED.values(), ids=REFUSED)
def test_what_a_naflex_model_cannot_have_is_refused_in_one_line(options):
    with pytest.raises(ValueError) as error:
        VisionTransformer(**dict(TINY, **options))
    assert "\n" not in str(error.value)
