"""Input pipelines: `tf.data` for TFDS datasets, image folders and arrays, with the paper's preprocessing.

Pixels reach the model as raw [0, 255] floats (the models scale them). A file that does not decode is skipped
(`ignore_errors`) and listed by `SourceInfo.skipped()`.
"""

import dataclasses
import hashlib
import math
import os
import sys

import numpy as np

from keras_vit.pretrained import download
from keras_vit.utils import extras, patches, validation

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
# The paper's Inception crop (big_vision's `inception_crop` defaults): 5-100 % of the area, aspect ratio 3/4-4/3.
DEFAULT_AREA_RANGE = (0.05, 1.0)
ASPECT_RATIO_RANGE = (3.0 / 4.0, 4.0 / 3.0)
# TFDS's own host: the probe of whether a download could work.
TFDS_PROBE_URL = "https://storage.googleapis.com"


@dataclasses.dataclass(frozen=True)
class SourceInfo:
    """What a loaded split holds: `num_examples` (`None` where unknown), the classes, and `fingerprint()`, a digest
    of its content (a cache key). `folder`, `files` and `decoded` (a flag per file) are set for image folders only."""

    num_examples: object
    num_classes: int
    class_names: object = None
    fingerprint: object = dataclasses.field(default=None, compare=False, repr=False)
    folder: object = None
    files: object = dataclasses.field(default=None, compare=False, repr=False)
    decoded: object = dataclasses.field(default=None, compare=False, repr=False)

    def skipped(self):
        """The files of an image folder not decoded so far: after a whole pass, the unreadable ones."""
        if self.decoded is None:
            return []
        return [self.files[index] for index in np.flatnonzero(~self.decoded.numpy())]


def _digest(*parts):
    """A hex digest of strings and arrays, in order."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(np.ascontiguousarray(part).tobytes() if isinstance(part, np.ndarray) else str(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _tf():
    # Traced functions call this too: once TensorFlow is imported no import machinery runs, which AutoGraph warns on.
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        return tf
    return extras.require("tensorflow", "keras_vit's tf.data pipelines", extra="data")


def load(
    source,
    split=None,
    *,
    data_dir=None,
    class_names=None,
    validation_split=None,
    subset=None,
    seed=None,
    shuffle_files=False,
    shard=None,
):
    """Loads one split of a dataset as `(image uint8 HxWx3, label int32)` pairs.

    Args:
        source: `"tfds:NAME"` (`as_supervised` pairs) or an image folder, `root/<split>/<class>/` or `root/<class>/`
        split: `"train"`, `"train[:90%]"` (TFDS) or the split folder's name; `None` for the flat layout.
        data_dir: TFDS data directory.
        class_names: folders only: the class list, e.g. the training split's.
        validation_split: folders only: the fraction held out, as in `keras.utils.image_dataset_from_directory`.
        subset: `"training"` or `"validation"`, with `validation_split`.
        seed: int, the seed of the `validation_split` partition (required with it) and of `shuffle_files`.
        shuffle_files: bool, a new order of the files every epoch.
        shard: `(num_shards, index)`, this host's part, chosen before decoding.

    Returns:
        `(dataset, SourceInfo)`: a finite dataset of unbatched images.
    """
    if not isinstance(source, str):
        raise ValueError(f"`source` must be 'tfds:NAME' or a folder (`from_arrays` takes arrays). Received: {source!r}")
    if source.startswith("tfds:"):
        if validation_split is not None or subset is not None:
            raise ValueError("`validation_split` and `subset` are for image folders; slice TFDS splits: 'train[:80%]'.")
        if split is None:
            raise ValueError("A TFDS source needs a split, e.g. split='train'. Received: split=None")
        return _load_tfds(source[len("tfds:") :], split, data_dir, shuffle_files, seed, shard)
    if not os.path.isdir(source):
        raise ValueError(f"`source` is neither 'tfds:NAME' nor an existing folder. Received: source={source!r}")
    if validation_split is not None:
        validation.finite_float(
            "validation_split", validation_split, minimum=0, maximum=1, include_minimum=False, include_maximum=False
        )
        validation.one_of("subset", subset, ("training", "validation"))
        if seed is None:
            raise ValueError("`validation_split` needs a `seed`, the same for both subsets. Received: seed=None")
    elif subset is not None:
        raise ValueError(f"`subset` needs a `validation_split`. Received: subset={subset!r}")
    return _load_folder(source, split, class_names, validation_split, subset, shuffle_files, seed, shard)


def _load_tfds(name, split, data_dir, shuffle_files, seed, shard):
    builder = tfds_builder(name, data_dir)
    import tensorflow_datasets as tfds

    supervised_keys = builder.info.supervised_keys
    label_feature = builder.info.features[supervised_keys[1]] if supervised_keys else None
    if not hasattr(label_feature, "num_classes"):
        raise ValueError(f"TFDS dataset {name!r} has no (image, class label) supervised keys; use `from_arrays`.")
    if shard is not None:
        split = tfds.even_splits(split, n=shard[0])[shard[1]]
    dataset = tfds.load(
        name,
        split=split,
        data_dir=data_dir,
        as_supervised=True,
        shuffle_files=shuffle_files,
        read_config=tfds.ReadConfig(shuffle_seed=seed) if shuffle_files else None,
    )
    try:
        num_examples = builder.info.splits[split].num_examples or None
    except (KeyError, ValueError):
        num_examples = None
    tf = _tf()

    def to_rgb(image, label):
        # Grayscale datasets (MNIST) get 3 channels; TFDS declares them statically, so no cond is traced.
        if image.shape[-1] == 1:
            image = tf.image.grayscale_to_rgb(image)
        return image, tf.cast(label, tf.int32)

    dataset = dataset.map(to_rgb, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    identity = _digest("tfds", name, builder.info.version, split, os.path.abspath(builder.data_dir))
    info = SourceInfo(num_examples, label_feature.num_classes, tuple(label_feature.names), fingerprint=lambda: identity)
    return dataset, info


def check_dependencies(source):
    """Raises `MissingDependencyError` (the `data` extra) if `source` cannot be read here; imports nothing."""
    needed = ["tensorflow"]
    if source == "digits":
        needed.append("sklearn")
    elif isinstance(source, str) and source.startswith("tfds:"):
        needed.append("tensorflow_datasets")
    extras.check(*needed, needed_for=f"the data {source!r}", extra="data")


class DataNotPreparedError(OSError):
    """A TFDS dataset is not prepared in its data dir and cannot be downloaded here."""


def check_tfds_source(name, data_dir=None):
    """Raises `DataNotPreparedError` if TFDS dataset `name` is not prepared here and cannot be downloaded."""
    if not name:
        raise ValueError(f"A TFDS source needs a dataset name, e.g. 'tfds:cifar10'. Received: {name!r}")
    extras.check("tensorflow_datasets", needed_for="a tfds: source", extra="data")
    root = data_dir or os.environ.get("TFDS_DATA_DIR") or os.path.join(os.path.expanduser("~"), "tensorflow_datasets")
    if "://" in root:
        return  # a remote data dir (gs://): TFDS decides
    base = name.split(":")[0]
    if any("dataset_info.json" in names for _, _, names in os.walk(os.path.join(root, *base.split("/")))):
        return
    offline = download.is_offline()
    if not offline and download.reachable(TFDS_PROBE_URL):
        return
    why = "offline mode is on (KERAS_VIT_OFFLINE / HF_HUB_OFFLINE)" if offline else "the network is unreachable"
    raise DataNotPreparedError(
        f"TFDS dataset {name!r} is not prepared in {root} and {why}: prepare it on a machine with network access "
        f"(`tfds build {base} --data_dir DIR`), copy DIR here and pass --data-dir DIR (data_dir=DIR in Python)."
    )


def tfds_builder(name, data_dir=None):
    """The TFDS builder of `name` (e.g. `"cifar10"`, `"cifar10:3.0.2"`), after `check_tfds_source`."""
    check_tfds_source(name, data_dir)
    import tensorflow_datasets as tfds

    try:
        return tfds.builder(name, data_dir=data_dir)
    except tfds.core.DatasetNotFoundError:
        raise ValueError(
            f"TensorFlow Datasets has no dataset {name!r} (see https://www.tensorflow.org/datasets/catalog)."
        ) from None


def folder_layout(source, split):
    """`"split"` when the folder `source/split` exists, else `"flat"` (`source/<class>/`)."""
    if not os.path.isdir(source):
        what = "a file" if os.path.exists(source) else "nothing"
        raise ValueError(
            f"No image folder at {source!r} ({what} there): give a folder root/<split>/<class>/ or root/<class>/, "
            "or 'tfds:NAME' for a TensorFlow Datasets dataset."
        )
    if split is not None and os.path.isdir(os.path.join(source, split)):
        return "split"
    if not _subfolders(source):
        raise ValueError(f"Image folder {source!r} has no class or split folders; expected {source}/<class>/*.jpg.")
    return "flat"


def default_eval_split(source, data_dir=None):
    """The held-out split of `source`: `validation` if present, else `val`, else `test`."""
    if source.startswith("tfds:"):
        splits = tfds_builder(source[len("tfds:") :], data_dir).info.splits
    else:
        splits = _subfolders(source)
    for name in ("validation", "val", "test"):
        if name in splits:
            return name
    raise ValueError(
        f"{source!r} has neither a 'validation', 'val' nor a 'test' split; pass the eval split "
        f"explicitly (or use the flat layout root/<class>/ with a validation split). Found: {sorted(splits)}"
    )


def load_splits(
    source,
    train_split="train",
    eval_split=None,
    *,
    data_dir=None,
    validation_split=0.2,
    seed=0,
    shuffle_files=False,
    shard=None,
):
    """`(train, held_out)` pairs of `load`: `eval_split` (default: `default_eval_split`), or a flat folder's
    `validation_split`; `shuffle_files` and `shard` apply to the training split."""
    training = dict(shuffle_files=shuffle_files, seed=seed, shard=shard)
    if source.startswith("tfds:"):
        train = load(source, train_split, data_dir=data_dir, **training)
        return train, load(source, eval_split or default_eval_split(source, data_dir), data_dir=data_dir)
    if folder_layout(source, train_split) == "flat":
        folder = source
        train = load(source, None, subset="training", validation_split=validation_split, **training)
        held_out = dict(split=None, subset="validation", validation_split=validation_split, seed=seed)
    else:
        folder = os.path.join(source, train_split)
        train = load(source, train_split, **training)
        held_out = dict(split=eval_split or default_eval_split(source))
    class_names = train[1].class_names
    if len(class_names) < 2:
        # Keras would train a 1-logit "classifier".
        raise ValueError(
            f"{folder} has 1 class ({class_names[0]!r}); a classifier needs at least 2: put each class's images in "
            f"its own folder, {os.path.join(folder, '<class>', '*.jpg')}."
        )
    return train, load(source, class_names=class_names, **held_out)


def _subfolders(path):
    with os.scandir(path) as entries:
        return sorted(entry.name for entry in entries if entry.is_dir())


def _index_folder(folder, class_names):
    """`(class_names, paths, labels)` of the image files under `folder/<class>/`; no file is opened."""
    found = _subfolders(folder)
    class_names = tuple(found if class_names is None else class_names)
    unknown = sorted(set(found) - set(class_names))
    if unknown:
        raise ValueError(f"{folder!r} has class folders that are not in the class list {list(class_names)}: {unknown}.")
    paths, labels = [], []
    for label, name in enumerate(class_names):
        walk = os.walk(os.path.join(folder, name))
        files = sorted(
            os.path.join(top, n) for top, _, names in walk for n in names if n.lower().endswith(IMAGE_EXTENSIONS)
        )
        paths += files
        labels += [label] * len(files)
    return class_names, paths, np.asarray(labels, np.int32)


def _load_folder(root, split, class_names, validation_split, subset, shuffle_files, seed, shard):
    folder = root if split is None else os.path.join(root, split)
    if not os.path.isdir(folder):
        raise ValueError(
            f"Image folder {root!r} has no split folder {split!r}; expected {root}/{split}/<class>/*.jpg, "
            f"or split=None for the flat layout {root}/<class>/*.jpg. Found: {_subfolders(root)}"
        )
    class_names, paths, labels = _index_folder(folder, class_names)
    parts = []
    if validation_split is not None:
        # Keras's rule: shuffle every file with the seed, hold out the last part.
        order = np.random.default_rng(seed).permutation(len(paths))
        kept = len(paths) - int(validation_split * len(paths))
        keep = np.sort(order[kept:] if subset == "validation" else order[:kept])
        paths, labels = [paths[i] for i in keep], labels[keep]
        parts.append(f"{subset} subset")
    if not paths:
        raise ValueError(f"No {'/'.join(IMAGE_EXTENSIONS)} images under {folder}/<class>/.")
    if shard is not None:
        num_shards, index = shard
        if len(paths) < num_shards:
            raise ValueError(
                f"{folder} has {len(paths)} image(s), fewer than the {num_shards} shards. Received: {shard}"
            )
        paths, labels = paths[index::num_shards], labels[index::num_shards]
        parts.append(f"shard {index} of {num_shards}")
    tf = _tf()
    with tf.device("/cpu:0"):  # beside tf.data's functions, which run on the host
        decoded = tf.Variable(tf.zeros([len(paths)], tf.bool), trainable=False)
    dataset = tf.data.Dataset.from_tensor_slices((np.arange(len(paths)), paths, labels))
    if shuffle_files:
        dataset = dataset.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)

    def decode(index, path, label):
        # channels=3 turns grayscale and palette images into RGB and drops alpha.
        image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
        with tf.control_dependencies([image]):
            mark = decoded.scatter_update(tf.IndexedSlices(tf.constant([True]), index[None]))
        with tf.control_dependencies([mark]):
            return tf.identity(image), label

    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.ignore_errors(log_warning=True)

    def fingerprint():
        stats = [os.stat(path) for path in paths]
        return _digest("\n".join(paths), labels, np.asarray([(s.st_size, s.st_mtime_ns) for s in stats], np.int64))

    where = folder + (f" ({', '.join(parts)})" if parts else "")
    return dataset, SourceInfo(len(paths), len(class_names), class_names, fingerprint, where, paths, decoded)


def check_readable(dataset, info):
    """Fails in one line if an image folder has no image that decodes (`fit` would end in `StopIteration`)."""
    if info.decoded is None:
        return
    for _ in dataset.take(1):
        return
    tf = _tf()
    first, example = info.files[0], ""
    try:
        tf.io.decode_image(tf.io.read_file(first), channels=3, expand_animations=False)
    except tf.errors.OpError as error:
        # The decoder's own words, without TensorFlow's node and device decoration.
        reason = error.message.splitlines()[0].split("}} ")[-1].split(" [Op:")[0].strip()
        example = f" (e.g. {first}: {reason})"
    count = len(info.files)
    files = "the image file" if count == 1 else f"all {count} image files"
    raise ValueError(f"No readable images under {info.folder}: {files} failed to decode{example}")


def from_arrays(images, labels, num_classes=None, class_names=None):
    """Wraps images `(N, H, W[, 1 or 3])` in [0, 255] and int labels `(N,)` as `(dataset, SourceInfo)`.

    `num_classes` defaults to `max(labels) + 1`; `class_names` is an optional sequence of `num_classes` names.
    """
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise ValueError(f"`images` must have shape (N, H, W[, 1 or 3]). Received: images.shape={images.shape}")
    if labels.ndim != 1 or len(labels) != len(images) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"`labels` must be integers, one per image. Received: labels.shape={labels.shape} {labels.dtype}"
        )
    if num_classes is None:
        num_classes = int(labels.max()) + 1 if len(labels) else 0
    validation.positive_int("num_classes", num_classes)
    bad = (labels < 0) | (labels >= num_classes)
    if bad.any():
        raise ValueError(
            f"Labels must lie in [0, num_classes={num_classes}); {int(bad.sum())} do not, e.g. "
            f"{labels[bad][:5].tolist()}. Pass the right `num_classes` or fix the labels."
        )
    if class_names is not None and len(class_names) != num_classes:
        raise ValueError(f"`class_names` must have one name per class ({num_classes}). Received: {class_names!r}")
    tf = _tf()
    dataset = tf.data.Dataset.from_tensor_slices((images, labels.astype(np.int32)))
    if images.shape[-1] == 1:
        dataset = dataset.map(lambda image, label: (tf.image.grayscale_to_rgb(image), label))
    identity = _digest("arrays", images.shape, images.dtype, images, labels)
    names = None if class_names is None else tuple(class_names)
    return dataset, SourceInfo(len(images), int(num_classes), names, fingerprint=lambda: identity)


def _augmentation(image_size, area_range, flip, randaugment, seed, naflex):
    """The per-image map of `train_pipeline`: Inception crop (or the whole image), resize, flip, RandAugment; or,
    with `naflex`, flip and RandAugment of the whole image, then its NaFlex patches."""
    import keras

    tf = _tf()
    randaugment_layer = keras.layers.RandAugment(value_range=(0, 255), seed=seed) if randaugment else None

    def augment(image, label):
        if naflex is not None:
            # No crop and no resize but NaFlex's own: the aspect ratio is what the model learns from.
            image = tf.cast(image, tf.float32)
            if flip:
                image = tf.image.random_flip_left_right(image, seed=seed)
            if randaugment_layer is not None:
                image = randaugment_layer(image)
            return naflex_patches(image, *naflex), label
        if area_range is not None:
            begin, size, _ = tf.image.sample_distorted_bounding_box(
                tf.shape(image),
                bounding_boxes=tf.zeros((1, 0, 4)),
                min_object_covered=0.0,
                aspect_ratio_range=ASPECT_RATIO_RANGE,
                area_range=area_range,
                max_attempts=10,
                use_image_if_no_bounding_boxes=True,
                seed=seed,
            )
            image = tf.slice(image, begin, size)
        image = tf.image.resize(image, image_size, method="bilinear")
        if flip:
            image = tf.image.random_flip_left_right(image, seed=seed)
        image = tf.ensure_shape(image, image_size + (3,))
        if randaugment_layer is not None:
            image = randaugment_layer(tf.clip_by_value(image, 0.0, 255.0))
        return tf.cast(image, tf.float32), label

    return augment


def train_pipeline(
    dataset,
    *,
    image_size,
    batch_size,
    num_classes,
    area_range=DEFAULT_AREA_RANGE,
    flip=True,
    randaugment=False,
    mixup_alpha=0.0,
    cutmix_alpha=0.0,
    shuffle_buffer=10_000,
    repeat=False,
    cache=False,
    shard=None,
    seed=None,
    naflex=None,
):
    """The training pipeline: shuffle, augment, batch; every batch full (static shapes).

    Returns a `tf.data.Dataset` of `(images, labels)`, the labels one-hot with MixUp or CutMix.

    Args:
        dataset: `(image, label)` pairs from `load` or `from_arrays`.
        image_size: int or `(height, width)`, the model's input size; `None` with `naflex`.
        batch_size: int.
        num_classes: int, for one-hot labels with MixUp or CutMix.
        area_range: `(min, max)` area fraction of the Inception crop; `None` resizes the whole image instead.
        flip: bool, random horizontal flips.
        randaugment: bool, `keras.layers.RandAugment` on the crop.
        mixup_alpha: float, `keras.layers.MixUp` alpha; 0 disables it.
        cutmix_alpha: float, `keras.layers.CutMix` alpha; 0 disables it.
        shuffle_buffer: int, decoded examples in the shuffle buffer.
        repeat: bool, repeat forever (pass `steps_per_epoch` to `fit`); `False` gives one pass.
        cache: bool, cache the decoded images in memory (small datasets).
        shard: `(num_shards, index)` to read only this host's part.
        seed: optional int for shuffling and augmentation.
        naflex: optional `(patch_size, max_num_patches)`: batches of NaFlex dicts (`naflex_patches`) of the whole
            images, each keeping its aspect ratio (flip and RandAugment apply; no crop, no MixUp or CutMix).
    """
    import keras

    image_size = _image_size(image_size, naflex)
    validation.positive_int("batch_size", batch_size)
    validation.positive_int("num_classes", num_classes)
    if area_range is not None and not (
        isinstance(area_range, (tuple, list)) and len(area_range) == 2 and 0 < area_range[0] <= area_range[1] <= 1
    ):
        raise ValueError(f"`area_range` must be None or (min, max) with 0 < min <= max <= 1. Received: {area_range!r}")
    mixup_alpha = validation.finite_float("mixup_alpha", mixup_alpha, minimum=0)
    cutmix_alpha = validation.finite_float("cutmix_alpha", cutmix_alpha, minimum=0)
    if naflex is not None and (mixup_alpha or cutmix_alpha):
        raise ValueError("MixUp and CutMix cannot mix NaFlex images: their patch grids differ. Pass `naflex=None`.")
    tf = _tf()
    if shard is not None:
        dataset = dataset.shard(*shard)
    examples = int(dataset.cardinality())  # unknown (< 0) for a folder
    if not repeat and 0 <= examples < batch_size:
        raise ValueError(
            f"The source has {examples} images, fewer than one batch of {batch_size}: every batch is full, so one "
            "pass would give no batch. Pass a smaller `batch_size`, or `repeat=True`."
        )
    if cache:
        dataset = dataset.cache()
    dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    augment = _augmentation(image_size, area_range, flip, randaugment, seed, naflex)
    dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    mixers = []
    if mixup_alpha:
        mixers.append(keras.layers.MixUp(alpha=mixup_alpha, seed=seed))
    if cutmix_alpha:
        mixers.append(keras.layers.CutMix(factor=cutmix_alpha, seed=seed))
    if mixers:

        def mix(images, labels):
            data = {"images": images, "labels": tf.one_hot(labels, num_classes)}
            for mixer in mixers:
                data = mixer(data)
            return data["images"], data["labels"]

        dataset = dataset.map(mix, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def eval_pipeline(
    dataset,
    *,
    image_size,
    batch_size,
    crop_fraction=1.0,
    static_shapes=False,
    num_examples=None,
    cache=False,
    shard=None,
    naflex=None,
):
    """The evaluation pipeline: resize (or NaFlex patches), batch; every example once, in the source's order.

    Returns a `tf.data.Dataset` of `(images, labels)`, or `(images, labels, weights)` with `static_shapes` or
    `num_examples`.

    Args:
        dataset: `(image, label)` pairs from `load` or `from_arrays`.
        image_size: int or `(height, width)`; `None` with `naflex`.
        batch_size: int.
        crop_fraction: float in (0, 1], central crop before the resize (1.0: the official plain resize).
        static_shapes: bool, every batch full, the last one padded with zero images of weight 0.
        num_examples: optional int, `SourceInfo.num_examples` (before `shard`): the batches are known unread.
        cache: bool, cache the resized images in memory.
        shard: `(num_shards, index)` to evaluate only this host's part.
        naflex: optional `(patch_size, max_num_patches)`: NaFlex dicts (`naflex_patches`), aspect ratios kept.
    """
    image_size = _image_size(image_size, naflex)
    validation.positive_int("batch_size", batch_size)
    validation.finite_float("crop_fraction", crop_fraction, minimum=0, maximum=1, include_minimum=False)
    if shard is not None:
        dataset = dataset.shard(*shard)
    tf = _tf()

    def preprocess(image, label):
        if crop_fraction < 1.0:
            image = tf.image.central_crop(image, crop_fraction)
        if naflex is not None:
            return naflex_patches(tf.cast(image, tf.float32), *naflex), label
        image = tf.ensure_shape(tf.image.resize(image, image_size, method="bilinear"), image_size + (3,))
        return tf.cast(image, tf.float32), label

    dataset = dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if cache:
        dataset = dataset.cache()
    if num_examples is None and not static_shapes:
        return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)

    examples = int(dataset.cardinality())
    if num_examples is not None:
        examples = num_examples if shard is None else len(range(shard[1], num_examples, shard[0]))
    dataset = dataset.map(lambda image, label: (image, label, tf.constant(1.0)))
    # Zeros of the images' structure (a NaFlex dict's: all padding).
    zeros = tf.nest.map_structure(lambda spec: tf.zeros(spec.shape, spec.dtype), dataset.element_spec[0])
    padding = tf.data.Dataset.from_tensors((zeros, tf.constant(0, tf.int32), tf.constant(0.0)))
    if examples >= 0:
        # Unreadable files are replaced by padding rows: a length tf.data knows (big_vision pads eval too).
        rows = math.ceil(examples / batch_size) * batch_size if static_shapes else examples
        dataset = dataset.concatenate(padding.repeat()).take(rows)
    else:
        # N examples + (batch_size - 1) padding rows make exactly ceil(N / batch_size) full batches.
        dataset = dataset.concatenate(padding.repeat(batch_size - 1))
    return dataset.batch(batch_size, drop_remainder=static_shapes).prefetch(tf.data.AUTOTUNE)


def _image_size(image_size, naflex):
    """The pipelines' `image_size` pair, or None with `naflex` (checked), whose images keep their own sizes."""
    if naflex is None:
        return validation.pair("image_size", image_size)
    if image_size is not None or not isinstance(naflex, (tuple, list)) or len(naflex) != 2:
        raise ValueError(
            "`naflex` is `(patch_size, max_num_patches)`, and the images keep their own sizes: pass image_size=None. "
            f"Received: naflex={naflex!r}, image_size={image_size!r}"
        )
    validation.pair("patch_size", naflex[0])
    validation.positive_int("max_num_patches", naflex[1])
    return None


def naflex_patches(image, patch_size, max_num_patches):
    """One image `(H, W, C)` of any size as NaFlex input, in TensorFlow ops, for `dataset.map` before `batch`.

    The dict of `keras_vit.NaFlexPatches` for one image, without the batch axis: `"patches"` float32
    `(max_num_patches, ph * pw * C)`, `"spatial_shapes"` int32 `(2,)` and `"mask"` bool `(max_num_patches,)`, of
    fixed shapes, so that images of different sizes batch together. C must be known statically.

    >>> import tensorflow as tf
    >>> images = tf.data.Dataset.from_generator(
    ...     lambda: (np.zeros(size + (3,), "uint8") for size in ((48, 80), (64, 32))),
    ...     output_signature=tf.TensorSpec((None, None, 3), tf.uint8),
    ... )
    >>> batch = next(iter(images.map(lambda image: naflex_patches(image, 16, 64)).batch(2)))
    >>> batch["patches"].shape, batch["spatial_shapes"].numpy().tolist()
    (TensorShape([2, 64, 768]), [[6, 10], [10, 5]])
    """
    tf = _tf()
    patch = validation.pair("patch_size", patch_size)
    image = tf.convert_to_tensor(image)
    if image.shape.rank != 3 or image.shape[-1] is None or 0 in image.shape[:2]:
        raise ValueError(
            f"`naflex_patches` takes one non-empty image (H, W, C), C static. Received: shape={image.shape}"
        )
    sides = tf.cast(tf.shape(image)[:2], tf.float64)
    grid = patches.naflex_grid((sides[0], sides[1]), patch, max_num_patches, ceil=tf.math.ceil, where=tf.where)
    rows, cols = (tf.cast(side, tf.int32) for side in grid)
    # Resizing to the image's own size is exact: the layer's skipped resize needs no `tf.cond` here.
    image = tf.image.resize(tf.cast(image, tf.float32), (rows * patch[0], cols * patch[1]), antialias=True)
    return {
        "patches": patches.cut_patches(tf, image[None], (rows, cols), patch, max_num_patches)[0],
        "spatial_shapes": tf.stack([rows, cols]),
        "mask": tf.range(max_num_patches) < rows * cols,
    }
