"""Pretrained ViT weights: the registry, checkpoint layouts, downloads and export.

`keras_vit.ViTB16(weights="imagenet")` loads through this package; it is public for the rest:

    from keras_vit import pretrained

    pretrained.available_tags("B/16")  # what weights= accepts
    model = pretrained.build_from_checkpoint("hf://timm/vit_small_patch14_dinov2.lvd142m")
    pretrained.export_weights(model, "out_dir", "hf")  # for transformers

Loading is all-or-nothing: no partially loaded model is ever returned.
"""

from keras_vit.pretrained.build import build_from_checkpoint
from keras_vit.pretrained.errors import CheckpointError, DownloadError
from keras_vit.pretrained.export import export_weights
from keras_vit.pretrained.loader import load_checkpoint
from keras_vit.pretrained.registry import available_tags, checkpoints, resolve

__all__ = [
    "CheckpointError",
    "DownloadError",
    "available_tags",
    "build_from_checkpoint",
    "checkpoints",
    "export_weights",
    "load_checkpoint",
    "resolve",
]
