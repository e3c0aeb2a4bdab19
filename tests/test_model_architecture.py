"""The `Architecture` record: read back from built and saved models, and from checkpoint tensors.

`Architecture.from_model` reads layer configs; a record built with
`build_model` and read back must be the same record, whatever the head,
pooling, hybrid stem or nesting. `Checkpoint.architecture` reads a
checkpoint's tensor shapes; the attention heads come from per-head tensors
(official layout) or `config.json` (transformers) where the file has them,
and from an explicit argument or the variant table otherwise.
"""

import json
import logging
import pathlib

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.models import Architecture, architecture, build, build_model
from keras_vit.pretrained import export, loader
from keras_vit.pretrained.errors import CheckpointError
from tests import pretrained_helpers as helpers

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
TINY = dict(patch_size=8, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32)


def round_trip(**kwargs):
    model = build_model(**{**TINY, **kwargs})
    record = Architecture.from_model(model)
    assert Architecture.from_model(build(record)) == record
    assert Architecture.from_model(build_model(**record.arguments())) == record
    return record


def test_plain_vit_round_trips():
    record = round_trip(input_shape=(24, 40, 3), classes=7, classifier_activation=None, gelu_approximate=True)
    assert record.grid_size == (3, 5) and record.image_size == (24, 40)
    assert record.classes == 7 and record.classifier_activation is None and record.gelu_approximate
    assert record.pooling == "token" and record.pixels_per_token == (8, 8) and not record.is_hybrid


def test_hybrid_round_trips_and_answers_its_pixels_per_token():
    record = round_trip(patch_size=1, resnet_stages=(1, 1), resnet_width=32, input_shape=(32, 32, 3), classes=3)
    assert record.resnet_stages == (1, 1) and record.resnet_width == 32
    # The root divides by 4, the second stage by 2 more: 8 px per token, a 4x4 grid at 32 px.
    assert record.pixels_per_token == (8, 8) and record.grid_size == (4, 4)
    embedding = build(record).get_layer("patch_embedding")
    assert embedding.pixels_per_token == record.pixels_per_token


def test_gap_pooling_representation_size_and_no_top_round_trip():
    gap = round_trip(include_top=False, pooling="avg", input_shape=(16, 16, 3))
    assert gap.pooling == "gap" and not gap.include_top and gap.classes is None
    pre_logits = round_trip(representation_size=24, input_shape=(16, 16, 3), classes=5)
    assert pre_logits.representation_size == 24 and pre_logits.classes == 5
    pooled = round_trip(include_top=False, pooling="max", representation_size=12)
    assert pooled.representation_size == 12 and pooled.image_size == (None, None)
    features = round_trip(include_top=False, embedding_grid=(3, 2))
    assert features.pooling is None and not features.return_sequence and features.grid_size == (3, 2)
    sequence = round_trip(include_top=False, return_sequence=True, include_preprocessing=False)
    assert sequence.return_sequence and not sequence.include_preprocessing


def test_training_options_round_trip():
    record = round_trip(dropout_rate=0.1, attention_dropout_rate=0.2, drop_path_rate=0.3, resample_method="bicubic")
    assert (record.dropout_rate, record.attention_dropout_rate, record.drop_path_rate) == (0.1, 0.2, 0.3)
    assert record.resample_method == "bicubic"


def test_record_is_immutable_and_replace_copies():
    record = Architecture.from_arguments(**TINY, input_shape=(16, 16, 3))
    with pytest.raises(AttributeError):
        record.hidden_dim = 8
    assert record.replace(classes=3).classes == 3 and record.classes == 1000


def test_a_backbone_nested_in_a_users_model_is_found_by_its_layers(tmp_path):
    backbone = build_model(**TINY, include_top=False, pooling="token", input_shape=(16, 16, 3), name="backbone")
    inputs = keras.Input((16, 16, 3))
    outer = keras.Model(inputs, keras.layers.Dense(2, activation="tanh")(backbone(inputs)), name="user")
    wrapped = keras.Sequential([outer])
    record = Architecture.from_model(wrapped)
    # The user's own Dense (with a tanh!) is no part of the ViT.
    assert record == Architecture.from_model(backbone) and record.representation_size is None
    assert architecture.find_vit(wrapped) is backbone
    path = tmp_path / "user.keras"
    wrapped.save(path)
    assert Architecture.from_model(keras.saving.load_model(path, safe_mode=True)) == record


def test_a_model_without_a_vit_is_a_clear_error():
    inputs = keras.Input((8, 8, 3))
    with pytest.raises(ValueError, match="no keras_vit Vision Transformer"):
        Architecture.from_model(keras.Model(inputs, keras.layers.Conv2D(2, 3)(inputs)))


@pytest.mark.parametrize("name", ["plain_vit", "hybrid_vit", "quantized_vit", "finetune"])
def test_models_saved_by_an_earlier_keras_vit_are_read(name):
    model = keras.saving.load_model(FIXTURES / f"{name}.keras", safe_mode=True)
    record = Architecture.from_model(model)
    parts = architecture.vit_layers(model)
    assert record.num_layers == len(parts.blocks) and record.hidden_dim == parts.patch_embedding.hidden_dim
    assert record.is_hybrid == (name == "hybrid_vit")
    rebuilt = build(record)
    assert Architecture.from_model(rebuilt) == record
    if name != "quantized_vit":
        # Same architecture, so the saved weights fit the rebuilt model one to one.
        vit = architecture.find_vit(model)
        assert [tuple(w.shape) for w in rebuilt.weights] == [tuple(w.shape) for w in vit.weights]


# --- from a checkpoint's tensors ------------------------------------------------------------------


def _hf_model(hidden_dim=24, num_heads=3, classes=5):
    config = helpers.hf_config(hidden_dim=hidden_dim, num_layers=2, num_heads=num_heads, mlp_dim=40, classes=classes)
    return helpers.random_hf_model(config)


def _expected(record, hidden_dim=24, num_heads=3, classes=5):
    assert (record.hidden_dim, record.num_layers, record.mlp_dim) == (hidden_dim, 2, 40)
    assert record.patch_size == (8, 8) and record.grid_size == (4, 4)
    assert record.num_heads == num_heads and record.classes == classes
    assert not record.is_hybrid


@pytest.mark.parametrize("layout", ["plain", "scanned"])
def test_official_checkpoint_says_its_heads_in_its_per_head_shapes(tmp_path, layout):
    state = helpers.hf_state(_hf_model())
    path = helpers.write_npz(tmp_path / "vit.npz", helpers.hf_to_official_state(state, 3, layout=layout))
    checkpoint = loader.load_checkpoint(path)
    assert checkpoint.declared_heads() == 3
    # 3 heads of 8: not the variant table's answer for any size, so they came from the shapes.
    _expected(checkpoint.architecture())
    with pytest.raises(CheckpointError, match="3 attention heads"):
        checkpoint.architecture(num_heads=4)


def test_hf_checkpoint_says_its_heads_in_config_json(tmp_path):
    _hf_model().save_pretrained(tmp_path / "hf")
    checkpoint = loader.load_checkpoint(tmp_path / "hf")
    assert checkpoint.shape_facts == {} and checkpoint.declared_heads() == 3
    _expected(checkpoint.architecture())


def test_timm_checkpoint_fuses_its_heads_so_they_are_asked_for(tmp_path, caplog):
    state = helpers.hf_to_timm_state(helpers.hf_state(_hf_model()))
    checkpoint = loader.load_checkpoint(helpers.write_safetensors(tmp_path / "vit.safetensors", state))
    assert checkpoint.declared_heads() is None
    with pytest.raises(CheckpointError, match="pass num_heads"):
        checkpoint.architecture()
    _expected(checkpoint.architecture(num_heads=3))
    # A published hidden size takes the table's heads, and says so.
    state = helpers.hf_to_timm_state(helpers.hf_state(_hf_model(hidden_dim=192, num_heads=3, classes=2)))
    checkpoint = loader.load_checkpoint(helpers.write_safetensors(tmp_path / "ti.safetensors", state))
    with caplog.at_level(logging.INFO, logger="keras_vit.pretrained"):
        record = checkpoint.architecture()
    assert record.num_heads == 3 and "variant table" in caplog.text


def test_a_mismatch_message_does_not_give_a_timm_file_the_models_heads(tmp_path):
    state = helpers.hf_to_timm_state(helpers.hf_state(_hf_model()))
    path = helpers.write_safetensors(tmp_path / "vit.safetensors", state)
    with pytest.raises(CheckpointError) as info:
        keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=5, weights=str(path))
    found = str(info.value).split(" does not fit ")[0]
    assert "hidden 24" in found and "heads not stored" in found and "2 heads" not in found


@pytest.mark.parametrize("layout, name", [("official", "vit.npz"), ("hf", "hf")])
def test_a_file_that_declares_its_heads_refuses_a_model_with_other_heads(tmp_path, layout, name):
    model = build_model(**TINY, input_shape=(16, 16, 3), classes=3)
    path = export.export_weights(model, tmp_path / name, layout)
    # 2 or 4 heads of a 16-wide block: the same fused shapes, so only the declared count can tell them apart.
    with pytest.raises(CheckpointError, match="has 2 attention heads per block, not num_heads=4"):
        keras_vit.VisionTransformer(**{**TINY, "num_heads": 4}, input_shape=(16, 16, 3), classes=3, weights=str(path))


def test_checkpoint_record_builds_the_model_the_weights_fit(tmp_path):
    model = build_model(**TINY, input_shape=(16, 24, 3), classes=3)
    # timm's fused attention does not say its heads; the file records the non-square grid.
    path = export.export_weights(model, tmp_path / "vit.safetensors", "timm")
    record = loader.load_checkpoint(path).architecture(num_heads=2)
    assert record.grid_size == (2, 3) and record.classes == 3
    rebuilt = build(record.replace(image_size=(16, 24)))
    assert Architecture.from_model(rebuilt) == Architecture.from_model(model)


def test_convert_checkpoint_writes_the_files_heads(tmp_path):
    state = helpers.hf_state(_hf_model())
    npz = helpers.write_npz(tmp_path / "vit.npz", helpers.hf_to_official_state(state, 3))
    export.convert_checkpoint(npz, tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["num_attention_heads"] == 3 and config["intermediate_size"] == 40
    np.testing.assert_array_equal(
        loader.load_checkpoint(tmp_path / "hf").weights["encoder_block_1/attention/qkv/kernel"],
        loader.load_checkpoint(npz).weights["encoder_block_1/attention/qkv/kernel"],
    )
