"""NaFlex input: SigLIP 2's grid rule (transformers' exactly), the layer against transformers' processor on every
backend, and its tf.data twin."""

import itertools

import keras
import numpy as np
import pytest

from keras_vit import NaFlexPatches
from keras_vit.utils import patches
from tests.helpers import BACKEND, assert_config_round_trip, to_numpy

tf = pytest.importorskip("tensorflow")
siglip2 = pytest.importorskip("transformers.models.siglip2.image_processing_pil_siglip2")
data = pytest.importorskip("keras_vit.training.data")

# At patch 4 and 24 patches: upsampled, downsampled, extreme aspect ratios, and 16 x 24, which needs no resize.
SIZES = ((12, 20), (30, 50), (7, 40), (40, 7), (1, 50), (50, 1), (16, 24))


def random_images(sizes, channels=3):
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, size + (channels,), dtype="uint8") for size in sizes]


@pytest.mark.skipif(BACKEND != "tensorflow", reason="plain Python and tf.data: one run is enough")
def test_grid_is_transformers_rule_in_python_and_in_a_graph():
    sides = (1, 2, 7, 16, 33, 224, 500, 1000, 4000, 123457, 1000003)  # the last two: the bisection's last steps count
    heights, widths = (np.array(side, "float64") for side in zip(*itertools.product(sides, sides)))
    sizes = [(int(height), int(width)) for height, width in zip(heights, widths)]
    for patch, max_num_patches in itertools.product((1, 4, 14, 16), (1, 3, 64, 256, 1024)):
        expected = [siglip2.get_image_size_for_max_num_patches(*size, patch, max_num_patches) for size in sizes]
        python = [patches.naflex_grid(size, patch, max_num_patches) for size in sizes]
        assert [(rows * patch, cols * patch) for rows, cols in python] == expected
        # The tf.data path: float64 tensors, here all the sizes at once.
        rows, cols = patches.naflex_grid((heights, widths), patch, max_num_patches, ceil=tf.math.ceil, where=tf.where)
        assert list(zip(rows.numpy() * patch, cols.numpy() * patch)) == expected


def test_layer_matches_transformers_processor():
    processor = siglip2.Siglip2ImageProcessorPil(patch_size=4, max_num_patches=24, do_rescale=False, do_normalize=False)
    layer = NaFlexPatches(4, max_num_patches=24)
    for image in random_images(SIZES):
        expected = processor(images=[image], input_data_format="channels_last", return_tensors="np")
        got = to_numpy(layer(image))
        np.testing.assert_array_equal(got["spatial_shapes"], expected["spatial_shapes"])
        np.testing.assert_array_equal(got["mask"], expected["pixel_attention_mask"].astype(bool))
        difference = np.abs(got["patches"] - expected["pixel_values"])
        if image.shape[:2] == (16, 24):
            assert difference.max() == 0
        else:
            # PIL's bilinear rounds to uint8; the backends' antialiased bilinear agrees within that rounding.
            assert difference.mean() < 0.4 and difference.max() < 1.5, (image.shape, difference.max())
        twin = data.naflex_patches(image, 4, 24)  # the tf.data twin, batched in tests/test_data.py
        for name, value in got.items():  # the same ops on TensorFlow, float32 rounding (of 255) elsewhere
            np.testing.assert_allclose(value[0], twin[name].numpy(), atol=0 if BACKEND == "tensorflow" else 5e-3)


def test_layer_in_a_compiled_model_keeps_static_shapes_and_its_config():
    layer = NaFlexPatches((8, 4), max_num_patches=9, name="naflex")
    revived = assert_config_round_trip(layer)
    assert (revived.patch_size, revived.max_num_patches) == ((8, 4), 9)
    assert keras.saving.serialize_keras_object(layer)["registered_name"] == "keras_vit>NaFlexPatches"
    inputs = keras.Input((64, 32, 4))  # any channel count
    model = keras.Model(inputs, layer(inputs))
    shapes = dict(patches=(None, 9, 128), spatial_shapes=(None, 2), mask=(None, 9))
    assert {name: tuple(output.shape) for name, output in model.output.items()} == shapes
    outputs = model.predict(random_images(((64, 32),) * 2, channels=4)[0][None].repeat(2, 0), verbose=0)
    assert outputs["patches"].shape == (2, 9, 128) and outputs["spatial_shapes"].tolist() == [[3, 3]] * 2


@pytest.mark.parametrize(
    "call",
    [
        lambda: NaFlexPatches(16, max_num_patches=0),
        lambda: NaFlexPatches(0, max_num_patches=4),
        lambda: NaFlexPatches(16, 4)(np.zeros((8, 8))),
        lambda: NaFlexPatches(16, 4)(np.zeros((0, 8, 3))),
        lambda: NaFlexPatches(16, 4)(keras.Input((None, 8, 3))),
        lambda: data.naflex_patches(np.zeros((1, 8, 8, 3)), 16, 4),
        lambda: data.naflex_patches(np.zeros((8, 0, 3)), 16, 4),
        lambda: data.naflex_patches(np.zeros((8, 8, 3)), 16, 0),
    ],
)
def test_bad_input_is_one_line(call):
    with pytest.raises(ValueError) as error:
        call()
    assert "\n" not in str(error.value) and "Received" in str(error.value)
