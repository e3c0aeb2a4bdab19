"""The checkpoint registry: every tag resolves, and loads from a file in the layout of its Hub copy.

The files are written by `transformers` (mapped to timm's names for timm rows) with each row's patch size,
resolution, head and pre_logits, but a tiny width; the download is faked and checks the requested repo and file.
"""

import inspect

import keras
import numpy as np
import pretrained_helpers as ph
import pytest

import keras_vit
from keras_vit import pretrained
from keras_vit.models.applications import CONSTRUCTORS
from keras_vit.models.variants import VARIANTS, constructor_name
from keras_vit.pretrained import download, loader, registry, sources
from tests import timm_reference
from tests.helpers import REPO_ROOT, to_numpy

TINY = dict(hidden_dim=8, num_layers=2, num_heads=2, mlp_dim=8)
# The catalogue's rows load on one backend, torch, where building the models is fastest.
ONE_BACKEND = pytest.mark.skipif(keras.backend.backend() != "torch", reason="the catalogue's rows: the torch run")


def _load_row(info, monkeypatch, tmp_path, arch):
    sizes = {key: arch[key] for key in ("hidden_dim", "num_layers", "num_heads", "mlp_dim", "patch_size")}
    config = ph.hf_config(**sizes, image_size=info.resolution, classes=info.classes or 2)
    hf = ph.random_hf_model(config, classifier=info.classes is not None, pooler=info.pre_logits)
    state = ph.hf_state(hf)
    if info.format == "timm":
        state = ph.hf_to_timm_state(state)
        path = ph.write_safetensors(tmp_path / "model.safetensors", state)
    else:
        hf.save_pretrained(tmp_path / "hf")
        path = str(tmp_path / "hf" / "model.safetensors")
    requested = ph.fake_hub(monkeypatch, path)
    monkeypatch.setattr(download, "download_url", lambda *a, **k: pytest.fail("the Hub copy must come first"))
    top = dict(classes=info.classes) if info.classes else dict(include_top=False, pooling="token")
    model = CONSTRUCTORS[constructor_name(info.variant)](
        weights=info.tag,
        input_shape=(info.resolution, info.resolution, 3),
        representation_size=arch["hidden_dim"] if info.pre_logits else None,
        **top,
    )
    assert requested == [(info.hub_repo, info.hub_filename)]
    cls_token = state.get("cls_token", state.get("vit.embeddings.cls_token", state.get("embeddings.cls_token")))
    return model, cls_token


# The hybrids' rows load through the same loader in tests/test_hybrid.py (timm's R+Ti/16 file); the families'
# rows in test_a_family_tag_builds_its_architecture.
PAPER_CHECKPOINTS = [info for info in registry.CHECKPOINTS if info.family == "ViT"]
PLAIN_CHECKPOINTS = [info for info in PAPER_CHECKPOINTS if "resnet_stages" not in VARIANTS[info.variant]]


# The catalogue's rows are the same on every backend; loading into each backend's variables is checked by
# test_pretrained_converters and, at full size, by the next test.
@ONE_BACKEND
@pytest.mark.parametrize("info", PLAIN_CHECKPOINTS, ids=lambda i: f"{i.variant}-{i.tag}-{i.resolution}")
def test_every_registry_checkpoint_loads_from_its_layout(info, monkeypatch, tmp_path):
    arch = dict(VARIANTS[info.variant], **TINY)
    monkeypatch.setitem(VARIANTS, info.variant, arch)
    model, cls_token = _load_row(info, monkeypatch, tmp_path, arch)
    weights = ph.keras_weights(model)
    np.testing.assert_array_equal(weights["class_token/token"], cls_token)
    grid = info.resolution // arch["patch_size"]
    assert weights["position_embedding/embedding"].shape == (1, 1 + grid * grid, arch["hidden_dim"])
    if info.classes:
        assert weights["head/kernel"].shape == (arch["hidden_dim"], info.classes)
        assert weights["head/kernel"].any()  # the pretrained head, not a new zero one
    assert ("pre_logits/kernel" in weights) == info.pre_logits


def test_a_registry_checkpoint_at_full_size(monkeypatch, tmp_path):
    # 12 blocks: block 10 sorts before block 2 by name, and must not load as it.
    info = pretrained.resolve("Ti/16", "augreg_in21k_ft_in1k", (224, 224))
    model, cls_token = _load_row(info, monkeypatch, tmp_path, VARIANTS["Ti/16"])
    assert model.count_params() == 5_717_416  # Ti/16 with a 1000-class head (timm, vit_jax)
    np.testing.assert_array_equal(ph.keras_weights(model)["class_token/token"], cls_token)


def test_every_variant_has_checkpoints_and_sources():
    for variant, arch in VARIANTS.items():
        rows = pretrained.checkpoints(variant)
        assert rows or variant == "R26+B/32", variant  # never published
        for info in (info for info in rows if info.family == "ViT"):
            assert info.resolution % arch["patch_size"] == 0 and info.hub_filename.endswith(".safetensors")
            assert info.hub_repo.startswith({"timm": "timm/vit_", "hf": "google/vit-"}[info.format])
            patch = "" if "resnet_stages" in arch else f"patch{arch['patch_size']}"
            timm_suffix = f"{patch}_{info.resolution}.{info.tag}"
            assert info.hub_repo.endswith(timm_suffix) or f"{patch}-{info.resolution}" in info.hub_repo
            assert info.url is None or info.url.startswith(registry.BUCKET) and info.url.endswith(".npz")
            assert info.top1 is None or info.tag in registry.IMAGENET_1K_TAGS


def test_official_urls_match_the_published_names():
    # Spot checks against the file names listed in timm's default_cfgs.
    bucket = registry.BUCKET
    assert pretrained.resolve("B/16", "augreg_in21k_ft_in1k", (384, 384)).url == bucket + (
        "augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384.npz"
    )
    assert pretrained.resolve("B/32", "augreg_in21k_ft_in1k", (384, 384)).url == bucket + (
        "augreg/B_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz"
    )
    assert pretrained.resolve("R26+S/32", "augreg_in21k_ft_in1k", (224, 224)).url == bucket + (
        "augreg/R26_S_32-i21k-300ep-lr_0.001-aug_light0-wd_0.03-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.03-res_224.npz"
    )
    assert pretrained.resolve("L/16", "orig_in21k_ft_in1k", (224, 224)).url == bucket + (
        "imagenet21k+imagenet2012/ViT-L_16-224.npz"
    )
    assert pretrained.resolve("R50+B/16", "orig_in21k", (224, 224)).url == bucket + "imagenet21k/R50+ViT-B_16.npz"


def test_unknown_weights_fail_before_any_download(monkeypatch):
    for name in ("hf_download", "download_url"):
        monkeypatch.setattr(download, name, lambda *a, **k: pytest.fail("network access before the tag was validated"))
    with pytest.raises(ValueError) as info:
        keras_vit.ViTB16(weights="augreg_in22k_ft_in1k")
    for tag in ("augreg_in22k_ft_in1k", "augreg2_in21k_ft_in1k", "augreg_in21k_ft_in1k", "orig_in21k", "imagenet"):
        assert tag in str(info.value)
    for weights, match in (("/no/such/file.npz", "No file or directory"), (3, "weights=3"), ("hf://org", "hf://")):
        with pytest.raises(ValueError, match=match):
            keras_vit.ViTS16(weights=weights)
    assert [info.tag for info in PAPER_CHECKPOINTS if info.variant == "H/14"] == ["orig_in21k"]
    assert "imagenet" not in pretrained.available_tags("H/14")  # DeiT III's classifiers are not the paper's
    for weights in ("imagenet", "augreg_in21k_ft_in1k"):
        with pytest.raises(ValueError, match="ImageNet-21k backbone"):
            keras_vit.ViTH14(weights=weights)


def test_nearest_resolution_and_imagenet_alias():
    resolve = pretrained.resolve
    for size, expected in (((224, 224), 224), ((288, 288), 224), ((320, 320), 384), ((512, 448), 384)):
        assert resolve("B/16", "augreg_in21k_ft_in1k", size).resolution == expected
    assert resolve("B/16", "augreg2_in21k_ft_in1k", (384, 384)).resolution == 224  # only one exists
    best_224 = resolve("B/16", "imagenet", (224, 224))
    assert (best_224.tag, best_224.resolution, best_224.top1) == ("augreg2_in21k_ft_in1k", 224, 85.108)
    best_384 = resolve("B/16", "imagenet", (384, 384))
    assert (best_384.tag, best_384.resolution) == ("augreg_in21k_ft_in1k", 384)
    assert resolve("L/32", "imagenet", (224, 224)).tag == "orig_in21k_ft_in1k"
    assert resolve("R50+B/16", "imagenet", (384, 384)).top1 == 84.988


def test_hub_handle_parsing():
    source = sources.resolve_source("B/16", "hf://timm/vit_base_patch16_224.augreg_in21k@main")
    assert (source.kind, source.repo_id, source.revision) == ("hub", "timm/vit_base_patch16_224.augreg_in21k", "main")
    assert source.filename == "model.safetensors"
    source = sources.resolve_source("B/16", "hf://me/my-vit/sub/weights.safetensors")
    assert (source.repo_id, source.filename, source.revision) == ("me/my-vit", "sub/weights.safetensors", None)


def test_weights_readme_table_is_generated_from_the_registry():
    import importlib.util

    spec = importlib.util.spec_from_file_location("weights_catalogue", REPO_ROOT + "/weights/catalogue.py")
    catalogue = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(catalogue)
    assert catalogue.main(["--check"]) == 0, "run: python weights/catalogue.py --write"
    assert catalogue.table().count("\n| ViT") == len(registry.CHECKPOINTS)


def test_family_rows_are_consistent():
    rows = [info for info in registry.CHECKPOINTS if info.family != "ViT"]
    arguments = inspect.signature(keras_vit.VisionTransformer).parameters
    assert {info.tag for info in rows}.isdisjoint(info.tag for info in PAPER_CHECKPOINTS)
    assert len({info.name for info in registry.CHECKPOINTS}) == len(registry.CHECKPOINTS)
    for info in rows:
        assert info.variant in VARIANTS and info.resolution % VARIANTS[info.variant]["patch_size"] == 0, info.name
        patch = f"patch{VARIANTS[info.variant]['patch_size']}"
        assert info.hub_repo.startswith("timm/") and (patch in info.hub_repo or info.family == "FlexiViT")
        assert set(info.options) <= set(arguments) - {"weights", "input_tensor", "name", "kwargs"}, info.name
        assert len(info.mean) == len(info.std) == 3 and info.options.get("pixel_mean", 0.5) in (info.mean, 0.5)
        assert 0 < info.crop_pct <= 1 and info.interpolation in ("bicubic", "bilinear")
        assert info.top1 is None or info.classes == 1000
    # "imagenet" keeps naming the paper's classifiers, though DeiT III's are on B/16 too.
    assert pretrained.resolve("B/16", "imagenet", (224, 224)).tag == "augreg2_in21k_ft_in1k"


# One tag per option family: timm's architecture at a tiny width, served as the tag's Hub file, built by the
# constructor with the row's options (and refusing a contradicting argument) gives timm's pooled features.
@pytest.mark.parametrize(
    "tag, variant, name",
    [
        ("dinov2_reg4_lvd142m", "S/14", "vit_small_patch14_reg4_dinov2"),
        ("siglip_webli", "B/16", "vit_base_patch16_siglip_224"),
        ("clip_openai", "B/16", "vit_base_patch16_clip_quickgelu_224"),
        ("deit3_fb_in1k", "B/16", "deit3_base_patch16_224"),
    ],
)
def test_a_family_tag_builds_its_architecture(tag, variant, name, monkeypatch, tmp_path):
    monkeypatch.setitem(VARIANTS, variant, dict(VARIANTS[variant], **dict(TINY, num_layers=1)))
    size = 3 * VARIANTS[variant]["patch_size"]  # the row, at three patches a side
    info = ph.replace_row(monkeypatch, pretrained.resolve(variant, tag), resolution=size)
    small = dict(embed_dim=TINY["hidden_dim"], num_heads=TINY["num_heads"], mlp_ratio=1.0, img_size=size)
    reference = ph.timm_saved_like_the_hub(name, str(tmp_path), **small)
    reference.reset_classifier(0)
    requested = ph.fake_hub(monkeypatch, str(tmp_path / "model.safetensors"))
    constructor = CONSTRUCTORS[constructor_name(variant)]
    with pytest.raises(ValueError, match="leave"):
        constructor(weights=tag, include_top=False, resample_method="bilinear")
    pooling = None if info.options.get("pooling") else "token"
    model = constructor(weights=tag, include_top=False, pooling=pooling, input_shape=(size, size, 3))
    assert requested == [(info.hub_repo, "model.safetensors")]
    assert {key: model.get_config()[key] for key in info.options} == info.options
    pixels = np.random.default_rng(0).uniform(0, 255, (2, size, size, 3)).astype("float32")
    expected = timm_reference.run_torch(reference, (pixels / 255 - np.float32(info.mean)) / np.float32(info.std))
    np.testing.assert_allclose(to_numpy(model(pixels)), expected, atol=1e-4 * np.abs(expected).max())


# ---------------------------------------------------------------- the rows timm hosts: RoPE, FlexiViT, NaFlex

ROPE_ROWS = [info for info in registry.CHECKPOINTS if "rope" in info.options]
TIMM_ROWS = [info for info in registry.CHECKPOINTS if "rope" in info.options or "Flex" in info.family]  # NaFlex too
TIMM_LICENSES = {"mit": "MIT", "apache-2.0": "Apache-2.0", "dinov3-license": registry.DINOV3_LICENSE}


@ONE_BACKEND
def test_the_rows_timm_hosts_carry_its_cfg():
    pretrained_cfg = timm_reference.import_timm().models.get_pretrained_cfg
    assert [len(ROPE_ROWS), len(TIMM_ROWS)] == [44, 44 + 11 + 2]
    for info in TIMM_ROWS:
        cfg = pretrained_cfg(info.hub_repo.removeprefix("timm/"), allow_unregistered=False)
        assert cfg.hf_hub_id == info.hub_repo and TIMM_LICENSES[cfg.license] == info.license, info.name
        assert (info.url or "") == cfg.url, info.name
        # A NaFlex row's resolution is its 16 x 16 position table's; timm's cfg names a square crop.
        size = 16 * VARIANTS[info.variant]["patch_size"] if "NaFlex" in info.family else cfg.input_size[1]
        expected = (size, cfg.num_classes, cfg.mean, cfg.std, cfg.crop_pct, cfg.interpolation)
        assert (info.resolution, info.classes or 0, info.mean, info.std, info.crop_pct, info.interpolation) == expected
    assert {info.license for info in ROPE_ROWS if info.family == "DINOv3"} == {"DINOv3 License (gated)"}
    assert {info.patch_sizes for info in TIMM_ROWS if info.family == "FlexiViT"} == {registry.FLEXIVIT_PATCH_SIZES}
    assert [info.variant for info in NAFLEX_ROWS] == ["B/16", "So400m/16"]


def _architecture(config, info):
    """A model config's architecture: what its size, head and input leave open taken out, RoPE defaults filled in."""
    left_open = {"name", "dtype", "include_top", "classes", "classifier_activation", "input_shape", "embedding_grid"}
    if "pooling" not in info.options:
        left_open.add("pooling")  # the user's choice unless the row's norm or head fixes it
    architecture = {key: value for key, value in config.items() if key not in left_open}
    for key in ("pixel_mean", "pixel_std"):
        architecture[key] = tuple(np.broadcast_to(architecture[key], 3).tolist())
    architecture["rope"] = loader.rope_key(architecture["rope"])
    return architecture


def _one_per_architecture(rows):
    """The first row of each variant, timm model and options: the others differ in what the test above checks."""
    found = {}
    for info in rows:
        found.setdefault((info.variant, info.hub_repo.split(".")[0], repr(info.options)), info)
    return list(found.values())


# timm's model at depth 1 and its real width, saved as its Hub repo holds it (its config.json naming the model and
# tag), three patches a side: the tag's constructor at depth 1 loads it (strictly, its RoPE checked against the
# name's) and builds what build_from_checkpoint reads from it. 38 builds of about 1 s (L: 2 s). A NaFlex row's table
# is then resized, bilinearly with antialias, to the grid.
NAFLEX_ROWS = [info for info in TIMM_ROWS if "NaFlex" in info.family]


@ONE_BACKEND
@pytest.mark.parametrize("info", _one_per_architecture(ROPE_ROWS + NAFLEX_ROWS), ids=lambda i: f"{i.variant}-{i.tag}")
def test_a_timm_tag_builds_what_build_from_checkpoint_reads_from_its_file(info, monkeypatch, tmp_path):
    size = 3 * VARIANTS[info.variant]["patch_size"]
    timm_name = info.hub_repo.removeprefix("timm/")
    table = dict(pos_embed_grid_size=(3, 3)) if info in NAFLEX_ROWS else {}  # else NaFlexVit's is 16 x 16
    ph.timm_saved_like_the_hub(timm_name, str(tmp_path), img_size=size, num_classes=info.classes or 0, **table)
    read = pretrained.build_from_checkpoint(str(tmp_path)).get_config()
    monkeypatch.setitem(VARIANTS, info.variant, dict(VARIANTS[info.variant], num_layers=1))
    ph.replace_row(monkeypatch, info, resolution=size)
    requested = ph.fake_hub(monkeypatch, str(tmp_path / "model.safetensors"))
    top = dict(classes=info.classes) if info.classes else dict(include_top=False)
    model = CONSTRUCTORS[constructor_name(info.variant)](weights=info.tag, input_shape=(size, size, 3), **top)
    assert requested == [(info.hub_repo, "model.safetensors")]
    built = model.get_config()
    assert _architecture(built, info) == _architecture(read, info)
    for config in (built, read):
        assert (config["classes"] if config["include_top"] else None) == info.classes
