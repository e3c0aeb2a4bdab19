"""The model contract through the shared helper, pinned parameter counts, the constructors and bad arguments."""

import inspect

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.models import flops
from keras_vit.models.applications import CONSTRUCTORS, constructor_for
from keras_vit.models.variants import VARIANTS, constructor_name
from tests.helpers import (
    BACKEND,
    assert_jit_fit_and_predict,
    import_tensorflow_if_installed,
    random_inputs,
    randomize_weights,
    run_model_test,
    to_numpy,
)

TINY = dict(patch_size=8, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32)

# At 224 px: (backbone without head, with a 1000-class head). Paper Table 1 / AugReg sizes; the hybrids: timm's
# vit_{tiny_r_s16_p8, small_r26_s32, base_r26_s32, base_r50_s16, large_r50_s32}_224 (docs/hybrid.md).
PINNED_PARAMS = {
    "Ti/16": (5_524_416, 5_717_416),
    "S/16": (21_665_664, 22_050_664),
    "S/32": (22_493_952, 22_878_952),
    "B/8": (85_807_872, 86_576_872),
    "B/16": (85_798_656, 86_567_656),
    "B/32": (87_455_232, 88_224_232),
    "L/16": (303_301_632, 304_326_632),
    "L/32": (305_510_400, 306_535_400),
    "H/14": (630_764_800, 632_045_800),
    "S/14": (21_619_584, 22_004_584),
    "B/14": (85_706_496, 86_475_496),
    "L/14": (303_178_752, 304_203_752),
    "So400m/14": (412_444_656, 413_597_656),
    "So400m/16": (412_582_896, 413_735_896),  # So400m/14's, the patch kernel 207,360 larger, 60 table rows fewer
    "g/14": (1_134_646_784, 1_136_183_784),  # timm's vit_giant_patch14_dinov2 at 224 px, its layer scale aside
    "S+/16": (28_761_984, 29_146_984),  # timm's vit_small_patch16_224 with mlp_layer=SwiGLU
    # timm's eva02_*_patch14_224 with a key bias (12 or 24 x hidden), B and L without their MLP's sub-LN.
    "EVA02-Ti/14": (5_504_448, 5_697_448),
    "EVA02-S/14": (21_625_728, 22_010_728),
    "EVA02-B/14": (85_718_784, 86_487_784),
    "EVA02-L/14": (303_162_336, 304_187_336),
    "R+Ti/16": (6_144_704, 6_337_704),
    "R26+S/32": (36_046_912, 36_431_912),
    "R26+B/32": (100_614_976, 101_383_976),
    "R50+B/16": (97_890_112, 98_659_112),
    "R50+L/32": (327_969_856, 328_994_856),
}


def _tiny(**kwargs):
    return keras_vit.VisionTransformer(**TINY, **{"input_shape": (32, 24, 3), "classes": 5, **kwargs})


def test_classifier_contract(tmp_path):
    run_model_test(
        lambda: _tiny(drop_path_rate=0.1, dropout_rate=0.1),
        input_shape=(2, 32, 24, 3),
        expected_output_shape=(2, 5),
        expected_num_params=flops.parameter_count(TINY, (32, 24), 5),
        expected_num_trainable_weights=4 + 12 * TINY["num_layers"] + 2 + 2,
        workdir=tmp_path,
        jit=BACKEND != "torch",  # torch.compile: the one-block model below
    )


@pytest.mark.parametrize(
    "arguments, output_shape",
    [
        (dict(pooling="gap", representation_size=8, classifier_activation=None, mlp_activation="gelu_tanh"), (2, 5)),
        (dict(include_top=False, return_sequence=True), (2, 1 + 4 * 3, TINY["hidden_dim"])),
    ],
    ids=["pre-logits", "sequence"],
)
def test_other_outputs_contract(tmp_path, arguments, output_shape):
    run_model_test(
        lambda: _tiny(**arguments),
        input_shape=(2, 32, 24, 3),
        expected_output_shape=output_shape,
        workdir=tmp_path,
        float32_outputs=len(output_shape) == 2,
        fresh_process=False,
        jit=False,
    )


# DINOv3's options (registers, layer scale, SwiGLU, RoPE without a table), and mixed RoPE (learned frequencies, a
# row per block) with a table too, nested in a user's functional model.
ROPE_MODELS = {
    "dinov3": dict(
        num_register_tokens=4,
        position_embedding=False,
        rope=dict(rope_type="dinov3", temperature=100.0, rotate_half=True),
        layer_scale_init=0.1,
        layer_norm_epsilon=1e-5,
        mlp_activation="swiglu",
    ),
    "mixed_nested": dict(num_register_tokens=1, rope=dict(rope_type="mixed", temperature=10.0)),
}


@pytest.mark.parametrize("name", ROPE_MODELS)
def test_rope_models_contract(tmp_path, name):
    def build():
        if name != "mixed_nested":
            return _tiny(**ROPE_MODELS[name])
        backbone = _tiny(**ROPE_MODELS[name], include_top=False, pooling="gap")
        inputs = keras.Input((32, 24, 3))
        return keras.Model(inputs, keras.layers.Dense(5, name="user_head")(backbone(inputs)), name="user_model")

    run_model_test(
        build,
        input_shape=(2, 32, 24, 3),
        expected_output_shape=(2, 5),
        workdir=tmp_path,
        float32_outputs=name != "mixed_nested",  # the user's head follows the policy
        jit=BACKEND != "torch",  # torch.compile: the one-block model below
    )


@pytest.mark.slow
@pytest.mark.skipif(BACKEND != "torch", reason="the other backends' jit runs in test_classifier_contract")
def test_torch_compile_traces_the_whole_model_as_one_graph():
    import torch

    import_tensorflow_if_installed()  # as a torch user's tf.data input pipeline does
    # Traced: a model with every position part, the plain model's and RoPE's (its `ops.pad` once broke the graph at
    # every block): a table, a register, mixed RoPE with one frequency row per block.
    rope = keras_vit.VisionTransformer(
        **dict(TINY, num_layers=1), input_shape=(16, 16, 3), classes=3, **ROPE_MODELS["mixed_nested"]
    )
    try:
        explanation = torch._dynamo.explain(rope)(keras.ops.convert_to_tensor(random_inputs((2, 16, 16, 3))))
    finally:
        torch._dynamo.reset()
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons
    model = keras_vit.VisionTransformer(**dict(TINY, num_layers=1), input_shape=(16, 16, 3), classes=3)
    randomize_weights(model)
    assert_jit_fit_and_predict(model, random_inputs((2, 16, 16, 3)))


def test_pooling_and_the_feature_map_read_the_backbone_tokens():
    sequence_model = _tiny(include_top=False, return_sequence=True)
    randomize_weights(sequence_model)
    images = random_inputs((2, 32, 24, 3))
    tokens = to_numpy(sequence_model(images))
    expected = {"token": tokens[:, 0], "avg": tokens[:, 1:].mean(1), "max": tokens[:, 1:].max(1)}
    expected[None] = tokens[:, 1:].reshape(2, 4, 3, TINY["hidden_dim"])
    for pooling, output in expected.items():
        pooled_model = _tiny(include_top=False, pooling=pooling)
        pooled_model.set_weights(sequence_model.get_weights())
        np.testing.assert_allclose(to_numpy(pooled_model(images)), output, atol=1e-5)


def test_head_is_zero_initialised_and_float32():
    model = _tiny()
    head = model.get_layer("head")
    assert not np.any(to_numpy(head.kernel)) and head.dtype_policy.name == "float32"
    np.testing.assert_allclose(to_numpy(model(random_inputs((1, 32, 24, 3)))), np.full((1, 5), 0.2), atol=1e-6)


def test_drop_path_rises_linearly_with_depth():
    model = keras_vit.VisionTransformer(**dict(TINY, num_layers=5), input_shape=(32, 32, 3), drop_path_rate=0.2)
    rates = [model.get_layer(f"encoder_block_{i}").drop_path_rate for i in range(5)]
    np.testing.assert_allclose(rates, [0.0, 0.05, 0.1, 0.15, 0.2])


def test_numpy_integers_build_a_model_whose_config_is_plain_json(tmp_path):
    sizes = {name: np.int64(value) for name, value in TINY.items()}
    model = keras_vit.VisionTransformer(**sizes, input_shape=tuple(np.array([32, 24, 3])), classes=np.int64(10))
    assert type(model.get_layer("head").units) is int
    model.save(tmp_path / "numpy.keras")
    assert keras.saving.load_model(tmp_path / "numpy.keras").output_shape == (None, 10)


def test_an_input_smaller_than_one_patch_is_one_padded_patch():
    small = _tiny(input_shape=(5, 3, 3))
    assert tuple(small.get_layer("position_embedding").embedding.shape) == (1, 2, TINY["hidden_dim"])
    padded = _tiny(input_shape=(8, 8, 3))
    padded.set_weights(small.get_weights())
    images = np.random.default_rng(0).uniform(0, 255, (2, 5, 3, 3)).astype("float32")
    # The model pads with zeros after scaling to [-1, 1], i.e. with pixel 127.5.
    whole = np.full((2, 8, 8, 3), 127.5, "float32")
    whole[:, :5, :3] = images
    np.testing.assert_allclose(to_numpy(small(images)), to_numpy(padded(whole)), atol=1e-5)


# --- the variants and their constructors ---------------------------------------------------------------------


def test_every_variant_has_a_pinned_count_and_a_constructor_of_any_name():
    assert set(PINNED_PARAMS) == set(VARIANTS)
    assert list(CONSTRUCTORS) == [constructor_name(variant) for variant in VARIANTS]
    reference = list(inspect.signature(keras.applications.ConvNeXtTiny).parameters)
    for name, constructor in CONSTRUCTORS.items():
        assert list(inspect.signature(constructor).parameters) == [*reference, "kwargs"]
        assert constructor.__name__ == name and getattr(keras_vit, name) is constructor
    assert constructor_for("ViTB16") is constructor_for("b/16") is keras_vit.ViTB16
    assert constructor_for("vitl16").variant == "L/16"
    for bad in ("ViTZ99", None):
        with pytest.raises(ValueError, match=repr(bad)):
            constructor_for(bad)


def test_analytic_parameter_counts_are_the_pinned_and_the_built_ones():
    for variant, (backbone, with_head) in PINNED_PARAMS.items():
        assert flops.parameter_count(VARIANTS[variant], classes=0) == backbone
        assert flops.parameter_count(VARIANTS[variant]) == with_head
    # Sizes that are no multiple of the token, non-square, and other heads: plain, a hybrid with a projection
    # shortcut and a strided stage, and a root-only hybrid.
    cases = [
        (TINY, (35, 20), 7),
        (dict(TINY, mlp_activation="swiglu"), (16, 16), 3),
        (dict(TINY, patch_size=(4, 8)), (16, 40), 3),
        (dict(TINY, patch_size=1, resnet_stages=(1, 2), resnet_width=32), (50, 37), 5),
        (dict(TINY, patch_size=2, resnet_stages=(), resnet_width=32), (33, 33), 2),
    ]
    for architecture, size, classes in cases:
        with keras.StatelessScope(initialize_variables=False):
            model = keras_vit.VisionTransformer(**architecture, input_shape=(*size, 3), classes=classes)
        assert flops.parameter_count(architecture, size, classes) == model.count_params()
    # The constructors build the pinned models (shapes without values: count_params() reads shapes).
    pinned = [
        (keras_vit.ViTTi16, 224, PINNED_PARAMS["Ti/16"][1]),
        (keras_vit.ViTRTi16, 224, PINNED_PARAMS["R+Ti/16"][1]),
        (keras_vit.ViTB16, 384, 86_859_496),  # a 24x24 grid: (577 - 197) * 768 more
        (keras_vit.ViTR50B16, 384, 98_950_952),  # timm's vit_base_r50_s16_384
    ]
    for constructor, size, expected in pinned:
        with keras.StatelessScope(initialize_variables=False):
            model = constructor(input_shape=(size, size, 3))
        assert model.count_params() == expected and model.output_shape == (None, 1000)


@pytest.mark.parametrize(
    "kwargs, named",
    [
        (dict(input_shape=(32, 32, 0)), "input_shape"),
        (dict(input_shape=(32, 32)), "input_shape"),
        (dict(input_shape=(0, 32, 3)), "input_shape"),
        (dict(input_shape=(32, 32, None)), "input_shape"),
        (dict(input_shape=(1.5, 32, 3)), "input_shape"),
        (dict(include_preprocessing=1), "include_preprocessing"),
        (dict(include_top="yes"), "include_top"),
        (dict(dropout_rate=1.5), "dropout_rate"),
        (dict(attention_dropout_rate=-0.1), "attention_dropout_rate"),
        (dict(patch_dropout_rate=-0.1), "patch_dropout_rate=-0.1"),
        (dict(return_sequence=True), "return_sequence"),
        (dict(pooling="min"), "pooling='min'"),
        (dict(classes=0), "classes=0"),
        (dict(include_top=False, representation_size=8), "representation_size"),
        (dict(include_top=False, patch_dropout_rate=0.5), "patch_dropout_rate"),
        (dict(weights=42), "weights=42"),
        (dict(class_token=False), "class_token"),  # a head pools the class token by default
        (dict(include_top=False, pooling="token", class_token=False), "class_token"),
        (dict(include_top=False, fc_norm=True), "fc_norm"),
        (dict(pooling="gap", fc_norm=True, final_norm=False), "final_norm"),
        (dict(num_register_tokens=-1), "num_register_tokens"),
        (dict(patch_bias=False, resnet_stages=()), "patch_bias"),
        (dict(mlp_activation="relu"), "mlp_activation"),
    ],
)
def test_bad_arguments_are_value_errors_that_name_them(kwargs, named):
    with pytest.raises(ValueError) as caught:
        _tiny(**kwargs)
    assert named in str(caught.value) and "\n" not in str(caught.value)


def test_a_dtype_argument_is_the_models_policy_and_survives_saving(tmp_path):
    model = keras_vit.VisionTransformer(
        patch_size=8,
        hidden_dim=16,
        num_layers=1,
        num_heads=2,
        mlp_dim=32,
        input_shape=(16, 16, 3),
        classes=3,
        dtype="mixed_bfloat16",
    )
    assert model.dtype_policy.name == "mixed_bfloat16"
    model.save(str(tmp_path / "model.keras"))
    revived = keras.saving.load_model(str(tmp_path / "model.keras"))
    assert revived.dtype_policy.name == revived.get_layer("encoder_block_0").dtype_policy.name == "mixed_bfloat16"
