"""Converters and loader against independent reference implementations.

The references are `transformers`' ViT (PyTorch, CPU) and keras-hub's
`ViTBackbone`, run on the same random weights; the timm and official `.npz`
files are written from the `transformers` state dict by the independent
mapping in `pretrained_helpers`. Everything is tiny (hidden 32-48, 2 blocks).
"""

import logging
import os

import keras
import numpy as np
import pretrained_helpers as ph
import pytest
import scipy.ndimage

import keras_vit
from keras_vit import pretrained
from keras_vit.models.variants import VARIANTS
from keras_vit.pretrained import loader

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

TOL = 1e-4
CONFIGS = {
    # name: (variant kwargs, image size, classes)
    "hidden32_patch8_img32": (dict(hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64, patch_size=8), 32, 5),
    "hidden48_patch16_img48": (dict(hidden_dim=48, num_layers=2, num_heads=4, mlp_dim=96, patch_size=16), 48, 7),
}


def _setup(monkeypatch, tmp_path, name="hidden32_patch8_img32", classifier=True, pooler=False, seed=0, **hf_kwargs):
    arch, size, classes = CONFIGS[name]
    variant = ph.register_variant(monkeypatch, **arch)
    config = ph.hf_config(
        hidden_dim=arch["hidden_dim"],
        num_layers=arch["num_layers"],
        num_heads=arch["num_heads"],
        mlp_dim=arch["mlp_dim"],
        image_size=size,
        patch_size=arch["patch_size"],
        classes=classes,
    )
    hf = ph.random_hf_model(config, classifier=classifier, pooler=pooler, seed=seed, **hf_kwargs)
    directory = tmp_path / "hf"
    hf.save_pretrained(directory)
    return variant, hf, str(directory), size, classes


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hf_parity(monkeypatch, tmp_path, name):
    variant, hf, directory, size, classes = _setup(monkeypatch, tmp_path, name)
    model = pretrained.build_pretrained(
        variant, directory, input_shape=(size, size, 3), classes=classes, classifier_activation=None
    )
    x = ph.images((2, size, size, 3))
    np.testing.assert_allclose(ph.outputs(model, x), ph.hf_logits(hf, x), atol=TOL, rtol=0)


def test_hf_parity_through_named_constructor(monkeypatch, tmp_path):
    # The constructors' weights= goes through applications._build_variant to the loader.
    _, hf, directory, size, classes = _setup(monkeypatch, tmp_path)
    ph.register_variant(monkeypatch, name="Ti/16", hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64, patch_size=8)
    model = keras_vit.ViTTi16(
        weights=directory, input_shape=(size, size, 3), classes=classes, classifier_activation=None
    )
    x = ph.images((1, size, size, 3), seed=3)
    np.testing.assert_allclose(ph.outputs(model, x), ph.hf_logits(hf, x), atol=TOL, rtol=0)


def test_hf_parity_through_vision_transformer_for_a_custom_size(monkeypatch, tmp_path):
    # A size that is no published variant: VisionTransformer(weights=file) of the same architecture.
    _, hf, directory, size, classes = _setup(monkeypatch, tmp_path)
    architecture = CONFIGS["hidden32_patch8_img32"][0]
    model = keras_vit.VisionTransformer(
        **architecture, weights=directory, input_shape=(size, size, 3), classes=classes, classifier_activation=None
    )
    x = ph.images((1, size, size, 3), seed=4)
    np.testing.assert_allclose(ph.outputs(model, x), ph.hf_logits(hf, x), atol=TOL, rtol=0)
    # The registered test variant has this size, and no checkpoint was published for it.
    with pytest.raises(ValueError, match="imagenet"):
        keras_vit.VisionTransformer(**architecture, weights="imagenet")


@pytest.mark.parametrize("shape", [(48, 48), (48, 32), (24, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_hf_parity_at_another_resolution(monkeypatch, tmp_path, shape):
    # transformers' interpolate_pos_encoding is bicubic (align_corners=False),
    # i.e. our resample_method="bicubic"; non-square targets included.
    variant, hf, directory, _, classes = _setup(monkeypatch, tmp_path)
    model = pretrained.build_pretrained(
        variant,
        directory,
        input_shape=shape + (3,),
        classes=classes,
        classifier_activation=None,
        resample_method="bicubic",
    )
    x = ph.images((2,) + shape + (3,), seed=1)
    expected = ph.hf_logits(hf, x, interpolate=True)
    np.testing.assert_allclose(ph.outputs(model, x), expected, atol=TOL, rtol=0)
    # The same at call time: a model of open input size resamples to each image's grid.
    dynamic = pretrained.build_pretrained(
        variant,
        directory,
        input_shape=(None, None, 3),
        classes=classes,
        classifier_activation=None,
        resample_method="bicubic",
    )
    np.testing.assert_allclose(ph.outputs(dynamic, x), expected, atol=TOL, rtol=0)


def test_hf_vit_model_pooler_is_pre_logits(monkeypatch, tmp_path, caplog):
    variant, hf, directory, size, _ = _setup(monkeypatch, tmp_path, classifier=False, pooler=True)
    x = ph.images((2, size, size, 3), seed=2)
    reference = hf_pooled = None
    with torch.no_grad():
        result = hf(torch.from_numpy(x.transpose(0, 3, 1, 2)))
    reference, hf_pooled = result.last_hidden_state.numpy(), result.pooler_output.numpy()

    kept = pretrained.build_pretrained(
        variant, directory, input_shape=(size, size, 3), include_top=False, pooling="token", representation_size=32
    )
    np.testing.assert_allclose(ph.outputs(kept, x), hf_pooled, atol=TOL, rtol=0)

    with caplog.at_level(logging.WARNING, logger="keras_vit.pretrained"):
        tokens = pretrained.build_pretrained(
            variant, directory, input_shape=(size, size, 3), include_top=False, return_sequence=True
        )
    assert "Dropping the pre_logits" in caplog.text
    assert "pre_logits" not in [layer.name for layer in tokens.layers]
    np.testing.assert_allclose(ph.outputs(tokens, x), reference, atol=TOL, rtol=0)


def test_keras_hub_backbone_agrees(monkeypatch, tmp_path):
    keras_hub = pytest.importorskip("keras_hub")
    variant, hf, directory, size, _ = _setup(monkeypatch, tmp_path)
    backbone = keras_hub.models.ViTBackbone.from_preset(directory)
    ours = pretrained.build_pretrained(
        variant, directory, input_shape=(size, size, 3), include_top=False, return_sequence=True
    )
    x = ph.images((2, size, size, 3), seed=4)
    theirs = keras.ops.convert_to_numpy(backbone(x))
    np.testing.assert_allclose(ph.outputs(ours, x), theirs, atol=TOL, rtol=0)
    # The default backbone output is the same tokens as a feature map, class token dropped.
    grid = size // CONFIGS["hidden32_patch8_img32"][0]["patch_size"]
    feature_map = pretrained.build_pretrained(variant, directory, input_shape=(size, size, 3), include_top=False)
    expected = theirs[:, 1:].reshape(2, grid, grid, -1)
    np.testing.assert_allclose(ph.outputs(feature_map, x), expected, atol=TOL, rtol=0)
    # Dynamic resolution: an open input size gives the same tokens at the checkpoint's size.
    dynamic = pretrained.build_pretrained(variant, directory, include_top=False, return_sequence=True)
    np.testing.assert_allclose(ph.outputs(dynamic, x), theirs, atol=TOL, rtol=0)
    with torch.no_grad():
        hf_tokens = hf.vit(torch.from_numpy(x.transpose(0, 3, 1, 2))).last_hidden_state.numpy()
    np.testing.assert_allclose(theirs, hf_tokens, atol=TOL, rtol=0)


@pytest.mark.parametrize("layout", ph.OFFICIAL_LAYOUTS)
def test_official_npz_layouts(monkeypatch, tmp_path, layout):
    zero_class_position = "big_vision" in layout
    variant, hf, _, size, classes = _setup(monkeypatch, tmp_path, zero_class_position=zero_class_position)
    state = ph.hf_to_official_state(ph.hf_state(hf), num_heads=2, layout=layout)
    path = ph.write_npz(tmp_path / f"{layout}.npz", state)
    model = pretrained.build_pretrained(
        variant, path, input_shape=(size, size, 3), classes=classes, classifier_activation=None
    )
    x = ph.images((2, size, size, 3), seed=5)
    np.testing.assert_allclose(ph.outputs(model, x), ph.hf_logits(hf, x), atol=TOL, rtol=0)


def test_official_npz_with_pre_logits_and_zero_head(monkeypatch, tmp_path, caplog):
    # The original ImageNet-21k files: pre_logits plus an all-zero head.
    variant, hf, _, size, _ = _setup(monkeypatch, tmp_path, classifier=False, pooler=True)
    state = ph.hf_to_official_state(ph.hf_state(hf), num_heads=2, zero_head_classes=11)
    path = ph.write_npz(tmp_path / "in21k.npz", state)
    x = ph.images((2, size, size, 3), seed=6)
    with torch.no_grad():
        pooled = hf(torch.from_numpy(x.transpose(0, 3, 1, 2))).pooler_output.numpy()

    backbone = pretrained.build_pretrained(
        variant, path, input_shape=(size, size, 3), include_top=False, pooling="token", representation_size=32
    )
    np.testing.assert_allclose(ph.outputs(backbone, x), pooled, atol=TOL, rtol=0)
    with caplog.at_level(logging.WARNING, logger="keras_vit.pretrained"):
        full = pretrained.build_pretrained(variant, path, input_shape=(size, size, 3), classes=11)
    assert "Keeping the pre_logits" in caplog.text
    assert full.get_layer("pre_logits").units == 32


def test_timm_safetensors(monkeypatch, tmp_path):
    variant, hf, _, size, classes = _setup(monkeypatch, tmp_path, name="hidden48_patch16_img48")
    path = ph.write_safetensors(tmp_path / "model.safetensors", ph.hf_to_timm_state(ph.hf_state(hf)))
    model = pretrained.build_pretrained(
        variant, path, input_shape=(size, size, 3), classes=classes, classifier_activation=None
    )
    x = ph.images((2, size, size, 3), seed=7)
    np.testing.assert_allclose(ph.outputs(model, x), ph.hf_logits(hf, x), atol=TOL, rtol=0)


def test_bfloat16_safetensors_load_exactly(monkeypatch, tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")

    variant, hf, _, size, classes = _setup(monkeypatch, tmp_path)
    state = ph.hf_to_timm_state(ph.hf_state(hf))
    half = {name: value.astype(ml_dtypes.bfloat16) for name, value in state.items()}
    from safetensors.numpy import save_file

    save_file(half, str(tmp_path / "bf16.safetensors"))
    model = pretrained.build_pretrained(
        variant, str(tmp_path / "bf16.safetensors"), input_shape=(size, size, 3), classes=classes
    )
    loaded = ph.keras_weights(model)
    np.testing.assert_array_equal(loaded["class_token/token"], half["cls_token"].astype("float32"))


def _random_model(variant, size, classes=5, representation_size=None, include_top=True, pooling=None, **options):
    model = keras_vit.VisionTransformer(
        **VARIANTS[variant],
        input_shape=(size[0], size[1], 3),
        classes=classes,
        representation_size=representation_size,
        include_top=include_top,
        pooling=pooling,
        **options,
    )
    rng = np.random.default_rng(0)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.2, variable.shape).astype("float32"))
    return model


@pytest.mark.parametrize(
    "format,representation_size,include_top",
    [("timm", None, True), ("hf", None, True), ("hf", 16, False), ("official", None, True), ("official", 16, True)],
)
def test_round_trip_is_bit_identical(monkeypatch, tmp_path, format, representation_size, include_top):
    variant = ph.register_variant(monkeypatch)
    size = (32, 24)  # Non-square: the exporter records the grid.
    kwargs = dict(
        representation_size=representation_size,
        include_top=include_top,
        pooling="token" if representation_size else None,
    )
    model = _random_model(variant, size, **kwargs)
    target = str(tmp_path / {"timm": "vit.safetensors", "hf": "hf_dir", "official": "vit.npz"}[format])
    written = pretrained.export_weights(model, target, format)
    assert os.path.isfile(written)
    assert not [name for name in os.listdir(os.path.dirname(written)) if name.endswith(".tmp")]
    reloaded = pretrained.build_pretrained(variant, target, input_shape=size + (3,), classes=5, **kwargs)
    original, again = ph.keras_weights(model), ph.keras_weights(reloaded)
    assert sorted(original) == sorted(again)
    for name in original:
        np.testing.assert_array_equal(again[name], original[name], err_msg=name)


def test_exported_hf_folder_runs_in_transformers(monkeypatch, tmp_path):
    from transformers import ViTForImageClassification

    variant = ph.register_variant(monkeypatch)
    model = _random_model(variant, (32, 32), classes=5, classifier_activation=None)  # logits
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
    assert not os.path.exists(tmp_path / "x.safetensors")


# ----------------------------------------------------------------- resampling through the loader


def _official_reference(embedding, source, target):
    # The official code: scipy.ndimage.zoom(order=1) on the grid, class row kept.
    grid = embedding[0, 1:].reshape(source + (-1,)).astype(np.float64)
    zoom = (target[0] / source[0], target[1] / source[1], 1)
    patches = scipy.ndimage.zoom(grid, zoom, order=1).reshape(1, -1, embedding.shape[-1])
    return np.concatenate([embedding[:, :1], patches.astype(np.float32)], axis=1)


@pytest.mark.parametrize(
    "patch,source,target",
    [(16, (14, 14), (24, 24)), (8, (4, 4), (6, 3)), (8, (4, 4), (4, 4))],
    ids=["14x14_to_24x24", "non_square", "same_size"],
)
def test_loader_resamples_position_embedding(monkeypatch, tmp_path, patch, source, target):
    variant = ph.register_variant(monkeypatch, hidden_dim=8, num_layers=1, num_heads=2, mlp_dim=16, patch_size=patch)
    model = _random_model(variant, (source[0] * patch, source[1] * patch))
    path = pretrained.export_weights(model, tmp_path / "vit.safetensors", "timm")
    loaded = pretrained.build_pretrained(
        variant, path, input_shape=(target[0] * patch, target[1] * patch, 3), classes=5
    )
    original = ph.keras_weights(model)["position_embedding/embedding"]
    resampled = ph.keras_weights(loaded)["position_embedding/embedding"]
    np.testing.assert_allclose(resampled, _official_reference(original, source, target), atol=1e-6, rtol=0)
    if source == target:
        np.testing.assert_array_equal(resampled, original)


def test_resample_method_is_selectable(monkeypatch, tmp_path):
    variant = ph.register_variant(monkeypatch)
    model = _random_model(variant, (32, 32))
    path = pretrained.export_weights(model, tmp_path / "vit.safetensors", "timm")
    loaded = {
        method: ph.keras_weights(
            pretrained.build_pretrained(variant, path, input_shape=(48, 48, 3), classes=5, resample_method=method)
        )["position_embedding/embedding"]
        for method in ("official", "bicubic")
    }
    original = ph.keras_weights(model)["position_embedding/embedding"]
    bicubic = keras_vit.layers.resampling.resample_position_embedding(original, (4, 4), (6, 6), method="bicubic")
    np.testing.assert_allclose(loaded["bicubic"], bicubic, atol=1e-6, rtol=0)
    assert np.abs(loaded["official"] - loaded["bicubic"]).max() > 1e-3
    with pytest.raises(ValueError, match="resample_method"):
        pretrained.build_pretrained(variant, path, input_shape=(48, 48, 3), resample_method="nearest")


# ----------------------------------------------------------------- transfer learning


def test_new_classes_get_a_logged_zero_head(monkeypatch, tmp_path, caplog):
    variant, hf, directory, size, _ = _setup(monkeypatch, tmp_path)
    with caplog.at_level(logging.WARNING, logger="keras_vit.pretrained"):
        model = pretrained.build_pretrained(variant, directory, input_shape=(size, size, 3), classes=3)
    assert "classes=3 differs from the 5 classes" in caplog.text
    weights = ph.keras_weights(model)
    assert weights["head/kernel"].shape == (32, 3)
    assert not weights["head/kernel"].any() and not weights["head/bias"].any()
    # The backbone is the pretrained one.
    backbone = pretrained.build_pretrained(variant, directory, input_shape=(size, size, 3), include_top=False)
    for name, value in ph.keras_weights(backbone).items():
        np.testing.assert_array_equal(weights[name], value)


def test_backbone_file_with_include_top_gets_a_logged_head(monkeypatch, tmp_path, caplog):
    variant, _, directory, size, _ = _setup(monkeypatch, tmp_path, classifier=False)
    with caplog.at_level(logging.WARNING, logger="keras_vit.pretrained"):
        model = pretrained.build_pretrained(variant, directory, input_shape=(size, size, 3), classes=4)
    assert "has no classification head" in caplog.text
    assert not ph.keras_weights(model)["head/kernel"].any()


# ----------------------------------------------------------------- bad input: clear errors, no model


@pytest.fixture
def no_assignment(monkeypatch):
    """Fails the test if any weight is assigned (the loader must check everything first)."""
    calls = []
    monkeypatch.setattr(loader, "assign", lambda model, values: calls.append(model))
    return calls


def test_wrong_architecture_is_reported_in_full(monkeypatch, tmp_path, no_assignment):
    _, _, directory, _, _ = _setup(monkeypatch, tmp_path, name="hidden48_patch16_img48")
    variant = ph.register_variant(monkeypatch)  # hidden 32, patch 8
    with pytest.raises(pretrained.CheckpointError) as info:
        pretrained.build_pretrained(variant, directory, input_shape=(48, 48, 3), classes=7)
    message = str(info.value)
    assert "hidden 48" in message and "Wrong shapes" in message
    assert ("patch_embedding/projection/kernel", (16, 16, 3, 48), (8, 8, 3, 32)) in info.value.mismatched
    assert not no_assignment


def test_deeper_checkpoint_lists_unexpected_blocks(monkeypatch, tmp_path, no_assignment):
    variant, _, directory, size, classes = _setup(monkeypatch, tmp_path)
    ph.register_variant(monkeypatch, num_layers=1)
    with pytest.raises(pretrained.CheckpointError) as info:
        pretrained.build_pretrained(variant, directory, input_shape=(size, size, 3), classes=classes)
    assert "encoder_block_1/attention/qkv/kernel" in info.value.unexpected
    assert not no_assignment


def test_missing_tensor_is_named(monkeypatch, tmp_path, no_assignment):
    variant, hf, _, size, classes = _setup(monkeypatch, tmp_path)
    state = ph.hf_to_timm_state(ph.hf_state(hf))
    del state["blocks.1.mlp.fc2.bias"]
    state["blocks.0.ls1.gamma"] = np.ones(32, "float32")  # layer scale: another architecture
    path = ph.write_safetensors(tmp_path / "broken.safetensors", state)
    with pytest.raises(pretrained.CheckpointError) as info:
        pretrained.build_pretrained(variant, path, input_shape=(size, size, 3), classes=classes)
    assert info.value.missing == ["blocks.1.mlp.fc2.bias"]
    assert info.value.unexpected == ["blocks.0.ls1.gamma"]
    assert not no_assignment


def test_not_a_vit_checkpoint(monkeypatch, tmp_path):
    variant = ph.register_variant(monkeypatch)
    path = ph.write_safetensors(tmp_path / "resnet.safetensors", {"conv1.weight": np.zeros((8, 3, 7, 7), "float32")})
    with pytest.raises(pretrained.CheckpointError, match="not a ViT checkpoint"):
        pretrained.build_pretrained(variant, path, input_shape=(32, 32, 3))


def test_truncated_safetensors_is_corrupt(monkeypatch, tmp_path):
    variant, hf, _, size, classes = _setup(monkeypatch, tmp_path)
    path = ph.write_safetensors(tmp_path / "model.safetensors", ph.hf_to_timm_state(ph.hf_state(hf)))
    data = open(path, "rb").read()
    with open(path, "wb") as handle:
        handle.write(data[: len(data) - 100])
    with pytest.raises(pretrained.CheckpointError, match="model.safetensors"):
        pretrained.build_pretrained(variant, path, input_shape=(size, size, 3), classes=classes)


@pytest.mark.parametrize("damage", ["truncate", "flip_bytes"])
def test_damaged_npz_is_corrupt(monkeypatch, tmp_path, damage):
    variant, hf, _, size, classes = _setup(monkeypatch, tmp_path)
    path = ph.write_npz(tmp_path / "vit.npz", ph.hf_to_official_state(ph.hf_state(hf), num_heads=2))
    data = bytearray(open(path, "rb").read())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(64)
    open(path, "wb").write(bytes(data))
    with pytest.raises(pretrained.CheckpointError):
        pretrained.build_pretrained(variant, path, input_shape=(size, size, 3), classes=classes)


def test_pickles_are_refused(monkeypatch, tmp_path):
    variant, hf, _, size, classes = _setup(monkeypatch, tmp_path)
    torch.save(hf.state_dict(), tmp_path / "model.pth")
    with pytest.raises(pretrained.CheckpointError, match="pickle"):
        pretrained.build_pretrained(variant, str(tmp_path / "model.pth"), input_shape=(size, size, 3))
    import pickle

    (tmp_path / "weights.bin").write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(pretrained.CheckpointError, match="pickle"):
        pretrained.build_pretrained(variant, str(tmp_path / "weights.bin"), input_shape=(size, size, 3))
    np.savez(tmp_path / "objects.npz", cls=np.array([{"a": 1}], dtype=object))
    with pytest.raises(pretrained.CheckpointError, match="pickled"):
        pretrained.build_pretrained(variant, str(tmp_path / "objects.npz"), input_shape=(size, size, 3))


def test_errors_are_value_errors_for_bad_files(monkeypatch, tmp_path):
    # Callers that catch ValueError (the keras.applications convention) catch ours.
    variant = ph.register_variant(monkeypatch)
    (tmp_path / "junk.safetensors").write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError):
        pretrained.build_pretrained(variant, str(tmp_path / "junk.safetensors"), input_shape=(32, 32, 3))


def test_docstring_examples_run():
    import doctest

    from keras_vit.pretrained import export

    result = doctest.testmod(export, extraglobs={"keras_vit": keras_vit, "np": np}, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
