"""The frozen representation of a keras_vit model, streamed from a data source and optionally cached: the
`pre_logits` layer where the model has one, else the pooled tokens (a ViT without pooling: its class token)."""

import dataclasses
import hashlib
import json
import os

import keras
import numpy as np

from keras_vit.models import preprocessing
from keras_vit.models.vit import find_vit
from keras_vit.training import data
from keras_vit.utils import files, validation

CACHE_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class Features:
    """The representation of every image of a split, in the source's order.

    Attributes:
        features: float32 array `(num_images, dim)`.
        labels: int64 array `(num_images,)`.
        num_classes: int.
        class_names: tuple of str, or `None`.
        kind: `"pre_logits"`, `"token"`, `"gap"` or `"max"`.
        outputs: float32 array `(num_images, num_classes)` of the model's head, or `None`.
    """

    features: np.ndarray
    labels: np.ndarray
    num_classes: int
    class_names: object
    kind: str
    outputs: object = None


@dataclasses.dataclass(frozen=True)
class Representation:
    """How a model's representation is read; call it on a batch of channels-last `[0, 255]` images.

    Attributes:
        model: a `keras.Model` from images to the representation (and the head's outputs, in the same graph).
        kind: `"pre_logits"`, `"token"`, `"gap"` or `"max"`.
        image_size: `(height, width)` the images are resized to.
        scale_pixels: bool, the ViT does not scale pixels to [-1, 1] itself.
        classifier: the user's model around the ViT, run for its outputs, or `None`.
        channels_first: bool.
        naflex: `(patch_size, max_num_patches)` of a NaFlex model, whose batches are NaFlex dicts (`image_size` None).
    """

    model: object
    kind: str
    image_size: tuple
    scale_pixels: bool
    classifier: object = None
    channels_first: bool = False
    naflex: object = None

    def __call__(self, images):
        """`(features (batch, dim), outputs or None)` of a batch (a NaFlex model's: its dict), as float32."""
        naflex = isinstance(images, dict)
        count = len(images["mask"] if naflex else images)
        if self.channels_first and not naflex:
            images = np.transpose(images, (0, 3, 1, 2))
        pixels = images
        if self.scale_pixels:
            scaled = np.asarray(images["patches"] if naflex else images, "float32") * np.float32(preprocessing.SCALE)
            scaled += np.float32(preprocessing.OFFSET)
            pixels = dict(images, patches=scaled) if naflex else scaled
        # `predict`, not `predict_on_batch`: Keras 3.16's JAX trainer reads one batch as several under
        # steps_per_execution > 1 (a saved model keeps its compile settings).
        results = self.model.predict(pixels, batch_size=count, verbose=0)
        features, outputs = results if isinstance(results, (list, tuple)) else (results, None)
        if self.classifier is not None:
            outputs = self.classifier.predict(images, batch_size=count, verbose=0)
        features = np.asarray(keras.ops.convert_to_numpy(features), dtype="float32")
        if outputs is not None:
            outputs = np.asarray(keras.ops.convert_to_numpy(outputs), dtype="float32")
        return features, outputs


def representation(model, image_size=None, num_classes=None):
    """The paper's representation of `model`: what `extract_features` reads.

    Args:
        model: a keras_vit model, or a user's model with one nested in it.
        image_size: optional int or `(height, width)`. Defaults to the ViT's input size.
        num_classes: optional int: when `model` has one output per class, its outputs are read too.

    Returns:
        A `Representation`.
    """
    backbone = find_vit(model)
    if backbone.representation_size is not None:
        kind, tensor = "pre_logits", backbone.get_layer("pre_logits").output
    elif backbone.pooling is not None:
        kind, tensor = backbone.pooling, backbone.get_layer("pooling").output
    elif backbone.class_token:
        last = "encoder_norm" if backbone.final_norm else f"encoder_block_{backbone.num_layers - 1}"
        tokens = backbone.get_layer(last).output
        # A distilled DeiT's representation is the mean of its class and distillation tokens, as its heads see them.
        kind, tensor = "token", keras.ops.mean(tokens[:, :2], axis=1) if backbone.distillation_token else tokens[:, 0]
    else:
        raise ValueError(f"Model {backbone.name!r} has no class token: build it with a `pooling` to extract features.")
    naflex = None if backbone.max_num_patches is None else (backbone.patch_size, backbone.max_num_patches)
    if naflex is not None and image_size is not None:
        raise ValueError(
            f"A NaFlex model reads each image at its own size: pass image_size=None. Received: {image_size}"
        )
    size = backbone.default_image_size if image_size is None else validation.pair("image_size", image_size)
    size = None if naflex else tuple(int(side) for side in size)
    outputs, classifier = tensor, None
    output_shape = model.output_shape if len(model.outputs) == 1 else None
    if num_classes is not None and output_shape is not None and output_shape[1:] == (num_classes,):
        if backbone is model:
            outputs = [tensor, model.outputs[0]]  # one pass gives both
        else:
            input_shape = model.input_shape
            spatial = None if naflex else tuple(input_shape[2:4] if backbone.channels_first else input_shape[1:3])
            if naflex or spatial in (size, (None, None)):
                classifier = model  # the ViT is nested: its tensors are not in the outer graph
    # One input stays a tensor, not a one-element list: batches are passed as a tensor.
    inputs = backbone.input if naflex else backbone.inputs[0] if len(backbone.inputs) == 1 else backbone.inputs
    feature_model = keras.Model(inputs, outputs, name=f"{backbone.name}_{kind}")
    scale = not backbone.include_preprocessing
    return Representation(feature_model, kind, size, scale, classifier, backbone.channels_first, naflex)


def check_features(features, what="features"):
    """`features` as an array, or a ValueError when it is not 2-D, is empty, or holds NaN or infinity."""
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
    """One split's features (`check_features`) and int labels >= 0, one per image, checked."""
    features = check_features(features, f"{what} features")
    labels = np.asarray(labels)
    if labels.shape != (len(features),) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"The {what} labels must be integers, one per image ({len(features)}). Received: shape {labels.shape}, "
            f"dtype {labels.dtype}"
        )
    if labels.min() < 0:
        raise ValueError(f"The {what} labels must be class indices >= 0. Received: a label {labels.min()}")
    return features, labels


def check_splits(train_features, train_labels, test_features, test_labels, num_classes=None):
    """`((train x, y), (test x, y), num_classes)`, checked; `num_classes` defaults to the largest label + 1."""
    train = check_split(train_features, train_labels, "training")
    test = check_split(test_features, test_labels, "test")
    if train[0].shape[1] != test[0].shape[1]:
        raise ValueError(f"Training and test features differ in size: {train[0].shape[1]} vs {test[0].shape[1]}.")
    largest = int(max(train[1].max(), test[1].max()))
    if num_classes is None:
        return train, test, largest + 1
    num_classes = validation.positive_int("num_classes", num_classes)
    if largest >= num_classes:
        raise ValueError(
            f"`num_classes` must exceed every label, and a label is {largest}: pass num_classes={largest + 1} (or "
            f"more), or fix the labels. Received: num_classes={num_classes}"
        )
    return train, test, num_classes


def check_source(source):
    """`source`, checked to be a `(dataset, SourceInfo)` pair."""
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[1], data.SourceInfo):
        return source
    raise ValueError(
        "`source` must be a `(dataset, SourceInfo)` pair from `keras_vit.training.data.load` or "
        f"`keras_vit.training.data.from_arrays`. Received: {type(source).__name__}"
    )


def _cache_key(rep, info):
    """A digest of everything the cached features depend on."""
    described = dict(
        format=CACHE_FORMAT,
        kind=rep.kind,
        image_size=rep.image_size,
        naflex=rep.naflex,
        scale=rep.scale_pixels,
        outputs=rep.classifier is not None or len(rep.model.outputs) > 1,
        examples=info.num_examples,
        classes=info.num_classes,
        names=info.class_names,
        # What the split holds, not only its size: another split of the same size must not read these features.
        data=info.fingerprint(),
    )
    digest = hashlib.sha256(json.dumps(described, sort_keys=True, default=list).encode())
    models = [rep.model] + ([rep.classifier] if rep.classifier is not None else [])
    for model in models:
        for weight in model.weights:
            digest.update(np.ascontiguousarray(keras.ops.convert_to_numpy(weight)).tobytes())
    return digest.hexdigest()


def _stream(rep, dataset, num_examples, batch_size, verbose):
    """Runs the pipeline through `rep`; returns `(features, labels, outputs or None)`."""
    pipeline = data.eval_pipeline(dataset, image_size=rep.image_size, batch_size=batch_size, naflex=rep.naflex)
    progress = keras.utils.Progbar(num_examples, unit_name="image", verbose=verbose)
    features, labels, outputs, seen = [], [], [], 0
    for images, batch_labels in pipeline.as_numpy_iterator():
        batch_features, batch_outputs = rep(images)
        features.append(batch_features)
        labels.append(np.asarray(batch_labels, dtype="int64"))
        if batch_outputs is not None:
            outputs.append(batch_outputs)
        seen += len(batch_labels)
        progress.update(seen)
    if not seen:
        raise ValueError("The split holds no images: pass a split with images in it.")
    return np.concatenate(features), np.concatenate(labels), (np.concatenate(outputs) if outputs else None)


def extract_features(model, source, *, image_size=None, batch_size=64, with_outputs=False, cache=None, verbose=1):
    """The representation of every image of a split, streamed batch by batch.

    Args:
        model: a keras_vit model, or a user's model with one nested in it.
        source: a `(dataset, SourceInfo)` pair from `keras_vit.training.data.load` or `from_arrays`.
        image_size: optional int or `(height, width)`. Defaults to the model's input size.
        batch_size: int, images per forward pass. Defaults to `64`.
        with_outputs: bool, also keep the outputs of a head for the source's classes (for `heldout_report`).
        cache: optional `.npz` path, read when it holds these features, else (re)written.
        verbose: 0 (silent) or 1 (progress bar).

    Returns:
        A `Features`.
    """
    dataset, info = check_source(source)
    validation.positive_int("batch_size", batch_size)
    if cache is not None and not str(cache).endswith(".npz"):
        raise ValueError(f"`cache` must be the path of a .npz file. Received: cache={cache!r}")
    if cache is not None and info.fingerprint is None:
        raise ValueError(
            "This source does not say what it holds (its `SourceInfo.fingerprint` is None), so features cached "
            "for it could be read back for another split: pass cache=None, or make the source with "
            "`keras_vit.training.data.load` / `from_arrays`."
        )
    rep = representation(model, image_size, num_classes=info.num_classes if with_outputs else None)
    key = _cache_key(rep, info) if cache is not None else None
    if key is not None and os.path.isfile(cache):
        with np.load(cache, allow_pickle=False) as cached:
            if "key" in cached and str(cached["key"]) == key:
                outputs = cached["outputs"] if "outputs" in cached else None
                values, labels = cached["features"], cached["labels"]
                return Features(values, labels, int(info.num_classes), info.class_names, rep.kind, outputs)
    data.check_readable(dataset, info)
    values, labels, outputs = _stream(rep, dataset, info.num_examples, batch_size, verbose)
    check_features(values)
    if key is not None:
        arrays = {"features": values, "labels": labels, "outputs": outputs}
        with files.atomic_file(cache) as staged, open(staged, "wb") as handle:
            np.savez(
                handle, key=np.asarray(key), **{name: value for name, value in arrays.items() if value is not None}
            )
    return Features(values, labels, int(info.num_classes), info.class_names, rep.kind, outputs)
