"""`pooling="map"`: the `AttentionPooling` layer (its timm parity: test_family_options.py)."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import layers
from keras_vit.pretrained import export
from keras_vit.pretrained.errors import CheckpointError
from tests.helpers import run_layer_test, run_quantization_test, to_numpy

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


def test_map_checkpoint_does_not_load_into_a_token_pooling_vit(tmp_path):
    model = keras_vit.VisionTransformer(**SIZE, input_shape=(32, 32, 3), pooling="map", include_top=False)
    path = export.export_weights(model, str(tmp_path / "map"), "timm")
    with pytest.raises(CheckpointError, match="pooling/latent"):
        keras_vit.VisionTransformer(**SIZE, input_shape=(32, 32, 3), include_top=False, pooling="token", weights=path)
