"""The patch-grid rules (a ViT's padded grid, SigLIP 2's NaFlex grid) and NaFlex's patch cutting, free of Keras so
that the keras-free variant table and counts, the layers and the `tf.data` pipelines share them."""

import math

from keras_vit.utils import validation


def patch_grid(image_size, patch_size):
    """The patch grid `(rows, cols)` of an image padded up to whole patches (timm's `dynamic_img_pad`).

    Unknown sides (None) give None.

    >>> patch_grid((224, 224), 16), patch_grid((123, 100), 16), patch_grid((None, 32), (8, 4))
    ((14, 14), (8, 7), (None, 8))
    """
    patch = validation.pair("patch_size", patch_size)
    return tuple(None if size is None else -(-size // p) for size, p in zip(image_size, patch))


# SigLIP 2's bisection (transformers' `get_image_size_for_max_num_patches`): scales in [1e-6, 100], halved until the
# interval is under 1e-5, which takes the same 24 halvings for every image, so a graph can run it unrolled.
_SCALE_RANGE, _SCALE_EPS = (1e-6, 100.0), 1e-5
_HALVINGS = math.ceil(math.log2((_SCALE_RANGE[1] - _SCALE_RANGE[0]) / _SCALE_EPS))


def _choose(condition, if_true, if_false):
    return if_true if condition else if_false


def naflex_grid(image_size, patch_size, max_num_patches, ceil=math.ceil, where=_choose):
    """The patch grid `(rows, cols)` SigLIP 2's NaFlex resizes an image to: aspect ratio kept, at most
    `max_num_patches` patches (the image is resized to `rows * patch_height` x `cols * patch_width` pixels).

    The sides are Python ints, or float64 tensors with `ceil=tf.math.ceil, where=tf.where` (in a `tf.data` graph):
    the same float64 steps as transformers' Python floats, so the same grid.

    >>> naflex_grid((48, 80), 16, 256), naflex_grid((1, 500), 16, 64), naflex_grid((64, 32), (8, 4), 9)
    ((12, 20), (1, 64), (3, 3))
    """
    patch = validation.pair("patch_size", patch_size)
    validation.positive_int("max_num_patches", max_num_patches)

    def grid(scale):
        # ceil(size * scale / patch) patches; transformers' "at least one patch" never binds for a positive size.
        return tuple(ceil(size * scale / p) for size, p in zip(image_size, patch))

    low, high = (image_size[0] * 0 + bound for bound in _SCALE_RANGE)  # in the sides' type: float64 in a graph
    for _ in range(_HALVINGS):
        middle = (low + high) / 2
        rows, cols = grid(middle)
        fits = rows * cols <= max_num_patches
        low, high = where(fits, middle, low), where(fits, high, middle)
    return grid(low)


def cut_patches(ops, images, grid, patch_size, max_num_patches):
    """Images `(batch, rows * ph, cols * pw, C)` as `(batch, max_num_patches, ph * pw * C)`: each patch flattened in
    (row, col, channel) order, row-major over the grid `(rows, cols)`, then zeros (SigLIP 2's order).

    `ops` is `keras.ops`, or `tensorflow` when the grid is a graph's tensors: the same calls exist in both.
    """
    (rows, cols), (ph, pw), channels = grid, patch_size, images.shape[-1]
    tokens = ops.reshape(images, (-1, rows, ph, cols, pw, channels))
    tokens = ops.reshape(ops.transpose(tokens, (0, 1, 3, 2, 4, 5)), (-1, rows * cols, ph * pw * channels))
    tokens = ops.pad(tokens, ((0, 0), (0, max_num_patches - rows * cols), (0, 0)))
    return ops.reshape(tokens, (-1, max_num_patches, ph * pw * channels))  # a static length, for a graph's grid too
