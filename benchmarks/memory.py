"""`python -m benchmarks.memory`: training memory and step time, with and without rematerialization (or LoRA).

For one variant and batch, each configuration trains in its own process (the runner's workers, pinned to the
same cores): keras_vit on each backend with `remat=False` and `remat=True`, and timm's `VisionTransformer`
of the same size (eager PyTorch) without and with `set_grad_checkpointing()`. The table gives each one's
training images/s, seconds per step, the resident memory once the framework and the model library are imported
(what the process holds before it builds anything), peak resident memory (the process's high-water mark, build and
imports included) over all steps and over the steps after the first (whose tracing and compilation can
take more memory than a step), each relative to timm with checkpointing, and the step-time cost of remat
against the same configuration without it. With `--lora RANK`, each backend also trains the model with LoRA adapters
of that rank (only they and the head train), without remat; its last column compares it with full fine-tuning.

Example:

    python -m benchmarks.memory --variant B/16 --batch-size 32 --output memory.json
    python -m benchmarks.memory --variant B/16 --batch-size 8 --lora 8 --no-timm --output lora.json
"""

import argparse
import sys

from benchmarks import runner, worker
from keras_vit_cli import quiet

# The training jit_compile a user gets by default: TensorFlow's graph executor, XLA on JAX, eager torch.
TRAIN_JIT = {"tensorflow": False, "jax": True, "torch": False}


def plan(
    variant_name, variant, batch_size, backends=runner.BACKENDS, timm=True, image_size=224, torch_only=False, **options
):
    """The specs: keras_vit per backend without and with remat, then timm without and with checkpointing.

    `torch_only`: keras_vit's torch rows run as in an install of keras-vision-transformer[torch], without the
    packages Keras imports wherever they are installed (`worker.TORCH_INSTALL_LACKS`).
    `options`: `classes`, `repeats`, `threads`, `precision` (defaults 1000, 1, 2, "float32"), `lora` (a rank: adds
    a LoRA row per backend), `compiled_torch` (the torch rows, keras_vit's and timm's, with `torch.compile`).
    """
    from keras_vit.utils import validation  # here, not at the top: `--help` imports no Keras

    for backend in backends:
        if backend not in runner.BACKENDS:
            raise ValueError(f"Unknown backend {backend!r}; choose from {runner.BACKENDS}.")
    common = dict(
        variant_name=variant_name,
        variant=dict(variant),
        image_size=image_size,
        classes=options.get("classes", 1000),
        inference_batch_sizes=[],
        train_batch_size=validation.positive_int("batch_size", batch_size),
        repeats=options.get("repeats", 1),
        threads=options.get("threads", 2),
        precision=options.get("precision", "float32"),
    )
    specs = [
        dict(common, kind="keras_vit", backend=backend, jit_compile=TRAIN_JIT[backend], remat=remat)
        for backend in backends
        for remat in (False, True)
    ]
    if options.get("compiled_torch"):
        specs = [dict(spec, jit_compile=spec["jit_compile"] or spec["backend"] == "torch") for spec in specs]
    if options.get("lora"):
        specs += [
            dict(common, kind="keras_vit", backend=backend, jit_compile=TRAIN_JIT[backend], lora=options["lora"])
            for backend in backends
        ]
    if torch_only:
        for spec in specs:
            if spec["backend"] == "torch":
                spec["absent_frameworks"] = list(worker.TORCH_INSTALL_LACKS)
    if timm:
        compiled = bool(options.get("compiled_torch"))
        specs += [
            dict(common, kind="timm", backend="torch", jit_compile=compiled, remat=remat) for remat in (False, True)
        ]
    return specs


def _cell(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"


def _step_s(record):
    if record.get("status") != "ok":
        return None
    return record["train_batch_size"] / record["result"]["train"]["images_per_s"]


def _rss(record, key="peak_rss_train_mb"):
    return record["result"].get(key) if record.get("status") == "ok" else None


def _steady_rss(record):
    return _rss(record, "peak_rss_steady_train_mb")


def summarize(records):
    """Adds `memory_vs_timm_checkpointed` (all steps, and `_steady`: after the first) and `step_time_vs_no_remat`
    to every record."""
    reference = next((r for r in records if r["kind"] == "timm" and r["remat"]), None)
    for record in records:
        without = next(
            (
                r
                for r in records
                if r["kind"] == record["kind"]
                and r["backend"] == record["backend"]
                and not r["remat"]
                and not r.get("lora")
            ),
            None,
        )
        record["memory_vs_timm_checkpointed"] = runner.ratio(_rss(record), reference and _rss(reference))
        record["steady_memory_vs_timm_checkpointed"] = runner.ratio(
            _steady_rss(record), reference and _steady_rss(reference)
        )
        record["step_time_vs_no_remat"] = runner.ratio(_step_s(record), without and _step_s(without))
    return records


def format_table(records):
    """Markdown: one row per configuration."""
    batch = records[0]["train_batch_size"] if records else "?"
    lines = [
        f"| configuration (batch {batch}) | training img/s | s per step | RSS after imports (MiB) | "
        "peak RSS, all steps (MiB) | peak RSS after the first step (MiB) | the two / timm checkpointed "
        "| step time / without remat (or LoRA) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        if record.get("status") != "ok":
            lines.append(f"| {record['label']} | {record['status']} | - | - | - | - | - | - |")
            continue
        lines.append(
            f"| {record['label']} | {_cell(record['result']['train']['images_per_s'], 2)} | "
            f"{_cell(_step_s(record), 1)} | {_cell(_rss(record, 'rss_after_imports_mb'), 0)} | "
            f"{_cell(_rss(record), 0)} | "
            f"{_cell(_steady_rss(record), 0)} | "
            f"{_cell(record['memory_vs_timm_checkpointed'], 2)} / "
            f"{_cell(record['steady_memory_vs_timm_checkpointed'], 2)} | "
            f"{_cell(record['step_time_vs_no_remat'], 2)} |"
        )
    for record in records:
        if record.get("status") not in (None, "ok"):
            lines.append(f"\n{record['label']}: {record['status']}: {record['error']}")
    return "\n".join(lines)


def run_records(specs, timeout=3600, log=None):
    """Runs the specs one after another, logging each; returns `{"machine", "command", "records"}`."""
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    machine = runner.machine_description()
    records = []
    for index, spec in enumerate(specs, 1):
        log(f"[{index}/{len(specs)}] {runner.label(spec)} ...")
        record = runner.run_spec(spec, timeout)
        log(f"[{index}/{len(specs)}] {record['label']}: {record['status']} in {record['elapsed_s']:.0f} s")
        records.append(record)
    return {"machine": machine, "command": " ".join(sys.argv), "records": records}


def run(specs, timeout=3600, output=None, log=None):
    """Runs the specs one after another; returns (and writes to `output`) the report."""
    from keras_vit.utils import files

    if output:
        files.check_output_path(output)
    report = run_records(specs, timeout, log)
    summarize(report["records"])
    report["table"] = format_table(report["records"])
    if output:
        files.write_json(output, report, indent=1, sort_keys=False)
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    runner.add_model_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=32, help="training batch (default: %(default)s)")
    parser.add_argument("--backends", default=",".join(runner.BACKENDS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--no-timm", action="store_true", help="skip the timm rows")
    parser.add_argument("--lora", type=int, default=None, help="also train with LoRA adapters of this rank")
    parser.add_argument(
        "--torch-only",
        action="store_true",
        help="run keras_vit's torch rows as in an install of keras-vision-transformer[torch] (Keras imports jax, "
        "TensorFlow, scikit-learn, SciPy and matplotlib wherever they are installed)",
    )
    parser.add_argument(
        "--precision", default="float32", choices=("float32", "mixed_bfloat16"), help="(default: %(default)s)"
    )
    parser.add_argument(
        "--compiled-torch", action="store_true", help="train the torch rows (keras_vit's and timm's) with torch.compile"
    )
    parser.add_argument("--repeats", type=int, default=1, help="timed steps after two untimed (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="cores per configuration (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per configuration (default: %(default)s)")
    parser.add_argument("--output", default="memory.json", help="the JSON report (default: %(default)s)")
    args = parser.parse_args(argv)
    quiet.install()  # before Keras loads, after --help: no framework log lines
    from keras_vit.utils import validation

    try:
        variant = runner.variant(args.variant)
        backends = tuple(name.strip() for name in args.backends.split(",") if name.strip())
        specs = plan(
            args.variant,
            variant,
            args.batch_size,
            backends=backends,
            timm=not args.no_timm,
            torch_only=args.torch_only,
            image_size=validation.positive_int("--image-size", args.image_size),
            repeats=validation.positive_int("--repeats", args.repeats),
            threads=validation.positive_int("--threads", args.threads),
            precision=args.precision,
            compiled_torch=args.compiled_torch,
            lora=None if args.lora is None else validation.positive_int("--lora", args.lora),
        )
        report = run(specs, timeout=args.timeout, output=args.output)
    except (ValueError, OSError) as error:
        print(f"python -m benchmarks.memory: {error}", file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 1
    machine = report["machine"]
    print(
        f"ViT-{args.variant} at {args.image_size} px, {args.precision}, training batch {args.batch_size}, "
        f"{args.threads} threads, "
        f"{machine['cpu']} ({machine['cores']} cores), load average at start {machine['load_average']}"
    )
    print(report["table"])
    return 0 if all(record["status"] == "ok" for record in report["records"]) else 1


if __name__ == "__main__":
    sys.exit(main())
