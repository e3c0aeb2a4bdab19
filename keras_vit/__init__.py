"""keras_vit: the Vision Transformer (Dosovitskiy et al., ICLR 2021) in Keras 3.

Runs on the TensorFlow, JAX and PyTorch backends. Models follow the
`keras.applications` signature:

    import keras_vit
    model = keras_vit.ViTB16(include_top=True, weights=None)
"""

# `training` and `layer_decay` are imported for their registered schedule,
# loss and optimizers: a model compiled with them reloads after `import keras_vit`.
from keras_vit import applications, layer_decay, layers, models, resnet, training, variants
from keras_vit.applications import (
    CONSTRUCTORS,
    VisionTransformer,
    ViTB8,
    ViTB16,
    ViTB32,
    ViTH14,
    ViTL16,
    ViTL32,
    ViTR26B32,
    ViTR26S32,
    ViTR50B16,
    ViTR50L32,
    ViTRTi16,
    ViTS16,
    ViTS32,
    ViTTi16,
    constructor_for,
)
from keras_vit.metadata import class_names
from keras_vit.preprocessing import decode_predictions, preprocess_input
from keras_vit.resampling import resample_position_embedding
from keras_vit.variants import VARIANTS

__version__ = "0.1.0"

__all__ = [
    "CONSTRUCTORS",
    "VARIANTS",
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
    "ViTRTi16",
    "ViTR26S32",
    "ViTR26B32",
    "ViTR50B16",
    "ViTR50L32",
    "applications",
    "class_names",
    "constructor_for",
    "decode_predictions",
    "layer_decay",
    "layers",
    "models",
    "preprocess_input",
    "resample_position_embedding",
    "resnet",
    "training",
    "variants",
]
