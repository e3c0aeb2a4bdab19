"""The Vision Transformer's layers, in `keras.ops` only (TensorFlow, JAX and PyTorch backends).

- `transformer`: patch embedding, class token, position embedding, the
  pre-LayerNorm transformer block and its parts, pooling and the feature map;
- `resnet`: the ResNet v2 stem and hybrid patch embedding of the paper's hybrids;
- `scaling`: the pixel scaling in front of the model (Keras's `Rescaling`, traceable by `torch.compile`);
- `resampling`: the interpolation matrices that resample a position embedding
  to another patch grid;
- `initializers`: the transformer kernels' Glorot-uniform initializer
  (Keras's values, drawn without temporaries on torch).

Every layer (and the initializer) is registered as `keras_vit>ClassName`, so a saved model revives
after `import keras_vit`.
"""

from keras_vit.layers.resnet import BottleneckUnit, HybridPatchEmbedding, ResNetBackbone, StandardizedConv2D
from keras_vit.layers.scaling import PixelScaling
from keras_vit.layers.transformer import (
    LAYER_NORM_EPSILON,
    ClassToken,
    DropPath,
    MLPBlock,
    MultiHeadSelfAttention,
    PatchDropout,
    PatchEmbedding,
    PatchFeatureMap,
    PatchTokens,
    PositionEmbedding,
    TokenPooling,
    TransformerBlock,
    pad_to_patches,
    patch_grid,
    patch_projection,
)

__all__ = [
    "LAYER_NORM_EPSILON",
    "BottleneckUnit",
    "ClassToken",
    "DropPath",
    "HybridPatchEmbedding",
    "MLPBlock",
    "MultiHeadSelfAttention",
    "PatchDropout",
    "PatchEmbedding",
    "PatchFeatureMap",
    "PatchTokens",
    "PixelScaling",
    "PositionEmbedding",
    "ResNetBackbone",
    "StandardizedConv2D",
    "TokenPooling",
    "TransformerBlock",
    "pad_to_patches",
    "patch_grid",
    "patch_projection",
]
