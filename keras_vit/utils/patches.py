"""The patch-grid rule: how many patches (tokens) an image gives.

Pure Python (no Keras): the layers, the variant table, the analytic counts
(`keras_vit.models.flops`) and the `keras-vit variants` command, which
imports no framework, all follow this one rule.
"""

from keras_vit.utils import validation


def patch_grid(image_size, patch_size):
    """The patch grid `(rows, cols)` of an image, padding included.

    Sides that are not a multiple of the patch are padded up to the next
    multiple (timm's `dynamic_img_pad`), so the grid is the ceiling of
    size / patch. Unknown sides (None) give None.

    Args:
        image_size: `(height, width)`; either may be None.
        patch_size: int or `(height, width)`.

    Returns:
        `(rows, cols)`, each an int or None.

    >>> patch_grid((224, 224), 16), patch_grid((123, 100), 16), patch_grid((None, 32), (8, 4))
    ((14, 14), (8, 7), (None, 8))
    """
    patch = validation.pair("patch_size", patch_size)
    return tuple(None if size is None else -(-size // p) for size, p in zip(image_size, patch))
