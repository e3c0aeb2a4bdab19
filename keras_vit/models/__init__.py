"""The Vision Transformer as a Keras model: `vit` (the model class), `variants` (the table), `applications` (the
constructors), `preprocessing`, `naflex` and `metadata` (pixels in, class names out), `flops` (analytic counts), `lora`.
Only `vit` is imported here: the weights loader (`keras_vit.pretrained`) sits above it."""

from keras_vit.models.vit import VisionTransformer, find_vit

__all__ = ["VisionTransformer", "find_vit"]
