"""Train a ViT on the bundled digits, or fine-tune any variant.

Writes model.keras, metrics.json (held-out accuracy, steps, images/s) and
training_curves.png to --out, with history.csv (the per-epoch log) and
checkpoint.keras (the last finished epoch); a killed run resumes from
out/backup when restarted with the same command. With stdout piped or
redirected and no --verbose, progress is one line per epoch (--verbose 2).
Options left out take the defaults of `keras_vit.training.finetune.finetune`, which
also checks every value.
"""

from keras_vit_cli import keras_free, options

TENSORFLOW_ON = ("tensorflow", "jax", "torch")  # tf.data reads the images on every backend


def add_arguments(parser):
    # One flag per setting of keras_vit.training.settings, which also checks and documents them.
    options.add_settings(parser, options.library_module("keras_vit.training.settings").SETTINGS)


def check(args):
    """Before any framework is imported (seconds): an unprepared TFDS dataset offline fails at once, in one line."""
    if getattr(args, "data", "").startswith("tfds:"):
        (data,) = keras_free.load("keras_vit.training.data")
        data.check_tfds_source(args.data[len("tfds:") :], getattr(args, "data_dir", None))


def run(args):
    import os
    import sys

    # Before anything computes: XLA's CPU compiler keeps fewer buffers alive (JAX; keras_vit.training.xla_memory).
    (xla_memory,) = keras_free.load("keras_vit.training.xla_memory")
    xla_memory.schedule_xla_cpu_for_memory(when_possible=True)  # called in a session that has computed: as before

    from keras_vit.training import multihost
    from keras_vit.training.finetune import finetune

    options = {key: value for key, value in vars(args).items() if key not in ("command", "run")}
    if "verbose" not in options and not sys.stdout.isatty():
        # Piped or redirected (a log file, CI): one line per epoch, not a progress bar's redraws and colour codes.
        options["verbose"] = 2
    metrics = finetune(**options)
    if not multihost.is_primary():
        return 0  # a multi-process run prints its results once, from process 0
    speed = metrics["images_per_second"]
    print(
        f"held-out accuracy {metrics['heldout_accuracy']:.4f} on {metrics['heldout_examples']} images; "
        f"{metrics['steps']} steps"
        + (f" (resumed from the backup at step {metrics['start_step']})" if metrics["start_step"] else "")
        + ", "
        + (f"{speed:.0f} images/s, " if speed is not None else "")
        + f"{metrics['total_seconds']:.0f} s in all"
    )
    unreadable = metrics["unreadable_files"]
    if unreadable:
        count = f"{len(unreadable)} unreadable image file" + ("s" if len(unreadable) > 1 else "")
        print(f"skipped {count} (listed in metrics.json), e.g. {unreadable[0]}")
    out = os.path.dirname(metrics["model_path"])
    results = [metrics["model_path"], os.path.join(out, "metrics.json"), metrics["curves_path"]]
    logs = [
        name
        for name in ("confusion_matrix.png", "history.csv", "checkpoint.keras")
        if os.path.isfile(os.path.join(out, name))
    ]
    print(f"wrote {', '.join(results)}" + (f"; beside them {', '.join(logs)}" if logs else ""))
    return 0
