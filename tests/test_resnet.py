"""The hybrid ViT's ResNet layers through the shared contract helper, plus their behaviour."""

import keras
import numpy as np
import pytest

from keras_vit.layers import resnet
from tests.helpers import run_layer_test, to_numpy

WIDTH = 32  # the smallest width GroupNorm(32) allows


def test_bottleneck_unit_identity_shortcut():
    unit = resnet.BottleneckUnit(filters=WIDTH)
    unit.build((1, 4, 4, 4 * WIDTH))
    assert unit.projection is None and len(unit.trainable_weights) == 3 + 3 * 2
    # gn3 starts at zero scale (official init): a fresh unit is relu(its input).
    inputs = np.random.default_rng(0).normal(size=(1, 4, 4, 4 * WIDTH)).astype("float32")
    np.testing.assert_allclose(to_numpy(unit(inputs)), np.maximum(inputs, 0), atol=1e-6)


def test_hybrid_patch_embedding_contract(tmp_path):
    # Root (stride 4) + one unit (4 * 32 channels), 2x2 patches: 32x16 images -> a 4x2 grid.
    unit = 32 * 32 + 9 * 32 * 32 + 32 * 128 + 32 * 128 + 2 * (32 + 32 + 128 + 128)
    run_layer_test(
        resnet.HybridPatchEmbedding,
        dict(hidden_dim=16, patch_size=2, stage_depths=(1,), width=WIDTH),
        input_shape=(2, 32, 16, 3),
        expected_output_shape=(2, 4, 2, 16),
        expected_num_trainable_weights=3 + 12 + 2,
        expected_num_params=7 * 7 * 3 * WIDTH + 2 * WIDTH + unit + 2 * 2 * 4 * WIDTH * 16 + 16,
        workdir=tmp_path,
    )


@pytest.mark.parametrize(
    "stage_depths, stride, channels",
    [((), 4, 64), ((3, 4, 9), 16, 1024), ((2, 2, 2, 2), 32, 2048), ((3, 4, 6, 3), 32, 2048)],
)
def test_published_layouts(stage_depths, stride, channels):
    backbone = resnet.ResNetBackbone(stage_depths)
    assert resnet.output_stride(stage_depths) == stride
    assert backbone.output_channels == channels
    assert backbone.compute_output_shape((None, 224, 224, 3)) == (None, 224 // stride, 224 // stride, channels)


def test_standardization_makes_the_kernel_scale_free():
    # Weight standardisation: scaling or shifting a kernel per output channel changes nothing.
    layer = resnet.StandardizedConv2D(filters=4, kernel_size=3)
    images = np.random.default_rng(0).normal(size=(1, 6, 6, 2)).astype("float32")
    layer.build(images.shape)
    before = to_numpy(layer(images))
    kernel = to_numpy(layer.kernel)
    layer.kernel.assign(kernel * np.array([2.0, 0.5, 3.0, 1.0], "float32") + 0.25)
    np.testing.assert_allclose(to_numpy(layer(images)), before, atol=1e-4)
    standardized = to_numpy(layer.standardized_kernel())
    np.testing.assert_allclose(standardized.mean(axis=(0, 1, 2)), 0, atol=1e-6)
    np.testing.assert_allclose(standardized.std(axis=(0, 1, 2)), 1, atol=1e-4)


@pytest.mark.parametrize("size", [(225, 250), (224, 31)])
def test_grid_of_sizes_no_stride_divides(size):
    # "Same" padding leaves ceil(n / stride) rows, padded to whole patches: a grid of ceil(n / (stride * patch)).
    images = np.zeros((1, *size, 3), "float32")
    expected = {
        (): (1, *(-(-n // 4) for n in size), WIDTH),
        (1, 1): (1, *(-(-n // 8) for n in size), 8 * WIDTH),
    }
    for stage_depths, shape in expected.items():
        backbone = resnet.ResNetBackbone(stage_depths, width=WIDTH)
        assert backbone.compute_output_shape(images.shape) == shape
        assert tuple(keras.ops.shape(backbone(images))) == shape
    embedding = resnet.HybridPatchEmbedding(hidden_dim=8, patch_size=8, stage_depths=(), width=WIDTH)
    grid = tuple(-(-n // 32) for n in size)
    assert embedding.compute_output_shape(images.shape) == (1, *grid, 8)
    assert tuple(keras.ops.shape(embedding(images))) == (1, *grid, 8)
    assert tuple(embedding(keras.Input((None, None, 3))).shape) == (None, None, None, 8)
