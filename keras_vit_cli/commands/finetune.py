"""Train a ViT on the bundled digits, or fine-tune any variant.

Writes model.keras, metrics.json, training_curves.png, history.csv and
checkpoint.keras to --out; a killed run resumes from its backup when run again.
Options left out take the defaults of `keras_vit.training.finetune.finetune`.
"""

import os
import sys

from keras_vit_cli import options, quiet

TENSORFLOW_ON = ("tensorflow", "jax", "torch")  # tf.data reads the images on every backend


def add_arguments(parser):
    # The flags are the library's settings, whose import imports Keras: on its backend TensorFlow first, silenced.
    quiet.install()
    from keras_vit.training import settings

    options.add_settings(parser, settings.SETTINGS)


def check(args):
    if getattr(args, "data", "").startswith("tfds:"):
        from keras_vit.training import data

        data.check_tfds_source(args.data[len("tfds:") :], getattr(args, "data_dir", None))


def run(args):
    from keras_vit.training import multihost, schedule_xla_cpu_for_memory
    from keras_vit.training.finetune import finetune

    # Before anything computes: XLA's CPU compiler keeps fewer buffers alive (JAX).
    schedule_xla_cpu_for_memory(when_possible=True)
    settings = {key: value for key, value in vars(args).items() if key not in ("command", "run")}
    if settings.get("lora") and settings.get("weights") is None and multihost.is_primary():
        # Adapters on a random backbone train little: LoRA is for pretrained weights.
        print("keras-vit finetune: note: --lora without --weights adapts a randomly initialised model", file=sys.stderr)
    if not sys.stdout.isatty():
        settings.setdefault("verbose", 2)  # a log file gets one line per epoch, not a progress bar's redraws
    metrics = finetune(**settings)
    if not multihost.is_primary():
        return 0  # a multi-process run prints its results once
    summary = f"held-out accuracy {metrics['heldout_accuracy']:.4f} on {metrics['heldout_examples']} images; "
    summary += f"{metrics['steps']} steps"
    if metrics["start_step"]:
        summary += f" (resumed from the backup at step {metrics['start_step']})"
    if metrics["images_per_second"] is not None:
        summary += f", {metrics['images_per_second']:.0f} images/s"
    print(f"{summary}, {metrics['total_seconds']:.0f} s in all")
    if metrics["lora"]:
        trained, total = metrics["trainable_parameters"], metrics["parameters"]
        print(f"LoRA rank {metrics['lora']}: trained {trained:,} of {total:,} parameters ({trained / total:.2%})")
    unreadable = metrics["unreadable_files"]
    if unreadable:
        count = f"{len(unreadable)} unreadable image file" + ("s" if len(unreadable) > 1 else "")
        print(f"skipped {count} (listed in metrics.json), e.g. {unreadable[0]}")
    out = os.path.dirname(metrics["model_path"])
    written = [metrics["model_path"], os.path.join(out, "metrics.json"), metrics["curves_path"]]
    logs = ("confusion_matrix.png", "history.csv", "checkpoint.keras")
    beside = [name for name in logs if os.path.isfile(os.path.join(out, name))]
    print(f"wrote {', '.join(written)}" + (f"; beside them {', '.join(beside)}" if beside else ""))
    return 0
