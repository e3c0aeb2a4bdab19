"""Input scaling and ImageNet-1k label decoding for ViT checkpoints.

Every published ViT checkpoint (the official JAX `.npz` files, timm's AugReg
and original weights, Hugging Face `google/vit-*`) was trained on pixels scaled
to [-1, 1], i.e. `x / 127.5 - 1` (mean = std = 0.5 on every channel): this is
`keras.applications`' `mode="tf"` scaling, not the ImageNet mean/std ("torch")
scaling that ResNets and ConvNeXts use.

keras_vit models follow the ConvNeXt / EfficientNetV2 convention: with
`include_preprocessing=True` (the default) the model scales raw [0, 255]
pixels itself, so `preprocess_input` is a pass-through kept for drop-in
compatibility. `scale_pixels` is the scaling, for models built with
`include_preprocessing=False`.

`decode_predictions` reads the ImageNet-1k class index that ships inside this
package (`keras_vit/resources/imagenet_class_index.json`, byte-identical to the
file `keras.applications` downloads; see `keras_vit/resources/README.md` for
where it came from). Nothing is downloaded, and the file is only read on the
first call.
"""

import functools
import importlib.resources
import json
import os
import re

import keras
import numpy as np

from keras_vit.utils import extras

NUM_IMAGENET_CLASSES = 1000

# pixels * SCALE + OFFSET maps [0, 255] to [-1, 1]: the model's Rescaling layer and scale_pixels.
SCALE = 1.0 / 127.5
OFFSET = -1.0

_CLASS_INDEX_FILE = "imagenet_class_index.json"
_DATA_FORMATS = (None, "channels_last", "channels_first")


def _check_data_format(data_format):
    if data_format not in _DATA_FORMATS:
        raise ValueError(
            "`data_format` must be one of None, 'channels_last' or 'channels_first'. "
            f"Received: data_format={data_format!r}"
        )


def preprocess_input(x, data_format=None):
    """A placeholder method for backward compatibility: returns `x` unchanged.

    keras_vit models scale their input themselves (`include_preprocessing=True`,
    the default): they take raw pixels in [0, 255], as
    `keras.applications.ConvNeXt*` and `EfficientNetV2*` do, whose
    `preprocess_input` is the same pass-through. For a model built with
    `include_preprocessing=False`, scale with `scale_pixels`.

    Args:
        x: images with pixel values in [0, 255]: a NumPy array, a backend
            tensor, a symbolic `keras.KerasTensor` or a `tf.Tensor` inside
            `tf.data.Dataset.map` (any backend).
        data_format: optional data format of the images, one of `None`,
            `"channels_last"` or `"channels_first"`. Does not affect the
            result. Defaults to `None`.

    Returns:
        `x`, unchanged.

    Example:

    >>> import numpy as np
    >>> from keras_vit.models.preprocessing import preprocess_input
    >>> preprocess_input(np.array([[0.0, 255.0]]))
    array([[  0., 255.]])
    """
    _check_data_format(data_format)
    return x


def scale_pixels(x, data_format=None):
    """Scales pixels from [0, 255] to [-1, 1], as ViT checkpoints expect.

    Computes `x / 127.5 - 1`, so 0 maps to -1, 127.5 to 0 and 255 to 1. Only
    for models built with `include_preprocessing=False`: the default models
    do this themselves (applying both scales twice). The scaling is the same
    for every channel, so the data format does not change the result; the
    argument is accepted (and validated) like `keras.applications`'.

    A NumPy input is never modified in place.

    Args:
        x: A batch of images (or a single image) with pixel values in
            [0, 255]: a NumPy array or anything `np.asarray` accepts, a
            backend tensor, a symbolic `keras.KerasTensor`, or a `tf.Tensor`
            inside `tf.data.Dataset.map` on any backend.
        data_format: Optional data format of the image tensor, one of
            `None`, `"channels_last"` or `"channels_first"`. Does not affect
            the result. Defaults to `None`.

    Returns:
        The scaled images. A NumPy input gives a `float32` NumPy array; a
        tensor gives a tensor of its own kind in `keras.config.floatx()`.

    Example:

    >>> import numpy as np
    >>> from keras_vit.models.preprocessing import scale_pixels
    >>> scale_pixels(np.array([[0, 63.75, 127.5, 255]]))
    array([[-1. , -0.5,  0. ,  1. ]], dtype=float32)
    """
    _check_data_format(data_format)
    if isinstance(x, (np.ndarray, np.generic, list, tuple, int, float)):
        # The arithmetic allocates a new array: the caller's array is never written to.
        x = np.asarray(x, dtype=np.float32)
        return x * np.float32(SCALE) + np.float32(OFFSET)
    # Keras's Rescaling layer runs on backend tensors and symbolic tensors,
    # and on tf.Tensors inside tf.data on every backend (it switches to
    # TensorFlow ops there), which plain keras.ops on JAX or torch cannot.
    return keras.layers.Rescaling(SCALE, offset=OFFSET)(x)


@functools.cache
def _imagenet_class_index():
    """Reads the shipped class index once: a tuple of `(wnid, class_name)` in class order."""
    text = importlib.resources.files("keras_vit").joinpath("resources", _CLASS_INDEX_FILE).read_text("utf-8")
    raw = json.loads(text)
    if sorted(raw, key=int) != [str(i) for i in range(NUM_IMAGENET_CLASSES)]:
        raise RuntimeError(f"The packaged {_CLASS_INDEX_FILE} is corrupt: expected keys '0'..'999'.")
    return tuple((raw[str(i)][0], raw[str(i)][1]) for i in range(NUM_IMAGENET_CLASSES))


def decode_predictions(preds, top=5):
    """Decodes a batch of ImageNet-1k predictions into class labels.

    The output format is the one of `keras.applications`' `decode_predictions`.
    Classes are ordered by decreasing score; equal scores keep class-index
    order.

    Args:
        preds: A batch of predictions of shape `(samples, 1000)` (logits or
            probabilities), as a NumPy array, a backend tensor or an eager
            `tf.Tensor` (e.g. from a `tf.data` pipeline, on any backend).
        top: Integer, how many top-scoring classes to return per sample,
            between 1 and 1000. Defaults to `5`.

    Returns:
        A list with one list per sample, each holding `top` tuples
        `(wnid, class_name, score)`: the WordNet id (e.g. `"n01440764"`),
        the short class name (e.g. `"tench"`) and the score as a Python
        `float`.

    Example:

    >>> import numpy as np
    >>> from keras_vit.models.preprocessing import decode_predictions
    >>> preds = np.zeros((1, 1000), dtype="float32")
    >>> preds[0, 1], preds[0, 999] = 0.5, 0.25
    >>> decode_predictions(preds, top=3)
    [[('n01443537', 'goldfish', 0.5), ('n15075141', 'toilet_tissue', 0.25), ('n01440764', 'tench', 0.0)]]
    """
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or not 1 <= top <= NUM_IMAGENET_CLASSES:
        raise ValueError(f"`top` must be an integer between 1 and {NUM_IMAGENET_CLASSES}. Received: top={top!r}")
    preds = np.asarray(preds) if type(preds).__module__.startswith("tensorflow") else keras.ops.convert_to_numpy(preds)
    if preds.ndim != 2 or preds.shape[1] != NUM_IMAGENET_CLASSES:
        raise ValueError(
            "`decode_predictions` expects a batch of ImageNet-1k predictions, i.e. a 2D array of shape "
            f"(samples, {NUM_IMAGENET_CLASSES}). Received: preds.shape={tuple(preds.shape)}"
        )
    class_index = _imagenet_class_index()
    results = []
    for pred in preds:
        # A stable sort on the negated scores: highest first, ties in class order.
        top_indices = np.argsort(-pred.astype(np.float64), kind="stable")[:top]
        results.append([(*class_index[i], float(pred[i])) for i in top_indices])
    return results


def load_image(path, size):
    """Reads an image file as uint8 RGB, resized (bilinear, as the official evaluation) to `size`.

    Args:
        path: path of a file PIL can read (JPEG, PNG, ...).
        size: `(height, width)`.

    Returns:
        uint8 array `(height, width, 3)`.

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: the file is not an image PIL can decode (empty,
            truncated, another format); the message names the file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No image file at {path!r}.")
    extras.check("PIL", needed_for="reading an image file")  # Keras's load_img raises a bare ImportError
    if os.path.getsize(path) == 0:
        raise ValueError(f"{path!r} is empty, not an image. Give a JPEG, PNG, BMP, GIF or WebP file.")
    try:
        image = keras.utils.load_img(path, color_mode="rgb", target_size=tuple(size), interpolation="bilinear")
    except PermissionError:
        raise
    except (OSError, SyntaxError, ValueError) as error:
        # PIL reads from an in-memory copy, so its own message names "<_io.BytesIO object at 0x...>", not the file.
        detail = re.sub(r"\s*<_io\.BytesIO object at 0x[0-9a-fA-F]+>", "", str(error)).strip()
        raise ValueError(
            f"{path!r} could not be decoded as an image ({detail or type(error).__name__}). "
            "Give a JPEG, PNG, BMP, GIF or WebP file."
        ) from None
    return np.asarray(keras.utils.img_to_array(image, dtype="float32")).round().astype("uint8")
