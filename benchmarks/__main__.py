"""`python -m benchmarks`: keras_vit against its peers, from the repository root.

Run from a clone (the benchmark is not part of the installed package):

    python -m benchmarks --variant Ti/16 --quick
"""

import argparse
import sys

from benchmarks import runner
from keras_vit_cli import quiet


def _names(text):
    return tuple(name.strip() for name in text.split(",") if name.strip())


def add_arguments(parser):
    runner.add_model_arguments(parser)
    parser.add_argument(
        "--family",
        choices=tuple(runner.FAMILIES),
        default="vit",
        help="the model: the plain ViT, or DINOv3 (RoPE, registers, layer scale) of the --variant sizes, measured "
        "beside keras_vit's plain ViT (default: %(default)s)",
    )
    parser.add_argument(
        "--backends",
        default=",".join(runner.BACKENDS),
        help="comma-separated, of " + ",".join(runner.KERAS_BACKENDS) + " (default: %(default)s)",
    )
    parser.add_argument(
        "--precisions", default=",".join(runner.PRECISIONS), help="comma-separated (default: %(default)s)"
    )
    parser.add_argument(
        "--jit",
        choices=runner.JIT_OPTIONS,
        default="default",
        help="jit_compile modes: default = TensorFlow off and on, JAX on, torch off, plus HF eager and "
        "torch.compile; both = off and on everywhere (default: %(default)s)",
    )
    parser.add_argument(
        "--peers", default=",".join(runner.PEERS), help="comma-separated, or 'none' (default: %(default)s)"
    )
    parser.add_argument(
        "--artefacts",
        default=",".join(runner.ARTEFACT_FORMATS),
        help="keras_vit's exported artefacts measured for float32 inference in their runtimes, comma-separated, "
        "or 'none' (default: %(default)s)",
    )
    parser.add_argument("--no-ceiling", action="store_true", help="skip the matrix-multiply ceiling")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls after warm-up (default: %(default)s)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="run the plan this many times, interleaved; report medians (default: 1)"
    )
    parser.add_argument("--batch-sizes", default="1,16", help="inference batch sizes (default: %(default)s)")
    parser.add_argument("--train-batch-size", type=int, default=8, help="training batch (default: %(default)s)")
    parser.add_argument("--classes", type=int, default=1000, help="size of the head (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="cores per configuration (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per configuration (default: %(default)s)")
    parser.add_argument("--output", default="benchmark.json", help="the JSON report (default: %(default)s)")
    parser.add_argument("--inference-only", action="store_true", help="measure inference, not training")
    parser.add_argument(
        "--quick", action="store_true", help="one repeat, one jit mode per backend, no torch.compile peer"
    )


def run(args):
    # Imported here: `--help` answers at once (keras_vit imports Keras and its backend).
    from keras_vit.utils import files, validation

    variant = runner.variant(args.variant)
    for option in ("image_size", "repeats", "rounds", "train_batch_size", "classes", "threads"):
        validation.positive_int(f"--{option.replace('_', '-')}", getattr(args, option))
    validation.finite_float("--timeout", args.timeout, minimum=0, include_minimum=False)
    files.check_output_path(args.output)  # a missing folder fails now, not after the whole run
    patch = variant["patch_size"]
    if args.image_size % patch:
        raise ValueError(f"--image-size must be a multiple of the patch size {patch}. Received: {args.image_size}")
    batch_sizes = runner.batch_sizes("--batch-sizes", args.batch_sizes)
    peers = () if args.peers.strip() == "none" else _names(args.peers)
    artefacts = () if args.artefacts.strip() == "none" else _names(args.artefacts)
    specs = runner.plan(
        args.variant,
        variant,
        backends=_names(args.backends),
        precisions=_names(args.precisions),
        jit="single" if args.quick else args.jit,
        peers=peers,
        artefacts=artefacts,
        ceiling=not args.no_ceiling,
        image_size=args.image_size,
        classes=args.classes,
        inference_batch_sizes=batch_sizes,
        train_batch_size=args.train_batch_size,
        repeats=1 if args.quick else args.repeats,
        threads=args.threads,
        inference_only=args.inference_only,
        family=args.family,
    )
    report = runner.run(specs, timeout=args.timeout, output=args.output, rounds=args.rounds)
    model = f"{runner.FAMILY_NAMES[args.family]} ViT-{args.variant}".strip()
    print(
        f"{model} at {args.image_size} px, {args.threads} threads, {report['started']}, "
        f"{report['machine']['cpu']} ({report['machine']['cores']} cores), "
        f"load average at start {report['machine']['load_average']}"
    )
    print(report["table"])
    print(f"\nWrote {args.output}", file=sys.stderr)
    return 0 if all(record["status"] == "ok" for record in report["records"]) else 1


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    quiet.install()  # before Keras loads, after --help: no framework log lines
    try:
        return run(args)
    except (ValueError, OSError) as error:
        print(f"python -m benchmarks: {error}", file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 1


if __name__ == "__main__":
    sys.exit(main())
