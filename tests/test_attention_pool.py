"""`pooling="map"`: the `AttentionPooling` layer's contract and parity with timm's `global_pool="map"` ViT."""

import keras
import numpy as np
import pytest
import safetensors.numpy

import keras_vit
from keras_vit import layers
from keras_vit.pretrained import converters, export
from keras_vit.pretrained.errors import CheckpointError
from tests import timm_reference
from tests.helpers import (
    assert_config_round_trip,
    run_layer_test,
    run_model_saving_test,
    run_quantization_test,
    to_numpy,
)

HIDDEN, MLP = 16, 32
# latent, query, key_value, output, norm, mlp
POOLING_PARAMS = HIDDEN + (HIDDEN + 1) * HIDDEN + (HIDDEN + 1) * 2 * HIDDEN + (HIDDEN + 1) * HIDDEN + 2 * HIDDEN
POOLING_PARAMS += (HIDDEN + 1) * MLP + (MLP + 1) * HIDDEN
SIZE = dict(patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64)


def test_attention_pooling_contract(tmp_path):
    run_layer_test(
        layers.AttentionPooling,
        dict(num_heads=2, mlp_dim=MLP),
        (2, 5, HIDDEN),
        (2, HIDDEN),
        13,
        expected_num_params=POOLING_PARAMS,
        workdir=tmp_path,
    )


def test_attention_pooling_quantizes(tmp_path):
    def build_model():
        inputs = keras.Input((5, HIDDEN))
        return keras.Model(inputs, layers.AttentionPooling(num_heads=2, mlp_dim=MLP)(inputs))

    run_quantization_test(build_model, (2, 5, HIDDEN), tmp_path, modes=("int8",), fresh_process=False)


def test_attention_pooling_skips_the_prefix_tokens():
    layer = layers.AttentionPooling(num_heads=2, mlp_dim=MLP)
    tokens = np.random.default_rng(0).normal(size=(2, 5, HIDDEN)).astype("float32")
    changed_prefix = tokens.copy()
    changed_prefix[:, 0] = 7.0
    np.testing.assert_array_equal(to_numpy(layer(tokens)), to_numpy(layer(changed_prefix)))
    changed_patch = tokens.copy()
    changed_patch[:, 1] = 7.0
    assert not np.allclose(to_numpy(layer(tokens)), to_numpy(layer(changed_patch)))


# The second case is SigLIP's shape: no class token, tanh GELU, no head.
@pytest.mark.parametrize("classes, act_layer, class_token", [(5, "gelu", True), (0, "gelu_tanh", False)])
def test_map_vit_matches_timm(classes, act_layer, class_token, tmp_path):
    timm = timm_reference.import_timm()
    reference = timm.models.vision_transformer.VisionTransformer(
        img_size=32,
        patch_size=8,
        embed_dim=32,
        depth=2,
        num_heads=2,
        mlp_ratio=2,
        num_classes=classes,
        global_pool="map",
        act_layer=act_layer,
        class_token=class_token,
    )
    reference = timm_reference.randomize_torch(reference.eval(), scale=0.3)
    state = timm_reference.state_dict_numpy(reference)
    path = str(tmp_path / "map.safetensors")
    safetensors.numpy.save_file(state, path)
    images = np.random.default_rng(0).uniform(-1, 1, (2, 32, 32, 3)).astype("float32")
    model = keras_vit.VisionTransformer(
        **SIZE,
        input_shape=(32, 32, 3),
        include_top=classes > 0,
        include_preprocessing=False,
        pooling="map",
        classes=classes or 1000,
        classifier_activation=None,
        mlp_activation=act_layer,
        class_token=class_token,
        weights=path,
    )
    expected = timm_reference.run_torch(reference, images)
    np.testing.assert_allclose(to_numpy(model(images)), expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    written = converters.from_keras(export.model_weights(model), "timm")
    assert sorted(written) == sorted(state)
    for key, value in written.items():
        np.testing.assert_array_equal(value, state[key])
    assert_config_round_trip(model)
    run_model_saving_test(model, images, tmp_path)


def test_map_checkpoint_does_not_load_into_a_token_pooling_vit(tmp_path):
    model = keras_vit.VisionTransformer(**SIZE, input_shape=(32, 32, 3), pooling="map", include_top=False)
    path = export.export_weights(model, str(tmp_path / "map"), "timm")
    with pytest.raises(CheckpointError, match="pooling/latent"):
        keras_vit.VisionTransformer(**SIZE, input_shape=(32, 32, 3), include_top=False, pooling="token", weights=path)


def test_map_with_pre_logits():
    model = keras_vit.VisionTransformer(
        **SIZE, input_shape=(32, 32, 3), pooling="map", representation_size=8, include_top=False
    )
    assert model.output_shape == (None, 8)
    assert model.get_layer("pooling").count_params() > 0
