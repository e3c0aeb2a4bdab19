"""scale_pixels ([0, 255] -> [-1, 1]), the models' pixel mean and std, decode_predictions and load_image."""

import hashlib
import importlib.resources

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.models import preprocessing
from keras_vit.models.preprocessing import decode_predictions, scale_pixels

# The class index shipped in the package (keras_vit/resources/README.md), and the MD5 keras.applications checks its
# downloaded copy against (`file_hash` in imagenet_utils.py).
CLASS_INDEX_SHA256 = "a1e7a966a1f601d39e4b43e119b3e7dd4a2ad3ea08cf69847cbaf021013767bc"
KERAS_CLASS_INDEX_MD5 = "c2c37ea517e94d9795004a39431a14cb"


def _class_index():
    return importlib.resources.files("keras_vit").joinpath("resources", "imagenet_class_index.json").read_bytes()


def test_scale_pixels_on_numpy_is_x_over_127_5_minus_one():
    np.testing.assert_allclose(scale_pixels([0.0, 63.75, 127.5, 191.25, 255.0]), [-1, -0.5, 0, 0.5, 1], atol=1e-6)
    images = np.random.default_rng(0).integers(0, 256, size=(2, 8, 8, 3)).astype("uint8")
    original = images.copy()
    for data_format in (None, "channels_last", "channels_first"):
        out = scale_pixels(images, data_format)
        assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == images.shape
        np.testing.assert_allclose(out, images / 127.5 - 1.0, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(images, original)  # never modified in place
    with pytest.raises(ValueError, match="channels_middle"):
        scale_pixels(images, data_format="channels_middle")


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16", "float32"])
def test_scale_pixels_on_backend_tensors_gives_floatx(dtype):
    pixels = np.array([[0, 51, 127, 204, 255]], dtype=dtype)
    out = scale_pixels(keras.ops.convert_to_tensor(pixels))
    assert keras.ops.is_tensor(out) and keras.backend.standardize_dtype(out.dtype) == keras.config.floatx()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out), pixels.astype("float64") / 127.5 - 1, atol=1e-6)


def test_scale_pixels_symbolic_and_mixed_precision():
    x = np.random.uniform(0, 255, (2, 10, 10, 3)).astype("float32")
    inputs = keras.Input(shape=x.shape[1:])
    model = keras.Model(inputs, scale_pixels(inputs))
    np.testing.assert_allclose(model.predict(x, verbose=0), x / 127.5 - 1, atol=1e-5)
    keras.config.set_dtype_policy("mixed_float16")
    assert scale_pixels(keras.Input(shape=(20, 20, 3))).shape == (None, 20, 20, 3)


def test_preprocessing_inside_tf_data_on_every_backend():
    tf = pytest.importorskip("tensorflow")
    import keras_vit

    x = np.random.uniform(0, 255, (4, 8, 8, 3)).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices(x).batch(2)
    scaled = np.concatenate([np.asarray(batch) for batch in dataset.map(scale_pixels)])
    np.testing.assert_allclose(scaled, x / 127.5 - 1, atol=1e-5)
    passed = np.concatenate([np.asarray(batch) for batch in dataset.map(keras_vit.preprocess_input)])
    np.testing.assert_array_equal(passed, x)
    preds = np.zeros((1, 1000), "float32")
    preds[0, 3] = 1.0
    for tensor in (preds, keras.ops.convert_to_tensor(preds), tf.constant(preds)):
        assert decode_predictions(tensor, top=1) == [[("n01491361", "tiger_shark", 1.0)]]


def test_shipped_class_index_is_the_keras_one():
    data = _class_index()
    assert hashlib.sha256(data).hexdigest() == CLASS_INDEX_SHA256
    assert hashlib.md5(data).hexdigest() == KERAS_CLASS_INDEX_MD5


def test_decode_predictions_orders_and_labels_the_top_k():
    preds = np.zeros((2, 1000), dtype="float32")
    preds[0, [1, 999, 207, 0]] = [0.1, 0.4, 0.3, 0.2]
    preds[1, 281] = 1.0
    assert decode_predictions(preds, top=3) == [
        [
            ("n15075141", "toilet_tissue", pytest.approx(0.4)),
            ("n02099601", "golden_retriever", pytest.approx(0.3)),
            ("n01440764", "tench", pytest.approx(0.2)),
        ],
        [("n02123045", "tabby", 1.0), ("n01440764", "tench", 0.0), ("n01443537", "goldfish", 0.0)],  # ties in order
    ]
    everything = decode_predictions(np.linspace(0, 1, 1000, dtype="float32")[None], top=1000)[0]
    assert len({wnid for wnid, _, _ in everything}) == 1000


@pytest.mark.parametrize(
    "shape, top, named",
    [((1000,), 5, "(1000,)"), ((2, 1001), 5, "(2, 1001)"), ((1, 1, 1000), 5, "(1, 1, 1000)")]
    + [((1, 1000), top, f"top={top!r}") for top in (0, 1001, 2.5, True)],
)
def test_decode_predictions_rejects_bad_shapes_and_top(shape, top, named):
    with pytest.raises(ValueError) as caught:
        decode_predictions(np.zeros(shape, dtype="float32"), top=top)
    assert named in str(caught.value)


@pytest.mark.parametrize("content", [b"", b"plain text, not pixels\n"], ids=["empty", "text"])
def test_load_image_refuses_a_file_that_is_not_an_image_naming_it(tmp_path, content):
    path = tmp_path / "photo.jpg"
    path.write_bytes(content)
    with pytest.raises(ValueError) as caught:
        preprocessing.load_image(str(path), (8, 8))
    assert repr(str(path)) in str(caught.value) and "BytesIO" not in str(caught.value)
    with pytest.raises(FileNotFoundError):
        preprocessing.load_image(str(tmp_path / "missing.jpg"), (8, 8))


def test_load_image_reads_a_real_image(tmp_path):
    from PIL import Image

    path = tmp_path / "red.png"
    Image.new("RGB", (20, 10), (255, 0, 0)).save(path)
    pixels = preprocessing.load_image(str(path), (4, 6))
    assert pixels.shape == (4, 6, 3) and pixels.dtype == np.uint8 and (pixels == [255, 0, 0]).all()


@pytest.mark.parametrize(
    "mean, std", [(0.5, 0.5), ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))], ids=["paper", "imagenet"]
)
def test_the_models_scaling_follows_pixel_mean_and_std(mean, std):
    assert preprocessing.scale_and_offset() == (1 / 127.5, -1.0)  # the paper's scaling, exactly
    model = keras_vit.VisionTransformer(8, 16, 1, 2, 32, include_top=False, pixel_mean=mean, pixel_std=std)
    plain = keras_vit.VisionTransformer.from_config({**model.get_config(), "include_preprocessing": False})
    plain.set_weights(model.get_weights())
    pixels = np.random.default_rng(0).uniform(0, 255, (2, 16, 16, 3)).astype("float32")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(model(pixels)),
        keras.ops.convert_to_numpy(plain((pixels / 255 - np.array(mean)) / np.array(std))),
        atol=1e-5,
    )
    with pytest.raises(ValueError, match="pixel_std"):
        keras_vit.VisionTransformer(8, 16, 1, 2, 32, pixel_std=(0.5, 0.0, 0.5))
