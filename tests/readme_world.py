"""What `tests/readme_runner.py` puts in place of the reader's world before it runs the README's blocks.

One function per row of the `WORLD` table in `tests/test_readme.py` (same keys; the test checks it): the files
a reader is assumed to have, the Hugging Face Hub, the dataset download and the model sizes. Everything is
written under the runner's working folder and `$HOME`, both temporary.
"""

import os
import shutil

import numpy as np
import pytest

CIFAR10_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def _write_images(folder, classes, count, suffix, seed):
    from PIL import Image

    rng = np.random.default_rng(seed)
    for name in classes:
        os.makedirs(os.path.join(folder, name), exist_ok=True)
        for index in range(count):
            pixels = rng.integers(0, 256, (24, 20, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(os.path.join(folder, name, f"{index}{suffix}"))


def reader_files(patch):
    """photo.jpg, photos/<class>/, imagenet/{train,val}/<class>/ and my_model.keras in the working folder."""
    import keras_vit
    from keras_vit import inspection

    shutil.copy(inspection.sample_image_path(), "photo.jpg")
    _write_images("photos", ("cat", "dog"), count=5, suffix=".jpg", seed=0)
    for split, count in (("train", 4), ("val", 2)):
        _write_images(os.path.join("imagenet", split), ("n01440764", "n01443537"), count, ".JPEG", seed=count)
    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64, input_shape=(32, 32, 3), classes=3
    )
    model.save("my_model.keras")


def small_variants(patch):
    """Every `VARIANTS` row at 2 blocks, 4 wide per head (MLP twice the width); heads, patch and ResNet kept."""
    from keras_vit.models import variants

    for name, row in list(variants.VARIANTS.items()):
        width = 4 * row["num_heads"]
        patch.setitem(variants.VARIANTS, name, dict(row, num_layers=2, hidden_dim=width, mlp_dim=2 * width))


def _checkpoint_for(info, folder):
    """A random model of `info`'s (small) variant, head and resolution, written in `info`'s layout."""
    from keras_vit.models import variants, vit
    from keras_vit.pretrained import export

    row = variants.VARIANTS[info.variant]
    model = vit.VisionTransformer(
        **row,
        input_shape=(info.resolution, info.resolution, 3),
        include_top=info.classes is not None,
        classes=info.classes or 1000,
        representation_size=row["hidden_dim"] if info.pre_logits else None,
    )
    target = os.path.join(folder, info.hub_repo.replace("/", "--"))
    path = export.export_weights(model, target + ".safetensors" if info.format == "timm" else target, info.format)
    return os.path.join(path, info.hub_filename) if os.path.isdir(path) else path


def hub(patch):
    """`tests/pretrained_helpers.fake_hub`, answering each catalogue file with a local file of its layout."""
    import pretrained_helpers

    from keras_vit.pretrained import registry

    catalogue = {info.hub_repo: info for info in registry.checkpoints()}
    folder = os.path.abspath("hub")
    os.makedirs(folder, exist_ok=True)
    written = {}

    def fetch(repo_id, filename):
        if repo_id not in catalogue:
            raise AssertionError(f"the README asked the Hub for {repo_id}, which is not in the catalogue")
        if repo_id not in written:
            written[repo_id] = _checkpoint_for(catalogue[repo_id], folder)
        return written[repo_id]

    pretrained_helpers.fake_hub(patch, fetch)


def _cifar10_release(folder, per_file=4):
    """CIFAR-10's binary release (one label byte + 3,072 pixel bytes per image), random pixels."""
    rng = np.random.default_rng(0)
    root = os.path.join(folder, "cifar-10-batches-bin")
    os.makedirs(root)
    names = [f"data_batch_{index}.bin" for index in range(1, 6)] + ["test_batch.bin"]
    for offset, name in enumerate(names):
        labels = (np.arange(per_file) + offset) % 10
        records = [np.concatenate([[label], rng.integers(0, 256, 3072)]).astype(np.uint8) for label in labels]
        with open(os.path.join(root, name), "wb") as file:
            file.write(np.stack(records).tobytes())
    with open(os.path.join(root, "batches.meta.txt"), "w") as file:
        file.write("\n".join(CIFAR10_NAMES) + "\n")
    return folder


def tfds_cifar10(patch):
    """tfds:cifar10 prepared in ~/tensorflow_datasets by TFDS's own builder, from 24 random images."""
    import tensorflow_datasets as tfds

    release = _cifar10_release(os.path.abspath("cifar10_release"))
    with pytest.MonkeyPatch.context() as download:
        download.setattr(tfds.download.DownloadManager, "download_and_extract", lambda self, url: release)
        tfds.builder("cifar10", data_dir=os.path.expanduser("~/tensorflow_datasets")).download_and_prepare()


def no_xla(patch):
    """`distribute.configure` without XLA: compiling each small model for 2 steps costs more than the steps."""
    import dataclasses

    from keras_vit.training import distribute

    configure = distribute.configure
    patch.setattr(distribute, "configure", lambda *a, **k: dataclasses.replace(configure(*a, **k), jit_compile=False))


WORLD = {
    "model sizes": small_variants,
    "reader's files": reader_files,
    "Hugging Face Hub": hub,
    "tfds:cifar10": tfds_cifar10,
    "XLA": no_xla,
}
