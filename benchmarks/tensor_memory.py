"""`python -m benchmarks.tensor_memory`: the live tensors of one torch training step, keras_vit against timm.

Resident memory (`python -m benchmarks.memory`) counts all the process holds: the framework runtimes, and the blocks
the C allocator keeps after they are freed. This counts tensors only, from torch.profiler's allocation records
(`profile_memory=True`) of one training step after a warm-up step: the peak of live tensor bytes above the step's
start, summed in time order, and all the bytes the step allocates (the churn that fragments the heap). Without
recomputation, also the activations autograd keeps for the backward pass (each distinct storage once, the weights
aside), and the layouts that keep the most: where two models of the same size differ there, one keeps a tensor the
other does not. PyTorch only:
keras_vit on Keras's torch backend as `keras-vit finetune` trains (gradients released after the update) and timm's
`VisionTransformer` of the same size, without and with remat / gradient checkpointing, SGD, float32, one process.
Both start the profiled step with no gradients held.

Example:

    python -m benchmarks.tensor_memory --variant B/16 --batch-size 8
"""

import argparse
import contextlib
import os
import sys

from benchmarks import runner
from keras_vit_cli import quiet

MIB = 2**20


def live_tensor_profile(step):
    """`{"peak_live_mib", "allocated_mib"}` of one call of `step` (after one warm-up call)."""
    from torch.profiler import ProfilerActivity, profile

    step()  # builds, traces and allocates what stays between steps
    # The profiler's native start/stop lines go to file descriptor 2 (KERAS_VIT_VERBOSE=1 keeps them).
    silenced = contextlib.nullcontext() if quiet.verbose() else quiet.native_stderr_silenced()
    with silenced, profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        step()
    live = peak = allocated = 0
    for event in sorted(profiler.events(), key=lambda event: event.time_range.start):
        change = event.self_cpu_memory_usage  # an op's own allocations (+) and frees (-), not its children's
        live += change
        peak = max(peak, live)
        allocated += max(change, 0)
    return {"peak_live_mib": peak / MIB, "allocated_mib": allocated / MIB}


def saved_for_backward(step, weights):
    """`{"saved_mib", "saved_storages"}`: what autograd keeps for the backward pass during one call of `step`.

    Each distinct storage counts once (a view saved by several ops shares its base's bytes); the storages of
    `weights` do not count: they are the model, not its activations. Recomputed blocks save their tensors inside
    `torch.utils.checkpoint`'s own hooks, out of this one's sight: measure steps without recomputation.
    `saved_storages` maps `"shape dtype"` of each storage's first saved view to `[storages, MiB]`, largest first.
    """
    import torch

    weight_storages = {weight.untyped_storage().data_ptr() for weight in weights}
    saved = {}  # storage address -> (bytes, "shape dtype" of the first view saved)

    def pack(tensor):
        storage = tensor.untyped_storage()
        address = storage.data_ptr()
        if address not in weight_storages and address not in saved:
            saved[address] = (storage.nbytes(), f"{tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}")
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        step()
    kinds = {}
    for nbytes, kind in saved.values():
        count, total = kinds.get(kind, (0, 0))
        kinds[kind] = (count + 1, total + nbytes)
    largest = sorted(kinds.items(), key=lambda item: -item[1][1])
    return {
        "saved_mib": sum(nbytes for nbytes, _ in saved.values()) / MIB,
        "saved_storages": {kind: [count, total / MIB] for kind, (count, total) in largest},
    }


def _keras_vit_step(variant, batch_size, image_size, classes, remat):
    import keras

    import keras_vit
    from benchmarks import worker

    model = keras_vit.VisionTransformer(
        **variant, input_shape=(image_size, image_size, 3), classes=classes, classifier_activation=None, remat=remat
    )
    model.compile(keras.optimizers.SGD(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    release = keras_vit.training.ReleaseGradients()
    release.set_model(model)
    images, labels = worker._images(batch_size, image_size), worker._labels(batch_size, classes)

    def step():
        model.train_on_batch(images, labels)
        # What `fit` does when the next batch begins (and when training ends): the next step starts without them.
        release.on_train_end()

    return step, [weight.value for weight in model.weights]


def _timm_step(variant, batch_size, image_size, classes, checkpointing):
    import torch

    from benchmarks import worker

    model = worker.timm_vision_transformer(variant, image_size, classes, checkpointing)
    optimizer, loss = torch.optim.SGD(model.parameters(), lr=1e-3), torch.nn.CrossEntropyLoss()
    images = torch.from_numpy(worker._images(batch_size, image_size, channels_first=True))
    labels = torch.from_numpy(worker._labels(batch_size, classes)).long()

    def step():
        loss(model(images), labels).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # at the end, as ReleaseGradients: the next step starts without them

    return step, list(model.parameters()) + list(model.buffers())


def measure(variant, batch_size, image_size=224, classes=1000):
    """The four rows: keras_vit and timm, each without and with recomputation."""
    configurations = [
        ("keras_vit, torch" + (", remat" if remat else ""), _keras_vit_step, remat) for remat in (False, True)
    ] + [
        ("timm, torch eager" + (", gradient checkpointing" if recompute else ""), _timm_step, recompute)
        for recompute in (False, True)
    ]
    rows = []
    for label, build, recompute in configurations:
        step, weights = build(variant, batch_size, image_size, classes, recompute)
        row = dict(label=label, **live_tensor_profile(step))
        row.update(saved_mib=None, saved_storages=None)
        if not recompute:
            row.update(saved_for_backward(step, weights))
        rows.append(row)
    return rows


def format_table(rows):
    """The table, then, per configuration without recomputation, the saved storages by the shape first saved."""
    lines = [
        "| configuration | peak of live tensors above the step's start (MiB) | bytes allocated in the step (MiB) "
        "| saved for the backward pass (MiB) |",
        "|---|---|---|---|",
    ]
    for row in rows:
        saved = "-" if row["saved_mib"] is None else f"{row['saved_mib']:.0f}"
        lines.append(f"| {row['label']} | {row['peak_live_mib']:.0f} | {row['allocated_mib']:.0f} | {saved} |")
    for row in rows:
        if row["saved_storages"]:
            storages = row["saved_storages"].items()
            kinds = ", ".join(f"{count} x {kind} ({mib:.1f} MiB)" for kind, (count, mib) in storages)
            lines.append(f"\n{row['label']}, saved storages by the shape first saved: {kinds}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tensor_memory", description=__doc__.splitlines()[0])
    runner.add_model_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=8, help="training batch (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    args = parser.parse_args(argv)
    quiet.install()  # before Keras loads, after --help: no framework log lines
    if "keras" in sys.modules and os.environ.get("KERAS_BACKEND") != "torch":
        print("python -m benchmarks.tensor_memory: Keras is loaded with another backend than torch", file=sys.stderr)
        return 2
    os.environ["KERAS_BACKEND"] = "torch"  # before Keras loads
    import torch

    from keras_vit.utils import keras_compat, validation

    try:
        variant = runner.variant(args.variant)
        batch_size = validation.positive_int("--batch-size", args.batch_size)
        image_size = validation.positive_int("--image-size", args.image_size)
        torch.set_num_threads(validation.positive_int("--threads", args.threads))
    except ValueError as error:
        print(f"python -m benchmarks.tensor_memory: {error}", file=sys.stderr)
        return 2
    keras_compat.set_random_seed(0)
    rows = measure(variant, batch_size, image_size)
    print(f"ViT-{args.variant} at {image_size} px, training batch {batch_size}, one step after a warm-up")
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
