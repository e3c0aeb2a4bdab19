"""The checkpoint registry: every tag resolves, and loads from a file of its layout.

Each registry row is loaded from a synthetic file written in the layout of
its Hub copy (timm names written here from the shapes; Hugging Face files by
`transformers` itself), with the row's real patch size, resolution, head and
pre_logits but a tiny width and at most 11 blocks, so all rows run in CI. The download is
replaced by a function that checks the requested repo and file and returns
the synthetic file; everything after it is the real code path. One row is
also loaded at full size.
"""

import keras
import numpy as np
import pretrained_helpers as ph
import pytest

import keras_vit
from keras_vit import pretrained
from keras_vit.models.applications import CONSTRUCTORS
from keras_vit.models.variants import VARIANTS
from keras_vit.pretrained import download

TINY_WIDTH = dict(hidden_dim=8, num_heads=2, mlp_dim=8)
# Blocks 0-10: every file still numbers a block with two digits (where a lexical order of the names would put
# block 10 before block 2), and no block of an L or H (24, 32) maps differently from block 10; the full-size
# row below loads a real depth. A block costs ~0.1 s to build, write and load.
MAX_BLOCKS = 11


def _constructor(variant):
    return CONSTRUCTORS["ViT" + variant.replace("/", "")]


def _timm_state(arch, resolution, classes, seed=0):
    rng = np.random.default_rng(seed)
    d, m, p = arch["hidden_dim"], arch["mlp_dim"], arch["patch_size"]
    n = (resolution // p) ** 2
    shapes = {
        "patch_embed.proj.weight": (d, 3, p, p),
        "patch_embed.proj.bias": (d,),
        "cls_token": (1, 1, d),
        "pos_embed": (1, n + 1, d),
        "norm.weight": (d,),
        "norm.bias": (d,),
    }
    for i in range(arch["num_layers"]):
        b = f"blocks.{i}."
        shapes.update(
            {
                b + "norm1.weight": (d,),
                b + "norm1.bias": (d,),
                b + "attn.qkv.weight": (3 * d, d),
                b + "attn.qkv.bias": (3 * d,),
                b + "attn.proj.weight": (d, d),
                b + "attn.proj.bias": (d,),
                b + "norm2.weight": (d,),
                b + "norm2.bias": (d,),
                b + "mlp.fc1.weight": (m, d),
                b + "mlp.fc1.bias": (m,),
                b + "mlp.fc2.weight": (d, m),
                b + "mlp.fc2.bias": (d,),
            }
        )
    if classes:
        shapes.update({"head.weight": (classes, d), "head.bias": (classes,)})
    return {name: rng.normal(0, 0.02, shape).astype("float32") for name, shape in shapes.items()}


def _synthetic_file(info, arch, tmp_path):
    if info.format == "timm":
        state = _timm_state(arch, info.resolution, info.classes)
        return ph.write_safetensors(tmp_path / "model.safetensors", state), state["cls_token"]
    config = ph.hf_config(
        hidden_dim=arch["hidden_dim"],
        num_layers=arch["num_layers"],
        num_heads=arch["num_heads"],
        mlp_dim=arch["mlp_dim"],
        image_size=info.resolution,
        patch_size=arch["patch_size"],
        classes=info.classes or 2,
    )
    model = ph.random_hf_model(config, classifier=info.classes is not None, pooler=info.pre_logits)
    model.save_pretrained(tmp_path / "hf")
    state = ph.hf_state(model)
    cls = state.get("vit.embeddings.cls_token", state.get("embeddings.cls_token"))
    return str(tmp_path / "hf" / "model.safetensors"), cls


def _load_row(info, monkeypatch, tmp_path, arch):
    path, cls_token = _synthetic_file(info, arch, tmp_path)
    requested = ph.fake_hub(monkeypatch, path)
    monkeypatch.setattr(download, "download_url", lambda *a, **k: pytest.fail("the Hub copy must come first"))
    kwargs = dict(input_shape=(info.resolution, info.resolution, 3))
    if info.classes is None:
        kwargs.update(include_top=False, pooling="token")
    else:
        kwargs.update(classes=info.classes)
    if info.pre_logits:
        kwargs["representation_size"] = arch["hidden_dim"]
    model = _constructor(info.variant)(weights=info.tag, **kwargs)
    assert requested == [(info.hub_repo, info.hub_filename)]
    return model, cls_token


# The hybrids' rows load through the same loader in tests/test_hybrid.py (timm's R+Ti/16 file); the
# synthetic files here are plain ViTs.
_PLAIN_CHECKPOINTS = [info for info in pretrained.CHECKPOINTS if "resnet_stages" not in VARIANTS[info.variant]]


# What each row checks is the catalogue (its Hub repo and file, layout, head, pre_logits, resolution), the same on
# every backend; loading into each backend's variables is checked by test_pretrained_converters and, at full size,
# by the next test.
@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the catalogue's rows: the tensorflow run")
@pytest.mark.parametrize("info", _PLAIN_CHECKPOINTS, ids=lambda i: f"{i.variant}-{i.tag}-{i.resolution}")
def test_every_registry_checkpoint_loads_from_its_layout(info, monkeypatch, tmp_path):
    arch = dict(VARIANTS[info.variant], **TINY_WIDTH)
    arch["num_layers"] = min(arch["num_layers"], MAX_BLOCKS)
    monkeypatch.setitem(VARIANTS, info.variant, arch)
    model, cls_token = _load_row(info, monkeypatch, tmp_path, arch)
    weights = ph.keras_weights(model)
    np.testing.assert_array_equal(weights["class_token/token"], cls_token)
    grid = info.resolution // arch["patch_size"]
    assert weights["position_embedding/embedding"].shape == (1, 1 + grid * grid, arch["hidden_dim"])
    assert sum(name.endswith("attention/qkv/kernel") for name in weights) == arch["num_layers"]
    if info.classes:
        assert weights["head/kernel"].shape == (arch["hidden_dim"], info.classes)
        assert weights["head/kernel"].any()  # the pretrained head, not a new zero one
    assert ("pre_logits/kernel" in weights) == info.pre_logits


def test_a_registry_checkpoint_at_full_size(monkeypatch, tmp_path):
    info = pretrained.resolve("Ti/16", "augreg_in21k_ft_in1k", (224, 224))
    model, cls_token = _load_row(info, monkeypatch, tmp_path, dict(VARIANTS["Ti/16"]))
    assert model.count_params() == 5_717_416  # Ti/16 with a 1000-class head (timm, vit_jax)
    np.testing.assert_array_equal(ph.keras_weights(model)["class_token/token"], cls_token)


def test_every_variant_has_checkpoints_and_sources():
    # The hybrids' checkpoints are not catalogued yet (see README, "Hybrid models").
    for variant in [v for v in VARIANTS if "resnet_stages" not in VARIANTS[v]]:
        rows = pretrained.checkpoints(variant)
        assert rows, variant
        for info in rows:
            assert info.hub_repo.count("/") == 1 and info.hub_filename.endswith(".safetensors")
            assert info.license == "Apache-2.0"
            assert info.preprocessing["mean"] == (0.5, 0.5, 0.5)
            patch = VARIANTS[variant]["patch_size"]
            if info.format == "timm":
                assert info.hub_repo.endswith(f"_patch{patch}_{info.resolution}.{info.tag}"), info
            else:
                assert f"-patch{patch}-{info.resolution}" in info.hub_repo, info
            if info.url:
                assert info.url.startswith("https://storage.googleapis.com/vit_models/") and info.url.endswith(".npz")


def test_official_urls_match_the_published_names():
    # Spot checks against the file names listed in timm's default_cfgs.
    assert pretrained.resolve("B/16", "augreg_in21k_ft_in1k", (384, 384)).url == (
        "https://storage.googleapis.com/vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-"
        "sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384.npz"
    )
    assert pretrained.resolve("B/32", "augreg_in21k_ft_in1k", (384, 384)).url == (
        "https://storage.googleapis.com/vit_models/augreg/B_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-"
        "sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz"
    )
    assert pretrained.resolve("Ti/16", "augreg_in21k", (224, 224)).url.endswith(
        "augreg/Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0.npz"
    )


@pytest.fixture
def no_network(monkeypatch):
    def forbidden(*args, **kwargs):
        pytest.fail("network access before the tag was validated")

    monkeypatch.setattr(download, "hf_download", forbidden)
    monkeypatch.setattr(download, "download_url", forbidden)


def test_unknown_tag_fails_before_any_download(no_network):
    with pytest.raises(ValueError) as info:
        keras_vit.ViTB16(weights="augreg_in22k_ft_in1k")
    message = str(info.value)
    assert "augreg_in22k_ft_in1k" in message
    for tag in ("augreg2_in21k_ft_in1k", "augreg_in21k_ft_in1k", "orig_in21k", "imagenet"):
        assert tag in message
    with pytest.raises(ValueError, match="No file or directory"):
        keras_vit.ViTS16(weights="/no/such/file.npz")
    with pytest.raises(ValueError, match="Received: weights=3"):
        keras_vit.ViTS16(weights=3)
    with pytest.raises(ValueError, match="hf://org/repo"):
        keras_vit.ViTS16(weights="hf://only-org")


def test_h14_says_only_an_imagenet21k_backbone_exists(no_network):
    assert pretrained.available_tags("H/14") == ["orig_in21k"]
    with pytest.raises(ValueError, match="ImageNet-21k backbone"):
        keras_vit.ViTH14(weights="imagenet")
    with pytest.raises(ValueError, match="ImageNet-21k backbone"):
        keras_vit.ViTH14(weights="augreg_in21k_ft_in1k")


def test_nearest_resolution_and_imagenet_alias():
    resolve = pretrained.resolve
    assert resolve("B/16", "augreg_in21k_ft_in1k", (224, 224)).resolution == 224
    assert resolve("B/16", "augreg_in21k_ft_in1k", (288, 288)).resolution == 224
    assert resolve("B/16", "augreg_in21k_ft_in1k", (320, 320)).resolution == 384
    assert resolve("B/16", "augreg_in21k_ft_in1k", (512, 448)).resolution == 384
    assert resolve("B/16", "augreg2_in21k_ft_in1k", (384, 384)).resolution == 224  # only one exists
    best_224 = resolve("B/16", "imagenet", (224, 224))
    assert (best_224.tag, best_224.resolution, best_224.top1) == ("augreg2_in21k_ft_in1k", 224, 85.108)
    best_384 = resolve("B/16", "imagenet", (384, 384))
    assert (best_384.tag, best_384.resolution) == ("augreg_in21k_ft_in1k", 384)
    assert resolve("L/32", "imagenet", (224, 224)).tag == "orig_in21k_ft_in1k"


def test_hub_handle_parsing():
    source = pretrained.resolve_source("B/16", "hf://timm/vit_base_patch16_224.augreg_in21k@main")
    assert (source.kind, source.repo_id, source.filename, source.revision) == (
        "hub",
        "timm/vit_base_patch16_224.augreg_in21k",
        "model.safetensors",
        "main",
    )
    source = pretrained.resolve_source("B/16", "hf://me/my-vit/sub/weights.safetensors")
    assert (source.repo_id, source.filename, source.revision) == ("me/my-vit", "sub/weights.safetensors", None)


def test_weights_readme_table_is_generated_from_the_registry():
    import importlib.util

    path = ph.REPO_ROOT + "/weights/catalogue.py"
    spec = importlib.util.spec_from_file_location("weights_catalogue", path)
    catalogue = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(catalogue)
    assert catalogue.main(["--check"]) == 0, "run: python weights/catalogue.py --write"
    assert catalogue.table().count("\n| ViT") == len(pretrained.CHECKPOINTS)
