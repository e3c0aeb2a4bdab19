"""tf.data pipelines against image folders written here and tfds mock data.

The pipelines are tf.data on every backend; they are tested once, on the
TensorFlow backend run of the suite.
"""

import os
import warnings

import numpy as np
import pytest

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
    from keras_vit import data

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset, info = data.load(folder, "train")
    assert info.class_names == ("cat", "dog")
    assert info.num_classes == 2
    # 5 cat + 4 dog PNGs + the grayscale JPEG; the corrupt PNG and the .txt are not examples.
    assert info.num_examples == 10
    assert len(info.skipped) == 1 and info.skipped[0].endswith("corrupt.png")
    assert any("Skipped 1 unreadable" in str(w.message) for w in caught)
    images = [np.asarray(image) for image, _ in dataset]
    assert len(images) == 10
    assert all(image.ndim == 3 and image.shape[-1] == 3 and image.dtype == np.uint8 for image in images)


def test_train_pipeline_shapes_range_and_static_batches(folder):
    from keras_vit import data

    dataset, info = data.load(folder, "train")
    pipeline = data.train_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=4, num_classes=2, seed=1)
    for images, labels in pipeline.take(5):
        images, labels = np.asarray(images), np.asarray(labels)
        assert images.shape == (4, IMAGE_SIZE, IMAGE_SIZE, 3) and images.dtype == np.float32
        assert images.min() >= -1.0 and images.max() <= 1.0
        assert set(labels.tolist()) <= {0, 1}
    # Static batch dimension (drop_remainder) for TPUs and jit_compile.
    assert pipeline.element_spec[0].shape.as_list() == [4, IMAGE_SIZE, IMAGE_SIZE, 3]


def test_eval_pipeline_is_complete_and_deterministic(folder):
    from keras_vit import data

    dataset, info = data.load(folder, "test")
    assert info.num_examples == 7
    pipeline = data.eval_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=3)
    (images, labels), _ = _collect(pipeline)
    (images_again, labels_again), _ = _collect(pipeline)
    assert images.shape == (7, IMAGE_SIZE, IMAGE_SIZE, 3)  # 3 + 3 + 1: nothing dropped
    np.testing.assert_array_equal(images, images_again)
    np.testing.assert_array_equal(labels, labels_again)
    assert labels.tolist() == [0, 0, 0, 1, 1, 1, 1]
    assert images.min() >= -1.0 and images.max() <= 1.0


def test_eval_static_shapes_pad_with_zero_weights(folder):
    from keras_vit import data

    dataset, _ = data.load(folder, "test")
    plain, _ = _collect(data.eval_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=3))
    (images, labels, weights), batches = _collect(
        data.eval_pipeline(dataset, image_size=IMAGE_SIZE, batch_size=3, static_shapes=True)
    )
    assert [b[0].shape[0] for b in batches] == [3, 3, 3]
    assert weights.tolist() == [1.0] * 7 + [0.0] * 2
    np.testing.assert_array_equal(images[:7], plain[0])
    np.testing.assert_array_equal(labels[:7], plain[1])


def test_eval_split_with_unknown_class_is_an_error(folder):
    from keras_vit import data

    os.makedirs(os.path.join(folder, "test", "zebra"))
    with pytest.raises(ValueError, match="zebra"):
        data.load(folder, "test", class_names=("cat", "dog"))


def test_bad_sources_are_errors(folder, tmp_path):
    from keras_vit import data

    with pytest.raises(ValueError, match="no split folder"):
        data.load(folder, "validation")
    with pytest.raises(ValueError, match="neither"):
        data.load(str(tmp_path / "missing"), "train")
    os.makedirs(tmp_path / "empty" / "train" / "a")
    with pytest.raises(ValueError, match="No readable"):
        data.load(str(tmp_path / "empty"), "train")


def test_arrays_validate_labels_and_grayscale():
    from keras_vit import data

    images = np.zeros((4, 6, 6), np.uint8)
    with pytest.raises(ValueError, match=r"\[0, num_classes=3\)"):
        data.from_arrays(images, np.array([0, 1, 2, 3]), num_classes=3)
    with pytest.raises(ValueError, match="one label per image"):
        data.from_arrays(images, np.array([0, 1]))
    dataset, info = data.from_arrays(images + 255, np.array([0, 1, 2, 0]), num_classes=3)
    ((batch, labels),) = list(data.eval_pipeline(dataset, image_size=4, batch_size=8))
    assert np.asarray(batch).shape == (4, 4, 4, 3)
    np.testing.assert_allclose(np.asarray(batch), 1.0)  # 255 -> +1


def test_labels_outside_range_fail_in_the_pipeline():
    import tensorflow as tf

    from keras_vit import data

    dataset = tf.data.Dataset.from_tensor_slices((np.zeros((3, 4, 4, 3), np.uint8), np.array([0, 5, 1], np.int32)))
    checked = data._check_labels(dataset, num_classes=3)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[0, 3\)"):
        list(checked)


def test_scale_pixels_maps_to_minus_one_one():
    from keras_vit import data

    np.testing.assert_allclose(np.asarray(data.scale_pixels(np.array([0, 127.5, 255]))), [-1.0, 0.0, 1.0])


def test_sharding_splits_eval_without_overlap():
    from keras_vit import data

    dataset, _ = data.from_arrays(np.arange(5, dtype=np.uint8)[:, None, None] * np.ones((5, 2, 2)), np.arange(5))
    seen = []
    for index in range(2):
        (_, labels), _ = _collect(data.eval_pipeline(dataset, image_size=2, batch_size=2, shard=(2, index)))
        seen += labels.tolist()
    assert sorted(seen) == [0, 1, 2, 3, 4]


def test_mixup_cutmix_randaugment_give_soft_labels():
    from keras_vit import data

    rng = np.random.default_rng(0)
    dataset, _ = data.from_arrays(rng.integers(0, 256, (8, 12, 12, 3), dtype=np.uint8), np.arange(8) % 4)
    pipeline = data.train_pipeline(
        dataset, image_size=8, batch_size=4, num_classes=4, randaugment=True, mixup_alpha=0.4, cutmix_alpha=1.0, seed=0
    )
    images, labels = (np.asarray(t) for t in next(iter(pipeline)))
    assert images.shape == (4, 8, 8, 3) and labels.shape == (4, 4)
    assert images.min() >= -1.0 - 1e-6 and images.max() <= 1.0 + 1e-6
    np.testing.assert_allclose(labels.sum(axis=-1), 1.0, rtol=1e-5)


def test_tfds_mock_data_pipelines():
    import tensorflow_datasets as tfds

    from keras_vit import data

    with tfds.testing.mock_data(num_examples=7):
        train, info = data.load("tfds:mnist", "train")
        evaluation, _ = data.load("tfds:mnist", "test")
        assert info.num_classes == 10 and info.class_names[:2] == ("0", "1")
        images, labels = next(iter(data.train_pipeline(train, image_size=16, batch_size=4, num_classes=10, seed=0)))
        assert np.asarray(images).shape == (4, 16, 16, 3)  # grayscale MNIST repeated to RGB
        assert np.asarray(images).min() >= -1.0 and np.asarray(images).max() <= 1.0
        pipeline = data.eval_pipeline(evaluation, image_size=16, batch_size=4)
        (eval_images, eval_labels), _ = _collect(pipeline)
        (again, _), _ = _collect(pipeline)
    assert eval_images.shape == (7, 16, 16, 3)
    assert set(eval_labels.tolist()) <= set(range(10))
    np.testing.assert_array_equal(eval_images, again)


def test_tfds_source_without_labels_or_name_is_an_error():
    from keras_vit import data

    with pytest.raises(ValueError, match="dataset name"):
        data.load("tfds:", "train")
    with pytest.raises(ValueError, match="from_arrays"):
        data.load(np.zeros(3), "train")
