"""Pixels in, ImageNet-1k class names out.

As ConvNeXt does, the models scale raw [0, 255] pixels themselves, so `preprocess_input` is a pass-through;
`decode_predictions` reads the class index `keras.applications` downloads, shipped in `keras_vit/resources`.
"""

import functools
import importlib.resources
import json
import os
import re

import keras
import numpy as np

from keras_vit.utils import extras, validation

# pixels * SCALE + OFFSET maps [0, 255] to [-1, 1].
SCALE = 1.0 / 127.5
OFFSET = -1.0
DATA_FORMATS = (None, "channels_last", "channels_first")


def scale_and_offset(mean=0.5, std=0.5):
    """`(scale, offset)` with `pixels * scale + offset == (pixels / 255 - mean) / std`, floats or per-channel lists.

    Args:
        mean: float or per-channel sequence in [0, 1].
        std: float or per-channel sequence, positive.
    """
    mean, std = np.asarray(mean, "float64"), np.asarray(std, "float64")
    if mean.ndim > 1 or std.ndim > 1 or not np.all(std > 0) or not np.all(np.isfinite(mean)):
        raise ValueError(
            "`pixel_mean` and `pixel_std` must be numbers or per-channel sequences, the std positive. "
            f"Received: pixel_mean={mean.tolist()}, pixel_std={std.tolist()}"
        )
    if mean.ndim == std.ndim == 0:
        # 0.5 and 0.5 give exactly 1 / 127.5 and -1, the scaling the paper's checkpoints were trained with.
        return float(1.0 / (255.0 * std)), float(-mean / std)
    scale, offset = np.broadcast_arrays(1.0 / (255.0 * std), -mean / std)
    return scale.tolist(), offset.tolist()


def preprocess_input(x, data_format=None):
    """A placeholder method for backward compatibility: returns `x` unchanged (the models scale pixels themselves;
    without `include_preprocessing`, use `scale_pixels`).

    Args:
        x: images with pixel values in [0, 255], of any kind (array, tensor, symbolic tensor).
        data_format: None, `"channels_last"` or `"channels_first"`; does not affect the result.

    Returns:
        `x`, unchanged.
    """
    validation.one_of("data_format", data_format, DATA_FORMATS)
    return x


def scale_pixels(x, data_format=None, mean=0.5, std=0.5):
    """Scales pixels from [0, 255] to `(x / 255 - mean) / std` (by default [-1, 1]: `x / 127.5 - 1`) for models built
    with `include_preprocessing=False`; a family checkpoint's `mean` and `std` are its registry row's.

    Args:
        x: images: a NumPy array (never modified) or anything `np.asarray` accepts, a backend tensor, a symbolic
            `keras.KerasTensor`, or a `tf.Tensor` inside `tf.data.Dataset.map` on any backend.
        data_format: None, `"channels_last"` or `"channels_first"`: where the channels of a per-channel `mean`
            and `std` are.
        mean: float or per-channel `(r, g, b)` in [0, 1].
        std: float or per-channel `(r, g, b)`, positive.

    Returns:
        A float32 NumPy array for NumPy input, else a tensor of the input's kind in `keras.config.floatx()`.

    >>> scale_pixels(np.array([[0, 63.75, 127.5, 255]]))
    array([[-1. , -0.5,  0. ,  1. ]], dtype=float32)
    """
    validation.one_of("data_format", data_format, DATA_FORMATS)
    scale, offset = scale_and_offset(mean, std)
    if isinstance(scale, list):
        first = (data_format or keras.config.image_data_format()) == "channels_first"
        scale, offset = (
            np.reshape(np.float32(value), (-1, 1, 1) if first else (1, 1, -1)) for value in (scale, offset)
        )
    if isinstance(x, (np.ndarray, np.generic, list, tuple, int, float)):
        return np.asarray(x, dtype=np.float32) * np.float32(scale) + np.float32(offset)
    # Keras's Rescaling runs on backend and symbolic tensors, and on tf.Tensors inside tf.data on every backend.
    return keras.layers.Rescaling(scale, offset=offset)(x)


@functools.cache
def _imagenet_class_index():
    text = importlib.resources.files("keras_vit").joinpath("resources", "imagenet_class_index.json").read_text()
    index = json.loads(text)
    return tuple(tuple(index[str(i)]) for i in range(1000))


def decode_predictions(preds, top=5):
    """Decodes a batch of ImageNet-1k predictions, as `keras.applications`' `decode_predictions` does.

    Args:
        preds: `(samples, 1000)` scores (logits or probabilities): an array, a backend tensor or an eager
            `tf.Tensor`.
        top: int in [1, 1000], how many classes per sample.

    Returns:
        A list per sample of `top` tuples `(wnid, class_name, score)`, highest score first (ties in class order).

    >>> preds = np.zeros((1, 1000), dtype="float32")
    >>> preds[0, 1], preds[0, 999] = 0.5, 0.25
    >>> decode_predictions(preds, top=3)
    [[('n01443537', 'goldfish', 0.5), ('n15075141', 'toilet_tissue', 0.25), ('n01440764', 'tench', 0.0)]]
    """
    if not validation.is_int(top) or not 1 <= top <= 1000:
        raise ValueError(f"`top` must be an integer between 1 and 1000. Received: top={top!r}")
    preds = np.asarray(preds) if type(preds).__module__.startswith("tensorflow") else keras.ops.convert_to_numpy(preds)
    if preds.ndim != 2 or preds.shape[1] != 1000:
        raise ValueError(
            "`decode_predictions` expects ImageNet-1k predictions of shape (samples, 1000). "
            f"Received: preds.shape={tuple(preds.shape)}"
        )
    class_index = _imagenet_class_index()
    results = []
    for pred in preds:
        best = np.argsort(-pred.astype(np.float64), kind="stable")[:top]
        results.append([(*class_index[i], float(pred[i])) for i in best])
    return results


def load_image(path, size):
    """Reads an image file as a uint8 RGB array `(height, width, 3)`, resized bilinearly (as the official
    evaluation) to `size` (`None`: its own size); a file that is missing or not an image gives a one-line error
    naming it."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No image file at {path!r}.")
    extras.check("PIL", needed_for="reading an image file")  # Keras's load_img raises a bare ImportError
    try:
        image = keras.utils.load_img(
            path, color_mode="rgb", target_size=None if size is None else tuple(size), interpolation="bilinear"
        )
    except PermissionError:
        raise
    except (OSError, SyntaxError, ValueError) as error:
        # PIL reads an in-memory copy, so its message names "<_io.BytesIO object at 0x...>", not the file.
        detail = re.sub(r"\s*<_io\.BytesIO object at 0x[0-9a-fA-F]+>", "", str(error)).strip()
        raise ValueError(
            f"{path!r} could not be decoded as an image ({detail or type(error).__name__}). "
            "Give a JPEG, PNG, BMP, GIF or WebP file."
        ) from None
    return np.asarray(keras.utils.img_to_array(image, dtype="float32")).round().astype("uint8")
