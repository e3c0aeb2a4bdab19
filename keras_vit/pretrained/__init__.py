"""Pretrained ViT weights: the registry, checkpoint layouts, downloads and export.

Most users never import this package: `keras_vit.ViTB16(weights="imagenet")`
loads through it. It is public for what the constructors do not cover:

    from keras_vit import pretrained

    pretrained.available_tags("B/16")            # what weights= accepts
    model = pretrained.build_pretrained(          # choose the resampling
        "B/16", "augreg_in21k_ft_in1k", input_shape=(320, 320, 3), resample_method="bicubic")
    pretrained.export_weights(model, "out_dir", "hf")   # leave for transformers

Loading is all-or-nothing: every tensor is converted and checked before any
is assigned, and no partially loaded model is ever returned.
"""

from keras_vit.models import variants
from keras_vit.models.vit import VisionTransformer
from keras_vit.pretrained.errors import CheckpointError, DownloadError
from keras_vit.pretrained.export import export_weights
from keras_vit.pretrained.loader import load_checkpoint
from keras_vit.pretrained.registry import available_tags, checkpoints, resolve


def build_pretrained(variant, weights, **kwargs):
    """ViT-`variant` with pretrained weights: `VisionTransformer(**VARIANTS[variant], weights=weights, **kwargs)`.

    Args:
        variant: a key of `keras_vit.models.variants.VARIANTS`, e.g. `"B/16"`.
        weights: a tag of the variant (see `available_tags`), `"imagenet"`, a local `.npz` / `.safetensors`
            file or `save_pretrained` folder, or `"hf://org/repo[/file][@revision]"`.
        **kwargs: the other arguments of `keras_vit.VisionTransformer`.

    Raises:
        ValueError: an unknown tag, before any download.
        DownloadError: the file cannot be fetched.
        CheckpointError: an unreadable file, or one that does not fit the model.
    """
    return VisionTransformer(**variants.VARIANTS[variant], weights=weights, **kwargs)


__all__ = [
    "CheckpointError",
    "DownloadError",
    "available_tags",
    "build_pretrained",
    "checkpoints",
    "export_weights",
    "load_checkpoint",
    "resolve",
]
