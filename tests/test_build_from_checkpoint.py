"""`keras_vit.pretrained.build_from_checkpoint` against timm: one published architecture per option signature of
timm's `vision_transformer` (`benchmarks/timm_coverage.py` runs them all), built by timm at depth 1 with random
weights and saved as the Hub holds it; the model built from the folder alone gives timm's outputs within 1e-4.
timm's RoPE family (`Eva`): tests/test_rope_checkpoints.py."""

import json

import numpy as np
import pytest

import keras_vit
from keras_vit.pretrained import CheckpointError, build_from_checkpoint, converters
from keras_vit.pretrained.export import model_weights, write_weights
from tests import pretrained_helpers, timm_reference
from tests.helpers import BACKEND, to_numpy

SMALL = dict(embed_dim=128, num_heads=2, mlp_ratio=4.0)
# One architecture per option signature among the 124 (class and register tokens, position embedding of the
# prefix, pre-norm, pooling, fc_norm, final norm, layer scale, activation, qkv bias, epsilon, head).
ARCHITECTURES = (
    "test_vit",  # at its own width (64, heads of 32: the name says them)
    "test_vit2",
    "vit_base_patch16_224",
    "vit_base_patch16_224_miil",
    "vit_small_patch8_224",
    "vit_xsmall_patch16_clip_224",
    "vit_base_patch16_clip_quickgelu_224",
    "vit_wee_patch16_reg1_gap_256",
    "vit_small_patch14_dinov2",
    "vit_small_patch14_reg4_dinov2",
    "vit_giant_patch14_dinov2",  # SwiGLUPacked: one fc1 gives the gate and the value
    "flexivit_small",
    "vit_medium_patch16_gap_256",
    "vit_base_patch16_siglip_gap_224",
    "vit_base_patch16_radio_v3",
    "vit_so400m_patch16_radio_v4",
    "vit_base_patch32_siglip_gap_256",
    "vit_base_patch16_siglip_224",
    "vit_base_patch32_siglip_256",
    "vit_so150m_patch16_reg4_gap_256",
    "vit_so150m2_patch16_reg1_gap_256",
    "vit_intern300m_patch14_448",
    "eva_large_patch14_196",
    "deit_tiny_distilled_patch16_224",  # the distillation token and head_dist, the two heads averaged
    "aimv2_large_patch14_224",  # RMSNorm (the patch tokens' too), no projection biases, SwiGLU of fc1_g and fc1_x
)
REFUSED = (
    "beit3_base_patch16_224",  # norms inside the attention and the MLP
    "vit_dwee_patch16_reg1_gap_256",  # differential attention
    "vit_base_patch16_rpn_224",  # post-norm blocks: the tensors look like a plain ViT's, the name refuses it
    "test_vit3",  # MAP pooling over the prefix tokens
)


def saved(name, folder, **timm_arguments):
    arguments = {} if name.startswith("test_vit") else SMALL
    if name.startswith("aimv2"):
        arguments = dict(SMALL, num_heads=1)  # its heads are 128 wide, as the name says
    return pretrained_helpers.timm_saved_like_the_hub(name, str(folder), **arguments, **timm_arguments)


def assert_close(actual, expected):
    scale = np.abs(expected).max()
    np.testing.assert_allclose(to_numpy(actual) / scale, expected / scale, rtol=0, atol=1e-4)


def images_for(reference, seed=0):
    return np.random.default_rng(seed).standard_normal((2, *reference.patch_embed.img_size, 3)).astype("float32")


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_outputs_match_timm(name, tmp_path):
    """Raw pixels in: the model normalises them with the mean and std of timm's `pretrained_cfg`."""
    reference = saved(name, tmp_path)
    pixels = np.random.default_rng(0).uniform(0, 255, (2, *reference.patch_embed.img_size, 3)).astype("float32")
    mean, std = (np.asarray(reference.pretrained_cfg[key], "float32") for key in ("mean", "std"))
    model = build_from_checkpoint(tmp_path)
    assert_close(model(pixels), timm_reference.run_torch(reference, (pixels / 255 - mean) / std))


def test_deit_features_tokens_and_timm_export(tmp_path):
    reference = saved("deit_tiny_distilled_patch16_224", tmp_path)
    images = images_for(reference)
    tokens = timm_reference.run_torch(reference.forward_features, images)
    backbone = build_from_checkpoint(tmp_path, include_top=False, pooling="token", include_preprocessing=False)
    assert_close(backbone(images), (tokens[:, 0] + tokens[:, 1]) / 2)  # timm's pre_logits
    (last,) = backbone.forward_intermediates(images, indices=1, output_fmt="NLC", norm=True, intermediates_only=True)
    assert_close(last, tokens)
    exported = converters.from_keras(model_weights(build_from_checkpoint(tmp_path)), "timm")
    expected = timm_reference.state_dict_numpy(reference)
    assert sorted(exported) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(exported[name], value, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", REFUSED)
def test_unsupported_architectures_are_refused_in_one_line(name, tmp_path):
    saved(name, tmp_path)
    with pytest.raises(CheckpointError) as error:
        build_from_checkpoint(tmp_path)
    assert "\n" not in str(error.value) and "does not build" in str(error.value)


def test_the_model_name_decides_what_the_tensors_cannot_tell(tmp_path):
    reference = saved("vit_base_patch16_clip_quickgelu_224", tmp_path)
    images = images_for(reference)
    expected = timm_reference.run_torch(reference, images)
    (tmp_path / "config.json").unlink()
    file = tmp_path / "model.safetensors"
    named = build_from_checkpoint(file, "vit_base_patch16_clip_quickgelu_224", include_preprocessing=False)
    assert (named.mlp_activation, named.layer_norm_epsilon) == ("quick_gelu", 1e-5)
    assert_close(named(images), expected)
    unnamed = build_from_checkpoint(file, include_preprocessing=False)
    assert (unnamed.mlp_activation, unnamed.layer_norm_epsilon) == ("gelu", 1e-6)
    assert unnamed.pre_norm and not unnamed.patch_bias  # the tensors still tell the rest
    with pytest.raises(CheckpointError):  # a keyword that does not fit the tensors
        build_from_checkpoint(file, num_register_tokens=1)


def test_an_unnamed_aimv2_file_gets_its_heads_and_epsilon_from_its_rms_norms(tmp_path):
    reference = saved("aimv2_large_patch14_224", tmp_path)
    (tmp_path / "config.json").unlink()
    model = build_from_checkpoint(tmp_path / "model.safetensors", include_preprocessing=False)
    assert (model.num_heads, model.layer_norm_epsilon) == (1, 1e-5)  # 128-wide heads, not timm's usual 64
    images = images_for(reference)
    assert_close(model(images), timm_reference.run_torch(reference, images))
    exported = converters.from_keras(model_weights(model), "timm")  # AIMv2's names: fc1_g, fc1_x, no biases
    expected = timm_reference.state_dict_numpy(reference)
    assert sorted(exported) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(exported[name], value)


def test_constructor_keywords_and_other_layouts(tmp_path):
    architecture = dict(patch_size=(8, 8), hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64)
    model = keras_vit.VisionTransformer(**architecture, input_shape=(24, 24, 3), classes=5)
    images = np.random.default_rng(1).uniform(0, 255, (2, 24, 24, 3)).astype("float32")
    for name, format in (("vit.npz", "official"), ("vit.safetensors", "timm"), ("hf", "hf")):
        # Written without `get_config`, whose first call imports TensorFlow.
        path = write_weights(model_weights(model), tmp_path / name, format, dict(architecture, embedding_grid=(3, 3)))
        built = build_from_checkpoint(path, num_heads=2, classifier_activation="softmax", mlp_activation="gelu")
        assert built.image_shape == (24, 24, 3)
        assert_close(built(images), to_numpy(model(images)))
    backbone = build_from_checkpoint(path, include_top=False)  # the heads from the folder's config.json
    assert not backbone.include_top and backbone.num_heads == 2


def test_sources_it_refuses(tmp_path):
    with pytest.raises(ValueError, match="architecture"):
        build_from_checkpoint("augreg_in21k_ft_in1k")  # a tag needs its variant
    with pytest.raises(ValueError):
        build_from_checkpoint(tmp_path / "missing.safetensors")
    (tmp_path / "model.pth").write_bytes(b"\x80\x04pickle")
    with pytest.raises(CheckpointError, match="pickle"):
        build_from_checkpoint(tmp_path / "model.pth")


def test_hub_handle_and_registry_tag(monkeypatch, tmp_path):
    reference = saved("vit_base_patch16_224", tmp_path, img_size=224)  # the registry's files are at 224
    images = images_for(reference)
    expected = timm_reference.run_torch(reference, images)
    requested = pretrained_helpers.fake_hub(monkeypatch, lambda repo, filename: str(tmp_path / filename))
    from_hub = build_from_checkpoint("hf://timm/vit", include_preprocessing=False)
    assert {("timm/vit", "config.json"), ("timm/vit", "preprocessor_config.json")} <= set(requested)
    assert_close(from_hub(images), expected)
    variant = pretrained_helpers.register_variant(
        monkeypatch, "Ti/16", hidden_dim=128, num_layers=1, mlp_dim=512, patch_size=16
    )
    tagged = build_from_checkpoint(
        "augreg_in21k_ft_in1k", variant, include_preprocessing=False, classifier_activation=None
    )
    assert_close(tagged(images), expected)


@pytest.mark.skipif(
    BACKEND != "jax", reason="the loader is NumPy and the commands run per backend in test_cli: one run"
)
def test_the_commands_take_a_family_checkpoint(tmp_path, capsys):
    import keras_vit_cli as cli

    names = ("vit_small_patch14_reg4_dinov2", "vit_base_patch16_siglip_224", "vit_base_patch16_clip_quickgelu_224")
    dinov2, siglip, clip = (str(tmp_path / name) for name in names)
    for name in names:
        saved(name, tmp_path / name)
    for model in (dinov2, clip):
        assert cli.main(["evaluate", model, "--shots", "1", "--seeds", "1", "--out", model + "_evaluate"]) == 0
        printed = capsys.readouterr().out
        assert "1-shot linear" in printed and "head top-1" not in printed  # a backbone: no head to report
    for model in (siglip, clip):
        argv = ["finetune", "--model", model, "--lora", "4", "--image-size", "32", "--steps", "2", "--epochs", "1"]
        assert cli.main([*argv, "--out", model + "_finetune"]) == 0
        metrics = json.loads(open(model + "_finetune/metrics.json").read())
        assert metrics["lora"] == 4 and 0 < metrics["trainable_parameters"] < metrics["parameters"]
    assert cli.main(["inspect", "--model", siglip, "--dpi", "20", "--out", str(tmp_path / "inspect")]) == 0
    assert cli.main(["inspect", "--model", siglip, "--weights", "imagenet", "--out", str(tmp_path / "x")]) == 2
    assert "--weights" in capsys.readouterr().err
