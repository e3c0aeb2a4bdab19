"""The keras.applications contract (Keras 3.15's `applications_test.py`, `imagenet_utils_test.py`), on tiny rows
of the variant table (same patch size, 16 wide, one block)."""

import inspect

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers.resampling import resample_position_embedding
from keras_vit.models.applications import CONSTRUCTORS
from keras_vit.models.preprocessing import scale_pixels
from keras_vit.models.variants import VARIANTS
from keras_vit.pretrained import registry
from tests.helpers import BACKEND, randomize_weights, run_model_saving_test, run_precision_test, to_numpy

TINY = dict(hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32)
NAMES = ["ViTTi16", "ViTH14", "ViTRTi16"]


@pytest.fixture
def tiny_variants(monkeypatch):
    for variant, row in list(VARIANTS.items()):
        monkeypatch.setitem(VARIANTS, variant, dict(row, **TINY))


@pytest.fixture(params=["channels_last", "channels_first"])
def data_format(request):
    previous = keras.config.image_data_format()
    keras.config.set_image_data_format(request.param)
    yield request.param
    keras.config.set_image_data_format(previous)


def _pixels(shape, seed=0):
    return np.random.default_rng(seed).uniform(0, 255, shape).astype("float32")


def test_every_constructor_builds_its_variant(tiny_variants):
    for name, constructor in CONSTRUCTORS.items():
        with keras.StatelessScope(initialize_variables=False):
            model = constructor(include_top=False, pooling="token", input_shape=(32, 32, 3), dropout_rate=0.1)
        config = model.get_config()
        row = VARIANTS[constructor.variant]
        assert config["hidden_dim"] == 16 and config["patch_size"] == (row["patch_size"],) * 2, name
        assert config["resnet_stages"] == row.get("resnet_stages") and config["dropout_rate"] == 0.1, name
        assert model.name == inspect.signature(constructor).parameters["name"].default.replace("-", "_")


@pytest.mark.parametrize("name", NAMES)
def test_application_notop_variable_input_channels_and_custom_input_shape(tiny_variants, data_format, name):
    for channels in (1, 4):
        shape = (channels, None, None) if data_format == "channels_first" else (None, None, channels)
        model = CONSTRUCTORS[name](weights=None, include_top=False, input_shape=shape)
        expected = [None, 16, None, None] if data_format == "channels_first" else [None, None, None, 16]
        assert list(model.outputs[0].shape) == expected
    shape = (3, 123, 123) if data_format == "channels_first" else (123, 123, 3)  # padded to whole patches
    model = CONSTRUCTORS[name](weights=None, include_top=False, input_shape=shape)
    side = -(-123 // model.pixels_per_token[0])
    out = to_numpy(model(np.zeros((1, *shape), "float32")))
    assert out.shape == ((1, 16, side, side) if data_format == "channels_first" else (1, side, side, 16))


@pytest.mark.parametrize("name", NAMES)
def test_application_custom_input_tensor_pooling_and_classifier_activation(tiny_variants, name):
    inputs = keras.Input(shape=(100, 100, 4), name="custom_input")
    # Keras names a user's first Rescaling "rescaling": the model's own scaling must not take that name.
    images = keras.layers.Rescaling(1.0)(inputs)
    model = CONSTRUCTORS[name](weights=None, include_top=False, input_tensor=images)
    assert model.outputs[0].shape[-1] == 16 and model.inputs[0] is inputs
    for pooling in ("max", "avg", "gap", "token"):
        model = CONSTRUCTORS[name](weights=None, include_top=False, pooling=pooling)
        assert list(model.outputs[0].shape) == [None, 16]
    model = CONSTRUCTORS[name](weights=None, include_top=True, classifier_activation="softmax")
    assert model.layers[-1].activation.__name__ == "softmax"


def test_application_base_with_local_weights(tiny_variants, tmp_path):
    # Keras's version downloads "imagenet"; here the weights come from a local export and the check is the
    # pipeline: raw pixels -> preprocess_input -> predict -> decode_predictions.
    from keras_vit import pretrained

    source = keras_vit.ViTTi16(input_shape=(32, 32, 3))
    randomize_weights(source)
    pretrained.export_weights(source, str(tmp_path / "hf"), "hf")
    model = keras_vit.ViTTi16(weights=str(tmp_path / "hf"), input_shape=(32, 32, 3))
    pixels = np.round(_pixels((1, 32, 32, 3)))
    preds = model.predict(keras_vit.preprocess_input(pixels), verbose=0)
    np.testing.assert_allclose(preds, to_numpy(source(pixels)), atol=1e-5)
    assert [len(entry) for entry in keras_vit.decode_predictions(preds)[0]] == [3] * 5


def test_preprocess_input_is_the_documented_pass_through():
    x = np.random.uniform(0, 255, (2, 10, 10, 3))
    for value in (x, x.astype("int32"), np.transpose(x, (0, 3, 1, 2))):
        for data_format in (None, "channels_last", "channels_first"):
            assert keras_vit.preprocess_input(value, data_format) is value
    with pytest.raises(ValueError, match="data_format"):
        keras_vit.preprocess_input(x, "channels_middle")


def test_scale_pixels_with_a_checkpoint_mean_and_std_is_the_built_in_scaling(data_format):
    mean, std = registry.IMAGENET_MEAN, registry.IMAGENET_STD
    shape = (3, 16, 16) if data_format == "channels_first" else (16, 16, 3)
    arguments = dict(TINY, patch_size=8, classes=3, input_shape=shape, pixel_mean=mean, pixel_std=std)
    scaling = keras_vit.VisionTransformer(**arguments)
    randomize_weights(scaling)
    bare = keras_vit.VisionTransformer(**arguments, include_preprocessing=False)
    bare.set_weights(scaling.get_weights())
    pixels = _pixels((2, *shape))
    expected = to_numpy(scaling(pixels))
    for images in (pixels, keras.ops.convert_to_tensor(pixels)):
        np.testing.assert_allclose(to_numpy(bare(scale_pixels(images, data_format, mean, std))), expected, atol=1e-5)


def test_default_input_shape_follows_include_top_and_data_format(tiny_variants, data_format):
    expected = {"channels_first": [(3, None, None), (3, 224, 224)], "channels_last": [(None, None, 3), (224, 224, 3)]}
    assert [keras_vit.ViTTi16(include_top=top).input_shape[1:] for top in (False, True)] == expected[data_format]


# --- any resolution, raw pixels, the keras-hub TestCase checks ------------------------------------------------


def _tiny(**kwargs):
    return keras_vit.VisionTransformer(**{"patch_size": 8, **TINY, "classes": 5, **kwargs})


@pytest.mark.parametrize(
    "size, hybrid",
    [((40, 56), {}), ((21, 30), {}), ((37, 45), dict(patch_size=1, resnet_stages=(1, 1), resnet_width=32))],
    ids=["plain", "plain_padded", "hybrid"],
)
def test_dynamic_model_equals_a_model_built_at_that_size(size, hybrid):
    # Both take 8 px per token: the hybrid's ResNet has output stride 8.
    dynamic = _tiny(input_shape=(None, None, 3), **hybrid)
    randomize_weights(dynamic)
    built = _tiny(input_shape=(*size, 3), **hybrid)
    grid = tuple(-(-side // 8) for side in size)
    for target, variable in zip(built.weights, dynamic.weights):
        value = to_numpy(variable)
        if variable.path == "position_embedding/embedding":
            value = resample_position_embedding(value, (28, 28), grid)
        target.assign(value)
    pixels = _pixels((2, *size, 3), seed=1)
    expected = to_numpy(built(pixels))
    np.testing.assert_allclose(to_numpy(dynamic(pixels)), expected, atol=1e-5)
    if BACKEND != "torch":  # torch.compile takes minutes per graph on a CPU
        dynamic.compile(jit_compile=True)
        np.testing.assert_allclose(dynamic.predict(pixels, verbose=0), expected, atol=1e-5)


def test_dynamic_model_precision_and_saving(tmp_path):
    run_precision_test(lambda: _tiny(input_shape=(None, None, 3)), np.full((1, 20, 28, 3), 128.0, "float32"))
    model = _tiny(include_top=False, input_shape=(None, None, 3))
    randomize_weights(model)
    run_model_saving_test(model, _pixels((1, 20, 28, 3), seed=5), tmp_path)
