"""The patch-grid rule, in plain Python so that the keras-free variant table and counts share it with the layers."""

from keras_vit.utils import validation


def patch_grid(image_size, patch_size):
    """The patch grid `(rows, cols)` of an image padded up to whole patches (timm's `dynamic_img_pad`).

    Unknown sides (None) give None.

    >>> patch_grid((224, 224), 16), patch_grid((123, 100), 16), patch_grid((None, 32), (8, 4))
    ((14, 14), (8, 7), (None, 8))
    """
    patch = validation.pair("patch_size", patch_size)
    return tuple(None if size is None else -(-size // p) for size, p in zip(image_size, patch))
