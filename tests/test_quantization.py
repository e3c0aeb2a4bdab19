"""`model.quantize(mode)` on the transformer block and the models (`tests/helpers.run_quantization_test`)."""

import keras

from keras_vit import layers as vit_layers
from keras_vit.models.applications import VisionTransformer
from tests import helpers

TINY = dict(patch_size=4, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(8, 8, 3))


def test_transformer_block_quantizes(tmp_path):
    def build():
        inputs = keras.Input(batch_shape=(2, 5, 16))
        return keras.Model(inputs, vit_layers.TransformerBlock(num_heads=2, mlp_dim=32)(inputs))

    helpers.run_quantization_test(build, (2, 5, 16), tmp_path, fresh_process=False)


def test_classifier_quantizes_and_reloads(tmp_path):
    def build():
        return VisionTransformer(**TINY, classes=3, representation_size=8, classifier_activation=None)

    errors = helpers.run_quantization_test(build, (2, 8, 8, 3), tmp_path, fresh_process=False)
    # Random weights with wide logits: int8 and float8 stay within a few per
    # cent of the float model, int4 (per-channel, 16 levels) within ~30 %.
    assert all(error < (0.3 if mode == "int4" else 0.1) for mode, error in errors.items()), errors


def test_backbone_nested_in_a_user_model_quantizes_and_reloads(tmp_path):
    def build():
        backbone = VisionTransformer(**TINY, include_top=False, pooling="gap")
        inputs = keras.Input((8, 8, 3))
        outputs = keras.layers.Dense(3, name="user_head")(backbone(inputs))
        return keras.Model(inputs, outputs, name="user_model")

    # The quantized policies are keyed by paths below each block, so they apply inside the user's model too.
    helpers.run_quantization_test(build, (2, 8, 8, 3), tmp_path, modes=("int8",), fresh_process=False)


def test_rope_model_quantizes_and_reloads(tmp_path):
    # Mixed RoPE: its learned frequencies stay float beside the int8 Dense layers.
    def build():
        rope = dict(rope_type="mixed", temperature=10.0)
        options = dict(num_register_tokens=2, position_embedding=False, rope=rope, mlp_activation="swiglu")
        return VisionTransformer(**TINY, classes=3, classifier_activation=None, **options)

    errors = helpers.run_quantization_test(build, (2, 8, 8, 3), tmp_path, modes=("int8",), fresh_process=False)
    assert errors["int8"] < 0.1, errors
