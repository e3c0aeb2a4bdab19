"""Feature extraction on every backend: the representation of plain, nested, saved, pooled and pre_logits ViTs,
streamed from a source, cached."""

import dataclasses

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import evaluation
from keras_vit.evaluation import extraction
from keras_vit.training import data
from tests import helpers

TINY = dict(patch_size=4, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32, input_shape=(16, 16, 3))
NUM_IMAGES, NUM_CLASSES = 21, 3  # 21 images in batches of 8: the last batch is short
# DINOv3's position scheme: the class token, then four registers; RoPE, no position table.
DINOV3 = dict(
    num_register_tokens=4, position_embedding=False, rope=dict(rope_type="dinov3", temperature=100.0, rotate_half=True)
)


def _tiny_vit(**overrides):
    model = keras_vit.VisionTransformer(**{**TINY, **overrides})
    helpers.randomize_weights(model)
    return model


def _source():
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(NUM_IMAGES, 16, 16, 3), dtype=np.uint8)
    labels = np.arange(NUM_IMAGES) % NUM_CLASSES
    return images, labels, data.from_arrays(images, labels, num_classes=NUM_CLASSES, class_names=("a", "b", "c"))


def _layer_output(model, name, images):
    probe = keras.Model(model.inputs[0], model.get_layer(name).output)
    return keras.ops.convert_to_numpy(probe(images.astype("float32"), training=False))


@pytest.mark.parametrize(
    "overrides, kind, layer, read",
    [
        (dict(classes=NUM_CLASSES), "token", "encoder_norm", lambda tokens: tokens[:, 0]),
        (dict(include_top=False, pooling=None), "token", "encoder_norm", lambda tokens: tokens[:, 0]),
        (dict(include_top=False, pooling="gap"), "gap", "encoder_norm", lambda tokens: tokens[:, 1:].mean(axis=1)),
        (dict(classes=NUM_CLASSES, representation_size=8), "pre_logits", "pre_logits", lambda values: values),
        (dict(include_top=False, distillation_token=True), "token", "encoder_norm", lambda t: t[:, :2].mean(axis=1)),
        (dict(include_top=False, **DINOV3), "token", "encoder_norm", lambda tokens: tokens[:, 0]),
    ],
    ids=["classifier", "no_pooling", "gap", "pre_logits", "deit_no_pooling", "dinov3_registers"],
)
def test_the_papers_representation_of_each_kind_of_model(overrides, kind, layer, read):
    model = _tiny_vit(**overrides)
    images, labels, source = _source()
    features = evaluation.extract_features(model, source, batch_size=8, with_outputs=True, verbose=0)
    assert features.kind == kind
    np.testing.assert_allclose(features.features, read(_layer_output(model, layer, images)), atol=1e-5)
    np.testing.assert_array_equal(features.labels, labels)
    assert features.class_names == ("a", "b", "c") and features.num_classes == NUM_CLASSES
    if "classes" in overrides:
        expected = keras.ops.convert_to_numpy(model(images.astype("float32")))
        np.testing.assert_allclose(features.outputs, expected, atol=1e-5)
    else:  # features are no head
        assert features.outputs is None


def test_nested_saved_channels_first_and_hybrid_models_give_their_features(tmp_path):
    vit = _tiny_vit(include_top=False, pooling="token", name="backbone")
    inputs = keras.Input((16, 16, 3))
    outputs = keras.layers.Dense(NUM_CLASSES, name="my_head")(keras.layers.Dropout(0.1)(vit(inputs)))
    model = keras.Model(inputs, outputs, name="users_model")
    images, _, source = _source()
    features = evaluation.extract_features(model, source, batch_size=8, with_outputs=True, verbose=0)
    reference = keras.ops.convert_to_numpy(vit(images.astype("float32")))
    np.testing.assert_allclose(features.features, reference, atol=1e-5)
    np.testing.assert_allclose(features.outputs, keras.ops.convert_to_numpy(model(images.astype("float32"))), atol=1e-5)
    # Saved and reloaded safely, the same features.
    model.save(tmp_path / "users_model.keras")
    reloaded = keras_vit.models.metadata.load_classifier(str(tmp_path / "users_model.keras"))
    again = evaluation.extract_features(reloaded, source, batch_size=8, verbose=0)
    np.testing.assert_allclose(again.features, features.features, atol=1e-5)
    # A channels-first twin of a classifier gives its features.
    model = _tiny_vit(classes=NUM_CLASSES)
    expected = evaluation.extract_features(model, source, batch_size=8, with_outputs=True, verbose=0)
    keras.config.set_image_data_format("channels_first")
    try:
        first = keras_vit.VisionTransformer(**{**TINY, "input_shape": (3, 16, 16)}, classes=NUM_CLASSES)
    finally:
        keras.config.set_image_data_format("channels_last")
    first.set_weights(model.get_weights())
    assert evaluation.representation(first).image_size == (16, 16)  # not (channels, height)
    features = evaluation.extract_features(first, source, batch_size=8, with_outputs=True, verbose=0)
    np.testing.assert_allclose(features.features, expected.features, atol=1e-5)
    np.testing.assert_allclose(features.outputs, expected.outputs, atol=1e-5)
    # A hybrid that takes any size is fed its stored grid's images: tokens of 4 px (a stem-only ResNet).
    hybrid_options = dict(patch_size=1, input_shape=None, include_top=False, resnet_stages=(), resnet_width=32)
    hybrid = keras_vit.VisionTransformer(**{**TINY, **hybrid_options})
    grid = hybrid.get_layer("position_embedding").grid_size
    assert evaluation.representation(hybrid).image_size == (4 * grid[0], 4 * grid[1])


def test_features_are_cached_and_the_cache_follows_the_weights(tmp_path, monkeypatch):
    model = _tiny_vit(classes=NUM_CLASSES)
    _, _, source = _source()
    cache = str(tmp_path / "train.npz")
    first = evaluation.extract_features(model, source, batch_size=8, cache=cache, verbose=0)
    calls = []
    original = extraction._stream
    monkeypatch.setattr(extraction, "_stream", lambda *args: calls.append(1) or original(*args))
    cached = evaluation.extract_features(model, source, batch_size=8, cache=cache, verbose=0)
    assert calls == []  # read from the file, the model not run
    np.testing.assert_array_equal(cached.features, first.features)
    model.get_layer("encoder_norm").gamma.assign(np.full((16,), 2.0, "float32"))  # other weights: recomputed
    changed = evaluation.extract_features(model, source, batch_size=8, cache=cache, verbose=0)
    assert calls == [1] and not np.allclose(changed.features, first.features)
    # Another split of the same size, classes and names: its own features, not the cached ones.
    images, labels, _ = _source()
    other = data.from_arrays(255 - images, labels, num_classes=NUM_CLASSES, class_names=("a", "b", "c"))
    fresh = evaluation.extract_features(model, other, batch_size=8, verbose=0)
    from_cache = evaluation.extract_features(model, other, batch_size=8, cache=cache, verbose=0)
    assert calls == [1, 1, 1]  # both ran the model: the cached file is not this split's
    np.testing.assert_allclose(from_cache.features, fresh.features, atol=1e-6)
    # A source that cannot say what it holds is not cached at all.
    dataset, info = other
    with pytest.raises(ValueError, match="does not say what it holds"):
        evaluation.extract_features(model, (dataset, dataclasses.replace(info, fingerprint=None)), cache=cache)


def test_bad_models_and_splits_are_one_clear_error():
    _, _, source = _source()
    plain = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Flatten(), keras.layers.Dense(3)])
    with pytest.raises(ValueError, match="holds no keras_vit Vision Transformer"):
        evaluation.extract_features(plain, source, verbose=0)
    empty = data.from_arrays(np.zeros((0, 16, 16, 3), np.uint8), np.zeros(0, np.int64), num_classes=3)
    with pytest.raises(ValueError, match="The split holds no images"):
        evaluation.extract_features(_tiny_vit(classes=3), empty, verbose=0)
    with pytest.raises(TypeError, match="shotz"):
        evaluation.evaluate(_tiny_vit(classes=3), source, source, shotz=(1,), verbose=0)  # before any extraction
    broken = _tiny_vit(classes=3)
    broken.get_layer("encoder_norm").beta.assign(np.full((16,), np.nan, "float32"))
    with pytest.raises(ValueError, match="21 of 21 images have NaN or infinite features"):
        evaluation.extract_features(broken, source, verbose=0)


def test_dataset_report_leaves_out_padding_and_reads_one_hot_labels():
    model = _tiny_vit(classes=NUM_CLASSES)
    images, labels, (dataset, _) = _source()
    expected = evaluation.heldout_report(keras.ops.convert_to_numpy(model(images.astype("float32"))), labels)
    padded = data.eval_pipeline(dataset, image_size=16, batch_size=8, static_shapes=True)  # 3 padding rows
    report = evaluation.dataset_report(model, padded)
    assert report["examples"] == NUM_IMAGES and report["confusion"] == expected["confusion"]
    assert report["ece"] == pytest.approx(expected["ece"], abs=1e-5)
    import tensorflow as tf

    one_hot = data.eval_pipeline(dataset, image_size=16, batch_size=8).map(lambda x, y: (x, tf.one_hot(y, NUM_CLASSES)))
    assert evaluation.dataset_report(model, one_hot)["confusion"] == expected["confusion"]
