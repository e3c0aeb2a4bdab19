"""`python -m benchmarks.naflex`: a NaFlex fine-tune against resize-to-square on images of mixed aspect ratios.

One run generates a folder of panoramas (3:1), portraits (1:3) and squares of the same area, whose class is the
orientation of their stripes (0, 30, 60 or 90 degrees from the horizontal, mirrored at random; period and colours at
random). Squashing an image to a square changes the orientation it shows (a 30-degree panorama reads as 60
degrees), so the geometry of each image is what the task needs. It runs `keras_vit.training.finetune.finetune`
twice on that folder, with the same model (`--model`, default the digits model: 4x4 patches, 4 blocks of width
64) and the same patch budget: `naflex=N` (each image keeps its aspect ratio, at most N patches) against the job's
default square pipeline at `4 * isqrt(N)` pixels (Inception crop in training, the whole image resized to the square
at evaluation), and reports training images/s and held-out accuracy, overall and per aspect ratio.

Example:

    KERAS_BACKEND=jax python -m benchmarks.naflex --steps 300 --output bench_naflex.json
"""

import argparse
import math
import os
import shutil
import tempfile

import numpy as np

from benchmarks import runner
from keras_vit_cli import quiet

ANGLES = (0, 30, 60, 90)  # the classes, degrees from the horizontal
SHAPES = {"panorama": (1, 3), "portrait": (3, 1), "square": (math.sqrt(3), math.sqrt(3))}  # sides of equal area


def _stripes(rng, height, width, angle):
    """A `(height, width, 3)` uint8 image of stripes at `angle` degrees (mirrored at random), random colours."""
    theta = math.radians(angle * rng.choice((-1, 1)) + rng.uniform(-4, 4))
    rows, cols = np.mgrid[:height, :width]
    # The stripes run along (cos, -sin) in image coordinates (rows grow downwards).
    phase = (cols * math.sin(theta) + rows * math.cos(theta)) * 2 * math.pi / rng.uniform(8, 14)
    wave = (np.sin(phase + rng.uniform(0, 2 * math.pi)) + 1) / 2
    low, high = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    pixels = low + wave[..., None] * (high - low) + rng.normal(0, 12, (height, width, 3))
    return np.clip(pixels, 0, 255).astype(np.uint8)


def write_folder(root, images_per_class, held_out_per_class, seed=0):
    """`root/{train,val}/<angle>/` and the held-out images again by shape, `root/by_shape/<shape>/<angle>/`."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for angle in ANGLES:
        for index in range(images_per_class + held_out_per_class):
            # Every shape in turn, in both splits.
            shape = tuple(SHAPES)[(index if index < images_per_class else index - images_per_class) % len(SHAPES)]
            side = rng.uniform(28, 44)
            height, width = (round(side * factor) for factor in SHAPES[shape])
            image = Image.fromarray(_stripes(rng, height, width, angle))
            folders = ["train"] if index < images_per_class else ["val", os.path.join("by_shape", shape)]
            for folder in folders:
                os.makedirs(os.path.join(root, folder, str(angle)), exist_ok=True)
                image.save(os.path.join(root, folder, str(angle), f"{shape}_{index}.png"))


def shape_accuracy(model_path, root, shape):
    """Top-1 of the saved model on the held-out images of one shape, through the evaluation pipeline."""
    import keras

    from keras_vit.evaluation import heldout
    from keras_vit.models import find_vit
    from keras_vit.training import data

    model = keras.saving.load_model(model_path)
    vit = find_vit(model)
    source, _ = data.load(os.path.join(root, "by_shape"), shape, class_names=[str(angle) for angle in ANGLES])
    if vit.max_num_patches is None:
        size = dict(image_size=tuple(model.input_shape[1:3]))
    else:
        size = dict(image_size=None, naflex=(vit.patch_size, vit.max_num_patches))
    return heldout.dataset_report(model, data.eval_pipeline(source, batch_size=64, **size))["top1"]


def run_one(root, out, naflex, args):
    from keras_vit.training.finetune import finetune

    size = dict(naflex=args.max_patches) if naflex else dict(image_size=4 * math.isqrt(args.max_patches))
    metrics = finetune(
        model=args.model, data=root, steps=args.steps, epochs=1, batch_size=args.batch_size, out=out, verbose=0,
        seed=args.seed, **size,
    )  # fmt: skip
    return {
        "pipeline": f"NaFlex, at most {args.max_patches} patches" if naflex else f"square {size['image_size']} px",
        "images_per_second": metrics["images_per_second"],
        "fit_seconds": metrics["fit_seconds"],
        "heldout_accuracy": metrics["heldout_accuracy"],
        "by_shape": {shape: shape_accuracy(metrics["model_path"], root, shape) for shape in SHAPES},
    }


def format_table(result):
    lines = [
        f"| {result['model']} ({result['backend']}), {result['steps']} steps of {result['batch_size']} | training "
        "images/s | held-out accuracy | " + " | ".join(SHAPES) + " |",
        "|---|---|---|" + "---|" * len(SHAPES),
    ]
    for row in result["runs"]:
        shapes = " | ".join(f"{row['by_shape'][shape]:.3f}" for shape in SHAPES)
        speed = "n/a" if row["images_per_second"] is None else f"{row['images_per_second']:.0f}"  # one call: none
        lines.append(f"| {row['pipeline']} | {speed} | {row['heldout_accuracy']:.3f} | {shapes} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.naflex", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="small", help="finetune's --model (default: %(default)s)")
    parser.add_argument("--max-patches", type=int, default=64, help="the NaFlex budget N (default: %(default)s)")
    parser.add_argument("--images", type=int, default=150, help="training images per class (default: %(default)s)")
    parser.add_argument("--held-out", type=int, default=60, help="held-out images per class, >= 3 (default: 60)")
    parser.add_argument("--steps", type=int, default=300, help="optimizer updates per run (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=32, help="(default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="data, initialisation and order (default: %(default)s)")
    parser.add_argument("--output", default=None, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    quiet.install(tensorflow=True)  # tf.data on every backend; no framework log lines (KERAS_VIT_VERBOSE=1 shows them)
    for name in ("max_patches", "images", "held_out", "steps", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be positive. Received: {getattr(args, name)}")
    if args.held_out < len(SHAPES):
        parser.error(f"--held-out must be at least {len(SHAPES)}, one image of each shape. Received: {args.held_out}")

    import keras

    load_before = os.getloadavg()
    workdir = tempfile.mkdtemp(prefix="keras_vit_naflex_bench_")
    try:
        root = os.path.join(workdir, "stripes")
        write_folder(root, args.images, args.held_out, args.seed)
        runs = [run_one(root, os.path.join(workdir, name), name == "naflex", args) for name in ("square", "naflex")]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = dict(vars(args), runs=runs, backend=keras.backend.backend())
    runner.finish_report(result, format_table, load_before, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
