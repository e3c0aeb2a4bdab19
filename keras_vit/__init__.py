"""keras_vit: the Vision Transformer (Dosovitskiy et al., ICLR 2021) in Keras 3, on TensorFlow, JAX and PyTorch.

Models follow the `keras.applications` signature: `keras_vit.ViTB16(include_top=True, weights=None)`.
"""

# `training` is imported for its registered schedule, loss and optimizers: a model compiled with them reloads
# after `import keras_vit`.
from keras_vit import layers, models, training
from keras_vit.models.applications import (
    VisionTransformer,
    ViTB8,
    ViTB14,
    ViTB16,
    ViTB32,
    ViTEVA02B14,
    ViTEVA02L14,
    ViTEVA02S14,
    ViTEVA02Ti14,
    ViTg14,
    ViTH14,
    ViTL14,
    ViTL16,
    ViTL32,
    ViTR26B32,
    ViTR26S32,
    ViTR50B16,
    ViTR50L32,
    ViTRTi16,
    ViTS14,
    ViTS16,
    ViTS32,
    ViTSo400m14,
    ViTSo400m16,
    ViTSPlus16,
    ViTTi16,
)
from keras_vit.models.metadata import class_names
from keras_vit.models.naflex import NaFlexPatches
from keras_vit.models.preprocessing import decode_predictions, preprocess_input

__version__ = "0.1.0"

__all__ = [
    "NaFlexPatches",
    "VisionTransformer",
    "ViTTi16",
    "ViTS16",
    "ViTS32",
    "ViTB8",
    "ViTB16",
    "ViTB32",
    "ViTL16",
    "ViTL32",
    "ViTH14",
    "ViTS14",
    "ViTB14",
    "ViTL14",
    "ViTSo400m14",
    "ViTSo400m16",
    "ViTg14",
    "ViTSPlus16",
    "ViTEVA02Ti14",
    "ViTEVA02S14",
    "ViTEVA02B14",
    "ViTEVA02L14",
    "ViTRTi16",
    "ViTR26S32",
    "ViTR26B32",
    "ViTR50B16",
    "ViTR50L32",
    "class_names",
    "decode_predictions",
    "layers",
    "models",
    "preprocess_input",
    "training",
]
