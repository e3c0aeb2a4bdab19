"""The hybrid ViTs (ResNet features + ViT) against timm's with random weights: timm's layout, and the official
`.npz` layout read by timm's own loader; logits within 1e-4, conversions bit-identical."""

import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import models
from keras_vit.pretrained import converters, io, loader, registry
from tests import pretrained_helpers as ph
from tests import timm_reference
from tests.helpers import BACKEND, run_model_test, to_numpy

# A hybrid small enough for every backend: two stages (output stride 8), 32 px images.
TINY = dict(resnet_stages=(1, 1), resnet_width=32, patch_size=1, hidden_dim=64, num_layers=2, num_heads=4, mlp_dim=128)
TINY_ROOT_ONLY = dict(TINY, resnet_stages=(), patch_size=2)
TOLERANCE = 1e-4


def _timm_tiny(config, image_size, classes, **kwargs):
    sizes = [config[key] for key in ("resnet_stages", "resnet_width", "patch_size", "hidden_dim", "num_layers")]
    sizes += [config["num_heads"], config["mlp_dim"]]
    return timm_reference.timm_hybrid_vit(*sizes, image_size, classes, **kwargs)


def _timm_weights(reference):
    weights, layout = converters.to_keras(timm_reference.state_dict_numpy(reference), "timm")
    assert "ResNet" in layout
    return weights


def _load(model, weights):
    assert {variable.path for variable in model.weights} == set(weights)
    for variable in model.weights:
        variable.assign(weights[variable.path])
    return model


def _images(size, batch=2):
    size = (size, size) if isinstance(size, int) else size
    return np.random.default_rng(3).uniform(-1, 1, (batch, *size, 3)).astype("float32")


def test_tiny_hybrid_contract(tmp_path):
    # One ResNet stage has every layer the contract checks; the two-stage layout is checked against timm below.
    run_model_test(
        lambda: models.VisionTransformer(**dict(TINY, resnet_stages=(1,)), input_shape=(32, 32, 3), classes=5),
        input_shape=(2, 32, 32, 3),
        expected_output_shape=(2, 5),
        workdir=tmp_path,
        fresh_process=BACKEND == "tensorflow",  # one fresh-process revival is enough
        # torch.compile of the ResNet's padding backward fails in inductor on CPU; test_models covers torch's jit.
        jit=BACKEND != "torch",
    )


@pytest.mark.parametrize("config, size", [(TINY, (37, 45)), (TINY_ROOT_ONLY, (35, 45))], ids=["stages", "root_only"])
def test_tiny_hybrid_matches_timm_at_any_size_and_in_both_layouts(config, size, tmp_path):
    # Sides no stride divides: every "same"-padded ResNet layer pads more at the bottom / right (TensorFlow's rule,
    # timm's StdConv2dSame / MaxPool2dSame); the root-only hybrid's 9x12 feature map is zero-padded to whole 2x2
    # patches (timm's dynamic_img_pad); the stored 4x4 position embedding is resampled with timm's bicubic.
    reference = _timm_tiny(config, 32, 7, dynamic_img_size=True, dynamic_img_pad=True)
    reference = timm_reference.randomize_torch(reference, scale=0.3)
    model = models.VisionTransformer(
        **config,
        input_shape=(None, None, 3),
        embedding_grid=(4, 4),
        resample_method="bicubic",
        resample_antialias=True,
        classes=7,
        classifier_activation=None,
        include_preprocessing=False,
    )
    _load(model, _timm_weights(reference))
    for images in (_images(size), _images(32)):
        expected = timm_reference.run_torch(reference, images)
        np.testing.assert_allclose(to_numpy(model(images)), expected, atol=TOLERANCE, rtol=0)
        assert np.abs(expected).max() > 0.5  # a real signal, not near-zero logits

    # keras_vit -> official .npz, read by timm's own loader of the official files.
    npz = converters.from_keras(ph.keras_weights(model), "official", num_heads=config["num_heads"])
    assert "conv_root/kernel" in npz and "embedding/kernel" in npz
    path = os.path.join(tmp_path, "hybrid.npz")
    np.savez(path, **npz)
    from_npz = _timm_tiny(config, 32, 7)
    from_npz.load_pretrained(path)
    np.testing.assert_allclose(timm_reference.run_torch(from_npz, images), expected, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("format", ["official", "timm"])
def test_hybrid_round_trips_are_bit_identical(format):
    model = models.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=3)
    rng = np.random.default_rng(0)
    ours = {path: rng.normal(size=value.shape).astype("float32") for path, value in ph.keras_weights(model).items()}
    written = converters.from_keras(ours, format, num_heads=TINY["num_heads"])
    back, layout = converters.to_keras(written, format)
    assert "ResNet" in layout and set(back) == set(ours)
    for path, value in ours.items():
        np.testing.assert_array_equal(back[path], value, err_msg=path)
    arch = loader.architecture_of_weights(back, num_heads=TINY["num_heads"])
    assert arch["resnet_stages"] == (1, 1) and loader.pixels_per_token_of_weights(back) == (8, 8)
    # A plain ViT's files keep their plain layout.
    plain = models.VisionTransformer(**dict(TINY, resnet_stages=None, patch_size=8), input_shape=(16, 16, 3))
    written = converters.from_keras(ph.keras_weights(plain), format, num_heads=TINY["num_heads"])
    weights, layout = converters.to_keras(written, format)
    assert "ResNet" not in layout and loader.embedding_stages(weights) is None


def test_r_ti16_loads_timm_safetensors_and_matches_timm(tmp_path):
    # The real R+Ti/16 (6.3 M parameters) through its constructor and the weights loader: the root
    # only, 8x8 patches of its stride-4 output; timm's layout written as the Hub's safetensors.
    reference = timm_reference.randomize_torch(timm_reference.timm_model("vit_tiny_r_s16_p8_224"), scale=0.05)
    path = os.path.join(tmp_path, "model.safetensors")
    io.write_safetensors(path, timm_reference.state_dict_numpy(reference))
    model = keras_vit.ViTRTi16(weights=path, classifier_activation=None, include_preprocessing=False)
    assert model.count_params() == 6_337_704
    images = _images(224, batch=1)
    expected = timm_reference.run_torch(reference, images)
    np.testing.assert_allclose(to_numpy(model(images)), expected, atol=TOLERANCE, rtol=0)
    assert np.abs(expected).max() > 0.1  # a real signal, not near-zero logits
    # At another resolution (250 px, a multiple of no stride: ceil(250 / 32) = 8) the 7x7 position
    # embedding is resampled to 8x8 at load, and the model takes 250 px images.
    bigger = keras_vit.ViTRTi16(weights=path, input_shape=(250, 250, 3), include_preprocessing=False)
    assert tuple(bigger.get_layer("position_embedding").embedding.shape) == (1, 65, 192)
    assert tuple(keras.ops.shape(bigger(_images(250, batch=1)))) == (1, 1000)
    # An open size keeps the checkpoint's 7x7 grid and resamples at call time.
    features = keras_vit.ViTRTi16(weights=path, include_top=False, include_preprocessing=False)
    assert tuple(features.get_layer("position_embedding").embedding.shape) == (1, 50, 192)
    assert tuple(keras.ops.shape(features(_images(250, batch=1)))) == (1, 8, 8, 192)


def test_empty_batch_gives_an_empty_feature_map():
    # No reshape infers a -1 from zero elements (JAX and torch cannot): 45x37 -> a 6x5 grid of 2x2 patches
    # on the root's 12x10 map, for no image.
    model = models.VisionTransformer(**TINY_ROOT_ONLY, include_top=False)
    assert tuple(keras.ops.shape(model(np.zeros((0, 45, 37, 3), "float32")))) == (0, 6, 5, TINY["hidden_dim"])


@pytest.mark.skipif(BACKEND != "tensorflow", reason="a count, backend-independent: the tensorflow run")
@pytest.mark.parametrize("config, size", [(TINY, 45), (TINY_ROOT_ONLY, 35)], ids=["stages", "root_only_padded"])
def test_forward_flops_equal_torch_flop_counter_on_timm(config, size):
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from keras_vit.models.flops import forward_flops

    reference = _timm_tiny(config, 32, 7, dynamic_img_size=True, dynamic_img_pad=True)
    for module in reference.modules():
        if hasattr(module, "fused_attn"):
            module.fused_attn = False  # FlopCounterMode does not count CPU's fused attention kernel
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        reference(torch.zeros(1, 3, size, size))
    assert forward_flops(config, size, classes=7) == counter.get_total_flops() > 0


@pytest.mark.skipif(BACKEND != "tensorflow", reason="counts and tables, backend-independent: the tensorflow run")
def test_catalogued_hybrids_flops_and_checkpoints():
    from keras_vit.models.flops import forward_flops

    # torch's FlopCounterMode on timm's vit_tiny_r_s16_p8_224 and vit_base_r50_s16_224 (docs/hybrid.md).
    assert forward_flops(keras_vit.models.variants.VARIANTS["R+Ti/16"]) == 867_363_840
    assert forward_flops(keras_vit.models.variants.VARIANTS["R50+B/16"]) == 43_070_717_952
    expected = {
        "R+Ti/16": {("augreg_in21k_ft_in1k", 224), ("augreg_in21k_ft_in1k", 384), ("augreg_in21k", 224)},
        "R26+S/32": {("augreg_in21k_ft_in1k", 224), ("augreg_in21k_ft_in1k", 384), ("augreg_in21k", 224)},
        "R26+B/32": set(),  # never published
        "R50+B/16": {("orig_in21k_ft_in1k", 384), ("orig_in21k", 224)},
        "R50+L/32": {("augreg_in21k_ft_in1k", 224), ("augreg_in21k_ft_in1k", 384), ("augreg_in21k", 224)},
    }
    for variant, rows in expected.items():
        infos = registry.checkpoints(variant)
        assert {(info.tag, info.resolution, info.format) for info in infos} == {row + ("timm",) for row in rows}


def test_inspection_works_on_a_hybrid(tmp_path):
    from keras_vit.inspection import analysis, report

    model = models.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=3)
    images = _images(32)
    attention = analysis.attention_maps(model, images)
    assert len(attention) == TINY["num_layers"] and attention[0].shape == (2, 4, 17, 17)
    assert analysis.attention_rollout(model, images).shape == (2, 4, 4)
    assert analysis.mean_attention_distance(model, images).shape == (TINY["num_layers"], TINY["num_heads"])
    assert analysis.position_embedding_similarity(model).shape == (4, 4, 4, 4)
    with pytest.raises(ValueError, match="no linear patch filters"):
        analysis.embedding_filters(model)
    pixels = np.random.default_rng(0).integers(0, 256, (32, 32, 3)).astype("uint8")
    paths = report.write_report(model, pixels, tmp_path)
    assert all(os.path.getsize(path) > 0 for path in paths.values())
