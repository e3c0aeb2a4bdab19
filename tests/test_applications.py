"""The keras.applications contract, ported from Keras 3.15's own tests to every keras_vit constructor.

`keras/src/applications/applications_test.py` and `imagenet_utils_test.py`
state what a `keras.applications` model does; each test below names the Keras
test it ports. The constructors run on a tiny row of the variant table (same
patch size, 16 wide, one block): the code path is the real one (explicit
function -> shared builder -> `VARIANTS` row), and the full-size models are
pinned by `tests/test_models.py`. What cannot apply to a ViT is listed in the
README ("keras.applications contract").
"""

import inspect

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers.resampling import resample_position_embedding
from keras_vit.models import preprocessing
from keras_vit.models.applications import CONSTRUCTORS
from keras_vit.models.variants import VARIANTS
from tests.helpers import BACKEND, run_model_saving_test, run_precision_test, to_numpy

TINY = dict(hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32)
# The plain ViTs and the smallest hybrid (its ResNet root alone), which stands for the family: the bigger
# hybrids' ResNets take the same code path and would only add CI time.
NAMES = sorted(
    name for name, f in CONSTRUCTORS.items() if "resnet_stages" not in VARIANTS[f.variant] or name == "ViTRTi16"
)


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


def _randomize(model, seed=0):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.2, size=tuple(variable.shape)).astype("float32"))


# --- applications_test.py ---------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_application_notop_variable_input_channels(tiny_variants, data_format, name):
    for channels in (1, 4):
        shape = (channels, None, None) if data_format == "channels_first" else (None, None, channels)
        model = CONSTRUCTORS[name](weights=None, include_top=False, input_shape=shape)
        expected = [None, 16, None, None] if data_format == "channels_first" else [None, None, None, 16]
        assert list(model.outputs[0].shape) == expected


@pytest.mark.parametrize("name", NAMES)
def test_application_notop_custom_input_shape(tiny_variants, data_format, name):
    # 123 is a multiple of no published patch size: the images are padded.
    shape = (3, 123, 123) if data_format == "channels_first" else (123, 123, 3)
    model = CONSTRUCTORS[name](weights=None, include_top=False, input_shape=shape)
    axis = 1 if data_format == "channels_first" else -1
    assert model.outputs[0].shape[axis] == 16
    side = -(-123 // model.pixels_per_token[0])
    out = to_numpy(model(np.zeros((1, *shape), "float32")))
    assert out.shape == ((1, 16, side, side) if axis == 1 else (1, side, side, 16))


@pytest.mark.parametrize("name", NAMES)
def test_application_notop_custom_input_tensor(tiny_variants, name):
    inputs = keras.Input(shape=(200, 200, 4), name="custom_input")
    images = keras.layers.Conv2D(3, (2, 2), padding="valid", strides=(2, 2))(inputs)  # 100 x 100
    model = CONSTRUCTORS[name](weights=None, include_top=False, input_tensor=images)
    assert model.outputs[0].shape[-1] == 16
    assert model.inputs[0] is inputs


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("pooling", ["max", "avg", "gap", "token"])
def test_application_pooling(tiny_variants, name, pooling):
    model = CONSTRUCTORS[name](weights=None, include_top=False, pooling=pooling)
    assert list(model.outputs[0].shape) == [None, 16]


@pytest.mark.parametrize("name", NAMES)
def test_application_classifier_activation(tiny_variants, name):
    model = CONSTRUCTORS[name](weights=None, include_top=True, classifier_activation="softmax")
    assert model.layers[-1].activation.__name__ == "softmax"


def test_application_base_with_local_weights(tiny_variants, tmp_path):
    # Keras's version loads weights="imagenet" and expects "African_elephant"; tests never download,
    # so the weights come from a local file and the check is the pipeline: raw pixels ->
    # preprocess_input -> predict -> decode_predictions, then serialize / deserialize.
    from keras_vit import pretrained

    source = keras_vit.ViTTi16(input_shape=(32, 32, 3))
    _randomize(source)
    pretrained.export_weights(source, str(tmp_path / "hf"), "hf")
    model = keras_vit.ViTTi16(weights=str(tmp_path / "hf"), input_shape=(32, 32, 3))
    pixels = np.random.default_rng(0).integers(0, 256, size=(1, 32, 32, 3)).astype("float32")
    preds = model.predict(keras_vit.preprocess_input(pixels), verbose=0)
    np.testing.assert_allclose(preds, to_numpy(source(pixels)), atol=1e-5)
    names = keras_vit.decode_predictions(preds)[0]
    assert len(names) == 5 and all(len(entry) == 3 for entry in names)
    config = keras.saving.serialize_keras_object(model)
    assert len(keras.saving.deserialize_keras_object(config).weights) == len(model.weights)


# --- imagenet_utils_test.py ---------------------------------------------------------------------


def test_preprocess_input_is_the_documented_pass_through():
    x = np.random.uniform(0, 255, (2, 10, 10, 3))
    for value in (x, x.astype("int32"), np.transpose(x, (0, 3, 1, 2))):
        for data_format in (None, "channels_last", "channels_first"):
            assert keras_vit.preprocess_input(value, data_format) is value
    with pytest.raises(ValueError, match="data_format"):
        keras_vit.preprocess_input(x, "channels_middle")


def test_scale_pixels_formats_and_integers():
    for shape, to_first in (((2, 10, 10, 3), (0, 3, 1, 2)), ((10, 10, 3), (2, 0, 1))):
        x = np.random.uniform(0, 255, shape)
        xint = x.astype("int32")
        assert preprocessing.scale_pixels(x).shape == x.shape
        assert preprocessing.scale_pixels(xint).shape == xint.shape
        last = preprocessing.scale_pixels(x, "channels_last")
        first = preprocessing.scale_pixels(np.transpose(x, to_first), "channels_first")
        np.testing.assert_allclose(last, np.transpose(first, np.argsort(to_first)), atol=1e-6)
        assert preprocessing.scale_pixels(xint).max() != xint.max()
        np.testing.assert_allclose(last, x / 127.5 - 1, atol=1e-5)


def test_scale_pixels_symbolic_and_mixed_precision():
    x = np.random.uniform(0, 255, (2, 10, 10, 3)).astype("float32")
    inputs = keras.Input(shape=x.shape[1:])
    model = keras.Model(inputs, preprocessing.scale_pixels(inputs))
    np.testing.assert_allclose(model.predict(x, verbose=0), x / 127.5 - 1, atol=1e-5)
    keras.config.set_dtype_policy("mixed_float16")
    try:
        assert preprocessing.scale_pixels(keras.Input(shape=(20, 20, 3))).shape == (None, 20, 20, 3)
    finally:
        keras.config.set_dtype_policy("float32")


def test_preprocessing_inside_tf_data_on_every_backend():
    tf = pytest.importorskip("tensorflow")
    x = np.random.uniform(0, 255, (4, 8, 8, 3)).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices(x).batch(2)
    scaled = np.concatenate([np.asarray(batch) for batch in dataset.map(preprocessing.scale_pixels)])
    np.testing.assert_allclose(scaled, x / 127.5 - 1, atol=1e-5)
    passed = np.concatenate([np.asarray(batch) for batch in dataset.map(keras_vit.preprocess_input)])
    np.testing.assert_array_equal(passed, x)
    preds = np.zeros((1, 1000), "float32")
    preds[0, 3] = 1.0
    for tensor in (preds, keras.ops.convert_to_tensor(preds), tf.constant(preds)):
        assert keras_vit.decode_predictions(tensor, top=1)[0][0][1] == "tiger_shark"


@pytest.mark.parametrize("input_shape", [(100,), (100, 100, 0), (0, 100, 3), (100, 100, None), (1.5, 100, 3)])
def test_obtain_input_shape_rejects_bad_shapes(input_shape):
    with pytest.raises(ValueError, match="input_shape"):
        keras_vit.ViTTi16(input_shape=input_shape)


def test_default_input_shape_follows_include_top_and_data_format(tiny_variants, data_format):
    open_shape = (3, None, None) if data_format == "channels_first" else (None, None, 3)
    fixed_shape = (3, 224, 224) if data_format == "channels_first" else (224, 224, 3)
    assert keras_vit.ViTTi16(include_top=False).input_shape[1:] == open_shape
    assert keras_vit.ViTTi16().input_shape[1:] == fixed_shape


# --- any resolution, raw pixels, the keras-hub TestCase checks -------------------------------------


def _tiny(**kwargs):
    return keras_vit.VisionTransformer(patch_size=8, **TINY, **{"classes": 5, **kwargs})


@pytest.mark.parametrize("size", [(40, 56), (21, 30), (64, 64)])
def test_dynamic_model_equals_a_model_built_at_that_size(size):
    dynamic = _tiny(input_shape=(None, None, 3))
    _randomize(dynamic)
    built = _tiny(input_shape=(*size, 3))
    grid = tuple(-(-s // 8) for s in size)
    for target, variable in zip(built.weights, dynamic.weights):
        value = to_numpy(variable)
        if variable.path == "position_embedding/embedding":
            value = resample_position_embedding(value, (28, 28), grid)
        target.assign(value)
    pixels = np.random.default_rng(1).uniform(0, 255, (2, *size, 3)).astype("float32")
    expected = to_numpy(built(pixels))
    np.testing.assert_allclose(to_numpy(dynamic(pixels)), expected, atol=1e-5)
    if BACKEND != "torch":  # torch.compile takes minutes per graph on a CPU
        dynamic.compile(jit_compile=True)
        np.testing.assert_allclose(dynamic.predict(pixels, verbose=0), expected, atol=1e-5)


def test_native_size_takes_no_resampling():
    model = _tiny(include_top=False, return_sequence=True, input_shape=(None, None, 3))
    _randomize(model)
    layer = model.get_layer("position_embedding")
    tokens = np.random.default_rng(2).normal(size=(1, 1 + 28 * 28, 16)).astype("float32")
    out = to_numpy(layer(tokens, patch_grid=np.zeros((1, 28, 28, 1), "float32")))
    np.testing.assert_array_equal(out, tokens + to_numpy(layer.embedding))


def test_raw_pixels_are_scaled_exactly_once():
    # include_preprocessing=True on raw pixels == include_preprocessing=False on scale_pixels(raw);
    # scaling twice (or never) would change the outputs.
    with_scaling = _tiny(input_shape=(16, 16, 3))
    _randomize(with_scaling)
    without = _tiny(input_shape=(16, 16, 3), include_preprocessing=False)
    without.set_weights(with_scaling.get_weights())
    pixels = np.random.default_rng(3).integers(0, 256, (2, 16, 16, 3)).astype("float32")
    expected = to_numpy(without(preprocessing.scale_pixels(pixels)))
    np.testing.assert_allclose(to_numpy(with_scaling(pixels)), expected, atol=1e-6)
    assert np.abs(to_numpy(with_scaling(preprocessing.scale_pixels(pixels))) - expected).max() > 1e-3


def test_feature_map_is_the_patch_tokens_on_the_grid():
    sequence = _tiny(include_top=False, return_sequence=True, input_shape=(24, 40, 3))
    _randomize(sequence)
    feature_map = _tiny(include_top=False, input_shape=(24, 40, 3))
    feature_map.set_weights(sequence.get_weights())
    pixels = np.random.default_rng(4).uniform(0, 255, (2, 24, 40, 3)).astype("float32")
    tokens = to_numpy(sequence(pixels))
    np.testing.assert_allclose(to_numpy(feature_map(pixels)), tokens[:, 1:].reshape(2, 3, 5, 16), atol=1e-6)
    pooled = keras.layers.GlobalAveragePooling2D()(feature_map(pixels))
    np.testing.assert_allclose(to_numpy(pooled), tokens[:, 1:].mean(1), atol=1e-5)


def test_dynamic_model_precision(tmp_path):
    run_precision_test(lambda: _tiny(input_shape=(None, None, 3)), np.full((1, 20, 28, 3), 128.0, "float32"))


def test_dynamic_feature_map_model_saving(tmp_path):
    model = _tiny(include_top=False, input_shape=(None, None, 3))
    _randomize(model)
    pixels = np.random.default_rng(5).uniform(0, 255, (1, 20, 28, 3)).astype("float32")
    run_model_saving_test(model, pixels, tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_constructor_docstrings_list_every_argument_and_weights_form(name):
    function = CONSTRUCTORS[name]
    for parameter in inspect.signature(function).parameters:
        assert f"        {parameter}:" in function.__doc__, parameter
    for form in ("`None`", "available_tags", '`"imagenet"`', "`.npz`", "`.safetensors`", "hf://"):
        assert form in function.__doc__, form
