"""`python -m benchmarks.first_step`: time to the first compiled training step on torch, keras_vit against timm.

Each row runs in its own process with an empty TorchInductor cache, the rows interleaved round by round: keras_vit
through `model.fit` with `jit_compile=True` as `keras-vit finetune` trains (SyncFreeSGD, gradients released), the
same model with Keras's own compiled step (`loss.backward()` a graph break), and timm's `torch.compile`d model with
torch's SGD. Dynamo's counts (frames traced, graphs, graph breaks) do not move with the machine's load; the seconds
do.

    python -m benchmarks.first_step --variant Ti/16 --image-size 64 --rounds 2
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks import runner, worker

ROWS = ("keras_vit", "keras_vit, Keras's train step", "timm")


def measure(row, variant_name, image_size, batch):
    """The first step's seconds and Dynamo's counts for one row, in this process."""
    import numpy as np
    import torch
    from torch._dynamo.utils import counters

    spec = dict(
        kind="timm" if row == "timm" else "keras_vit",
        backend="torch",
        precision="float32",
        jit_compile=True,
        optimizer="sync-free",
        variant=runner.variant(variant_name),
        image_size=image_size,
        classes=10,
    )
    images = np.random.default_rng(0).uniform(-1, 1, (batch, image_size, image_size, 3)).astype("float32")
    labels = np.arange(batch) % 10
    if row == "timm":
        model = worker.timm_vision_transformer(spec["variant"], image_size, 10)
        _, _, train_steps = worker.torch_trainer(spec, model, torch.compile(model))
        images = images.transpose(0, 3, 1, 2)
    else:
        import keras

        model, _, train_steps = worker.keras_trainer(spec)
        if row != "keras_vit":
            keras.Model.make_train_function(model)  # Keras's compiled step; `fit` keeps it
    start = time.perf_counter()
    train_steps(images, labels, 1)
    return {
        "row": row,
        "first_step_s": time.perf_counter() - start,
        "frames": counters["frames"]["total"],
        "graphs": counters["stats"]["unique_graphs"],
        "graph_breaks": sum(counters["graph_break"].values()),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.first_step", description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="Ti/16", help="a key of keras_vit.models.variants.VARIANTS (%(default)s)")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--row", choices=ROWS, help=argparse.SUPPRESS)  # a worker process's one row
    args = parser.parse_args(argv)
    sizes = ["--variant", args.variant, "--image-size", str(args.image_size), "--batch-size", str(args.batch_size)]
    if args.row:
        print(worker.RESULT_PREFIX + json.dumps(measure(args.row, args.variant, args.image_size, args.batch_size)))
        return
    print(f"{args.variant} at {args.image_size} px, batch {args.batch_size}: {runner.machine_description()}")
    for round_number in range(args.rounds):
        seconds = {}
        for row in ROWS:
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, KERAS_BACKEND="torch", TORCHINDUCTOR_CACHE_DIR=cache)
                command = [sys.executable, "-m", "benchmarks.first_step", "--row", row, *sizes]
                output = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
            (line,) = [line for line in output.splitlines() if line.startswith(worker.RESULT_PREFIX)]
            result = json.loads(line[len(worker.RESULT_PREFIX) :])
            seconds[row] = result.pop("first_step_s")
            print(f"round {round_number + 1}, {row}: {seconds[row]:.1f} s, {result}", flush=True)
        ratios = ", ".join(f"{row} {seconds[row] / seconds['timm']:.2f}x" for row in ROWS[:2])
        print(f"round {round_number + 1}: against timm: {ratios}", flush=True)


if __name__ == "__main__":
    main()
