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

from keras_vit.pretrained.converters import detect_format, from_keras, to_keras
from keras_vit.pretrained.download import cache_dir, download_url, hf_download, is_offline
from keras_vit.pretrained.errors import (
    CheckpointFormatError,
    CheckpointMismatchError,
    CorruptCheckpointError,
    DownloadError,
    HashMismatchError,
    MalformedCheckpointError,
    MissingDependencyError,
    NonFiniteWeightsError,
    OfflineError,
    TruncatedDownloadError,
    UnknownWeightsError,
    WeightsError,
)
from keras_vit.pretrained.export import export_weights
from keras_vit.pretrained.loader import Checkpoint, build_pretrained, load_checkpoint
from keras_vit.pretrained.registry import CHECKPOINTS, CheckpointInfo, available_tags, checkpoints, resolve
from keras_vit.pretrained.sources import WeightsSource, fetch, resolve_source

__all__ = [
    "CHECKPOINTS",
    "Checkpoint",
    "CheckpointFormatError",
    "CheckpointInfo",
    "CheckpointMismatchError",
    "CorruptCheckpointError",
    "DownloadError",
    "HashMismatchError",
    "MalformedCheckpointError",
    "MissingDependencyError",
    "NonFiniteWeightsError",
    "OfflineError",
    "TruncatedDownloadError",
    "UnknownWeightsError",
    "WeightsError",
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
