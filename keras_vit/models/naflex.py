"""NaFlex input (SigLIP 2): images resized, aspect ratio kept, to at most `max_num_patches` patches, as a padded
patch sequence with each image's grid and a validity mask. `keras_vit.training.data.naflex_patches` is its
`tf.data` twin (one image of any size per element)."""

import keras
from keras import ops

from keras_vit.utils import patches, serialization, validation


@serialization.register
class NaFlexPatches(keras.layers.Layer):
    """Images as NaFlex input, as transformers' `Siglip2ImageProcessor` makes it (without its pixel scaling).

    The images, channels last, are resized (bilinear, antialiased) to the grid of `keras_vit.utils.patches.naflex_grid`
    (transformers' `get_image_size_for_max_num_patches`) and cut into patches. The output is a dict:
    `"patches"` `(batch, max_num_patches, ph * pw * C)` (raw pixels, each patch flattened in (row, col, channel)
    order, the valid ones first, row-major, then zeros), `"spatial_shapes"` int32 `(batch, 2)` (each image's grid
    `(rows, cols)`) and `"mask"` bool `(batch, max_num_patches)` (True on the valid patches).

    Args:
        patch_size: int or `(height, width)`, the model's patch size.
        max_num_patches: int, the fixed sequence length N.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        images: one image `(H, W, C)` or a batch of images of one size `(B, H, W, C)`, H and W known statically.

    Example:

    >>> out = NaFlexPatches(16, max_num_patches=64)(np.zeros((2, 48, 80, 3)))
    >>> {name: tuple(value.shape) for name, value in out.items()}, np.asarray(out["spatial_shapes"][0])
    ({'patches': (2, 64, 768), 'spatial_shapes': (2, 2), 'mask': (2, 64)}, array([ 6, 10], dtype=int32))
    """

    def __init__(self, patch_size, max_num_patches, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = validation.pair("patch_size", patch_size)
        self.max_num_patches = validation.positive_int("max_num_patches", max_num_patches)

    def __call__(self, images, **kwargs):
        # Checked before Keras's call wrapper, which adds lines to an error's message.
        shape = tuple(ops.shape(images))
        if len(shape) not in (3, 4) or not all(validation.static_dim(side) for side in shape[-3:-1]):
            raise ValueError(
                "NaFlexPatches takes an image (H, W, C) or a batch (B, H, W, C) of a static, non-zero size. "
                f"Received: shape={shape}"
            )
        return super().__call__(images, **kwargs)

    def call(self, images):
        images = ops.cast(images if len(images.shape) == 4 else images[None], self.compute_dtype)
        image_size = tuple(int(side) for side in images.shape[1:3])
        rows, cols = patches.naflex_grid(image_size, self.patch_size, self.max_num_patches)
        size = (rows * self.patch_size[0], cols * self.patch_size[1])
        if size != image_size:
            images = ops.image.resize(images, size, antialias=True, data_format="channels_last")
        batch = ops.shape(images)[0]
        return {
            "patches": patches.cut_patches(ops, images, (rows, cols), self.patch_size, self.max_num_patches),
            "spatial_shapes": ops.broadcast_to(ops.convert_to_tensor((rows, cols), "int32"), (batch, 2)),
            "mask": ops.broadcast_to(ops.arange(self.max_num_patches) < rows * cols, (batch, self.max_num_patches)),
        }

    def get_config(self):
        return {**super().get_config(), **serialization.arguments(self)}
