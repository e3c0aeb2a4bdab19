"""The Vision Transformer's layers, registered as `keras_vit>ClassName` so saved models revive."""

from keras_vit.layers.attention_pool import AttentionPooling
from keras_vit.layers.resnet import BottleneckUnit, HybridPatchEmbedding, ResNetBackbone, StandardizedConv2D
from keras_vit.layers.rotary import RotaryEmbedding, apply_rotary
from keras_vit.layers.scaling import PixelScaling
from keras_vit.layers.transformer import (
    LAYER_NORM_EPSILON,
    MLP_ACTIVATIONS,
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
    "MLP_ACTIVATIONS",
    "AttentionPooling",
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
    "RotaryEmbedding",
    "StandardizedConv2D",
    "TokenPooling",
    "TransformerBlock",
    "apply_rotary",
    "pad_to_patches",
    "patch_grid",
    "patch_projection",
]
