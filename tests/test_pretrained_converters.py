"""The weights loader and exporter against independent references, on tiny models (hidden 32-48, 2 blocks).

The references are `transformers`' ViT (PyTorch, CPU) and keras-hub's
`ViTBackbone` on the same random weights; the timm and official `.npz` files
are written from the `transformers` state dict by the independent mapping in
`pretrained_helpers`.
"""

import logging
import os
import pickle

import keras
import numpy as np
import pretrained_helpers as ph
import pytest
import scipy.ndimage

import keras_vit
from keras_vit import pretrained
from keras_vit.models.variants import VARIANTS
from tests.helpers import randomize_weights

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

TOL = 1e-4
CONFIGS = {
    # name: (variant kwargs, image size, classes)
    "hidden32_patch8_img32": (dict(hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64, patch_size=8), 32, 5),
    "hidden48_patch16_img48": (dict(hidden_dim=48, num_layers=2, num_heads=4, mlp_dim=96, patch_size=16), 48, 7),
}


def _setup(monkeypatch, tmp_path, name="hidden32_patch8_img32", classifier=True, pooler=False, **hf_kwargs):
    arch, size, classes = CONFIGS[name]
    variant = ph.register_variant(monkeypatch, **arch)
    config = ph.hf_config(**arch, image_size=size, classes=classes)
    hf = ph.random_hf_model(config, classifier=classifier, pooler=pooler, **hf_kwargs)
    hf.save_pretrained(tmp_path / "hf")
    return variant, hf, str(tmp_path / "hf"), size, classes


def _hf_outputs(hf, images):
    with torch.no_grad():
        return hf(torch.from_numpy(images.transpose(0, 3, 1, 2)))


@pytest.mark.parametrize("route", ["build_from_checkpoint", "constructor", "custom_size"])
def test_hf_parity(monkeypatch, tmp_path, route):
    name = "hidden48_patch16_img48" if route == "build_from_checkpoint" else "hidden32_patch8_img32"
    variant, hf, directory, size, classes = _setup(monkeypatch, tmp_path, name)
    kwargs = dict(weights=directory, input_shape=(size, size, 3), classes=classes, classifier_activation=None)
    if route == "build_from_checkpoint":
        model = pretrained.build_from_checkpoint(kwargs.pop("weights"), architecture=variant, **kwargs)
    elif route == "constructor":  # the constructors' weights= goes through applications to the loader
        ph.register_variant(monkeypatch, name="Ti/16", **CONFIGS[name][0])
        model = keras_vit.ViTTi16(**kwargs)
    else:  # no published variant: VisionTransformer(weights=file) of the same architecture
        model = keras_vit.VisionTransformer(**CONFIGS[name][0], **kwargs)
        with pytest.raises(ValueError, match="imagenet"):
            keras_vit.VisionTransformer(**CONFIGS[name][0], weights="imagenet")
    x = ph.images((2, size, size, 3))
    np.testing.assert_allclose(ph.outputs(model, x), ph.hf_logits(hf, x), atol=TOL, rtol=0)


@pytest.mark.parametrize("shape", [(48, 32), (24, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_hf_parity_at_another_resolution(monkeypatch, tmp_path, shape):
    # transformers' interpolate_pos_encoding is bicubic (align_corners=False): our resample_method="bicubic".
    variant, hf, directory, _, classes = _setup(monkeypatch, tmp_path)
    x = ph.images((2,) + shape + (3,), seed=1)
    expected = ph.hf_logits(hf, x, interpolate=True)
    # Resampled at load, and (an open input size) at call time to each image's grid.
    for input_shape in (shape + (3,), (None, None, 3)):
        model = pretrained.build_from_checkpoint(
            directory,
            architecture=variant,
            input_shape=input_shape,
            classes=classes,
            classifier_activation=None,
            resample_method="bicubic",
        )
        np.testing.assert_allclose(ph.outputs(model, x), expected, atol=TOL, rtol=0)


def test_hf_vit_model_pooler_is_pre_logits(monkeypatch, tmp_path, caplog):
    variant, hf, directory, size, _ = _setup(monkeypatch, tmp_path, classifier=False, pooler=True)
    x = ph.images((2, size, size, 3), seed=2)
    result = _hf_outputs(hf, x)
    kept = pretrained.build_from_checkpoint(
        directory,
        architecture=variant,
        input_shape=(size, size, 3),
        include_top=False,
        pooling="token",
        representation_size=32,
    )
    np.testing.assert_allclose(ph.outputs(kept, x), result.pooler_output.numpy(), atol=TOL, rtol=0)
    with caplog.at_level(logging.WARNING, logger="keras_vit.pretrained"):
        tokens = pretrained.build_from_checkpoint(
            directory, architecture=variant, input_shape=(size, size, 3), include_top=False, return_sequence=True
        )
    assert "Dropping the pre_logits" in caplog.text
    assert "pre_logits" not in [layer.name for layer in tokens.layers]
    np.testing.assert_allclose(ph.outputs(tokens, x), result.last_hidden_state.numpy(), atol=TOL, rtol=0)


def test_keras_hub_backbone_agrees(monkeypatch, tmp_path):
    keras_hub = pytest.importorskip("keras_hub")
    variant, _, directory, size, _ = _setup(monkeypatch, tmp_path)
    x = ph.images((2, size, size, 3), seed=4)
    theirs = keras.ops.convert_to_numpy(keras_hub.models.ViTBackbone.from_preset(directory)(x))
    tokens = pretrained.build_from_checkpoint(
        directory, architecture=variant, input_shape=(size, size, 3), include_top=False, return_sequence=True
    )
    np.testing.assert_allclose(ph.outputs(tokens, x), theirs, atol=TOL, rtol=0)


@pytest.mark.parametrize("layout", ph.OFFICIAL_LAYOUTS)
def test_official_npz_layouts(monkeypatch, tmp_path, layout):
    zero_class_position = "big_vision" in layout
    variant, hf, _, size, classes = _setup(monkeypatch, tmp_path, zero_class_position=zero_class_position)
    state = ph.hf_to_official_state(ph.hf_state(hf), num_heads=2, layout=layout)
    path = ph.write_npz(tmp_path / f"{layout}.npz", state)
    model = pretrained.build_from_checkpoint(
        path, architecture=variant, input_shape=(size, size, 3), classes=classes, classifier_activation=None
    )
    x = ph.images((2, size, size, 3), seed=5)
    np.testing.assert_allclose(ph.outputs(model, x), ph.hf_logits(hf, x), atol=TOL, rtol=0)


def test_official_npz_with_pre_logits_and_zero_head(monkeypatch, tmp_path, caplog):
    # The original ImageNet-21k files: pre_logits plus an all-zero head.
    variant, hf, _, size, _ = _setup(monkeypatch, tmp_path, classifier=False, pooler=True)
    path = ph.write_npz(tmp_path / "in21k.npz", ph.hf_to_official_state(ph.hf_state(hf), 2, zero_head_classes=11))
    x = ph.images((2, size, size, 3), seed=6)
    backbone = pretrained.build_from_checkpoint(
        path,
        architecture=variant,
        input_shape=(size, size, 3),
        include_top=False,
        pooling="token",
        representation_size=32,
    )
    np.testing.assert_allclose(ph.outputs(backbone, x), _hf_outputs(hf, x).pooler_output.numpy(), atol=TOL, rtol=0)
    with caplog.at_level(logging.WARNING, logger="keras_vit.pretrained"):
        full = pretrained.build_from_checkpoint(path, architecture=variant, input_shape=(size, size, 3), classes=11)
    assert "Keeping the pre_logits" in caplog.text
    assert full.get_layer("pre_logits").units == 32


def test_timm_safetensors_in_float32_and_bfloat16(monkeypatch, tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    variant, hf, _, size, classes = _setup(monkeypatch, tmp_path, name="hidden48_patch16_img48")
    state = ph.hf_to_timm_state(ph.hf_state(hf))
    path = ph.write_safetensors(tmp_path / "model.safetensors", state)
    model = pretrained.build_from_checkpoint(
        path, architecture=variant, input_shape=(size, size, 3), classes=classes, classifier_activation=None
    )
    x = ph.images((2, size, size, 3), seed=7)
    np.testing.assert_allclose(ph.outputs(model, x), ph.hf_logits(hf, x), atol=TOL, rtol=0)
    half = {name: value.astype(ml_dtypes.bfloat16) for name, value in state.items()}
    checkpoint = pretrained.load_checkpoint(ph.write_safetensors(tmp_path / "bf16.safetensors", half))
    np.testing.assert_array_equal(checkpoint.weights["class_token/token"], half["cls_token"].astype("float32"))


def _random_model(variant, size, classes=5, **options):
    model = keras_vit.VisionTransformer(
        **VARIANTS[variant], input_shape=(size[0], size[1], 3), classes=classes, **options
    )
    randomize_weights(model)
    return model


@pytest.mark.parametrize(
    "format,representation_size,include_top",
    [("timm", None, True), ("hf", None, True), ("hf", 16, False), ("official", None, True), ("official", 16, True)],
)
def test_round_trip_is_bit_identical(monkeypatch, tmp_path, format, representation_size, include_top):
    variant = ph.register_variant(monkeypatch)
    pooling = "token" if representation_size else None
    kwargs = dict(representation_size=representation_size, include_top=include_top, pooling=pooling)
    model = _random_model(variant, (32, 24), **kwargs)  # non-square: the exporter records the grid
    target = str(tmp_path / {"timm": "vit.safetensors", "hf": "hf_dir", "official": "vit.npz"}[format])
    pretrained.export_weights(model, target, format)
    assert os.listdir(tmp_path) == [os.path.basename(target)]
    reloaded = pretrained.build_from_checkpoint(
        target, architecture=variant, input_shape=(32, 24, 3), classes=5, **kwargs
    )
    again = ph.keras_weights(reloaded)
    for name, value in ph.keras_weights(model).items():
        np.testing.assert_array_equal(again.pop(name), value, err_msg=name)
    assert not again


def test_exported_hf_folder_runs_in_transformers(monkeypatch, tmp_path):
    from transformers import ViTForImageClassification

    variant = ph.register_variant(monkeypatch)
    model = _random_model(variant, (32, 32), classifier_activation=None)
    pretrained.export_weights(model, tmp_path / "out", "hf")
    hf = ViTForImageClassification.from_pretrained(tmp_path / "out").eval()
    x = ph.images((2, 32, 32, 3), seed=8)
    np.testing.assert_allclose(ph.hf_logits(hf, x), ph.outputs(model, x), atol=TOL, rtol=0)


def test_export_refuses_what_the_target_cannot_hold(monkeypatch, tmp_path):
    variant = ph.register_variant(monkeypatch)
    model = _random_model(variant, (32, 32), representation_size=16)
    with pytest.raises(ValueError, match="pre_logits"):
        pretrained.export_weights(model, tmp_path / "x.safetensors", "timm")
    with pytest.raises(ValueError, match="pooler"):
        pretrained.export_weights(model, tmp_path / "dir", "hf")
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------- resampling through the loader


def _official_reference(embedding, source, target):
    # The official code: scipy.ndimage.zoom(order=1) on the grid, class row kept.
    grid = embedding[0, 1:].reshape(source + (-1,)).astype(np.float64)
    zoom = (target[0] / source[0], target[1] / source[1], 1)
    patches = scipy.ndimage.zoom(grid, zoom, order=1).reshape(1, -1, embedding.shape[-1])
    return np.concatenate([embedding[:, :1], patches.astype(np.float32)], axis=1)


@pytest.mark.parametrize(
    "patch,source,target,method",
    [
        (16, (14, 14), (24, 24), "official"),
        (8, (4, 4), (6, 3), "official"),
        (8, (4, 4), (4, 4), "official"),
        (8, (4, 4), (6, 6), "bicubic"),
    ],
    ids=["14x14_to_24x24", "non_square", "same_size", "bicubic"],
)
def test_loader_resamples_position_embedding(monkeypatch, tmp_path, patch, source, target, method):
    variant = ph.register_variant(monkeypatch, hidden_dim=8, num_layers=1, num_heads=2, mlp_dim=16, patch_size=patch)
    model = _random_model(variant, (source[0] * patch, source[1] * patch))
    path = pretrained.export_weights(model, tmp_path / "vit.safetensors", "timm")
    input_shape = (target[0] * patch, target[1] * patch, 3)
    loaded = pretrained.build_from_checkpoint(
        path, architecture=variant, input_shape=input_shape, resample_method=method
    )
    original = ph.keras_weights(model)["position_embedding/embedding"]
    resampled = ph.keras_weights(loaded)["position_embedding/embedding"]
    official = _official_reference(original, source, target)
    if method == "bicubic":
        expected = keras_vit.layers.resampling.resample_position_embedding(original, source, target, method=method)
        np.testing.assert_allclose(resampled, expected, atol=1e-6, rtol=0)
        assert np.abs(resampled - official).max() > 1e-3
        with pytest.raises(ValueError, match="resample_method"):
            pretrained.build_from_checkpoint(
                path, architecture=variant, input_shape=input_shape, resample_method="nearest"
            )
    else:
        np.testing.assert_allclose(resampled, official, atol=1e-6, rtol=0)
    if source == target:
        np.testing.assert_array_equal(resampled, original)


# ----------------------------------------------------------------- transfer learning


@pytest.mark.parametrize("classifier", [True, False], ids=["other-classes", "no-head-in-file"])
def test_a_new_head_is_zero_and_logged(monkeypatch, tmp_path, caplog, classifier):
    variant, _, directory, size, _ = _setup(monkeypatch, tmp_path, classifier=classifier)
    with caplog.at_level(logging.WARNING, logger="keras_vit.pretrained"):
        model = pretrained.build_from_checkpoint(
            directory, architecture=variant, input_shape=(size, size, 3), classes=3
        )
    assert ("classes=3 differs from the 5 classes" if classifier else "has no classification head") in caplog.text
    weights = ph.keras_weights(model)
    assert weights["head/kernel"].shape == (32, 3)
    assert not weights["head/kernel"].any() and not weights["head/bias"].any()
    # The backbone is the pretrained one.
    backbone = pretrained.build_from_checkpoint(
        directory, architecture=variant, input_shape=(size, size, 3), include_top=False
    )
    for name, value in ph.keras_weights(backbone).items():
        np.testing.assert_array_equal(weights[name], value)


# ----------------------------------------------------------------- bad input: one clear error, no model


def test_wrong_architecture_is_reported_in_full(monkeypatch, tmp_path):
    _, _, directory, _, _ = _setup(monkeypatch, tmp_path, name="hidden48_patch16_img48")
    variant = ph.register_variant(monkeypatch)  # hidden 32, patch 8
    with pytest.raises(pretrained.CheckpointError) as info:
        pretrained.build_from_checkpoint(directory, architecture=variant, input_shape=(48, 48, 3), classes=7)
    assert "hidden 48" in str(info.value)
    assert ("patch_embedding/projection/kernel", (16, 16, 3, 48), (8, 8, 3, 32)) in info.value.mismatched
    ph.register_variant(monkeypatch, hidden_dim=48, num_layers=1, num_heads=4, mlp_dim=96, patch_size=16)
    with pytest.raises(pretrained.CheckpointError) as info:
        pretrained.build_from_checkpoint(directory, architecture=variant, input_shape=(48, 48, 3), classes=7)
    assert "encoder_block_1/attention/qkv/kernel" in info.value.unexpected


def test_missing_and_unexpected_tensors_are_named(monkeypatch, tmp_path):
    variant, hf, _, size, classes = _setup(monkeypatch, tmp_path)
    state = ph.hf_to_timm_state(ph.hf_state(hf))
    del state["blocks.1.mlp.fc2.bias"]
    state["blocks.0.adapter.weight"] = np.ones(32, "float32")  # a tensor no layout describes
    path = ph.write_safetensors(tmp_path / "broken.safetensors", state)
    with pytest.raises(pretrained.CheckpointError) as info:
        pretrained.build_from_checkpoint(path, architecture=variant, input_shape=(size, size, 3), classes=classes)
    assert info.value.missing == ["blocks.1.mlp.fc2.bias"]
    assert info.value.unexpected == ["blocks.0.adapter.weight"]


def _damaged(path, damage):
    data = bytearray(open(path, "rb").read())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:  # the archive's directory
        data[-40:] = bytes(40)
    open(path, "wb").write(bytes(data))
    return path


BAD_FILES = {
    "not-a-vit": lambda tmp, model: ph.write_safetensors(tmp / "r.safetensors", {"conv1.weight": np.zeros(3)}),
    "truncated-safetensors": lambda tmp, model: _damaged(_export(model, tmp / "v.safetensors"), "truncate"),
    "truncated-npz": lambda tmp, model: _damaged(_export(model, tmp / "v.npz"), "truncate"),
    "zeroed-npz": lambda tmp, model: _damaged(_export(model, tmp / "v.npz"), "zero"),
    "torch-pickle": lambda tmp, model: torch.save({"a": torch.zeros(2)}, tmp / "model.pth") or tmp / "model.pth",
    "plain-pickle": lambda tmp, model: (tmp / "w.bin").write_bytes(pickle.dumps({"a": 1})) and tmp / "w.bin",
    "object-npz": lambda tmp, model: ph.write_npz(tmp / "o.npz", {"cls": np.array([{"a": 1}], dtype=object)}),
    "junk": lambda tmp, model: (tmp / "junk.safetensors").write_bytes(b"not a checkpoint") and tmp / "junk.safetensors",
}


def _export(model, path):
    return pretrained.export_weights(model, path, "official" if str(path).endswith(".npz") else "timm")


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_is_a_checkpoint_error_naming_it(case, tmp_path):
    architecture = dict(patch_size=8, hidden_dim=32, num_layers=1, num_heads=2, mlp_dim=8, input_shape=(16, 16, 3))
    path = str(BAD_FILES[case](tmp_path, keras_vit.VisionTransformer(**architecture)))
    # A ValueError, as keras.applications raises for bad weights.
    with pytest.raises(pretrained.CheckpointError, match=os.path.basename(path)) as info:
        keras_vit.VisionTransformer(**architecture, weights=path)
    assert isinstance(info.value, ValueError)
