"""Streams a data source through a model's representation, optionally cached in a file.

See `keras_vit.evaluation.features` for what the representation is.
"""

import dataclasses
import hashlib
import json
import os

import keras
import numpy as np

from keras_vit.evaluation import features as features_lib
from keras_vit.training import data
from keras_vit.utils import files, validation

CACHE_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class Features:
    """The representation of every image of a split.

    Attributes:
        features: float32 array `(num_images, dim)`, in the source's order.
        labels: int64 array `(num_images,)`.
        num_classes: int, the classes of the source.
        class_names: tuple of str, or `None`.
        kind: the representation (`"pre_logits"`, `"token"`, `"gap"`, `"max"`).
        outputs: float32 array `(num_images, num_classes)` of the model's own
            outputs when it has a head for these classes and they were
            asked for, else `None`.
    """

    features: np.ndarray
    labels: np.ndarray
    num_classes: int
    class_names: object
    kind: str
    outputs: object = None


def check_features(features, what="features"):
    """Raises a ValueError when `features` (2-D) is empty or holds NaN or infinity."""
    features = np.asarray(features)
    if features.ndim != 2 or not len(features):
        raise ValueError(
            f"The {what} must be a non-empty 2-D array (images, dim): is the split empty? "
            f"Received: shape {features.shape}"
        )
    bad = ~np.isfinite(features).all(axis=1)
    if bad.any():
        raise ValueError(
            f"{int(bad.sum())} of {len(features)} images have NaN or infinite {what} (e.g. image "
            f"{int(np.flatnonzero(bad)[0])}): check the model's weights and the images."
        )
    return features


def check_split(features, labels, what):
    """Checks one split's features (see `check_features`) and its int labels, one per image."""
    features = check_features(features, f"{what} features")
    labels = np.asarray(labels)
    if labels.shape != (len(features),) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"The {what} labels must be integers, one per image ({len(features)}). Received: shape {labels.shape}, "
            f"dtype {labels.dtype}"
        )
    if len(labels) and labels.min() < 0:
        raise ValueError(f"The {what} labels must be class indices >= 0. Received: a label {labels.min()}")
    return features, labels


def check_splits(train_features, train_labels, test_features, test_labels, num_classes=None):
    """Checks a training and a test split (`check_split`) of one feature size, and their classes.

    Returns:
        `((train features, labels), (test features, labels), num_classes)`:
        `num_classes` as given, checked to hold every label, else the largest
        label + 1.
    """
    train = check_split(train_features, train_labels, "training")
    test = check_split(test_features, test_labels, "test")
    if train[0].shape[1] != test[0].shape[1]:
        raise ValueError(f"Training and test features differ in size: {train[0].shape[1]} vs {test[0].shape[1]}.")
    return train, test, check_classes(num_classes, train[1], test[1])


def check_classes(num_classes, *labels):
    """`num_classes` checked to exceed every label, or (None) the largest label + 1."""
    largest = max(int(split.max()) for split in labels if len(split))
    if num_classes is None:
        return largest + 1
    num_classes = validation.positive_int("num_classes", num_classes)
    if largest >= num_classes:
        raise ValueError(
            f"`num_classes` must exceed every label, and a label is {largest}: pass num_classes={largest + 1} (or "
            f"more), or fix the labels. Received: num_classes={num_classes}"
        )
    return num_classes


def _source(source):
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[1], data.SourceInfo):
        return source
    raise ValueError(
        "`source` must be a `(dataset, SourceInfo)` pair from `keras_vit.training.data.load` or "
        f"`keras_vit.training.data.from_arrays`. Received: {type(source).__name__}"
    )


def check_source(source):
    """Checks a `(dataset, SourceInfo)` pair, and that a folder has an image that decodes (`data.check_readable`).

    Raises:
        ValueError: not such a pair, or an image folder where no file decodes.
    """
    data.check_readable(*_source(source))


def _cache_key(rep, info):
    """A digest of everything the cached features depend on: weights, representation, image size, source."""
    digest = hashlib.sha256()
    described = dict(
        format=CACHE_FORMAT,
        kind=rep.kind,
        image_size=rep.image_size,
        scale=rep.scale_pixels,
        outputs=rep.classifier is not None or len(rep.model.outputs) > 1,
        examples=info.num_examples,
        classes=info.num_classes,
        names=info.class_names,
        # What the split holds, not only its size: another split of the same size must not read these features.
        data=info.fingerprint(),
    )
    digest.update(json.dumps(described, sort_keys=True, default=list).encode())
    models = [rep.model] + ([rep.classifier] if rep.classifier is not None else [])
    for model in models:
        for weight in model.weights:
            digest.update(np.ascontiguousarray(keras.ops.convert_to_numpy(weight)).tobytes())
    return digest.hexdigest()


def _read_cache(path, key):
    """The cached arrays at `path` when their key is `key`, else `None` (no file, another model or split)."""
    if path is None or not os.path.isfile(path):
        return None
    with np.load(path, allow_pickle=False) as cached:
        if "key" not in cached or str(cached["key"]) != key:
            return None
        return {name: cached[name] for name in cached.files}


def _write_cache(path, key, arrays):
    with files.atomic_file(path) as staged, open(staged, "wb") as handle:
        np.savez(handle, key=np.asarray(key), **{name: value for name, value in arrays.items() if value is not None})


def _stream(rep, dataset, num_examples, batch_size, verbose):
    """Runs the pipeline through `rep`; returns `(features, labels, outputs or None)`."""
    pipeline = data.eval_pipeline(dataset, image_size=rep.image_size, batch_size=batch_size)
    progress = keras.utils.Progbar(num_examples, unit_name="image", verbose=verbose)
    chunks, labels, outputs, seen = [], [], [], 0
    for images, batch_labels in pipeline.as_numpy_iterator():
        batch_features, batch_outputs = rep(images)
        chunks.append(batch_features)
        labels.append(np.asarray(batch_labels, dtype="int64"))
        if batch_outputs is not None:
            outputs.append(batch_outputs)
        seen += len(images)
        progress.update(seen)
    if not seen:
        raise ValueError("The split holds no images: pass a split with images in it.")
    return np.concatenate(chunks), np.concatenate(labels), (np.concatenate(outputs) if outputs else None)


def extract_features(model, source, *, image_size=None, batch_size=64, with_outputs=False, cache=None, verbose=1):
    """The representation of every image of a split, streamed batch by batch.

    Args:
        model: a keras_vit model, or a user's model with one nested in it
            (e.g. `keras-vit finetune`'s `model.keras`, loaded).
        source: a `(dataset, SourceInfo)` pair from `keras_vit.training.data.load`
            (an image folder, `"tfds:NAME"`) or `keras_vit.training.data.from_arrays`.
        image_size: optional int or `(height, width)`; defaults to the
            model's input size. Images are resized to it (`eval_pipeline`).
        batch_size: int, images per forward pass. Defaults to `64`.
        with_outputs: bool, also keep the model's outputs when it has a head
            for the source's classes (for `heldout_report`).
        cache: optional path of a `.npz` file: features stored there for the
            same weights, representation, image size and source are read
            instead of computed; otherwise they are computed and the file is
            (re)written atomically.
        verbose: 0 (silent) or 1 (progress bar).

    Returns:
        A `Features`.

    Raises:
        ValueError: no keras_vit ViT in `model`, an empty split, an image
            folder where no file decodes, or features that hold NaN or
            infinity.
    """
    dataset, info = _source(source)
    validation.positive_int("batch_size", batch_size)
    if cache is not None and not str(cache).endswith(".npz"):
        raise ValueError(f"`cache` must be the path of a .npz file. Received: cache={cache!r}")
    if cache is not None and info.fingerprint is None:
        raise ValueError(
            "This source does not say what it holds (its `SourceInfo.fingerprint` is None), so features cached "
            "for it could be read back for another split: pass cache=None, or make the source with "
            "`keras_vit.training.data.load` / `from_arrays`."
        )
    if info.num_examples == 0:
        raise ValueError("The split holds no images: pass a split with images in it.")
    rep = features_lib.representation(model, image_size, num_classes=info.num_classes if with_outputs else None)
    key = _cache_key(rep, info) if cache is not None else None
    cached = _read_cache(cache, key)
    if cached is not None:
        values, labels, outputs = cached["features"], cached["labels"], cached.get("outputs")
    else:
        data.check_readable(dataset, info)
        values, labels, outputs = _stream(rep, dataset, info.num_examples, batch_size, verbose)
    check_features(values)
    if cache is not None and cached is None:
        _write_cache(cache, key, {"features": values, "labels": labels, "outputs": outputs})
    return Features(values, labels, int(info.num_classes), info.class_names, rep.kind, outputs)
