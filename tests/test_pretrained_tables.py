"""Every layout reads back exactly what it writes (pure NumPy; numerics: test_pretrained_converters)."""

import dataclasses

import keras
import numpy as np
import pytest

from keras_vit.pretrained import converters, io, loader, mapping
from keras_vit.pretrained.errors import CheckpointError

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="pure NumPy: the tensorflow run")

D, HEADS, MLP, LAYERS = 8, 2, 16, 3
# The hybrids' layouts add a ResNet backbone to these: their round trips are in test_hybrid.py.
# The plain ViT's layouts (tests/test_hf_family.py round-trips the family's through transformers,
# tests/test_build_from_checkpoint.py AIMv2's through timm, tests/test_rope_checkpoints.py the RoPE ones' and
# tests/test_siglip2.py the NaFlex ones').
PLAIN_LAYOUTS = [layout for layout in converters.LAYOUTS if "ResNet" not in layout.description]
NAFLEX = (*converters.BIG_VISION_NAFLEX, converters.TIMM_NAFLEX)
OTHERS = (*converters.HF_FAMILY, converters.TIMM_AIMV2, converters.TIMM_EVA, converters.DINOV3, *NAFLEX)
PLAIN_LAYOUTS = [layout for layout in PLAIN_LAYOUTS if layout not in OTHERS]
BLOCK = {
    "norm1/gamma": (D,),
    "norm1/beta": (D,),
    "attention/qkv/kernel": (D, 3 * D),
    "attention/qkv/bias": (3 * D,),
    "attention/output/kernel": (D, D),
    "attention/output/bias": (D,),
    "norm2/gamma": (D,),
    "norm2/beta": (D,),
    "mlp/fc1/kernel": (D, MLP),
    "mlp/fc1/bias": (MLP,),
    "mlp/fc2/kernel": (MLP, D),
    "mlp/fc2/bias": (D,),
}


def vit_weights(head=True, pre_logits=False):
    shapes = {
        "patch_embedding/projection/kernel": (4, 4, 3, D),
        "patch_embedding/projection/bias": (D,),
        "class_token/token": (1, 1, D),
        "position_embedding/embedding": (1, 5, D),
        "encoder_norm/gamma": (D,),
        "encoder_norm/beta": (D,),
    }
    shapes.update({f"encoder_block_{i}/{name}": shape for i in range(LAYERS) for name, shape in BLOCK.items()})
    if pre_logits:
        shapes.update({"pre_logits/kernel": (D, 6), "pre_logits/bias": (6,)})
    if head:
        shapes.update({"head/kernel": (6 if pre_logits else D, 5), "head/bias": (5,)})
    rng = np.random.default_rng(0)
    weights = {name: rng.normal(size=shape).astype("float32") for name, shape in shapes.items()}
    weights["position_embedding/embedding"][:, 0] = 0.0  # expressible in big_vision's layout too
    return weights


def assert_same(weights, again):
    assert sorted(again) == sorted(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)


@pytest.mark.parametrize("layout", PLAIN_LAYOUTS, ids=lambda layout: layout.description)
def test_every_layout_round_trips_and_is_recognised(layout):
    weights = vit_weights(pre_logits=not layout.refuses)
    tensors = layout.write(weights, {"num_heads": HEADS})
    assert converters.detect_layout(tensors) == layout
    again, description = converters.to_keras(tensors, format=layout.format)
    assert description == layout.description
    assert_same(weights, again)


def test_written_layouts_are_the_published_names():
    official = converters.from_keras(vit_weights(), "official", num_heads=HEADS)
    assert official["Transformer/encoderblock_2/MultiHeadDotProductAttention_1/out/kernel"].shape == (2, 4, D)
    timm = converters.from_keras(vit_weights(), "timm")
    assert timm["blocks.0.attn.qkv.weight"].shape == (3 * D, D)
    assert timm["patch_embed.proj.weight"].shape == (D, 3, 4, 4)
    assert "vit.encoder.layer.1.attention.attention.key.weight" in converters.from_keras(vit_weights(), "hf")
    assert "pooler.dense.weight" in converters.from_keras(vit_weights(head=False, pre_logits=True), "hf")
    scanned = next(layout for layout in PLAIN_LAYOUTS if "scanned" in layout.description)
    tensors = scanned.write(vit_weights(), {"num_heads": HEADS})
    assert tensors["Transformer/encoderblock/LayerNorm_0/scale"].shape == (LAYERS, D)
    assert tensors["Transformer/encoderblock/MultiHeadDotProductAttention_1/query/kernel"].shape == (LAYERS, D, 2, 4)


def test_writing_checks_what_the_layout_needs():
    with pytest.raises(ValueError, match="num_heads"):
        converters.from_keras(vit_weights(), "official")
    with pytest.raises(ValueError, match="format"):
        converters.from_keras(vit_weights(), "onnx")
    weights = vit_weights()
    weights["encoder_block_0/attention/extra/kernel"] = np.zeros(3)
    del weights["encoder_block_1/mlp/fc2/bias"]
    with pytest.raises(CheckpointError) as info:
        converters.from_keras(weights, "timm")
    assert info.value.missing == ["encoder_block_1/mlp/fc2/bias"]
    assert info.value.unexpected == ["encoder_block_0/attention/extra/kernel"]
    big_vision = next(layout for layout in PLAIN_LAYOUTS if "no class-token position" in layout.description)
    weights = vit_weights()
    weights["position_embedding/embedding"][:, 0] = 1.0
    with pytest.raises(ValueError, match="class token"):
        big_vision.write(weights, {"num_heads": HEADS})


def test_reading_names_what_is_wrong(tmp_path):
    tensors = converters.from_keras(vit_weights(), "official", num_heads=HEADS)
    tensors["Transformer/encoderblock_0/MultiHeadDotProductAttention_1/key/kernel"] = np.zeros((5, 2, 4))
    with pytest.raises(CheckpointError, match="encoder_block_0/attention/qkv/kernel"):
        converters.to_keras(tensors)
    del tensors["cls"]
    with pytest.raises(CheckpointError, match="class token"):
        converters.to_keras(tensors)
    tensors = converters.from_keras(vit_weights(), "timm")
    tensors = {name.replace("blocks.1.", "blocks.7."): value for name, value in tensors.items()}
    path = io.write_safetensors(tmp_path / "gap.safetensors", tensors)
    with pytest.raises(CheckpointError, match="not numbered"):
        loader.load_checkpoint(path).architecture(num_heads=HEADS)


def test_layouts_compose_with_parts_of_another_model():
    # What a hybrid model does: a stem part with two indices, numbered from 1 in the file.
    stem = mapping.Part(
        "stem units",
        mapping.rows(("conv/kernel", "conv1/kernel"), ("norm/gamma", "gn1/scale")),
        keras_root="stage_{i}/unit_{j}/",
        key_root="block{i}/unit{j}/",
        offsets={"i": 1, "j": 1},
    )
    layouts = [dataclasses.replace(layout.with_parts(stem), description="hybrid") for layout in PLAIN_LAYOUTS]
    weights = vit_weights()
    for i, units in enumerate((2, 3)):
        for j in range(units):
            weights[f"stage_{i}/unit_{j}/conv/kernel"] = np.full((1, 1, 2, 2), i * 10 + j, "float32")
            weights[f"stage_{i}/unit_{j}/norm/gamma"] = np.full((2,), j, "float32")
    tensors = converters.from_keras(weights, "official", num_heads=HEADS, layouts=layouts)
    assert tensors["block2/unit3/conv1/kernel"][0, 0, 0, 0] == 12
    with pytest.raises(CheckpointError, match="block1/unit1/conv1/kernel"):
        converters.to_keras(tensors, layouts=PLAIN_LAYOUTS)  # the plain ViT layouts do not know the stem
    assert_same(weights, converters.to_keras(tensors, layouts=layouts)[0])
