"""Pretrained ViT weights: registry, converters, download cache, export.

Most users never import this package: `keras_vit.ViTB16(weights="imagenet")`
goes through `build_pretrained`. It is public for what the constructors do not
cover:

    from keras_vit import pretrained

    pretrained.available_tags("B/16")            # what weights= accepts
    model = pretrained.build_pretrained(          # choose the resampling
        "B/16", "augreg_in21k_ft_in1k", input_shape=(320, 320, 3),
        resample_method="bicubic")
    pretrained.export_weights(model, "out_dir", "hf")   # leave for transformers

Loading is all-or-nothing: every tensor is converted and checked before any
is assigned, and no partially loaded model is ever returned.
"""

from keras_vit.models import variants
from keras_vit.models.vit import VisionTransformer
from keras_vit.pretrained.converters import detect_format, from_keras, to_keras
from keras_vit.pretrained.download import cache_dir, download_url, hf_download, is_offline
from keras_vit.pretrained.errors import CheckpointError, DownloadError
from keras_vit.pretrained.export import export_weights
from keras_vit.pretrained.loader import Checkpoint, load_checkpoint
from keras_vit.pretrained.registry import CHECKPOINTS, CheckpointInfo, available_tags, checkpoints, resolve
from keras_vit.pretrained.sources import WeightsSource, fetch, resolve_source


def build_pretrained(variant, weights, **kwargs):
    """ViT-`variant` with pretrained weights: `VisionTransformer(**VARIANTS[variant], weights=weights, **kwargs)`.

    Args:
        variant: a key of `keras_vit.models.variants.VARIANTS`, e.g. `"B/16"`.
        weights: a tag of the variant (see `keras_vit.pretrained.available_tags`),
            `"imagenet"` (the best ImageNet-1k classifier at the resolution
            nearest `input_shape`), a local `.npz` / `.safetensors` file or
            `save_pretrained` directory, or `"hf://org/repo[/file][@revision]"`.
        **kwargs: the other arguments of `keras_vit.VisionTransformer`
            (include_top, input_shape, classes, representation_size,
            resample_method, ...). `representation_size=None` keeps the
            checkpoint's `pre_logits` only when its pretrained head is kept
            (the head needs it) and drops it otherwise, as the paper does for
            fine-tuning.

    Returns:
        A `keras_vit.VisionTransformer` whose every weight came from the
        checkpoint (or, for a new head, is zero), or an exception and no model.

    Raises:
        ValueError: before any download, for unknown tags.
        DownloadError: the file cannot be fetched (an `OSError`).
        CheckpointError: an unreadable file, or one that does not fit the model (a `ValueError`).
    """
    return VisionTransformer(**variants.VARIANTS[variant], weights=weights, **kwargs)


__all__ = [
    "CHECKPOINTS",
    "Checkpoint",
    "CheckpointError",
    "CheckpointInfo",
    "DownloadError",
    "WeightsSource",
    "available_tags",
    "build_pretrained",
    "cache_dir",
    "checkpoints",
    "detect_format",
    "download_url",
    "export_weights",
    "fetch",
    "from_keras",
    "hf_download",
    "is_offline",
    "load_checkpoint",
    "resolve",
    "resolve_source",
    "to_keras",
]
