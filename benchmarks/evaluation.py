"""`python -m benchmarks.evaluation`: is the few-shot solve fast, and does feature extraction stream?

One run reports, on this machine:

1. the closed-form ridge of the linear few-shot evaluation at ImageNet scale,
   1,000 classes x 25 shots x 768 features (ViT-B's width), on random
   features: the solve (standardise, `XᵀX`, one `eigh`, the weights for one
   L2 strength) and each further L2 strength, median of `--repeats` after one
   untimed warm-up call; target: the solve under 1 s;
2. the peak resident memory of `keras_vit.evaluation.extract_features` as
   the number of images grows, each count in a fresh process, with images
   generated inside the `tf.data` pipeline (the source holds none in memory):
   many images through a small model (`--small-images`) and a few through
   ViT-B/16 at 224 px (`--b16-images`; it runs about 3 images/s on a 2-core
   CPU once compiled, so the 50,000 images of ImageNet's validation set, about
   5 hours, are out of reach here). Streaming holds when the peak stays flat
   while the count grows: only the features (`images x dim x 4` bytes)
   accumulate.

Example:

    KERAS_BACKEND=jax python -m benchmarks.evaluation --output bench_evaluation.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from benchmarks import runner, worker
from keras_vit_cli import quiet

SMALL = dict(patch_size=4, hidden_dim=64, num_layers=4, num_heads=4, mlp_dim=128)  # the digits model of finetune


def time_ridge(num_classes=1000, shots=25, dim=768, repeats=3, extra_l2=10):
    """Median seconds of the few-shot solve and of one more L2 strength, on random features."""
    from keras_vit.evaluation import RidgeSolver

    rng = np.random.default_rng(0)
    features = rng.normal(size=(num_classes * shots, dim)).astype("float32")
    labels = np.repeat(np.arange(num_classes), shots)
    RidgeSolver(features[: 2 * dim], labels[: 2 * dim], num_classes).weights(1.0)  # warm-up: BLAS threads, caches
    solves, cpu, strengths = [], [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        solver = RidgeSolver(features, labels, num_classes)
        solver.weights(2.0**10)
        solves.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        start = time.perf_counter()
        for power in range(extra_l2):
            solver.weights(2.0**power)
        strengths.append((time.perf_counter() - start) / extra_l2)
    return {
        "solve_seconds": statistics.median(solves),
        # CPU seconds of all threads: on a busy machine the wall time waits for cores, this does not.
        "solve_cpu_seconds": statistics.median(cpu),
        "per_extra_l2_seconds": statistics.median(strengths),
    }


def _generated_source(num_images, image_size, num_classes=10):
    """A source whose images are made inside the pipeline from their index: nothing is held in memory."""
    import tensorflow as tf

    from keras_vit.training import data

    def make(index):
        seed = tf.stack([index, tf.constant(0, tf.int64)])
        image = tf.random.stateless_uniform((image_size, image_size, 3), seed, maxval=256, dtype=tf.int32)
        return tf.cast(image, tf.uint8), tf.cast(index % num_classes, tf.int32)

    dataset = tf.data.Dataset.range(num_images).map(make)
    return dataset, data.SourceInfo(num_images, num_classes)


def measure_extraction(model_name, num_images, batch_size):
    """Runs in the worker process: extracts features, returns peak RSS and images/s."""
    import keras_vit
    from keras_vit import evaluation
    from keras_vit.models.applications import CONSTRUCTORS

    if model_name == "small":
        model, size = keras_vit.VisionTransformer(**SMALL, input_shape=(16, 16, 3), classes=10), 16
    else:
        model, size = CONSTRUCTORS[model_name](weights=None, input_shape=(224, 224, 3)), 224
    source = _generated_source(num_images, size)
    start = time.perf_counter()
    features = evaluation.extract_features(model, source, batch_size=batch_size, verbose=0)
    seconds = time.perf_counter() - start
    return {
        "model": model_name,
        "images": num_images,
        "feature_mib": features.features.nbytes / 2**20,
        "peak_rss_mib": worker.peak_rss_mb(),  # the worker's own mark, not its parent's
        "images_per_second": num_images / seconds,
    }


def _run_worker(model_name, num_images, batch_size, timeout):
    command = [sys.executable, "-m", "benchmarks.evaluation", "--worker", model_name, str(num_images), str(batch_size)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def format_table(result):
    ridge = result["ridge"]
    lines = [
        "| few-shot ridge, 1,000 classes x 25 shots x 768 features | seconds |",
        "|---|---|",
        f"| solve (standardise, XᵀX, eigh, weights), median of {result['repeats']} | {ridge['solve_seconds']:.3f} |",
        f"| the same, CPU seconds of all threads | {ridge['solve_cpu_seconds']:.3f} |",
        f"| each further L2 strength | {ridge['per_extra_l2_seconds']:.3f} |",
        "",
        f"| feature extraction ({result['backend']}) | images | peak RSS MiB | features MiB | images/s |",
        "|---|---|---|---|---|",
    ]
    for row in result["extraction"]:
        lines.append(
            f"| {row['model']} | {row['images']:,} | {row['peak_rss_mib']:.0f} | {row['feature_mib']:.2f} | "
            f"{row['images_per_second']:.1f} |"
        )
    return "\n".join(lines)


def _counts(text):
    counts = tuple(int(part) for part in text.split(",") if part.strip())
    if any(count < 1 for count in counts):
        raise ValueError(f"image counts must be positive. Received: {text!r}")
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.evaluation", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed ridge solves (default: %(default)s)")
    parser.add_argument(
        "--small-images", default="1000,4000,16000", help="counts for the small model (default: %(default)s)"
    )
    parser.add_argument("--b16-images", default="16,64", help="counts for ViT-B/16 at 224 px (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=None, help="BLAS threads of the ridge (default: the library's)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per extraction (default: %(default)s)")
    parser.add_argument("--output", default=None, help="also write the results as JSON here")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quiet.install(tensorflow=True)  # tf.data on every backend; no framework log lines (KERAS_VIT_VERBOSE=1 shows them)
    if args.worker:
        model_name, num_images, batch_size = args.worker
        print(json.dumps(measure_extraction(model_name, int(num_images), int(batch_size))))
        return 0
    if args.repeats < 1:
        parser.error(f"--repeats must be positive. Received: {args.repeats}")
    try:
        small, b16 = _counts(args.small_images), _counts(args.b16_images)
    except ValueError as error:
        parser.error(str(error))
    import keras

    load_before = os.getloadavg()
    if args.threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads, user_api="blas")
    ridge = time_ridge(repeats=args.repeats)
    plan = [("small", count, 256) for count in small] + [("ViTB16", count, 16) for count in b16]
    extraction = [_run_worker(name, count, batch, args.timeout) for name, count, batch in plan]
    result = {
        "ridge": ridge,
        "repeats": args.repeats,
        "blas_threads": args.threads,
        "extraction": extraction,
        "backend": keras.backend.backend(),
    }
    runner.finish_report(result, format_table, load_before, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
