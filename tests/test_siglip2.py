"""SigLIP 2 NaFlex checkpoints: transformers' `Siglip2VisionModel` (alone and as a whole `Siglip2Model`), timm's
`NaFlexVit` and big_vision's NaFlex `.npz`, tiny with random weights, load with `build_from_checkpoint` and give the
references' outputs within 1e-4 on plain images whose grid the references take whole (square and not: the 4 x 4
table resized bilinearly with antialias); the registry's NaFlex rows are timm's."""

import dataclasses
import json

import numpy as np
import pytest

from keras_vit.models.applications import CONSTRUCTORS
from keras_vit.models.variants import VARIANTS, constructor_name
from keras_vit.pretrained import CheckpointError, build_from_checkpoint, io, registry
from tests import pretrained_helpers, timm_reference
from tests.helpers import to_numpy

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

VISION = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, patch_size=8)
VISION["num_patches"] = 16  # a 4 x 4 table
TIMM = dict(embed_dim=32, num_heads=2, mlp_ratio=2.0, patch_size=8, pos_embed_grid_size=(4, 4), img_size=32)
SIZES = [(32, 32), (16, 64), (24, 40)]  # grids 4 x 4 (the table's), 2 x 8 (its 16 rows, resized) and 3 x 5
NAFLEX = dict(class_token=False, pooling="map", mlp_activation="gelu_tanh", resample_method="bilinear")


def siglip2(folder):
    torch.manual_seed(0)
    reference = transformers.Siglip2VisionModel(transformers.Siglip2VisionConfig(**VISION)).eval()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))  # every weight matters
    reference.save_pretrained(folder)
    return reference


def flat_patches(images, patch=8):
    """Channels-last images as transformers' Siglip2 processor cuts them: (row, col, channel) inside a patch."""
    batch, height, width, channels = images.shape
    patches = images.reshape(batch, height // patch, patch, width // patch, patch, channels)
    return patches.transpose(0, 1, 3, 2, 4, 5).reshape(batch, -1, patch * patch * channels)


def transformers_outputs(reference, images):
    """`(pooler_output, last_hidden_state)` of a full grid: no padding, the mask all ones."""
    patches = flat_patches(images)
    grid = torch.tensor([[images.shape[1] // 8, images.shape[2] // 8]] * len(images))
    mask = torch.ones(patches.shape[:2], dtype=torch.int32)
    with torch.no_grad():
        output = reference(torch.from_numpy(patches), pixel_attention_mask=mask, spatial_shapes=grid)
    return output.pooler_output.numpy(), output.last_hidden_state.numpy()


def assert_close(actual, expected):
    np.testing.assert_allclose(to_numpy(actual), expected, atol=1e-4 * np.abs(expected).max())


def images_of(size):
    return np.random.default_rng(0).standard_normal((2, *size, 3)).astype("float32")


@pytest.mark.parametrize("whole", [False, True], ids=["Siglip2VisionModel", "Siglip2Model"])
def test_transformers_siglip2_on_full_grids(whole, tmp_path):
    reference = siglip2(tmp_path)
    if whole:  # its vision tower under `vision_model.`, the text tower left aside
        tensors = {f"vision_model.{k}": v for k, v in io.read_safetensors(tmp_path / "model.safetensors")[0].items()}
        extra = dict(logit_scale=np.ones(1), logit_bias=np.ones(1), **{"text_model.head.weight": np.ones((4, 4))})
        io.write_safetensors(tmp_path / "model.safetensors", dict(tensors, **extra))
        config = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps(dict(model_type="siglip2", vision_config=config)))
    for size in SIZES:
        model = build_from_checkpoint(tmp_path, include_preprocessing=False, input_shape=(*size, 3))
        assert {key: model.get_config()[key] for key in NAFLEX} == NAFLEX and model.get_config()["resample_antialias"]
        pooled, tokens = transformers_outputs(reference, images_of(size))
        assert_close(model(images_of(size)), pooled)
        assert_close(model.forward_intermediates(images_of(size), indices=1)[0], tokens)


def big_vision_npz(state, scanned):
    """transformers' Siglip2 tensors named as big_vision's two-tower NaFlex file (`naflex_vit.py`), a text tower too."""
    width, heads = VISION["hidden_size"], VISION["num_attention_heads"]

    def dense(name, weight, bias, kernel_shape=None, bias_shape=None):
        kernel = weight.T
        return {
            f"{name}/kernel": kernel.reshape(kernel_shape or kernel.shape),
            f"{name}/bias": bias.reshape(bias_shape or bias.shape),
        }

    def linear(name, key):
        return dense(name, state[f"{key}.weight"], state[f"{key}.bias"])

    def norm(name, key):
        return {f"{name}/scale": state[f"{key}.weight"], f"{name}/bias": state[f"{key}.bias"]}

    def attention(qkv, out, name="MultiHeadDotProductAttention_0"):
        tensors = dense(f"{name}/out", *out, (heads, -1, width))
        for part, (weight, bias) in zip(("query", "key", "value"), qkv):
            tensors.update(dense(f"{name}/{part}", weight, bias, (width, heads, -1), (heads, -1)))
        return tensors

    def mlp(key):
        return {**linear("MlpBlock_0/Dense_0", f"{key}mlp.fc1"), **linear("MlpBlock_0/Dense_1", f"{key}mlp.fc2")}

    blocks = []
    for i in range(VISION["num_hidden_layers"]):
        key = f"encoder.layers.{i}."
        *qkv, out = [
            [state[f"{key}self_attn.{n}_proj.{p}"] for p in ("weight", "bias")] for n in ("q", "k", "v", "out")
        ]
        blocks.append(
            {
                **norm("LayerNorm_0", f"{key}layer_norm1"),
                **attention(qkv, out),
                **norm("LayerNorm_1", f"{key}layer_norm2"),
                **mlp(key),
            }
        )
    if scanned:
        tensors = {f"Transformer/encoderblock/{name}": np.stack([b[name] for b in blocks]) for name in blocks[0]}
    else:
        tensors = {f"Transformer/encoderblock_{i}/{name}": v for i, b in enumerate(blocks) for name, v in b.items()}
    qkv = zip(*(np.split(state[f"head.attention.in_proj_{p}"], 3) for p in ("weight", "bias")))
    out = [state[f"head.attention.out_proj.{p}"] for p in ("weight", "bias")]
    head = {
        "probe": state["head.probe"],
        **attention(qkv, out),
        **norm("LayerNorm_0", "head.layernorm"),
        **mlp("head."),
    }
    tensors.update(
        linear("embedding", "embeddings.patch_embedding"), **norm("Transformer/encoder_norm", "post_layernorm")
    )
    tensors.update({f"MAPHead_0/{name}": value for name, value in head.items()})
    tensors["pos_embedding"] = state["embeddings.position_embedding.weight"].reshape(4, 4, width)
    text = {"params/txt/Embed_0/embedding": np.ones((4, width)), "params/t": np.ones(1), "params/b": np.ones(1)}
    return dict(text, **{f"params/img/{name}": value for name, value in tensors.items()})


@pytest.mark.parametrize("scanned", [False, True], ids=["per-block", "scanned"])
def test_big_vision_naflex_npz(scanned, tmp_path):
    reference = siglip2(tmp_path)
    state = {name: value.numpy() for name, value in reference.state_dict().items()}
    path = pretrained_helpers.write_npz(tmp_path / "siglip2_naflex.npz", big_vision_npz(state, scanned))
    for size in SIZES:
        model = build_from_checkpoint(path, include_preprocessing=False, input_shape=(*size, 3), num_heads=2)
        assert {key: model.get_config()[key] for key in NAFLEX} == NAFLEX and model.get_config()["resample_antialias"]
        assert_close(model(images_of(size)), transformers_outputs(reference, images_of(size))[0])


def test_timm_naflexvit(tmp_path):
    reference = pretrained_helpers.timm_saved_like_the_hub("naflexvit_base_patch16_siglip", str(tmp_path), **TIMM)
    for size in SIZES:
        model = build_from_checkpoint(tmp_path, include_preprocessing=False, input_shape=(*size, 3), num_heads=2)
        assert {key: model.get_config()[key] for key in NAFLEX} == NAFLEX and model.get_config()["resample_antialias"]
        assert_close(model(images_of(size)), timm_reference.run_torch(reference, images_of(size)))


def test_what_does_not_say_naflex_is_refused(tmp_path):
    timm_folder, hf_folder = tmp_path / "timm", tmp_path / "hf"
    pretrained_helpers.timm_saved_like_the_hub("naflexvit_base_patch16_siglip", str(timm_folder), **TIMM)
    config = json.loads((timm_folder / "config.json").read_text())
    (timm_folder / "config.json").write_text(json.dumps(dict(config, architecture="naflexvit_base_patch16_gap")))
    with pytest.raises(CheckpointError, match="NaFlexVit naflexvit_base_patch16_gap: keras_vit reads its SigLIP 2"):
        build_from_checkpoint(timm_folder, num_heads=2)
    (timm_folder / "config.json").unlink()
    with pytest.raises(CheckpointError, match="NaFlexVit [(]no config.json names it[)]"):
        build_from_checkpoint(timm_folder, num_heads=2)
    siglip2(hf_folder)
    config = json.loads((hf_folder / "config.json").read_text())
    (hf_folder / "config.json").write_text(json.dumps(dict(config, num_channels=1)))
    with pytest.raises(CheckpointError, match="8x8 pixels of 1 channels, but its patch embedding takes 192 inputs"):
        build_from_checkpoint(hf_folder)
    (hf_folder / "config.json").unlink()  # the class's defaults: patches of 16 pixels
    with pytest.raises(CheckpointError, match="16x16 pixels of 3 channels"):
        build_from_checkpoint(hf_folder / "model.safetensors", num_heads=2)


NAFLEX_ROWS = [info for info in registry.CHECKPOINTS if info.tag == "siglip2_naflex_webli"]


def test_the_naflex_rows_are_timms_copies_with_their_cfg():
    pretrained_cfg = timm_reference.import_timm().models.get_pretrained_cfg
    assert [info.variant for info in NAFLEX_ROWS] == ["B/16", "So400m/16"]
    for info in NAFLEX_ROWS:
        cfg = pretrained_cfg(info.hub_repo.removeprefix("timm/"), allow_unregistered=False)
        assert cfg.hf_hub_id == info.hub_repo and cfg.license == "apache-2.0" == info.license.lower()
        assert (info.classes or 0, info.mean, info.std, info.crop_pct, info.interpolation) == (
            cfg.num_classes,
            cfg.mean,
            cfg.std,
            cfg.crop_pct,
            cfg.interpolation,
        )
        assert info.resolution == 16 * VARIANTS[info.variant]["patch_size"]  # the 16 x 16 table


def test_the_naflex_tag_builds_timms_model(monkeypatch, tmp_path):
    monkeypatch.setitem(VARIANTS, "B/16", dict(VARIANTS["B/16"], hidden_dim=32, num_layers=1, num_heads=2, mlp_dim=64))
    row = dataclasses.replace(NAFLEX_ROWS[0], resolution=48)  # a 3 x 3 table
    monkeypatch.setattr(
        registry, "CHECKPOINTS", tuple(row if info is NAFLEX_ROWS[0] else info for info in registry.CHECKPOINTS)
    )
    arguments = dict(TIMM, patch_size=16, pos_embed_grid_size=(3, 3), img_size=48)
    reference = pretrained_helpers.timm_saved_like_the_hub("naflexvit_base_patch16_siglip", str(tmp_path), **arguments)
    requested = pretrained_helpers.fake_hub(monkeypatch, str(tmp_path / "model.safetensors"))
    for size in ((48, 48), (32, 80)):
        model = CONSTRUCTORS[constructor_name("B/16")](weights=row.tag, include_top=False, input_shape=(*size, 3))
        pixels = np.random.default_rng(0).uniform(0, 255, (2, *size, 3)).astype("float32")
        assert_close(model(pixels), timm_reference.run_torch(reference, pixels / 127.5 - 1))
    assert requested == [(row.hub_repo, "model.safetensors")] * 2
