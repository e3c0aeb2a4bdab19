"""`python -m benchmarks.largest_batch`: the largest training batch that fits in a memory limit.

Each batch size trains one step of keras_vit in its own worker process (the runner's: pinned cores, a fresh
high-water mark, framework runtime included), as `keras-vit finetune` trains on that backend (SGD, float32,
each step's gradients released), and reports that step's peak resident memory. One step, not three: at a
thousand images a step takes minutes on a small CPU, and in every `benchmarks.memory` run the first step's
peak was the peak of the steps after it. The report names the largest measured batch within the limit and
where a straight line through the two largest measured batches crosses it (an estimate, marked as one).

Example:

    python -m benchmarks.largest_batch --variant B/16 --batch-sizes 112,128 --backend torch --torch-only
"""

import argparse
import sys

from benchmarks import memory, runner
from keras_vit_cli import quiet

MIB_PER_GB = 1e9 / 2**20  # the limit is in decimal gigabytes, the memory in MiB


def plan(variant_name, variant, batch_sizes, backend="torch", remat=False, torch_only=False, image_size=224, **options):
    """One first-step-only spec per batch size, smallest first."""
    if not batch_sizes:
        raise ValueError("Give at least one batch size.")
    specs = []
    for batch_size in sorted(set(batch_sizes)):
        (spec,) = [
            spec
            for spec in memory.plan(
                variant_name,
                variant,
                batch_size,
                (backend,),
                timm=False,
                image_size=image_size,
                torch_only=torch_only,
                **options,
            )
            if spec["remat"] == remat
        ]
        specs.append(dict(spec, first_step_only=True))
    return specs


def largest_within(records, limit_gb):
    """`(largest measured batch within the limit or None, the straight-line estimate or None)`."""
    limit_mib = limit_gb * MIB_PER_GB
    points = [
        (record["train_batch_size"], record["result"]["peak_rss_train_mb"])
        for record in records
        if record.get("status") == "ok"
    ]
    within = [batch for batch, peak in points if peak <= limit_mib]
    estimate = None
    if len(points) >= 2:
        (small, small_peak), (large, large_peak) = sorted(points)[-2:]
        per_image = (large_peak - small_peak) / (large - small)
        if per_image > 0:
            estimate = int(large + (limit_mib - large_peak) // per_image)
    return (max(within) if within else None), estimate


def format_table(records):
    lines = ["| batch | first step (s) | peak RSS (MiB) |", "|---|---|---|"]
    for record in records:
        if record.get("status") != "ok":  # "failed" where the system killed it for memory
            lines.append(f"| {record['train_batch_size']} | {record['status']} | - |")
            continue
        result = record["result"]
        lines.append(
            f"| {record['train_batch_size']} | {result['first_train_step_s']:.1f} | {result['peak_rss_train_mb']:.0f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.largest_batch", description=__doc__.splitlines()[0])
    runner.add_model_arguments(parser)
    parser.add_argument("--batch-sizes", required=True, help="comma-separated training batches to measure")
    parser.add_argument("--backend", default="torch", choices=runner.BACKENDS, help="(default: %(default)s)")
    parser.add_argument("--remat", action="store_true", help="train with remat=True")
    parser.add_argument("--torch-only", action="store_true", help="torch rows as an install with torch alone")
    parser.add_argument("--limit-gb", type=float, default=20.0, help="the memory limit (default: %(default)s GB)")
    parser.add_argument("--threads", type=int, default=2, help="cores per configuration (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per batch size (default: %(default)s)")
    parser.add_argument("--output", default="largest_batch.json", help="the JSON report (default: %(default)s)")
    args = parser.parse_args(argv)
    quiet.install()  # before Keras loads, after --help: no framework log lines
    from keras_vit.utils import files, validation

    try:
        variant = runner.variant(args.variant)
        if not args.limit_gb > 0:
            raise ValueError(f"--limit-gb must be positive. Received: {args.limit_gb}")
        specs = plan(
            args.variant,
            variant,
            runner.batch_sizes("--batch-sizes", args.batch_sizes),
            backend=args.backend,
            remat=args.remat,
            torch_only=args.torch_only,
            image_size=validation.positive_int("--image-size", args.image_size),
            threads=validation.positive_int("--threads", args.threads),
        )
        files.check_output_path(args.output)  # before minutes of training, not after
        report = memory.run_records(specs, timeout=args.timeout)
        largest, estimate = largest_within(report["records"], args.limit_gb)
        report.update(table=format_table(report["records"]), limit_gb=args.limit_gb, largest=largest, estimate=estimate)
        files.write_json(args.output, report, indent=1, sort_keys=False)
    except (ValueError, OSError) as error:
        print(f"python -m benchmarks.largest_batch: {error}", file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 1
    print(f"{runner.label(specs[0])}, ViT-{args.variant} at {args.image_size} px, {report['machine']['cpu']}")
    print(report["table"])
    print(f"Largest measured batch within {args.limit_gb:g} GB: {largest if largest is not None else 'none'}")
    if estimate is not None:
        print(f"Estimate: a straight line through the two largest batches reaches {args.limit_gb:g} GB near {estimate}")
    return 0 if all(record["status"] == "ok" for record in report["records"]) else 1


if __name__ == "__main__":
    sys.exit(main())
