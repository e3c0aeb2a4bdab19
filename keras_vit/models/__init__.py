"""The Vision Transformer as functional Keras models.

- `vit`: `build_model`, the one builder of every ViT and hybrid;
- `variants`: the variant table (`"B/16"` -> sizes) and the shape rules;
- `applications`: the public constructors (`keras_vit.ViTB16`, ...), which
  add the weights loader to `build_model`;
- `preprocessing`, `metadata`: pixels in, class names out;
- `flops`: analytic FLOP counts.

Only `vit` is imported here: `applications` sits above the weights machinery
(`keras_vit.pretrained`), which itself builds through `build_model`.
"""

from keras_vit.models.vit import build_model, token_size

__all__ = ["build_model", "token_size"]
