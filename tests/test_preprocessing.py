"""scale_pixels (the public [0, 255] -> [-1, 1] scaling; preprocess_input is the documented pass-through,
tested in test_applications) and decode_predictions, on NumPy and on the current backend's tensors."""

import doctest
import hashlib
import importlib.resources
import json

import keras
import numpy as np
import pytest

import keras_vit.models.preprocessing
from keras_vit.models.preprocessing import decode_predictions, scale_pixels

# The class index shipped in the package; see keras_vit/resources/README.md for its provenance.
CLASS_INDEX_SHA256 = "a1e7a966a1f601d39e4b43e119b3e7dd4a2ad3ea08cf69847cbaf021013767bc"
# The MD5 keras.applications checks its downloaded copy against (`file_hash` in imagenet_utils.py).
KERAS_CLASS_INDEX_MD5 = "c2c37ea517e94d9795004a39431a14cb"


def _class_index_bytes():
    return importlib.resources.files("keras_vit").joinpath("resources", "imagenet_class_index.json").read_bytes()


# --- scale_pixels ---------------------------------------------------------------------------------------------


def test_preprocess_numpy_maps_the_pixel_range_to_minus_one_one():
    pixels = np.array([0.0, 63.75, 127.5, 191.25, 255.0])
    out = scale_pixels(pixels)
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.float32
    # x * (1 / 127.5) - 1 in float32: within one float32 ulp of the exact values.
    np.testing.assert_allclose(out, [-1.0, -0.5, 0.0, 0.5, 1.0], rtol=0, atol=1e-6)


def test_preprocess_numpy_is_x_over_127_5_minus_one_on_every_pixel():
    images = np.random.default_rng(0).integers(0, 256, size=(2, 8, 8, 3)).astype("uint8")
    out = scale_pixels(images)
    assert out.shape == images.shape
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, images.astype(np.float64) / 127.5 - 1.0, rtol=0, atol=1e-6)
    assert out.min() >= -1.0 and out.max() <= 1.0


def test_preprocess_numpy_does_not_modify_its_input():
    images = np.full((1, 2, 2, 3), 255.0, dtype="float32")
    scale_pixels(images)
    np.testing.assert_array_equal(images, 255.0)


def test_preprocess_accepts_lists():
    out = scale_pixels([[0, 255]])
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(out, [[-1.0, 1.0]])


@pytest.mark.parametrize("data_format", [None, "channels_last", "channels_first"])
def test_preprocess_data_format_does_not_change_the_result(data_format):
    images = np.arange(2 * 3 * 4 * 4, dtype="float32").reshape(2, 3, 4, 4)
    np.testing.assert_allclose(scale_pixels(images, data_format=data_format), images / 127.5 - 1.0, rtol=0, atol=1e-6)


def test_preprocess_rejects_an_unknown_data_format():
    with pytest.raises(ValueError, match=r"Received: data_format='channels_middle'"):
        scale_pixels(np.zeros((1, 2, 2, 3)), data_format="channels_middle")


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float32"])
def test_preprocess_backend_tensor(dtype):
    pixels = np.array([[0, 51, 127, 204, 255]], dtype=dtype)
    tensor = keras.ops.convert_to_tensor(pixels)
    out = scale_pixels(tensor)
    assert keras.ops.is_tensor(out)
    # Integer tensors become floatx; floating-point tensors keep their dtype.
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out), pixels / 127.5 - 1.0, rtol=0, atol=1e-6)
    endpoints = scale_pixels(keras.ops.convert_to_tensor(np.array([0.0, 127.5, 255.0], dtype="float32")))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(endpoints), [-1.0, 0.0, 1.0])


def test_preprocess_backend_tensor_gives_floatx():
    # A tensor comes back in keras.config.floatx() (the Rescaling layer's compute dtype), as documented.
    tensor = keras.ops.convert_to_tensor(np.array([0.0, 255.0], dtype="float16"))
    out = scale_pixels(tensor)
    assert keras.backend.standardize_dtype(out.dtype) == keras.config.floatx()
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(out), [-1.0, 1.0])


def test_preprocess_inside_a_functional_model():
    inputs = keras.Input((4, 4, 3))
    model = keras.Model(inputs, scale_pixels(inputs))
    images = np.full((2, 4, 4, 3), 255.0, dtype="float32")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(images)), 1.0)


# --- decode_predictions ---------------------------------------------------------------------------------------


def test_shipped_class_index_is_the_keras_one():
    data = _class_index_bytes()
    assert hashlib.sha256(data).hexdigest() == CLASS_INDEX_SHA256
    assert hashlib.md5(data).hexdigest() == KERAS_CLASS_INDEX_MD5
    index = json.loads(data)
    assert list(index) == [str(i) for i in range(1000)]
    assert index["0"] == ["n01440764", "tench"]
    assert index["999"] == ["n15075141", "toilet_tissue"]
    assert len({wnid for wnid, _ in index.values()}) == 1000


def test_decode_predictions_orders_and_labels_the_top_k():
    preds = np.zeros((2, 1000), dtype="float32")
    preds[0, [1, 999, 207, 0]] = [0.1, 0.4, 0.3, 0.2]
    preds[1, 281] = 1.0
    decoded = decode_predictions(preds, top=3)

    assert decoded == [
        [
            ("n15075141", "toilet_tissue", pytest.approx(0.4)),
            ("n02099601", "golden_retriever", pytest.approx(0.3)),
            ("n01440764", "tench", pytest.approx(0.2)),
        ],
        [("n02123045", "tabby", 1.0), ("n01440764", "tench", 0.0), ("n01443537", "goldfish", 0.0)],
    ]
    for row in decoded:
        for wnid, name, score in row:
            assert isinstance(wnid, str) and isinstance(name, str) and isinstance(score, float)


def test_decode_predictions_defaults_to_top_5_and_matches_argsort():
    preds = np.random.default_rng(1).random((3, 1000)).astype("float32")
    decoded = decode_predictions(preds)
    assert [len(row) for row in decoded] == [5, 5, 5]
    index = json.loads(_class_index_bytes())
    for row, pred in zip(decoded, preds):
        expected = np.argsort(pred)[::-1][:5]
        assert [(wnid, name) for wnid, name, _ in row] == [tuple(index[str(i)]) for i in expected]
        assert [score for _, _, score in row] == [float(pred[i]) for i in expected]


def test_decode_predictions_top_1000_lists_every_class_once():
    decoded = decode_predictions(np.linspace(0, 1, 1000, dtype="float32")[None], top=1000)
    assert len(decoded[0]) == 1000
    assert decoded[0][0][:2] == ("n15075141", "toilet_tissue")
    assert len({wnid for wnid, _, _ in decoded[0]}) == 1000


def test_decode_predictions_accepts_backend_tensors():
    preds = np.zeros((1, 1000), dtype="float32")
    preds[0, 2] = 1.0
    assert decode_predictions(keras.ops.convert_to_tensor(preds), top=1) == [[("n01484850", "great_white_shark", 1.0)]]


@pytest.mark.parametrize("shape", [(1000,), (2, 10), (2, 1001), (1, 1, 1000), (2, 21843)])
def test_decode_predictions_rejects_bad_shapes(shape):
    with pytest.raises(ValueError, match=r"shape \(samples, 1000\)") as info:
        decode_predictions(np.zeros(shape, dtype="float32"))
    assert f"Received: preds.shape={shape}" in str(info.value)


@pytest.mark.parametrize("top", [0, -1, 1001, 2.5, True])
def test_decode_predictions_rejects_bad_top(top):
    with pytest.raises(ValueError, match=r"Received: top="):
        decode_predictions(np.zeros((1, 1000), dtype="float32"), top=top)


def test_class_index_is_read_lazily_and_once():
    keras_vit.models.preprocessing._imagenet_class_index.cache_clear()
    decode_predictions(np.zeros((1, 1000), dtype="float32"))
    decode_predictions(np.zeros((1, 1000), dtype="float32"))
    info = keras_vit.models.preprocessing._imagenet_class_index.cache_info()
    assert (info.misses, info.hits) == (1, 1)


# --- docstrings -----------------------------------------------------------------------------------------------


def test_docstring_examples_run():
    result = doctest.testmod(keras_vit.models.preprocessing, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5
    assert result.failed == 0


# --- load_image -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"plain text, not pixels\n"], ids=["empty", "text"])
def test_load_image_refuses_a_file_that_is_not_an_image_naming_it(tmp_path, content):
    path = tmp_path / "photo.jpg"
    path.write_bytes(content)
    with pytest.raises(ValueError) as caught:
        keras_vit.models.preprocessing.load_image(str(path), (8, 8))
    message = str(caught.value)
    assert repr(str(path)) in message and "BytesIO" not in message
    assert "JPEG, PNG" in message  # what to give instead


def test_load_image_reads_a_real_image(tmp_path):
    from PIL import Image

    path = tmp_path / "red.png"
    Image.new("RGB", (20, 10), (255, 0, 0)).save(path)
    pixels = keras_vit.models.preprocessing.load_image(str(path), (4, 6))
    assert pixels.shape == (4, 6, 3) and pixels.dtype == np.uint8
    assert (pixels == [255, 0, 0]).all()
