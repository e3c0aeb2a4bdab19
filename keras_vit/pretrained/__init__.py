"""Pretrained ViT weights: the registry, checkpoint layouts, downloads and export.

Most users never import this package: `keras_vit.ViTB16(weights="imagenet")`
loads through it. It is public for what the constructors do not cover:

    from keras_vit import pretrained

    pretrained.available_tags("B/16")            # what weights= accepts
    model = pretrained.build_from_checkpoint(     # a timm DINOv2, SigLIP, CLIP, ... file: its own architecture
        "hf://timm/vit_small_patch14_dinov2.lvd142m")
    model = pretrained.build_from_checkpoint(     # a tag of a variant, with another resampling
        "augreg_in21k_ft_in1k", architecture="B/16", input_shape=(320, 320, 3), resample_method="bicubic")
    pretrained.export_weights(model, "out_dir", "hf")   # leave for transformers

Loading is all-or-nothing: every tensor is converted and checked before any
is assigned, and no partially loaded model is ever returned.
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
