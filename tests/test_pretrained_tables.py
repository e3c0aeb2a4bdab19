"""The declarative layout tables: every layout is read back exactly as it is written.

Pure NumPy, so it runs on the tensorflow run only. The numerics of each
layout against independent references are in test_pretrained_converters.
"""

import dataclasses

import keras
import numpy as np
import pytest

from keras_vit.pretrained import converters, mapping, tables
from keras_vit.pretrained.errors import CheckpointError

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="pure NumPy: the tensorflow run")

HIDDEN, HEADS, MLP, LAYERS = 8, 2, 16, 3


def vit_weights(head=True, pre_logits=False, seed=0):
    rng = np.random.default_rng(seed)
    shapes = {
        "patch_embedding/projection/kernel": (4, 4, 3, HIDDEN),
        "patch_embedding/projection/bias": (HIDDEN,),
        "class_token/token": (1, 1, HIDDEN),
        "position_embedding/embedding": (1, 5, HIDDEN),
        "encoder_norm/gamma": (HIDDEN,),
        "encoder_norm/beta": (HIDDEN,),
    }
    block = {
        "norm1/gamma": (HIDDEN,),
        "norm1/beta": (HIDDEN,),
        "attention/qkv/kernel": (HIDDEN, 3 * HIDDEN),
        "attention/qkv/bias": (3 * HIDDEN,),
        "attention/output/kernel": (HIDDEN, HIDDEN),
        "attention/output/bias": (HIDDEN,),
        "norm2/gamma": (HIDDEN,),
        "norm2/beta": (HIDDEN,),
        "mlp/fc1/kernel": (HIDDEN, MLP),
        "mlp/fc1/bias": (MLP,),
        "mlp/fc2/kernel": (MLP, HIDDEN),
        "mlp/fc2/bias": (HIDDEN,),
    }
    shapes.update({f"encoder_block_{i}/{name}": shape for i in range(LAYERS) for name, shape in block.items()})
    width = HIDDEN
    if pre_logits:
        shapes.update({"pre_logits/kernel": (HIDDEN, 6), "pre_logits/bias": (6,)})
        width = 6
    if head:
        shapes.update({"head/kernel": (width, 5), "head/bias": (5,)})
    weights = {name: rng.normal(size=shape).astype("float32") for name, shape in shapes.items()}
    weights["position_embedding/embedding"][:, 0] = 0.0  # expressible in big_vision's layout too
    return weights


@pytest.mark.parametrize("layout", tables.LAYOUTS, ids=lambda layout: layout.description)
def test_every_layout_round_trips_and_is_recognised(layout):
    weights = vit_weights(pre_logits=not layout.refuses)
    tensors = layout.write(weights, {"num_heads": HEADS})
    assert converters.detect_layout(tensors) == layout
    again, description = converters.to_keras(tensors, format=layout.format)
    assert description == layout.description
    assert sorted(again) == sorted(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)


def test_scanned_layout_stacks_blocks_on_a_leading_axis():
    layout = next(layout for layout in tables.LAYOUTS if "scanned" in layout.description)
    tensors = layout.write(vit_weights(), {"num_heads": HEADS})
    assert tensors["Transformer/encoderblock/LayerNorm_0/scale"].shape == (LAYERS, HIDDEN)
    assert tensors["Transformer/encoderblock/MultiHeadDotProductAttention_1/query/kernel"].shape == (
        LAYERS,
        HIDDEN,
        HEADS,
        HIDDEN // HEADS,
    )


def test_written_layouts_are_the_published_names():
    official = converters.from_keras(vit_weights(), "official", num_heads=HEADS)
    assert official["Transformer/encoderblock_2/MultiHeadDotProductAttention_1/out/kernel"].shape == (2, 4, HIDDEN)
    timm = converters.from_keras(vit_weights(), "timm")
    assert timm["blocks.0.attn.qkv.weight"].shape == (3 * HIDDEN, HIDDEN)
    assert timm["patch_embed.proj.weight"].shape == (HIDDEN, 3, 4, 4)
    assert "vit.encoder.layer.1.attention.attention.key.weight" in converters.from_keras(vit_weights(), "hf")
    assert "pooler.dense.weight" in converters.from_keras(vit_weights(head=False, pre_logits=True), "hf")


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


def test_gaps_in_block_numbering_are_reported():
    tensors = converters.from_keras(vit_weights(), "timm")
    tensors = {name.replace("blocks.1.", "blocks.7."): value for name, value in tensors.items()}
    with pytest.raises(CheckpointError, match="not numbered"):
        converters.to_keras(tensors)


def test_a_malformed_tensor_is_named():
    tensors = converters.from_keras(vit_weights(), "official", num_heads=HEADS)
    tensors["Transformer/encoderblock_0/MultiHeadDotProductAttention_1/key/kernel"] = np.zeros((5, 2, 4))
    with pytest.raises(CheckpointError, match="encoder_block_0/attention/qkv/kernel"):
        converters.to_keras(tensors)


def test_big_vision_cannot_hold_a_class_token_position():
    layout = next(layout for layout in tables.LAYOUTS if "no class-token position" in layout.description)
    weights = vit_weights()
    weights["position_embedding/embedding"][:, 0] = 1.0
    with pytest.raises(ValueError, match="class token"):
        layout.write(weights, {"num_heads": HEADS})


def test_official_without_class_token_is_refused():
    tensors = converters.from_keras(vit_weights(), "official", num_heads=HEADS)
    del tensors["cls"]
    with pytest.raises(CheckpointError, match="class token"):
        converters.to_keras(tensors)


def test_layouts_compose_with_parts_of_another_model():
    # What a hybrid model does: a stem part with two indices, numbered from 1 in the file.
    stem = mapping.Part(
        "stem units",
        mapping.rows(("conv/kernel", "conv1/kernel"), ("norm/gamma", "gn1/scale", mapping.IDENTITY)),
        keras_root="stage_{i}/unit_{j}/",
        key_root="block{i}/unit{j}/",
        offsets={"i": 1, "j": 1},
    )
    layouts = [dataclasses.replace(layout.with_parts(stem), description="hybrid") for layout in tables.LAYOUTS]
    weights = vit_weights()
    for i, units in enumerate((2, 3)):
        for j in range(units):
            weights[f"stage_{i}/unit_{j}/conv/kernel"] = np.full((1, 1, 2, 2), i * 10 + j, "float32")
            weights[f"stage_{i}/unit_{j}/norm/gamma"] = np.full((2,), j, "float32")
    tensors = converters.from_keras(weights, "official", num_heads=HEADS, layouts=layouts)
    assert tensors["block2/unit3/conv1/kernel"][0, 0, 0, 0] == 12
    with pytest.raises(CheckpointError, match="block1/unit1/conv1/kernel"):
        converters.to_keras(tensors, layouts=tables.LAYOUTS)  # The plain ViT layouts do not know the stem.
    again, _ = converters.to_keras(tensors, layouts=layouts)
    assert sorted(again) == sorted(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)
