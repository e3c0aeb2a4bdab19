"""SigLIP 2 NaFlex checkpoints: transformers' `Siglip2VisionModel` (alone and as a whole `Siglip2Model`), timm's
`NaFlexVit` and big_vision's NaFlex `.npz`, tiny with random weights, built by `build_from_checkpoint`: the
references' outputs within 1e-4 on plain images of full grids (square and not: the 4 x 4 table resized bilinearly
with antialias) and, as NaFlex models, on a padded batch of four aspect ratios. The registry's NaFlex rows:
tests/test_pretrained_registry.py."""

import json
import re

import numpy as np
import pytest

from keras_vit.models.vit import VisionTransformer
from keras_vit.pretrained import CheckpointError, build_from_checkpoint, io
from tests import pretrained_helpers, timm_reference
from tests.helpers import naflex_batch, to_numpy

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

VISION = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, patch_size=8)
TIMM = dict(embed_dim=32, num_heads=2, mlp_ratio=2.0, patch_size=8, pos_embed_grid_size=(4, 4), img_size=32)
TIMM_NAME = "naflexvit_base_patch16_siglip"
NAFLEX = dict(class_token=False, pooling="map", mlp_activation="gelu_tanh", resample_method="bilinear")


def siglip2(folder):
    reference = transformers.Siglip2VisionModel(transformers.Siglip2VisionConfig(**VISION, num_patches=16))
    timm_reference.randomize_torch(reference.eval(), scale=0.1).save_pretrained(folder)  # every weight matters
    return reference


def run_siglip2(reference, batch):
    """transformers' `(pooled, tokens)` of a NaFlex batch."""
    patches, mask, grid = (torch.from_numpy(batch[key]) for key in ("patches", "mask", "spatial_shapes"))
    with torch.no_grad():
        output = reference(patches, pixel_attention_mask=mask.int(), spatial_shapes=grid.long())
    return output.pooler_output.numpy(), output.last_hidden_state.numpy()


def assert_close(actual, expected):
    np.testing.assert_allclose(to_numpy(actual), expected, atol=1e-4 * np.abs(expected).max())


ATTENTION = "MultiHeadDotProductAttention_0/"
BIG_VISION = {f"{n}_proj": ATTENTION + name for n, name in zip("qkv", ("query", "key", "value"))}
BIG_VISION.update(layer_norm1="LayerNorm_0", layernorm="LayerNorm_0", layer_norm2="LayerNorm_1", mlp="MlpBlock_0")
BIG_VISION.update(post_layernorm="Transformer/encoder_norm", encoder="Transformer", head="MAPHead_0")
BIG_VISION.update(patch_embedding="embedding", fc1="Dense_0", fc2="Dense_1", out_proj=ATTENTION + "out")
BIG_VISION.update(attention="", self_attn="", embeddings="")  # levels big_vision has not


def big_vision_npz(state, scanned):
    """transformers' Siglip2 tensors under big_vision's names (`naflex_vit.py`), in a two-tower file."""
    width, heads = VISION["hidden_size"], VISION["num_attention_heads"]
    tensors = {"pos_embedding": state.pop("embeddings.position_embedding.weight").reshape(4, 4, width)}
    for kind in ("weight", "bias"):  # the head's packed projection as the blocks' three
        for name, value in zip("qkv", np.split(state.pop(f"head.attention.in_proj_{kind}"), 3)):
            state[f"head.attention.{name}_proj.{kind}"] = value
    for key, value in state.items():
        *modules, kind = re.sub(r"layers\.(\d+)", r"encoderblock_\1", key).split(".")
        name = "/".join(filter(None, (BIG_VISION.get(module, module) for module in modules)))
        if kind == "weight":
            kind, value = ("scale", value) if value.ndim == 1 else ("kernel", value.T)
        if ATTENTION in name and not name.endswith("out"):  # per head
            value = value.reshape((width, heads, -1) if kind == "kernel" else (heads, -1))
        elif ATTENTION in name and kind == "kernel":
            value = value.reshape(heads, -1, width)
        tensors[f"{name}/{kind}"] = value
    if scanned:
        for name in [name for name in tensors if name.startswith("Transformer/encoderblock_0/")]:
            layers = [tensors.pop(name.replace("_0/", f"_{i}/", 1)) for i in range(VISION["num_hidden_layers"])]
            tensors[name.replace("encoderblock_0", "encoderblock")] = np.stack(layers)
    text = {"params/txt/Embed_0/embedding": np.ones((4, width)), "params/t": np.ones(1), "params/b": np.ones(1)}
    return dict(text, **{f"params/img/{name}": value for name, value in tensors.items()})


def saved(source, folder):
    """`(path, reference)`: `source`'s file in `folder`, and its reference's `(pooled, tokens or None)` of a batch."""
    if source == "timm":
        timm = pretrained_helpers.timm_saved_like_the_hub(TIMM_NAME, str(folder), **TIMM)
        return folder, lambda images: (timm_reference.run_torch(timm, images), None)
    reference, path = siglip2(folder), folder
    if source == "Siglip2Model":  # the vision tower under `vision_model.`, the text tower left aside
        tensors = {f"vision_model.{k}": v for k, v in io.read_safetensors(folder / "model.safetensors")[0].items()}
        extra = {"logit_scale": np.ones(1), "logit_bias": np.ones(1), "text_model.head.weight": np.ones((4, 4))}
        io.write_safetensors(folder / "model.safetensors", dict(tensors, **extra))
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(dict(model_type="siglip2", vision_config=config)))
    elif source.startswith("npz"):
        state = {name: value.numpy() for name, value in reference.state_dict().items()}
        path = pretrained_helpers.write_npz(folder / "naflex.npz", big_vision_npz(state, source == "npz scanned"))
    return path, lambda images: run_siglip2(reference, naflex_batch(list(images), 8))  # full grids: no padding


@pytest.mark.parametrize("source", ["Siglip2VisionModel", "Siglip2Model", "npz", "npz scanned", "timm"])
def test_plain_images_of_full_grids(source, tmp_path):
    path, reference = saved(source, tmp_path)
    for size in ((32, 32), (16, 64), (24, 40)):  # 4 x 4 (the table's), 2 x 8 (its 16 rows, resized), 3 x 5
        model = build_from_checkpoint(path, include_preprocessing=False, input_shape=(*size, 3), num_heads=2)
        assert {key: model.get_config()[key] for key in NAFLEX} == NAFLEX and model.get_config()["resample_antialias"]
        images = np.random.default_rng(0).standard_normal((2, *size, 3)).astype("float32")
        pooled, tokens = reference(images)
        assert_close(model(images), pooled)
        if tokens is not None:
            assert_close(model.forward_intermediates(images, indices=1)[0], tokens)


def test_a_padded_batch_of_four_aspect_ratios(tmp_path):
    grids, length = [(4, 4), (2, 8), (3, 5), (5, 2)], 20
    images = [np.random.default_rng(i).standard_normal((8 * rows, 8 * cols, 3)) for i, (rows, cols) in enumerate(grids)]
    batch = naflex_batch(images, 8, length)
    # timm's (row, col) of each patch, (0, 0) for padding.
    coordinates = np.stack(np.divmod(np.arange(length), batch["spatial_shapes"][:, 1:]), -1) * batch["mask"][..., None]
    expected = run_siglip2(siglip2(tmp_path / "hf"), batch)
    model = build_from_checkpoint(tmp_path / "hf", include_preprocessing=False, max_num_patches=length)
    assert_close(model(batch), expected[0])
    tokens = to_numpy(model.forward_intermediates(batch, indices=1, output_fmt="NLC")[0])
    assert_close(tokens[batch["mask"]], expected[1][batch["mask"]])  # the padding aside
    with pytest.raises(ValueError, match="output_fmt='NLC'"):  # a padded sequence has no feature map
        model.forward_intermediates(batch)
    with pytest.raises(CheckpointError, match="a NaFlex checkpoint, whose position table is resized bilinearly"):
        VisionTransformer(**dict(model.get_config(), resample_method="bicubic"), weights=tmp_path / "hf")
    timm = pretrained_helpers.timm_saved_like_the_hub(TIMM_NAME, str(tmp_path / "timm"), **TIMM)
    patches, mask, coordinates = (torch.from_numpy(array) for array in (batch["patches"], batch["mask"], coordinates))
    with torch.no_grad():
        expected = timm(dict(patches=patches, patch_coord=coordinates, patch_valid=mask)).numpy()
    model = build_from_checkpoint(tmp_path / "timm", include_preprocessing=False, max_num_patches=length, num_heads=2)
    assert_close(model(batch), expected)


@pytest.mark.parametrize(
    "source, config, match",
    [
        ("timm", dict(architecture="naflexvit_base_patch16_gap"), "naflexvit_base_patch16_gap: keras_vit reads its"),
        ("timm", None, "NaFlexVit [(]no config.json names it[)]"),
        ("Siglip2VisionModel", dict(num_channels=1), "8x8 pixels of 1 channels, but its patch embedding takes 192"),
        ("Siglip2VisionModel", None, "16x16 pixels of 3 channels"),  # the class's defaults
    ],
)
def test_what_does_not_say_naflex_is_refused(source, config, match, tmp_path):
    saved(source, tmp_path)
    file = tmp_path / "config.json"
    file.unlink() if config is None else file.write_text(json.dumps(dict(json.loads(file.read_text()), **config)))
    with pytest.raises(CheckpointError, match=match):
        build_from_checkpoint(tmp_path, num_heads=2)
