"""`python -m benchmarks.data`: does the input pipeline keep up, and how fast does a folder index?

One run reports, on this machine:

1. indexing a generated folder of `--files` images (100 classes) with
   `keras_vit.training.data.load` against `keras.utils.image_dataset_from_directory`
   (median of `--repeats` timings each, alternated, after one warm-up listing
   so that both read a warm directory cache); target: within 1.5x of Keras;
2. the training pipeline's images/s at `--image-size` with the paper's
   augmentation (Inception crop 5-100 %, flip, decode of 500x375 JPEGs, the
   size of an average ImageNet photo), on `--threads` cores;
3. each model's own training images/s (`--models`, random batches, SGD, one
   warm-up step to compile), so that the last column says whether the model
   would starve: the pipeline must be faster than the model (target for B/16).

Example:

    KERAS_BACKEND=jax python -m benchmarks.data --files 100000 --output bench_data.json
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np

from benchmarks import runner
from keras_vit_cli import quiet

JPEG_SIZE = (375, 500)  # height, width: about ImageNet's average photo


def _jpeg_bytes(rng, size=JPEG_SIZE):
    import io

    from PIL import Image

    # Smooth random content compresses like a photo (white noise would not).
    small = rng.integers(0, 256, size=(size[0] // 25, size[1] // 25, 3), dtype=np.uint8)
    image = Image.fromarray(small).resize((size[1], size[0]), Image.BILINEAR)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def write_folder(root, num_files, num_classes=100, num_distinct=64, seed=0):
    """`root/<class>/<i>.jpg`, `num_files` in all, drawing from `num_distinct` JPEG contents."""
    rng = np.random.default_rng(seed)
    contents = [_jpeg_bytes(rng) for _ in range(num_distinct)]
    for index in range(num_files):
        folder = os.path.join(root, f"class_{index % num_classes:03d}")
        if index < num_classes:
            os.makedirs(folder)
        with open(os.path.join(folder, f"{index}.jpg"), "wb") as file:
            file.write(contents[index % num_distinct])


def time_indexing(root, repeats):
    """Median seconds of `keras_vit.training.data.load` and of `image_dataset_from_directory` on `root`."""
    import keras

    from keras_vit.training import data

    def ours():
        return data.load(root)[1].num_examples

    def theirs():
        return keras.utils.image_dataset_from_directory(root, image_size=(224, 224), batch_size=None, verbose=False)

    # One untimed call of each warms the directory cache and TensorFlow's
    # first-use costs for both.
    ours()
    theirs()
    timings = {"keras_vit": [], "keras": []}
    for _ in range(repeats):
        for name, function in (("keras_vit", ours), ("keras", theirs)):
            start = time.perf_counter()
            function()
            timings[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in timings.items()}


def pipeline_images_per_second(root, image_size, batch_size, batches):
    """Images/s of `train_pipeline` (paper augmentation) over `batches` batches after a warm-up."""
    from keras_vit.training import data

    source, info = data.load(root, shuffle_files=True, seed=0)
    pipeline = data.train_pipeline(
        source, image_size=image_size, batch_size=batch_size, num_classes=info.num_classes, repeat=True, seed=0
    )
    iterator = iter(pipeline)
    for _ in range(3):  # fills the shuffle buffer and the prefetch
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * batch_size / (time.perf_counter() - start)


def model_images_per_second(constructor, image_size, batch_size, steps):
    """Training images/s of a model on random batches, after one compiling step."""
    import keras

    from keras_vit.models.applications import CONSTRUCTORS

    model = CONSTRUCTORS[constructor](weights=None, input_shape=(image_size, image_size, 3), classes=100)
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        jit_compile=keras.backend.backend() != "torch",
    )
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (batch_size, image_size, image_size, 3)).astype("float32")
    labels = rng.integers(0, 100, (batch_size,))
    model.train_on_batch(images, labels)  # traces and compiles
    start = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(images, labels)
    seconds = time.perf_counter() - start
    del model
    keras.backend.clear_session()
    return steps * batch_size / seconds


def format_table(result):
    index = result["indexing_seconds"]
    ratio = index["keras_vit"] / index["keras"]
    lines = [
        f"| indexing {result['files']:,} files | keras_vit.training.data.load | image_dataset_from_directory "
        "| ratio (target <= 1.5) |",
        "|---|---|---|---|",
        f"| seconds (median of {result['repeats']}) | {index['keras_vit']:.2f} | {index['keras']:.2f} | {ratio:.2f}x |",
        "",
        f"| model ({result['backend']}, batch {result['model_batch_size']}) | training images/s | "
        f"pipeline images/s at {result['image_size']} px | pipeline / model |",
        "|---|---|---|---|",
    ]
    pipeline = result["pipeline_images_per_second"]
    for name, speed in result["model_images_per_second"].items():
        lines.append(f"| {name} | {speed:.2f} | {pipeline:.1f} | {pipeline / speed:,.0f}x |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.data", description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000, help="files in the indexed folder (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="timings of each indexer (default: %(default)s)")
    parser.add_argument("--image-size", type=int, default=224, help="pipeline and model input (default: %(default)s)")
    parser.add_argument("--pipeline-batches", type=int, default=8, help="timed batches of 32 (default: %(default)s)")
    parser.add_argument("--models", default="ViTB16,ViTS16", help="comma-separated constructors (default: %(default)s)")
    parser.add_argument("--model-batch-size", type=int, default=8, help="training batch (default: %(default)s)")
    parser.add_argument("--model-steps", type=int, default=2, help="timed training steps (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for TF and tf.data (default: %(default)s)")
    parser.add_argument("--output", default=None, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    quiet.install(tensorflow=True)  # tf.data on every backend; no framework log lines (KERAS_VIT_VERBOSE=1 shows them)
    for name in ("files", "repeats", "image_size", "pipeline_batches", "model_batch_size", "model_steps", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be positive. Received: {getattr(args, name)}")

    import keras
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    load_before = os.getloadavg()
    workdir = tempfile.mkdtemp(prefix="keras_vit_data_bench_")
    try:
        indexed = os.path.join(workdir, "indexed")
        start = time.perf_counter()
        write_folder(indexed, args.files)
        write_seconds = time.perf_counter() - start
        indexing = time_indexing(indexed, args.repeats)
        shutil.rmtree(indexed)
        decoded = os.path.join(workdir, "decoded")
        write_folder(decoded, 512, num_classes=10, num_distinct=512)
        pipeline = pipeline_images_per_second(decoded, args.image_size, 32, args.pipeline_batches)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    models = {
        name: model_images_per_second(name, args.image_size, args.model_batch_size, args.model_steps)
        for name in args.models.split(",")
        if name
    }
    result = {
        "files": args.files,
        "repeats": args.repeats,
        "folder_write_seconds": round(write_seconds, 1),
        "indexing_seconds": indexing,
        "image_size": args.image_size,
        "pipeline_images_per_second": pipeline,
        "model_images_per_second": models,
        "model_batch_size": args.model_batch_size,
        "backend": keras.backend.backend(),
        "threads": args.threads,
    }
    runner.finish_report(result, format_table, load_before, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
