"""The Vision Transformer as functional Keras models.

- `architecture`: `Architecture`, the immutable description of a ViT, read
  from a built model (`Architecture.from_model`) or checkpoint weights, and
  `find_vit`, which finds a ViT nested in a user's model;
- `vit`: `build_model`, the one builder of every ViT and hybrid (`build`
  builds an `Architecture`);
- `variants`: the variant table (`"B/16"` -> sizes) and the shape rules;
- `applications`: the public constructors (`keras_vit.ViTB16`, ...), which
  add the weights loader to `build_model`;
- `preprocessing`, `metadata`: pixels in, class names out;
- `flops`: analytic FLOP counts.

Only `vit` is imported here: `applications` sits above the weights machinery
(`keras_vit.pretrained`), which itself builds through `build_model`.
"""

from keras_vit.models.architecture import Architecture, find_vit
from keras_vit.models.vit import build, build_model

__all__ = ["Architecture", "build", "build_model", "find_vit"]
