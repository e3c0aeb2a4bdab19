"""Input pipelines: `tf.data` for TFDS datasets, image folders and arrays.

The paper's preprocessing, written once and shared by every source:

* train: Inception crop (5-100 % of the area, aspect 3/4-4/3), random
  horizontal flip, resize to the model's size; optional RandAugment, MixUp
  and CutMix from Keras core;
* eval: resize (optionally a central crop first), in a fixed order, with every
  example kept: with `static_shapes=True` the last batch is padded and the
  padding carries a sample weight of 0, so TPUs see one batch shape and the
  metrics count each example exactly once;
* pixels to [-1, 1] (`x / 127.5 - 1`), the scaling of every ViT checkpoint.

Keras 3 consumes `tf.data` on every backend, so these pipelines feed JAX and
PyTorch models too. TensorFlow is imported inside the functions: `import
keras_vit` does not need it.

Sources are strings: `"tfds:NAME"` (a TensorFlow Datasets name) or the path of
a folder laid out as `root/<split>/<class>/*.jpg|png`; arrays go through
`from_arrays`.

Example:

```python
train, info = keras_vit.data.load("tfds:cifar10", "train")
train = keras_vit.data.train_pipeline(
    train, image_size=224, batch_size=64, num_classes=info.num_classes)
```
"""

import dataclasses
import os
import warnings

import numpy as np

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
# The paper's Inception crop keeps 5-100 % of the image area (big_vision's
# `inception_crop` default), with aspect ratios in [3/4, 4/3].
DEFAULT_AREA_RANGE = (0.05, 1.0)
ASPECT_RATIO_RANGE = (3.0 / 4.0, 4.0 / 3.0)


@dataclasses.dataclass(frozen=True)
class SourceInfo:
    """What a loaded split holds.

    Attributes:
        num_examples: int, the examples in the split (corrupt files excluded),
            or `None` when the source does not say.
        num_classes: int, the classes of the labels.
        class_names: tuple of str, or `None`.
        skipped: tuple of str, the files skipped because they could not be
            decoded (image folders only).
    """

    num_examples: object
    num_classes: int
    class_names: object = None
    skipped: tuple = ()


def _tf():
    import tensorflow as tf

    return tf


def load(source, split, *, data_dir=None, class_names=None):
    """Loads one split of a dataset as `(image uint8 HxWx3, label int32)` pairs.

    Args:
        source: `"tfds:NAME"` for a TensorFlow Datasets dataset (`as_supervised`
            pairs), or the path of a folder `root/<split>/<class>/*.jpg|png`.
        split: the split, e.g. `"train"`, `"test"` or `"train[:90%]"` (TFDS).
        data_dir: TFDS data directory (TFDS only).
        class_names: folders only: the class list of the training split, so
            that an eval split uses the same label numbers; `None` reads the
            folders of this split.

    Returns:
        `(dataset, SourceInfo)`. The dataset yields unbatched, undecoded-size
        images; pass it to `train_pipeline` or `eval_pipeline`.

    Raises:
        ValueError: unknown source, missing split or class folder, or no images.
    """
    if not isinstance(source, str):
        raise ValueError(
            "`source` must be 'tfds:NAME' or the path of an image folder; use "
            f"`from_arrays` for arrays. Received: source={source!r}"
        )
    if source.startswith("tfds:"):
        return _load_tfds(source[len("tfds:") :], split, data_dir)
    if os.path.isdir(source):
        return _load_folder(source, split, class_names)
    raise ValueError(f"`source` is neither 'tfds:NAME' nor an existing folder. Received: source={source!r}")


def _load_tfds(name, split, data_dir):
    import tensorflow_datasets as tfds

    if not name:
        raise ValueError("`source` 'tfds:' needs a dataset name, e.g. 'tfds:cifar10'.")
    builder = tfds.builder(name, data_dir=data_dir)
    features = builder.info.features
    label_feature = features[builder.info.supervised_keys[1]] if builder.info.supervised_keys else None
    if label_feature is None or not hasattr(label_feature, "num_classes"):
        raise ValueError(
            f"TFDS dataset {name!r} has no (image, class label) supervised keys; "
            "write its pipeline with `from_arrays` or an image folder."
        )
    dataset = tfds.load(name, split=split, data_dir=data_dir, as_supervised=True, shuffle_files=False)
    try:
        num_examples = builder.info.splits[split].num_examples or None
    except (KeyError, ValueError):
        num_examples = None
    tf = _tf()

    def to_rgb(image, label):
        # Grayscale datasets (MNIST) are repeated to the 3 channels of the model.
        image = tf.cond(tf.equal(tf.shape(image)[-1], 1), lambda: tf.image.grayscale_to_rgb(image), lambda: image)
        return image, tf.cast(label, tf.int32)

    dataset = dataset.map(to_rgb, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    info = SourceInfo(num_examples, label_feature.num_classes, tuple(label_feature.names))
    return _check_labels(dataset, info.num_classes), info


def default_eval_split(source, data_dir=None):
    """The held-out split of `source`: `validation` if present, else `test`."""
    if source.startswith("tfds:"):
        import tensorflow_datasets as tfds

        splits = tfds.builder(source[len("tfds:") :], data_dir=data_dir).info.splits
    else:
        splits = [entry for entry in os.listdir(source) if os.path.isdir(os.path.join(source, entry))]
    for name in ("validation", "val", "test"):
        if name in splits:
            return name
    raise ValueError(
        f"{source!r} has neither a 'validation', 'val' nor a 'test' split; pass the eval split "
        f"explicitly. Found: {sorted(splits)}"
    )


def _readable_image(path):
    """True when Pillow can decode the whole file (not just its header)."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.load()
        return True
    except Exception:  # Pillow raises many types for bad files (OSError, SyntaxError, ...).
        return False


def _load_folder(root, split, class_names):
    split_dir = os.path.join(root, split)
    if not os.path.isdir(split_dir):
        raise ValueError(
            f"Image folder {root!r} has no split folder {split!r}; expected "
            f"{root}/{split}/<class>/*.jpg. Found: {sorted(os.listdir(root))}"
        )
    found = sorted(entry for entry in os.listdir(split_dir) if os.path.isdir(os.path.join(split_dir, entry)))
    if class_names is None:
        class_names = found
    unknown = sorted(set(found) - set(class_names))
    if unknown:
        raise ValueError(
            f"Split {split!r} of {root!r} has class folders that are not in the class list "
            f"{list(class_names)}: {unknown}. Their labels would be outside [0, {len(class_names)})."
        )
    paths, labels, skipped = [], [], []
    for label, name in enumerate(class_names):
        class_dir = os.path.join(split_dir, name)
        if not os.path.isdir(class_dir):
            continue
        for filename in sorted(os.listdir(class_dir)):
            if not filename.lower().endswith(IMAGE_EXTENSIONS):
                continue
            path = os.path.join(class_dir, filename)
            # Decoding every file once here means a corrupt image is counted
            # and skipped now, not an error deep inside `fit`.
            if _readable_image(path):
                paths.append(path)
                labels.append(label)
            else:
                skipped.append(path)
    if skipped:
        warnings.warn(
            f"Skipped {len(skipped)} unreadable image(s) in {split_dir}: {skipped[:5]}"
            + (" ..." if len(skipped) > 5 else ""),
            stacklevel=3,
        )
    if not paths:
        raise ValueError(f"No readable {'/'.join(IMAGE_EXTENSIONS)} images under {split_dir}/<class>/.")
    tf = _tf()

    def decode(path, label):
        # channels=3 turns grayscale and palette images into RGB and drops alpha.
        image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
        image.set_shape((None, None, 3))
        return image, label

    dataset = tf.data.Dataset.from_tensor_slices((paths, np.asarray(labels, np.int32)))
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return dataset, SourceInfo(len(paths), len(class_names), tuple(class_names), tuple(skipped))


def from_arrays(images, labels, num_classes=None):
    """Wraps in-memory images and integer labels as a source.

    Args:
        images: array `(N, H, W)`, `(N, H, W, 1)` or `(N, H, W, 3)` with pixel
            values in [0, 255].
        labels: int array `(N,)`.
        num_classes: int; defaults to `max(labels) + 1`.

    Returns:
        `(dataset, SourceInfo)` like `load`.

    Raises:
        ValueError: mismatched lengths, bad shapes, or labels outside
            `[0, num_classes)`.
    """
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise ValueError(
            f"`images` must have shape (N, H, W), (N, H, W, 1) or (N, H, W, 3). Received: images.shape={images.shape}"
        )
    if labels.ndim != 1 or len(labels) != len(images):
        raise ValueError(
            f"`labels` must be a vector with one label per image ({len(images)}). Received: labels.shape={labels.shape}"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"`labels` must be integers. Received: labels.dtype={labels.dtype}")
    if num_classes is None:
        num_classes = int(labels.max()) + 1
    bad = (labels < 0) | (labels >= num_classes)
    if bad.any():
        raise ValueError(
            f"Labels must lie in [0, num_classes={num_classes}); {int(bad.sum())} do not, e.g. "
            f"{labels[bad][:5].tolist()}. Pass the right `num_classes` or fix the labels."
        )
    tf = _tf()
    dataset = tf.data.Dataset.from_tensor_slices((images, labels.astype(np.int32)))
    if images.shape[-1] == 1:
        dataset = dataset.map(lambda image, label: (tf.image.grayscale_to_rgb(image), label))
    return dataset, SourceInfo(len(images), int(num_classes))


def _check_labels(dataset, num_classes):
    """Fails the pipeline at the first label outside `[0, num_classes)`."""
    tf = _tf()

    def check(image, label):
        message = f"labels must lie in [0, {num_classes})"
        with tf.control_dependencies(
            [
                tf.debugging.assert_non_negative(label, message=message),
                tf.debugging.assert_less(label, tf.cast(num_classes, label.dtype), message=message),
            ]
        ):
            return image, tf.identity(label)

    return dataset.map(check)


def scale_pixels(images):
    """Maps pixel values in [0, 255] to [-1, 1] as float32 (`x / 127.5 - 1`)."""
    tf = _tf()
    return tf.cast(images, tf.float32) / 127.5 - 1.0


def inception_crop(image, image_size, area_range=DEFAULT_AREA_RANGE, seed=None):
    """A random crop covering `area_range` of the image, resized to `image_size`.

    Args:
        image: uint8 or float tensor `(H, W, C)`.
        image_size: `(height, width)` of the result.
        area_range: `(min, max)` fraction of the image area the crop covers.
        seed: optional int.

    Returns:
        A float32 tensor `(height, width, C)` in the value range of `image`.
    """
    tf = _tf()
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
    crop = tf.slice(image, begin, size)
    return tf.image.resize(crop, image_size, method="bilinear")


def _central_crop_resize(image, image_size, crop_fraction):
    tf = _tf()
    if crop_fraction < 1.0:
        image = tf.image.central_crop(image, crop_fraction)
    return tf.image.resize(image, image_size, method="bilinear")


def _image_size(image_size):
    if isinstance(image_size, int):
        image_size = (image_size, image_size)
    if len(image_size) != 2 or not all(isinstance(s, int) and s > 0 for s in image_size):
        raise ValueError(f"`image_size` must be an int or (height, width). Received: image_size={image_size!r}")
    return tuple(image_size)


def _shard(dataset, shard):
    if shard is None:
        return dataset
    num_shards, index = shard
    if not 0 <= index < num_shards:
        raise ValueError(f"`shard` must be (num_shards, index) with 0 <= index < num_shards. Received: {shard}")
    return dataset.shard(num_shards, index)


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
    repeat=True,
    cache=False,
    shard=None,
    seed=None,
):
    """The training pipeline: shuffle, augment, scale to [-1, 1], batch.

    Batches always have `batch_size` examples (`drop_remainder=True`), the
    static shape TPUs and `jit_compile=True` need.

    Args:
        dataset: `(image, label)` pairs from `load` or `from_arrays`.
        image_size: int or `(height, width)`, the model's input size.
        batch_size: int, the global batch size (per replica x replicas).
        num_classes: int, for one-hot labels when MixUp or CutMix is on.
        area_range: `(min, max)` area fraction of the Inception crop; `None`
            resizes the whole image instead.
        flip: bool, random horizontal flips.
        randaugment: bool, `keras.layers.RandAugment` on the uint8 crop.
        mixup_alpha: float, `keras.layers.MixUp` alpha; 0 disables it.
        cutmix_alpha: float, `keras.layers.CutMix` alpha; 0 disables it.
        shuffle_buffer: int, examples in the shuffle buffer.
        repeat: bool, repeat forever (then pass `steps_per_epoch` to `fit`).
        cache: bool, cache the decoded images in memory (small datasets).
        shard: `(num_shards, index)` to read only this host's part (one
            shard per host in multi-host training).
        seed: optional int for shuffling and augmentation.

    Returns:
        A `tf.data.Dataset` of `(images float32 (B, H, W, 3), labels)`; labels
        are int32 `(B,)`, or one-hot float32 `(B, num_classes)` with MixUp or
        CutMix (use `CategoricalCrossentropy` then).
    """
    import keras

    tf = _tf()
    image_size = _image_size(image_size)
    dataset = _shard(dataset, shard)
    if cache:
        dataset = dataset.cache()
    dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    randaugment_layer = keras.layers.RandAugment(value_range=(0, 255), seed=seed) if randaugment else None

    def augment(image, label):
        if area_range is None:
            image = tf.image.resize(image, image_size, method="bilinear")
        else:
            image = inception_crop(image, image_size, area_range, seed=seed)
        if flip:
            image = tf.image.random_flip_left_right(image, seed=seed)
        # The crop's size is data-dependent; the channels are not.
        image = tf.ensure_shape(image, image_size + (3,))
        if randaugment_layer is not None:
            image = randaugment_layer(tf.clip_by_value(image, 0.0, 255.0))
        return scale_pixels(image), label

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
    cache=False,
    shard=None,
):
    """The evaluation pipeline: resize, scale to [-1, 1], batch, in order.

    Deterministic and complete: every example appears exactly once, in the
    source's order.

    Args:
        dataset: `(image, label)` pairs from `load` or `from_arrays`.
        image_size: int or `(height, width)`.
        batch_size: int.
        crop_fraction: float in (0, 1], central crop before the resize
            (1.0 is the official plain resize; timm uses 0.9 at 224).
        static_shapes: bool. `False`: the last batch may be smaller and the
            pipeline yields `(images, labels)`. `True`: every batch has
            `batch_size` examples, the last one padded with zero images, and
            the pipeline yields `(images, labels, sample_weights)` with weight
            0 on the padding so metrics ignore it (TPUs, `jit_compile`).
        cache: bool, cache the decoded, resized images in memory.
        shard: `(num_shards, index)` to evaluate only this host's part.

    Returns:
        A `tf.data.Dataset`.
    """
    tf = _tf()
    image_size = _image_size(image_size)
    if not 0.0 < crop_fraction <= 1.0:
        raise ValueError(f"`crop_fraction` must be in (0, 1]. Received: crop_fraction={crop_fraction}")
    dataset = _shard(dataset, shard)

    def preprocess(image, label):
        image = tf.ensure_shape(_central_crop_resize(image, image_size, crop_fraction), image_size + (3,))
        return scale_pixels(image), label

    dataset = dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if cache:
        dataset = dataset.cache()
    if not static_shapes:
        return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)

    dataset = dataset.map(lambda image, label: (image, label, tf.constant(1.0)))
    # Padding to a whole number of batches keeps one static shape without
    # dropping the tail (big_vision pads eval the same way).
    padding = tf.data.Dataset.from_tensors(
        (tf.zeros(image_size + (3,), tf.float32), tf.constant(0, tf.int32), tf.constant(0.0))
    ).repeat(batch_size - 1)
    # N real + (batch_size - 1) padded examples make exactly ceil(N / batch_size)
    # full batches, none of them padding only.
    dataset = dataset.concatenate(padding).batch(batch_size, drop_remainder=True)
    return dataset.prefetch(tf.data.AUTOTUNE)
