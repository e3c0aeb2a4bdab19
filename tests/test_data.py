"""tf.data pipelines against image folders and a TFDS dataset built here (no mocks, no network).

The pipelines are tf.data on every backend: the TensorFlow run tests them.
"""

import os
import re
import warnings

import keras
import numpy as np
import pytest

from keras_vit.training import data
from tests.helpers import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "tensorflow", reason="tf.data pipelines are tested on the tensorflow run")

IMAGE_SIZE = 8


def _write_folder(root):
    """root/{train,test}/{cat,dog}/ with RGB PNGs, one grayscale JPEG, one corrupt file."""
    from PIL import Image

    rng = np.random.default_rng(0)
    counts = {"train": {"cat": 5, "dog": 4}, "test": {"cat": 3, "dog": 4}}
    for split, classes in counts.items():
        for name, count in classes.items():
            folder = os.path.join(root, split, name)
            os.makedirs(folder)
            for index in range(count):
                pixels = rng.integers(0, 256, size=(10 + index, 12, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(os.path.join(folder, f"{index}.png"))
    gray = rng.integers(0, 256, size=(9, 9), dtype=np.uint8)
    Image.fromarray(gray, mode="L").save(os.path.join(root, "train", "dog", "gray.jpg"))
    with open(os.path.join(root, "train", "cat", "corrupt.png"), "wb") as file:
        file.write(b"\x89PNG\r\n\x1a\n not really a png")
    with open(os.path.join(root, "train", "cat", "notes.txt"), "w") as file:
        file.write("not an image")
    return counts


@pytest.fixture()
def folder(tmp_path):
    root = str(tmp_path / "images")
    _write_folder(root)
    return root


def _collect(dataset):
    batches = [tuple(np.asarray(t) for t in batch) for batch in dataset]
    return [np.concatenate([b[i] for b in batches]) for i in range(len(batches[0]))], batches


def test_folder_counts_and_skips_corrupt_files(folder):
    dataset, info = data.load(folder, "train")
    images = [np.asarray(image) for image, _ in dataset]
    images += [np.asarray(image) for image, _ in dataset]  # a second epoch lists the file once
    assert info.class_names == ("cat", "dog")
    assert info.num_classes == 2
    # 5 cat + 4 dog PNGs + the grayscale JPEG + the corrupt PNG indexed; the .txt is not.
    assert info.num_examples == 11
    assert len(images) == 20  # the corrupt PNG is skipped in each epoch
    assert info.skipped() == [os.path.join(folder, "train", "cat", "corrupt.png")]
    assert all(image.ndim == 3 and image.shape[-1] == 3 and image.dtype == np.uint8 for image in images)


def _write_unreadable(folder, count):
    """`count` text files named *.jpg in `folder`: indexed as images, none decodes."""
    os.makedirs(folder, exist_ok=True)
    for index in range(count):
        with open(os.path.join(folder, f"{index}.jpg"), "w") as file:
            file.write("not an image")


def test_folder_where_no_image_decodes_is_one_error(tmp_path):
    root = str(tmp_path / "bad")
    _write_unreadable(os.path.join(root, "a"), 3)
    _write_unreadable(os.path.join(root, "b"), 3)
    example = r"\(e\.g\. .*bad/a/0\.jpg: Unknown image file format"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset, info = data.load(root, shuffle_files=True, seed=0)
        expected = f"^No readable images under {re.escape(root)}: all 6 image files failed to decode {example}"
        with pytest.raises(ValueError, match=expected):
            data.check_readable(dataset, info)
        assert list(data.eval_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=2)) == []
        part, part_info = data.load(root, validation_split=0.5, subset="validation", seed=0)
        with pytest.raises(ValueError, match=r"under .*bad \(validation subset\): all 3 image files"):
            data.check_readable(part, part_info)
    assert len(info.skipped()) == 6
    assert [str(w.message) for w in caught] == []  # one error, not a warning per file
    # One readable file is enough; arrays have nothing to decode.
    from PIL import Image

    Image.fromarray(np.full((6, 6, 3), 9, np.uint8)).save(os.path.join(root, "b", "9.png"))
    dataset, info = data.load(root)
    data.check_readable(dataset, info)
    assert len(list(dataset)) == 1 and len(info.skipped()) == 6
    arrays, array_info = data.from_arrays(np.zeros((2, 4, 4, 3), np.uint8), np.array([0, 1]))
    data.check_readable(arrays, array_info)
    assert array_info.skipped() == []


def test_flat_layout_with_validation_split_partitions_the_files(tmp_path):
    root = str(tmp_path / "flat")
    _write_folder(root)
    flat = os.path.join(root, "train")  # train/<class>/ is a flat folder of its own
    whole, whole_info = data.load(flat)
    assert whole_info.class_names == ("cat", "dog") and whole_info.num_examples == 11
    parts = [
        data.load(flat, validation_split=0.3, subset=subset, seed=3, class_names=("cat", "dog"))
        for subset in ("training", "validation")
    ]
    (train, train_info), (held_out, held_out_info) = parts
    assert (train_info.num_examples, held_out_info.num_examples) == (8, 3)  # int(0.3 * 11) held out, as Keras

    def digests(dataset):
        return sorted(hash(np.asarray(image).tobytes()) for image, _ in dataset)

    train_set, held_out_set = digests(train), digests(held_out)
    assert not set(train_set) & set(held_out_set)
    assert sorted(train_set + held_out_set) == digests(whole)  # together: every readable file once
    again, _ = data.load(flat, validation_split=0.3, subset="validation", seed=3)
    assert digests(again) == held_out_set
    with pytest.raises(ValueError, match="needs a `seed`"):
        data.load(flat, validation_split=0.3, subset="training")
    with pytest.raises(ValueError, match="subset"):
        data.load(flat, validation_split=0.3, subset="train", seed=0)
    with pytest.raises(ValueError, match="validation_split"):
        data.load(flat, validation_split=1.0, subset="training", seed=0)
    with pytest.raises(ValueError, match="split=None for the flat layout"):
        data.load(flat, "train")
    assert data.folder_layout(root, "train") == "split" and data.folder_layout(flat, "train") == "flat"


def test_train_pipeline_shapes_static_batches_and_finite_unless_repeated(folder):
    dataset, _ = data.load(folder, "train", shuffle_files=True, seed=0)
    pipeline = data.train_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=4, num_classes=2, seed=0)
    batches = [tuple(np.asarray(t) for t in batch) for batch in pipeline]
    assert len(batches) == 2  # 10 readable images: two full batches, then the epoch ends
    for images, labels in batches:
        assert images.shape == (4, IMAGE_SIZE, IMAGE_SIZE, 3) and images.dtype == np.float32
        assert images.min() >= 0.0 and images.max() <= 255.0  # raw pixels: the model scales them
        assert set(labels.tolist()) <= {0, 1}
    assert pipeline.element_spec[0].shape.as_list() == [4, IMAGE_SIZE, IMAGE_SIZE, 3]  # static, for XLA and TPUs
    repeated = data.train_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=4, num_classes=2, repeat=True)
    assert len(list(repeated.take(7))) == 7
    inputs = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3))
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.GlobalAveragePooling2D()(inputs)))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(pipeline, epochs=2, verbose=0)  # ends without steps_per_epoch
    assert len(history.history["loss"]) == 2


@pytest.mark.parametrize(
    "arguments, match",
    [
        (dict(mixup_alpha=-1), "mixup_alpha"),
        (dict(cutmix_alpha=float("nan")), "cutmix_alpha"),
        (dict(batch_size=0), "batch_size"),
        (dict(image_size=0), "image_size"),
        (dict(area_range=(0.5, 0.2)), "area_range"),
        (dict(area_range=(0.0, 1.0)), "area_range"),
        (dict(area_range=(0.5, 1.5)), "area_range"),
        (dict(num_classes=0), "num_classes"),
        # Fewer images than one full batch: one pass would give none (Keras's fit then ends in StopIteration).
        (dict(batch_size=8), "has 4 images, fewer than one batch of 8"),
        (dict(crop_fraction=0), "crop_fraction"),
        (dict(naflex=(2, 4)), "the images keep their own sizes: pass image_size=None"),
        (dict(image_size=None, naflex=(2, 4), mixup_alpha=0.2), "MixUp and CutMix cannot mix NaFlex images"),
    ],
)
def test_pipelines_reject_bad_arguments(arguments, match):
    dataset, _ = data.from_arrays(np.zeros((4, 6, 6, 3), np.uint8), np.arange(4) % 2)
    options = dict(image_size=4, batch_size=2) | arguments
    with pytest.raises(ValueError, match=match):
        if "crop_fraction" in arguments:
            data.eval_pipeline(dataset, **options)
        else:
            data.train_pipeline(dataset, **(dict(num_classes=2) | options))


def test_indexing_opens_no_file(tmp_path):
    # Empty "images" in nested folders: indexing only lists names (an empty file would fail any decode).
    for label in range(3):
        for sub in range(3):
            folder = tmp_path / f"class_{label}" / f"part_{sub}"
            folder.mkdir(parents=True)
            for index in range(10):
                (folder / f"{index}.JPEG").touch()
    (tmp_path / "class_0" / "README").touch()
    dataset, info = data.load(str(tmp_path))
    assert info.num_examples == 90 and info.class_names == ("class_0", "class_1", "class_2")


def test_eval_pipeline_is_complete_and_deterministic(folder):
    dataset, info = data.load(folder, "test")
    assert info.num_examples == 7
    pipeline = data.eval_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=3)
    (images, labels), _ = _collect(pipeline)
    (images_again, labels_again), _ = _collect(pipeline)
    assert images.shape == (7, IMAGE_SIZE, IMAGE_SIZE, 3)  # 3 + 3 + 1: nothing dropped
    np.testing.assert_array_equal(images, images_again)
    np.testing.assert_array_equal(labels, labels_again)
    assert labels.tolist() == [0, 0, 0, 1, 1, 1, 1]
    assert images.min() >= 0.0 and images.max() <= 255.0
    # Static shapes: the last batch padded, with weight 0.
    padded = data.eval_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=3, static_shapes=True)
    (padded_images, padded_labels, weights), batches = _collect(padded)
    assert [b[0].shape[0] for b in batches] == [3, 3, 3] and weights.tolist() == [1.0] * 7 + [0.0] * 2
    np.testing.assert_array_equal(padded_images[:7], images)
    np.testing.assert_array_equal(padded_labels[:7], labels)


def test_naflex_pipelines_keep_each_images_aspect_ratio():
    import tensorflow as tf

    from keras_vit import NaFlexPatches

    sizes = [(16, 32), (32, 16), (24, 24)]  # 2:1, 1:2, square (resized): grids of at most 32 patches of 4x4
    rng = np.random.default_rng(0)
    examples = [(rng.integers(0, 256, size + (3,), np.uint8), index) for index, size in enumerate(sizes)]
    spec = (tf.TensorSpec((None, None, 3), tf.uint8), tf.TensorSpec((), tf.int32))
    dataset = tf.data.Dataset.from_generator(lambda: iter(examples), output_signature=spec)
    train = data.train_pipeline(dataset, image_size=None, naflex=(4, 32), batch_size=3, num_classes=3)
    shapes = dict(patches=(3, 32, 48), spatial_shapes=(3, 2), mask=(3, 32))  # static, for one compiled step
    assert {name: tuple(spec.shape) for name, spec in train.element_spec[0].items()} == shapes
    ((inputs, labels),) = train.as_numpy_iterator()
    assert dict(zip(labels.tolist(), inputs["spatial_shapes"].tolist())) == {0: [4, 8], 1: [8, 4], 2: [5, 5]}
    valid = [rows * cols for rows, cols in inputs["spatial_shapes"].tolist()]
    assert inputs["mask"].sum(axis=1).tolist() == valid
    # Held out: in order, no augmentation, the last batch padded with an all-padding image of weight 0.
    held_out = data.eval_pipeline(dataset, image_size=None, naflex=(4, 32), batch_size=2, static_shapes=True)
    (first, first_labels, _), (last, last_labels, weights) = held_out.as_numpy_iterator()
    assert first_labels.tolist() == [0, 1] and last["spatial_shapes"].tolist() == [[5, 5], [0, 0]]
    assert weights.tolist() == [1.0, 0.0] and not last["mask"][1].any() and last_labels.tolist() == [2, 0]
    cut = [NaFlexPatches(4, max_num_patches=32)(image)["patches"][0].numpy() for image, _ in examples]
    np.testing.assert_array_equal(np.stack([*first["patches"], last["patches"][0]]), np.stack(cut))  # the layer's


def test_eval_pipeline_knows_a_folders_length_from_its_listing(folder):
    dataset, info = data.load(folder, "train")  # 11 files listed, 10 decode
    pipeline = data.eval_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=3, num_examples=info.num_examples)
    assert int(pipeline.cardinality()) == 4  # ceil(11 / 3), known before any file is read
    (images, labels, weights), batches = _collect(pipeline)
    assert [len(batch[0]) for batch in batches] == [3, 3, 3, 2]
    assert weights.tolist() == [1.0] * 10 + [0.0]  # the unreadable file is a row of weight 0
    padded = data.eval_pipeline(
        dataset, image_size=IMAGE_SIZE, batch_size=3, static_shapes=True, num_examples=info.num_examples
    )
    (_, _, padded_weights), batches = _collect(padded)
    assert [len(batch[0]) for batch in batches] == [3, 3, 3, 3] and padded_weights.tolist() == weights.tolist() + [0]
    sharded = data.eval_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=3, num_examples=11, shard=(2, 1))
    assert int(sharded.cardinality()) == 2  # files 1, 3, 5, 7, 9 of 11
    inputs = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3))
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.GlobalAveragePooling2D()(inputs)))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True), weighted_metrics=["accuracy"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.evaluate(pipeline, verbose=0)
    assert [str(w.message) for w in caught if "ran out of data" in str(w.message)] == []


def test_a_folders_fingerprint_follows_its_files(folder):
    _, info = data.load(folder, "test")
    before = info.fingerprint()
    assert data.load(folder, "test")[1].fingerprint() == before != data.load(folder, "train")[1].fingerprint()
    path = os.path.join(folder, "test", "cat", "0.png")
    os.utime(path, ns=(0, os.stat(path).st_mtime_ns + 10**9))  # the file rewritten in place
    assert info.fingerprint() != before


def test_bad_sources_are_errors(folder, tmp_path):
    os.makedirs(os.path.join(folder, "test", "zebra"))
    with pytest.raises(ValueError, match="zebra"):
        data.load(folder, "test", class_names=("cat", "dog"))  # a class the training split does not have
    with pytest.raises(ValueError, match="no split folder"):
        data.load(folder, "validation")
    with pytest.raises(ValueError, match="neither"):
        data.load(str(tmp_path / "missing"), "train")
    os.makedirs(tmp_path / "empty" / "train" / "a")
    with pytest.raises(ValueError, match="No .* images under"):
        data.load(str(tmp_path / "empty"), "train")
    with pytest.raises(ValueError, match="dataset name"):
        data.load("tfds:", "train")
    with pytest.raises(ValueError, match="from_arrays"):
        data.load(np.zeros(3), "train")


def test_arrays_validate_labels_and_grayscale_and_shard_the_eval_set():
    images = np.zeros((4, 6, 6), np.uint8)
    with pytest.raises(ValueError, match=r"\[0, num_classes=3\)"):
        data.from_arrays(images, np.array([0, 1, 2, 3]), num_classes=3)
    with pytest.raises(ValueError, match=r"labels.shape=\(2,\)"):
        data.from_arrays(images, np.array([0, 1]))
    dataset, info = data.from_arrays(images + 255, np.array([0, 1, 2, 0]), num_classes=3)
    ((batch, labels),) = list(data.eval_pipeline(dataset, image_size=4, batch_size=8))
    assert np.asarray(batch).shape == (4, 4, 4, 3) and np.asarray(batch).dtype == np.float32
    np.testing.assert_allclose(np.asarray(batch), 255.0)  # grayscale 255 -> RGB 255: the models scale, not the data
    dataset, _ = data.from_arrays(np.zeros((5, 2, 2, 3), np.uint8), np.arange(5))
    shards = [_collect(data.eval_pipeline(dataset, image_size=2, batch_size=2, shard=(2, i)))[0][1] for i in (0, 1)]
    assert sorted(np.concatenate(shards).tolist()) == [0, 1, 2, 3, 4]  # disjoint, together the whole set


def test_folder_shards_are_disjoint_and_cover_the_files_before_decoding(folder):
    whole, whole_info = data.load(folder, "train")
    parts = [data.load(folder, "train", shard=(3, index)) for index in range(3)]
    # Each host counts only its own files (its epoch length), and decodes only them.
    assert sum(info.num_examples for _, info in parts) == whole_info.num_examples
    pixels = [sorted(image.tobytes() for image, _ in dataset.as_numpy_iterator()) for dataset, _ in parts]
    assert sorted(sum(pixels, [])) == sorted(image.tobytes() for image, _ in whole.as_numpy_iterator())
    with pytest.raises(ValueError, match="fewer than the 1000 shards"):
        data.load(folder, "train", shard=(1000, 0))


def test_mixup_cutmix_randaugment_give_soft_labels():
    rng = np.random.default_rng(0)
    dataset, _ = data.from_arrays(rng.integers(0, 256, (8, 12, 12, 3), dtype=np.uint8), np.arange(8) % 4)
    pipeline = data.train_pipeline(
        dataset, image_size=8, batch_size=4, num_classes=4, randaugment=True, mixup_alpha=0.4, cutmix_alpha=1.0, seed=0
    )
    images, labels = (np.asarray(t) for t in next(iter(pipeline)))
    assert images.shape == (4, 8, 8, 3) and labels.shape == (4, 4)
    assert images.min() >= -1e-3 and images.max() <= 255.0 + 1e-3
    np.testing.assert_allclose(labels.sum(axis=-1), 1.0, rtol=1e-5)


def _tiny_tfds_builder(data_dir):
    """A 2-class TFDS dataset (train 12, test 5 RGB images), prepared offline into `data_dir`."""
    import tensorflow_datasets as tfds
    from etils import epath

    class KerasVitTinyImages(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return self.dataset_info_from_configs(
                features=tfds.features.FeaturesDict(
                    {
                        "image": tfds.features.Image(shape=(None, None, 3)),
                        "label": tfds.features.ClassLabel(names=["ant", "bee"]),
                    }
                ),
                supervised_keys=("image", "label"),
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(12, 0), "test": self._generate_examples(5, 1)}

        def _generate_examples(self, count, seed):
            rng = np.random.default_rng(seed)
            for index in range(count):
                image = rng.integers(0, 256, size=(10 + index, 9, 3), dtype=np.uint8)
                yield index, {"image": image, "label": index % 2}

    # TFDS looks for the builder's checksums beside its module; a test module
    # has no package folder, so point it at an empty one.
    code_dir = os.path.join(data_dir, "code")
    os.makedirs(code_dir, exist_ok=True)
    KerasVitTinyImages.pkg_dir_path = epath.Path(code_dir)
    builder = KerasVitTinyImages(data_dir=data_dir)
    builder.download_and_prepare()
    return builder.name


def test_tfds_dataset_built_offline_loads_shards_and_batches(tmp_path, monkeypatch):
    data_dir = str(tmp_path / "tfds")
    name = _tiny_tfds_builder(data_dir)
    monkeypatch.setenv("KERAS_VIT_OFFLINE", "1")  # a prepared dataset needs no network
    train, info = data.load(f"tfds:{name}", "train", data_dir=data_dir, shuffle_files=True, seed=0)
    evaluation, eval_info = data.load(f"tfds:{name}", "test", data_dir=data_dir)
    assert (info.num_examples, eval_info.num_examples) == (12, 5)
    assert info.num_classes == 2 and info.class_names == ("ant", "bee")
    assert data.default_eval_split(f"tfds:{name}", data_dir) == "test"
    # Two hosts read disjoint sub-splits that together are the split.
    parts = [data.load(f"tfds:{name}", "train", data_dir=data_dir, shard=(2, index)) for index in range(2)]
    shard_images = [[image.tobytes() for image, _ in part.as_numpy_iterator()] for part, _ in parts]
    all_images = sorted(image.tobytes() for image, _ in train.as_numpy_iterator())
    assert [len(images) for images in shard_images] == [info.num_examples for _, info in parts] == [6, 6]
    assert sorted(shard_images[0] + shard_images[1]) == all_images
    (images, _), _ = _collect(data.train_pipeline(train, image_size=IMAGE_SIZE, batch_size=4, num_classes=2, seed=0))
    assert images.shape == (12, IMAGE_SIZE, IMAGE_SIZE, 3)
    (eval_images, eval_labels), _ = _collect(data.eval_pipeline(evaluation, image_size=IMAGE_SIZE, batch_size=4))
    assert eval_images.shape == (5, IMAGE_SIZE, IMAGE_SIZE, 3) and sorted(eval_labels.tolist()) == [0, 0, 0, 1, 1]


@pytest.mark.parametrize("offline", ["declared", "unreachable"])
def test_unprepared_tfds_dataset_fails_at_once_with_how_to_prepare_it(tmp_path, monkeypatch, offline):
    # A real TFDS name that is not prepared in the data dir: nothing is downloaded, the error says how to prepare
    # it. Offline is declared (KERAS_VIT_OFFLINE) or detected: the probe of TFDS's host fails (here a closed
    # local port, so the test does not depend on this machine's network).
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    if offline == "declared":
        monkeypatch.setenv("KERAS_VIT_OFFLINE", "1")
    else:
        monkeypatch.delenv("KERAS_VIT_OFFLINE", raising=False)
        monkeypatch.setattr(data, "TFDS_PROBE_URL", "http://127.0.0.1:9")
    empty = str(tmp_path / "tfds")
    with pytest.raises(data.DataNotPreparedError) as info:
        data.load("tfds:cifar10", "train", data_dir=empty)
    assert "\n" not in str(info.value) and "`tfds build cifar10 --data_dir DIR`" in str(info.value)
    assert ("offline mode is on" if offline == "declared" else "unreachable") in str(info.value)
    # A partly written data dir (no dataset_info.json) is no prepared copy: TFDS's own check says so.
    os.makedirs(os.path.join(empty, "cifar10", "3.0.2"))
    with pytest.raises(data.DataNotPreparedError):
        data.default_eval_split("tfds:cifar10", empty)
