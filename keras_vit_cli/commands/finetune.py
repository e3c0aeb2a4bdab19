"""Train a ViT on the bundled digits, or fine-tune any variant.

Writes model.keras, metrics.json (held-out accuracy, steps, images/s) and
training_curves.png to --out, with history.csv (the per-epoch log) and
checkpoint.keras (the last finished epoch); a killed run resumes from
out/backup when restarted with the same command. Options left out take the defaults of
`keras_vit.finetune.finetune`, which also checks every value.
"""

import argparse


def add_arguments(parser):
    # SUPPRESS: an option the user leaves out is not passed, so the library's defaults apply (one home).
    parser.argument_default = argparse.SUPPRESS
    add = parser.add_argument
    add("--model", help="'small' (the digits model, default) or a constructor such as ViTB16")
    add("--weights", help="pretrained weights tag passed to the constructor (default: random init)")
    add("--data", help="'digits' (default), 'tfds:NAME', or an image folder root/<split>/<class>/ or root/<class>/")
    add("--train-split", help="training split (TFDS, or folder root/<split>/) (default: train)")
    add("--eval-split", help="held-out split (default: validation, val or test)")
    add("--data-dir", help="TFDS data directory (default: TFDS's own)")
    add("--validation-split", type=float, help="held-out fraction of a flat image folder root/<class>/ (default: 0.2)")
    add("--image-size", type=int, help="square input size in pixels; default 16 (digits) or 224")
    add("--batch-size", type=int, help="images per optimizer update; default 64 (digits) or 512")
    add("--steps", type=int, help="optimizer updates, exactly; default 1500 (digits) or 10000")
    add("--epochs", type=int, help="evaluation/checkpoint rounds (<= steps); default 20 or 10")
    add("--learning-rate", type=float, help="peak learning rate; default 0.03 x batch/512 (sgd), 2e-3")
    add("--optimizer", help="auto (default: sgd with --weights, else adamw), sgd or adamw")
    add("--warmup-steps", type=int, help="linear warmup updates; default 10%% of --steps, at most 500")
    add("--accumulation-steps", type=int, help="batches per update: 8 gives 512 = 8 x 64 (default: 1)")
    add("--layer-decay", type=float, help="layer-wise learning-rate decay in (0, 1], e.g. 0.75 (default: off)")
    add("--label-smoothing", type=float, help="in [0, 1); default 0.1 without --weights, else 0")
    add("--randaugment", action="store_true", help="RandAugment on the training crops")
    add("--mixup", type=float, help="MixUp alpha (default 0: off)")
    add("--cutmix", type=float, help="CutMix alpha (default 0: off)")
    add("--strategy", help="tf.distribute strategy: auto (default), default, mirrored or tpu")
    add(
        "--precision",
        help="auto (default: mixed_bfloat16 where supported, else float32), float32, mixed_bfloat16 or mixed_float16",
    )
    add("--backup-every", type=int, help="batches between resumable backups (default 0: every epoch)")
    add("--out", help="output folder (default: outputs/finetune)")
    add("--seed", type=int, help="seed of the data order, augmentation and initialisation (default: 0)")
    add("--verbose", type=int, choices=(0, 1, 2), help="0 silent, 1 progress bar (default), 2 one line per epoch")
    add(
        "--coordinator",
        help="multi-process run (JAX): host:port of process 0, or 'auto' where JAX detects the cluster (Cloud TPU, "
        "SLURM); default: KERAS_DISTRIBUTION_JOB_ADDRESSES, else one process",
    )
    add("--num-processes", type=int, help="processes of the multi-process run (default: KERAS_DISTRIBUTION_*)")
    add("--process-id", type=int, help="this process, 0 to --num-processes - 1 (default: KERAS_DISTRIBUTION_*)")
    add("--heartbeat-timeout", type=int, help="seconds before the processes give up on a silent one (default: 100)")


def run(args):
    import os

    from keras_vit.training.finetune import finetune

    options = {key: value for key, value in vars(args).items() if key not in ("command", "run")}
    metrics = finetune(**options)
    speed = metrics["images_per_second"]
    print(
        f"held-out accuracy {metrics['heldout_accuracy']:.4f} on {metrics['heldout_examples']} images; "
        f"{metrics['steps']} steps, "
        + (f"{speed:.0f} images/s, " if speed is not None else "")
        + f"{metrics['total_seconds']:.0f} s in all"
    )
    out = os.path.dirname(metrics["model_path"])
    print(f"wrote {metrics['model_path']}, {metrics['curves_path']} and {os.path.join(out, 'metrics.json')}")
    return 0
