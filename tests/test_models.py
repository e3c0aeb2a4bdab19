"""The model family: the builder through the shared helper, pinned parameter
counts for every variant, the keras.applications signature, and bad input."""

import inspect

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.models.applications import CONSTRUCTORS
from keras_vit.models.variants import VARIANTS
from tests.helpers import (
    BACKEND,
    assert_jit_fit_and_predict,
    import_tensorflow_if_installed,
    random_inputs,
    randomize_weights,
    run_model_test,
    to_numpy,
)

TINY = dict(patch_size=8, hidden_dim=32, num_layers=2, num_heads=4, mlp_dim=64)

# Paper Table 1 / AugReg sizes at 224 px: (backbone without head, with a
# 1000-class head). Every VARIANTS entry must be pinned here.
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
    # The hybrids: timm's counts for vit_tiny_r_s16_p8_224, vit_small_r26_s32_224, vit_base_r26_s32_224,
    # vit_base_r50_s16_224, vit_large_r50_s32_224, each checked against timm with num_classes=1000 (docs/hybrid.md;
    # tests/test_hybrid.py builds timm's R+Ti/16 and compares).
    # timm's vit_base_r50_s16_224 defaults to num_classes=0 (its orig_in21k checkpoint has no head): its
    # 97,890,112 is the backbone; with num_classes=1000 timm builds 98,659,112, as here.
    "R+Ti/16": (6_144_704, 6_337_704),
    "R26+S/32": (36_046_912, 36_431_912),
    "R26+B/32": (100_614_976, 101_383_976),
    "R50+B/16": (97_890_112, 98_659_112),
    "R50+L/32": (327_969_856, 328_994_856),
}


def _constructor(variant):
    from keras_vit.models.applications import constructor_for

    return constructor_for(variant)


def _built_without_values(constructor, **kwargs):
    """The constructor's model with every variable created at its shape but not initialised (Keras's deferred
    initialisation): count_params() reads the shapes only, and drawing H/14's 632 M initial values took 7 s of CPU
    of the 8 its count cost."""
    with keras.StatelessScope(initialize_variables=False):
        return constructor(**kwargs)


def _tiny(**kwargs):
    return keras_vit.VisionTransformer(**TINY, **{"input_shape": (32, 24, 3), "classes": 5, **kwargs})


def _tiny_params(classes=5, representation_size=None, grid=(4, 3)):
    d, mlp = TINY["hidden_dim"], TINY["mlp_dim"]
    block = 4 * d + 3 * d * d + 3 * d + d * d + d + d * mlp + mlp + mlp * d + d
    backbone = 8 * 8 * 3 * d + d + d + (1 + grid[0] * grid[1]) * d + TINY["num_layers"] * block + 2 * d
    pre = 0 if representation_size is None else d * representation_size + representation_size
    head = (representation_size or d) * classes + classes
    return backbone, backbone + pre + head


def test_classifier_contract(tmp_path):
    run_model_test(
        lambda: _tiny(drop_path_rate=0.1, dropout_rate=0.1),
        input_shape=(2, 32, 24, 3),
        expected_output_shape=(2, 5),
        expected_num_params=_tiny_params()[1],
        expected_num_trainable_weights=4 + 12 * TINY["num_layers"] + 2 + 2,
        workdir=tmp_path,
        jit=BACKEND != "torch",  # torch.compile is checked on a one-block model below
    )


def test_jit_compiled_fit_and_predict_on_a_one_block_model():
    # Keras's jit_compile is XLA on TensorFlow and JAX and torch.compile on
    # torch, which spends minutes per graph on a CPU: one block keeps it short.
    model = keras_vit.VisionTransformer(**dict(TINY, num_layers=1), input_shape=(16, 16, 3), classes=3)
    randomize_weights(model)
    assert_jit_fit_and_predict(model, random_inputs((2, 16, 16, 3)))


@pytest.mark.skipif(BACKEND != "torch", reason="torch.compile's graphs")
def test_torch_compile_traces_the_whole_model_as_one_graph():
    """A keras_vit model compiles (`jit_compile=True` on torch) into one graph. Keras's own `Rescaling` at its front
    broke it into pieces at every call (an import inside), which recompiled until torch's limit and then ran
    eagerly: on a GPU, "compiled" inference was no faster than eager."""
    import torch

    import_tensorflow_if_installed()  # as a torch user's tf.data input pipeline does

    model = keras_vit.VisionTransformer(**dict(TINY, num_layers=1), input_shape=(16, 16, 3), classes=3)
    inputs = keras.ops.convert_to_tensor(random_inputs((2, 16, 16, 3)))
    try:
        explanation = torch._dynamo.explain(model)(inputs)
    finally:
        torch._dynamo.reset()
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons


def test_pre_logits_gap_classifier_contract(tmp_path):
    run_model_test(
        lambda: _tiny(pooling="gap", representation_size=16, classifier_activation=None, gelu_approximate=True),
        input_shape=(2, 32, 24, 3),
        expected_output_shape=(2, 5),
        expected_num_params=_tiny_params(representation_size=16)[1],
        workdir=tmp_path,
        fresh_process=False,
        jit=BACKEND != "torch",  # torch.compile is covered once, by the classifier test
    )


def test_backbone_sequence_contract(tmp_path):
    run_model_test(
        lambda: _tiny(include_top=False, return_sequence=True),
        input_shape=(2, 32, 24, 3),
        expected_output_shape=(2, 1 + 4 * 3, TINY["hidden_dim"]),
        expected_num_params=_tiny_params()[0],
        workdir=tmp_path,
        float32_outputs=False,
        fresh_process=False,
        jit=BACKEND != "torch",
    )


def test_pooling_reads_the_backbone_tokens():
    sequence_model = _tiny(include_top=False, return_sequence=True)
    randomize_weights(sequence_model)
    images = random_inputs((2, 32, 24, 3))
    tokens = to_numpy(sequence_model(images))
    pooled = {
        "token": tokens[:, 0],
        "gap": tokens[:, 1:].mean(1),
        "avg": tokens[:, 1:].mean(1),
        "max": tokens[:, 1:].max(1),
    }
    for pooling, expected in pooled.items():
        pooled_model = _tiny(include_top=False, pooling=pooling)
        pooled_model.set_weights(sequence_model.get_weights())
        np.testing.assert_allclose(to_numpy(pooled_model(images)), expected, atol=1e-5)


def test_head_is_zero_initialised_and_float32():
    model = _tiny()
    head = model.get_layer("head")
    assert not np.any(to_numpy(head.kernel))
    assert head.dtype_policy.name == "float32"
    np.testing.assert_allclose(to_numpy(model(random_inputs((1, 32, 24, 3)))), np.full((1, 5), 0.2), atol=1e-6)


def test_drop_path_rises_linearly_with_depth():
    model = keras_vit.VisionTransformer(**dict(TINY, num_layers=5), input_shape=(32, 32, 3), drop_path_rate=0.2)
    rates = [model.get_layer(f"encoder_block_{i}").drop_path_rate for i in range(5)]
    np.testing.assert_allclose(rates, [0.0, 0.05, 0.1, 0.15, 0.2])


def test_input_tensor_is_used():
    images = keras.Input((32, 24, 3), name="my_images")
    model = _tiny(input_tensor=images)
    assert model.inputs[0] is images
    # The user's own first Rescaling is named "rescaling" by Keras: the model's scaling must not take that name.
    scaled = keras.layers.Rescaling(1.0)(keras.Input((32, 24, 3)))
    assert _tiny(input_tensor=scaled).output_shape == (None, 5)


def test_numpy_integers_build_a_model_whose_config_is_plain_json(tmp_path):
    sizes = {name: np.int64(value) for name, value in TINY.items()}
    model = keras_vit.VisionTransformer(**sizes, input_shape=tuple(np.array([32, 24, 3])), classes=np.int64(10))
    assert model.output_shape == (None, 10) and type(model.get_layer("head").units) is int
    model.save(tmp_path / "numpy.keras")
    assert keras.saving.load_model(tmp_path / "numpy.keras").output_shape == (None, 10)


def test_every_variant_is_pinned():
    assert set(PINNED_PARAMS) == set(VARIANTS)
    assert set(CONSTRUCTORS) == {f"ViT{v.replace('/', '').replace('+', '')}" for v in VARIANTS}


def test_constructor_for_accepts_constructor_and_variant_names():
    from keras_vit.models.applications import constructor_for

    assert constructor_for("ViTB16") is constructor_for("b/16") is keras_vit.ViTB16
    assert constructor_for("vitl16").variant == "L/16"
    with pytest.raises(ValueError, match="Unknown model 'ViTZ99'.*ViTB16.*B/16"):
        constructor_for("ViTZ99")


@pytest.mark.parametrize("variant", list(PINNED_PARAMS))
def test_variant_parameter_counts(variant):
    backbone, with_head = PINNED_PARAMS[variant]
    model = _built_without_values(_constructor(variant))
    assert model.count_params() == with_head
    head = model.get_layer("head")
    assert model.count_params() - head.count_params() == backbone
    assert tuple(model.output.shape) == (None, 1000)
    del model
    keras.backend.clear_session()


def test_analytic_parameter_count_is_the_built_models():
    # `keras-vit variants` counts without building: the count equals count_params() of every constructor's
    # model (the pinned counts above, which test_variant_parameter_counts builds), backbone and head.
    from keras_vit.models import flops

    for variant, (backbone, with_head) in PINNED_PARAMS.items():
        assert flops.parameter_count(VARIANTS[variant], classes=0) == backbone, variant
        assert flops.parameter_count(VARIANTS[variant]) == with_head, variant
    assert flops.parameter_count(VARIANTS["B/16"], 384) == 86_859_496
    assert flops.parameter_count(VARIANTS["R50+B/16"], 384) == 98_950_952
    # Tiny builds at sizes that are no multiple of the token, non-square, and other heads: plain, root-only
    # hybrid, and a hybrid with a projection shortcut and a strided stage.
    tiny_hybrid = dict(TINY, patch_size=1, resnet_stages=(1, 2), resnet_width=32)
    cases = [(TINY, (35, 20), 7), (dict(TINY, patch_size=(4, 8)), (16, 40), 3), (tiny_hybrid, (50, 37), 5)]
    cases.append((dict(TINY, patch_size=2, resnet_stages=(), resnet_width=32), (33, 33), 2))
    for architecture, size, classes in cases:
        model = keras_vit.VisionTransformer(**architecture, input_shape=(*size, 3), classes=classes)
        assert flops.parameter_count(architecture, size, classes) == model.count_params(), architecture


def test_r50_b16_at_384_matches_timm():
    # timm's vit_base_r50_s16_384 (1000-class head): the 24x24 grid adds (576 - 196) * 768 parameters.
    model = _built_without_values(keras_vit.ViTR50B16, input_shape=(384, 384, 3))
    assert model.count_params() == 98_950_952
    del model
    keras.backend.clear_session()


def test_vit_b16_at_384_has_a_larger_position_embedding():
    model = _built_without_values(keras_vit.ViTB16, input_shape=(384, 384, 3))
    assert model.count_params() == 86_859_496
    assert tuple(model.get_layer("position_embedding").embedding.shape) == (1, 577, 768)


def test_constructors_have_the_keras_applications_signature():
    reference = list(inspect.signature(keras.applications.ConvNeXtTiny).parameters)
    for name, constructor in CONSTRUCTORS.items():
        parameters = list(inspect.signature(constructor).parameters)
        assert parameters[: len(reference)] == reference, name
        assert constructor.__name__ == name
        assert name == "ViT" + constructor.variant.replace("/", "").replace("+", "")
        assert "Args:" in constructor.__doc__


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(input_shape=(32, 32, 0)), r"channels >= 1.*input_shape=\(32, 32, 0\)"),
        (dict(input_shape=(32, 32)), r"3-tuple.*input_shape=\(32, 32\)"),
        (dict(include_preprocessing=1), r"include_preprocessing=1"),
        (dict(include_top="yes"), r"`include_top` must be True or False.*include_top='yes'"),
        (dict(dropout_rate=1.5), r"`dropout_rate` must be a float in \[0, 1\).*dropout_rate=1.5"),
        (dict(attention_dropout_rate=-0.1), r"`attention_dropout_rate` must be.*attention_dropout_rate=-0.1"),
        (dict(return_sequence=True), r"return_sequence=True.*include_top=False"),
        (dict(pooling="min"), r"`pooling` must be one of \('token', 'gap', 'max'\).*pooling='min'"),
        (dict(classes=0), r"classes=0"),
        (dict(include_top=False, representation_size=8), r"representation_size"),
    ],
)
def test_bad_arguments_are_value_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _tiny(**kwargs)


def test_unsupported_weights_value_is_a_value_error():
    with pytest.raises(ValueError, match=r"`weights` must be None, a checkpoint tag.*Received: weights=42"):
        keras_vit.ViTTi16(weights=42)


def test_an_input_smaller_than_one_patch_is_one_padded_patch():
    # No minimum size: the image is zero-padded to whole patches, as at any size that the patch does not divide.
    small = _tiny(input_shape=(5, 3, 3))
    assert tuple(small.get_layer("position_embedding").embedding.shape) == (1, 2, TINY["hidden_dim"])
    padded = _tiny(input_shape=(8, 8, 3))
    padded.set_weights(small.get_weights())
    images = np.random.default_rng(0).uniform(0, 255, (2, 5, 3, 3)).astype("float32")
    # Zero after the model's scaling to [-1, 1] is pixel 127.5: pad with it to compare with an 8x8 image.
    whole = np.full((2, 8, 8, 3), 127.5, "float32")
    whole[:, :5, :3] = images
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(small(images)), keras.ops.convert_to_numpy(padded(whole)), atol=1e-5
    )
