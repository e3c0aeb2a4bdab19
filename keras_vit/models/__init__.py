"""The Vision Transformer as a Keras model.

- `vit`: `VisionTransformer`, the one model class of every ViT and hybrid
  (its config is its constructor arguments), and `find_vit`, which finds
  one nested in a user's model;
- `variants`: the variant table (`"B/16"` -> sizes) and the shape rules;
- `applications`: the public constructors (`keras_vit.ViTB16`, ...);
- `preprocessing`, `metadata`: pixels in, class names out;
- `flops`: analytic FLOP counts.

Only `vit` is imported here: its weights loader (`keras_vit.pretrained`) sits above it and is imported when
`weights=` asks for it.
"""

from keras_vit.models.vit import VisionTransformer, find_vit

__all__ = ["VisionTransformer", "find_vit"]
