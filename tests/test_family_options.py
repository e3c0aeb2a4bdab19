"""The architecture options of `VisionTransformer` (tokens, norms, blocks) against timm's `VisionTransformer` built
with the same options and random weights, loaded through keras_vit's timm layout."""

import functools

import keras
import numpy as np
import pytest
import safetensors.numpy

import keras_vit
from keras_vit import inspection
from keras_vit.pretrained import converters, export
from keras_vit.pretrained.errors import CheckpointError
from keras_vit.training.layer_decay import layer_decay_multipliers
from tests import timm_reference
from tests.helpers import assert_config_round_trip, random_inputs, to_numpy

SIZE = dict(patch_size=8, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32)
IMAGES = random_inputs((2, 32, 32, 3))

# (timm's VisionTransformer arguments, keras_vit's), one architecture option or family shape per case.
OPTIONS = {
    "no_class_token_gap": (
        dict(class_token=False, global_pool="avg", fc_norm=False),
        dict(class_token=False, pooling="gap"),
    ),
    "registers": (dict(reg_tokens=2), dict(num_register_tokens=2)),
    "registers_no_embed_class": (
        dict(reg_tokens=2, no_embed_class=True),
        dict(num_register_tokens=2, no_embed_class=True),
    ),
    "registers_gap_fc_norm": (
        dict(class_token=False, reg_tokens=3, global_pool="avg", no_embed_class=True, init_values=1e-5),
        dict(
            class_token=False,
            num_register_tokens=3,
            pooling="gap",
            fc_norm=True,
            no_embed_class=True,
            layer_scale_init=1e-5,
        ),
    ),
    "pre_norm_clip": (
        dict(pre_norm=True, layer_norm_epsilon=1e-5),
        dict(pre_norm=True, patch_bias=False, layer_norm_epsilon=1e-5),
    ),
    "no_final_norm": (dict(final_norm=False), dict(final_norm=False)),
    "layer_scale_no_qkv_bias": (dict(init_values=1e-5, qkv_bias=False), dict(layer_scale_init=1e-5, qkv_bias=False)),
    "quick_gelu": (dict(act_layer="quick_gelu"), dict(mlp_activation="quick_gelu")),
    "gelu_tanh": (dict(act_layer="gelu_tanh"), dict(mlp_activation="gelu_tanh")),
    "map": (dict(global_pool="map"), dict(pooling="map")),
    # SigLIP's shape: attention pooling, no class token, tanh GELU.
    "map_siglip": (
        dict(global_pool="map", class_token=False, act_layer="gelu_tanh"),
        dict(pooling="map", class_token=False, mlp_activation="gelu_tanh"),
    ),
}


def timm_vit(num_classes=5, layer_norm_epsilon=1e-6, **options):
    """A tiny timm ViT with random weights (every tensor, layer scale included), in eval mode."""
    import torch

    timm = timm_reference.import_timm()
    torch.manual_seed(0)
    model = timm.models.vision_transformer.VisionTransformer(
        img_size=32,
        patch_size=SIZE["patch_size"],
        embed_dim=SIZE["hidden_dim"],
        depth=SIZE["num_layers"],
        num_heads=SIZE["num_heads"],
        mlp_ratio=SIZE["mlp_dim"] / SIZE["hidden_dim"],
        num_classes=num_classes,
        norm_layer=functools.partial(torch.nn.LayerNorm, eps=layer_norm_epsilon),
        **options,
    )
    return timm_reference.randomize_torch(model.eval())


def saved(model, tmp_path):
    path = str(tmp_path / "timm.safetensors")
    safetensors.numpy.save_file(timm_reference.state_dict_numpy(model), path)
    return path


def keras_vit_from(path, **options):
    options = dict(input_shape=(32, 32, 3), include_preprocessing=False, classifier_activation=None, **options)
    return keras_vit.VisionTransformer(**SIZE, weights=path, **options)


def assert_close(actual, expected):
    scale = np.abs(expected).max()
    np.testing.assert_allclose(to_numpy(actual) / scale, expected / scale, rtol=0, atol=1e-4)


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_logits_and_exported_weights_match_timm(case, tmp_path):
    timm_options, options = OPTIONS[case]
    reference = timm_vit(**timm_options)
    model = keras_vit_from(saved(reference, tmp_path), classes=5, **options)
    assert_close(model(IMAGES), timm_reference.run_torch(reference, IMAGES))
    state = timm_reference.state_dict_numpy(reference)
    written = converters.from_keras(export.model_weights(model), "timm")
    assert sorted(written) == sorted(state)
    for key, value in written.items():
        np.testing.assert_array_equal(value, state[key])


def test_registers_feature_map_sequence_and_intermediates_match_timm(tmp_path):
    reference = timm_vit(num_classes=0, reg_tokens=2, global_pool="")
    path = saved(reference, tmp_path)
    import torch

    with torch.no_grad():
        tokens = reference.forward_features(torch.from_numpy(IMAGES.transpose(0, 3, 1, 2))).numpy()
    sequence = keras_vit_from(path, include_top=False, return_sequence=True, num_register_tokens=2)
    assert_close(sequence(IMAGES), tokens)
    patches = tokens[:, 3:].reshape(2, 4, 4, SIZE["hidden_dim"])
    feature_map = keras_vit_from(path, include_top=False, num_register_tokens=2)
    assert_close(feature_map(IMAGES), patches)
    assert feature_map.num_prefix_tokens == 3
    (last,) = feature_map.forward_intermediates(IMAGES, indices=1, norm=True, intermediates_only=True)
    assert_close(last, patches)
    final, (last,) = feature_map.forward_intermediates(IMAGES, indices=1, output_fmt="NLC", norm=True)
    assert_close(final, tokens)
    assert_close(last, tokens)


def test_all_or_nothing_without_the_option(tmp_path):
    path = saved(timm_vit(reg_tokens=2, init_values=1e-5), tmp_path)
    with pytest.raises(CheckpointError):
        keras_vit_from(path, classes=5, num_register_tokens=2)  # no layer scale: ls1/ls2 left over
    with pytest.raises(CheckpointError):
        keras_vit_from(path, classes=5, layer_scale_init=1e-5)  # no registers: reg_token left over


def test_defaults_add_no_weights_and_options_round_trip():
    plain = keras_vit.VisionTransformer(**SIZE, input_shape=(32, 32, 3), classes=5)
    options = {**OPTIONS["registers_gap_fc_norm"][1], **OPTIONS["pre_norm_clip"][1], "qkv_bias": False}
    model = keras_vit.VisionTransformer(**SIZE, input_shape=(32, 32, 3), classes=5, **options)
    assert_config_round_trip(model)
    added = {v.path for v in model.weights} - {v.path for v in plain.weights}
    assert added == {
        "register_tokens/token",
        "norm_pre/gamma",
        "norm_pre/beta",
        "fc_norm/gamma",
        "fc_norm/beta",
        *(f"encoder_block_{i}/layer_scale{n}" for i in range(2) for n in (1, 2)),
    }
    removed = {v.path for v in plain.weights} - {v.path for v in model.weights}
    assert removed == {
        "class_token/token",
        "encoder_norm/gamma",
        "encoder_norm/beta",
        "patch_embedding/projection/bias",
        "encoder_block_0/attention/qkv/bias",
        "encoder_block_1/attention/qkv/bias",
    }
    assert model.get_layer("position_embedding").embedding.shape == (1, 16, 16)
    multipliers = layer_decay_multipliers(model, 0.5)
    assert "register_tokens" in multipliers and "class_token" not in multipliers


def test_an_aimv2_shaped_model_with_lora_on_its_mlp_saves_reloads_and_merges(tmp_path):
    options = dict(mlp_activation="swiglu", normalization="rms", patch_norm=True, proj_bias=False)
    model = keras_vit.VisionTransformer(**SIZE, input_shape=(32, 32, 3), classes=5, **options)
    assert model.get_layer("encoder_block_0").mlp.fc1.kernel.shape == (16, 64)  # the gate and the value
    paths = {variable.path for variable in model.weights}
    assert {"patch_norm/scale", "encoder_norm/scale"} <= paths and not any(p.endswith("/beta") for p in paths)
    assert not {"encoder_block_0/attention/output/bias", "encoder_block_0/mlp/fc1/bias"} & paths
    model.enable_lora(2, targets=("attention", "mlp"))
    for variable in model.trainable_weights:
        variable.assign(np.random.default_rng(0).normal(scale=0.1, size=variable.shape))
    model.save(tmp_path / "swiglu.keras")
    reloaded = keras.saving.load_model(tmp_path / "swiglu.keras", safe_mode=True)
    assert {key: getattr(reloaded, key) for key in options} == options
    np.testing.assert_allclose(to_numpy(reloaded(IMAGES)), to_numpy(model(IMAGES)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(model.merge_lora()(IMAGES)), to_numpy(model(IMAGES)), rtol=1e-5, atol=1e-6)


def test_inspection_reads_the_prefix_tokens():
    registers = keras_vit.VisionTransformer(**SIZE, input_shape=(32, 32, 3), classes=5, num_register_tokens=2)
    assert inspection.attention_rollout(registers, IMAGES).shape == (2, 4, 4)
    assert inspection.mean_attention_distance(registers, IMAGES).shape == (2, 2)
    no_class_token = keras_vit.VisionTransformer(
        **SIZE, input_shape=(32, 32, 3), classes=5, class_token=False, pooling="gap"
    )
    assert inspection.attention_rollout(no_class_token, IMAGES).shape == (2, 4, 4)  # the patch tokens' mean
