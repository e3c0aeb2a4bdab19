"""The model describes itself: its config is its arguments, its blocks answer `forward_intermediates`, and a
checkpoint's tensor shapes say the arguments of the model they fit."""

import json
import logging

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import VisionTransformer
from keras_vit.models import find_vit
from keras_vit.pretrained import export, loader
from keras_vit.pretrained.errors import CheckpointError
from tests import pretrained_helpers as helpers
from tests.helpers import random_inputs, randomize_weights, run_model_saving_test, to_numpy

TINY = dict(patch_size=8, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32)


def test_a_named_constructor_describes_its_architecture_and_the_grid_rule():
    with keras.StatelessScope(initialize_variables=False):
        model = keras_vit.ViTB16(weights=None)
        config = model.get_config()
        rebuilt = VisionTransformer.from_config(config)
    assert isinstance(model, VisionTransformer) and isinstance(rebuilt, VisionTransformer)
    expected = dict(patch_size=(16, 16), hidden_dim=768, num_layers=12, num_heads=12, mlp_dim=3072)
    assert {key: config[key] for key in expected} == expected
    assert config["input_shape"] == (224, 224, 3) and config["classes"] == 1000 and config["pooling"] == "token"
    assert "input_tensor" not in config and "weights" not in config
    assert rebuilt.count_params() == model.count_params() == 86_567_656
    assert model.num_layers == 12 and model.embedding_grid == (14, 14) and model.pixels_per_token == (16, 16)
    # The grid rule: a fixed input size's grid, else `embedding_grid`, else 224 px's.
    plain = VisionTransformer(**TINY, input_shape=(24, 40, 3), classes=7)
    assert plain.embedding_grid == (3, 5) and plain.pixels_per_token == (8, 8)
    # The hybrid's root divides by 4, its second stage by 2 more: 8 px per token, a 4x4 grid at 32 px.
    with keras.StatelessScope(initialize_variables=False):
        hybrid = VisionTransformer(
            **{**TINY, "patch_size": 1}, resnet_stages=(1, 1), resnet_width=32, input_shape=(32, 32, 3)
        )
    assert hybrid.pixels_per_token == (8, 8) and hybrid.embedding_grid == (4, 4)
    any_size = VisionTransformer(**TINY, include_top=False)
    assert any_size.embedding_grid == (28, 28) and any_size.default_image_size == (224, 224)


@pytest.mark.parametrize(
    "arguments",
    [
        dict(input_shape=(24, 40, 3), classes=7, classifier_activation=None, mlp_activation="gelu_tanh"),
        dict(patch_size=1, resnet_stages=(1,), resnet_width=32, input_shape=(16, 16, 3), classes=3),
        dict(include_top=False, pooling="avg", representation_size=12),
        dict(include_top=False, pooling="map", representation_size=8),
        dict(include_top=False, embedding_grid=(3, 2), include_preprocessing=False),
        dict(include_top=False, return_sequence=True, dropout_rate=0.1, drop_path_rate=0.3, patch_dropout_rate=0.5),
    ],
    ids=["plain", "hybrid", "pooled", "map", "features", "sequence"],
)
def test_from_config_rebuilds_the_same_model(arguments):
    model = VisionTransformer(**{**TINY, **arguments})
    randomize_weights(model)
    # After a JSON round trip of the config.
    rebuilt = VisionTransformer.from_config(json.loads(json.dumps(model.get_config())))
    assert rebuilt.get_config() == model.get_config()
    rebuilt.set_weights(model.get_weights())
    images = random_inputs((2, *model.default_image_size, 3)) * 127.5 + 127.5
    np.testing.assert_array_equal(to_numpy(rebuilt(images)), to_numpy(model(images)))
    # Each argument is also an attribute ("avg" is kept as the pooling it names).
    assert model.num_heads == 2 and model.pooling == rebuilt.pooling
    assert model.get_config()["pooling"] == {"avg": "gap"}.get(arguments.get("pooling"), model.pooling)


def test_forward_intermediates_of_a_ti16_gives_every_block():
    model = keras_vit.ViTTi16(weights=None, include_top=False, input_shape=(32, 48, 3))
    images = random_inputs((1, 32, 48, 3)) * 127.5 + 127.5
    maps = model.forward_intermediates(images, intermediates_only=True)
    assert len(maps) == 12 and all(tuple(keras.ops.shape(x)) == (1, 2, 3, 192) for x in maps)
    final, tokens, attention = model.forward_intermediates(
        images, indices=[0, -1], output_fmt="NLC", return_attention=True
    )
    assert tuple(keras.ops.shape(final)) == (1, 7, 192)
    assert [tuple(keras.ops.shape(x)) for x in tokens] == [(1, 7, 192)] * 2
    assert [tuple(keras.ops.shape(x)) for x in attention] == [(1, 3, 7, 7)] * 2
    np.testing.assert_allclose(to_numpy(attention[0]).sum(axis=-1), 1.0, rtol=1e-5)


def test_forward_intermediates_has_timms_contract():
    """`(final_features, intermediates)`, the final features the model's own; timm's arguments and formats."""
    model = VisionTransformer(**TINY, include_top=False, return_sequence=True, input_shape=(16, 24, 3))
    randomize_weights(model)
    images = random_inputs((2, 16, 24, 3)) * 127.5 + 127.5
    final, (last,) = model.forward_intermediates(images, indices=1, output_fmt="NLC", norm=True)
    np.testing.assert_allclose(to_numpy(last), to_numpy(model(images)), atol=1e-5)
    np.testing.assert_allclose(to_numpy(final), to_numpy(model(images)), atol=1e-5)
    tokens = to_numpy(model.forward_intermediates(images, indices=[0], output_fmt="NLC", intermediates_only=True)[0])
    (nhwc, prefix), nchw = (
        model.forward_intermediates(images, indices=[0], output_fmt=fmt, intermediates_only=True, **options)[0]
        for fmt, options in (("NHWC", dict(return_prefix_tokens=True)), ("NCHW", {}))
    )
    np.testing.assert_array_equal(to_numpy(nhwc), tokens[:, 1:].reshape(2, 2, 3, 16))
    np.testing.assert_array_equal(to_numpy(nchw), tokens[:, 1:].reshape(2, 2, 3, 16).transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(to_numpy(prefix), tokens[:, :1])
    # Stopping early, the final features are the last chosen block's, normed.
    early, (first,) = model.forward_intermediates(images, indices=[0], output_fmt="NLC", stop_early=True)
    np.testing.assert_allclose(to_numpy(early), to_numpy(model.get_layer("encoder_norm")(first)), atol=1e-6)
    for indices in (0, 3, [2], [], "all"):
        with pytest.raises(ValueError, match="indices"):
            model.forward_intermediates(images, indices=indices)
    with pytest.raises(ValueError, match="output_fmt"):
        model.forward_intermediates(images, output_fmt="NDHWC")


def test_a_vit_nested_in_a_users_model_is_found_and_survives_saving(tmp_path):
    backbone = VisionTransformer(**TINY, include_top=False, pooling="token", input_shape=(16, 16, 3), name="backbone")
    randomize_weights(backbone)
    inputs = keras.Input((16, 16, 3))
    outer = keras.Model(inputs, keras.layers.Dense(2, activation="tanh")(backbone(inputs)), name="user")
    wrapped = keras.Sequential([outer])
    assert find_vit(wrapped) is backbone and find_vit(wrapped).get_config()["hidden_dim"] == 16
    images = random_inputs((2, 16, 16, 3)) * 127.5 + 127.5
    run_model_saving_test(wrapped, images, tmp_path)
    reloaded = keras.saving.load_model(tmp_path / "model.keras", safe_mode=True)
    assert find_vit(reloaded).get_config() == backbone.get_config()
    with pytest.raises(ValueError, match="no keras_vit Vision Transformer"):
        find_vit(outer.layers[-1])


# --- from a checkpoint's tensors ------------------------------------------------------------------


def _hf_model(hidden_dim=24, num_heads=3, classes=5):
    config = helpers.hf_config(hidden_dim=hidden_dim, num_layers=2, num_heads=num_heads, mlp_dim=40, classes=classes)
    return helpers.random_hf_model(config)


def _expected(architecture, hidden_dim=24, num_heads=3, classes=5):
    got = {key: architecture[key] for key in ("hidden_dim", "num_layers", "mlp_dim", "num_heads", "classes")}
    assert got == dict(hidden_dim=hidden_dim, num_layers=2, mlp_dim=40, num_heads=num_heads, classes=classes)
    assert architecture["patch_size"] == (8, 8) and architecture["embedding_grid"] == (4, 4)
    assert architecture["resnet_stages"] is None


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
        architecture = checkpoint.architecture()
    assert architecture["num_heads"] == 3 and "variant table" in caplog.text
    # A mismatch message does not give the file the model's heads.
    with pytest.raises(CheckpointError) as info:
        VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=5, weights=str(tmp_path / "vit.safetensors"))
    found = str(info.value).split(" does not fit ")[0]
    assert "hidden 24" in found and "heads not stored" in found and "2 heads" not in found


@pytest.mark.parametrize("layout, name", [("official", "vit.npz"), ("hf", "hf")])
def test_a_file_that_declares_its_heads_refuses_a_model_with_other_heads(tmp_path, layout, name):
    model = VisionTransformer(**TINY, input_shape=(16, 16, 3), classes=3)
    path = export.export_weights(model, tmp_path / name, layout)
    # 2 or 4 heads of a 16-wide block: the same fused shapes, so only the declared count can tell them apart.
    with pytest.raises(CheckpointError, match="has 2 attention heads per block, not num_heads=4"):
        VisionTransformer(**{**TINY, "num_heads": 4}, input_shape=(16, 16, 3), classes=3, weights=str(path))


def test_checkpoint_architecture_builds_the_model_the_weights_fit(tmp_path):
    model = VisionTransformer(**TINY, input_shape=(16, 24, 3), classes=3)
    randomize_weights(model)
    # timm's fused attention does not say its heads; the file records the non-square grid.
    path = export.export_weights(model, tmp_path / "vit.safetensors", "timm")
    architecture = loader.load_checkpoint(path).architecture(num_heads=2)
    assert architecture["embedding_grid"] == (2, 3) and architecture["classes"] == 3
    rebuilt = VisionTransformer(**dict(architecture, input_shape=(16, 24, 3)), weights=str(path))
    assert rebuilt.get_config() == dict(model.get_config(), name=rebuilt.name)
    images = random_inputs((1, 16, 24, 3)) * 127.5 + 127.5
    np.testing.assert_allclose(to_numpy(rebuilt(images)), to_numpy(model(images)), atol=1e-6)


def test_a_converted_checkpoint_declares_its_heads_in_config_json(tmp_path):
    state = helpers.hf_state(_hf_model())
    npz = helpers.write_npz(tmp_path / "vit.npz", helpers.hf_to_official_state(state, 3))
    export.convert_checkpoint(npz, tmp_path / "hf")
    checkpoint = loader.load_checkpoint(tmp_path / "hf")
    assert checkpoint.shape_facts == {} and checkpoint.declared_heads() == 3
    _expected(checkpoint.architecture())
    name = "encoder_block_1/attention/qkv/kernel"
    np.testing.assert_array_equal(checkpoint.weights[name], loader.load_checkpoint(npz).weights[name])
