"""`python -m benchmarks.accelerator`: ViT training and inference on one GPU, keras_vit against its peers.

Run from a clone, on a machine with the GPU (and its jax and torch):

    python -m benchmarks.accelerator --variant B/16 --output accelerator.json

Every configuration (`CONFIGURATIONS`: keras_vit on jax with XLA and on
torch with and without `torch.compile`, with and without rematerialization;
timm's `VisionTransformer` compiled, with and without gradient
checkpointing; keras-hub's `ViTBackbone` on jax; and the device's own
bfloat16 matrix-product rate) runs in its own process
(`benchmarks.accelerator_worker`). All start together, so their compilations
(CPU-bound, up to minutes each) overlap; once each is ready, the timed
windows take turns, one process on the device at a time, round after round,
in a rotating order. The report gives each row's median over the rounds,
its ratio to timm compiled, its share of the measured matrix-product rate,
and its peak device memory (each process's own high-water mark).
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time

from benchmarks import runner
from benchmarks.accelerator_worker import PROTOCOL_PREFIX

# name: (kind, backend, jit_compile, remat, optimizer). Attention is left to each framework's own choice, which is
# the fused (flash) kernel for bfloat16 on a recent GPU: each row records whether that check passed. Every row
# trains with SGD: keras_vit with `keras_vit.training.SyncFreeSGD` (as `keras-vit finetune` does), keras-hub with
# Keras's, which on torch reads the learning rate back to the host in every step (the "keras-sgd" row shows its
# cost), timm with torch's.
CONFIGURATIONS = {
    "keras_vit jax": ("keras_vit", "jax", True, False, "sync-free"),
    "keras_vit jax remat": ("keras_vit", "jax", True, True, "sync-free"),
    "keras_vit jax xla attention": ("keras_vit", "jax", True, False, "sync-free", {"attention": "xla"}),
    "keras_vit jax pad 8": ("keras_vit", "jax", True, False, "sync-free", {"attention_multiple": 8}),
    "keras_vit torch compiled": ("keras_vit", "torch", True, False, "sync-free"),
    "keras_vit torch compiled remat": ("keras_vit", "torch", True, True, "sync-free"),
    "keras_vit torch compiled keras-sgd": ("keras_vit", "torch", True, False, "keras"),
    "keras_vit torch eager": ("keras_vit", "torch", False, False, "sync-free"),
    "keras_vit torch eager remat": ("keras_vit", "torch", False, True, "sync-free"),
    "timm compiled": ("timm", "torch", True, False, "torch"),
    "timm compiled checkpointed": ("timm", "torch", True, True, "torch"),
    "keras_hub jax": ("keras_hub", "jax", True, False, "keras"),
}
REFERENCE = "timm compiled"
CEILING = "matrix products"


def _specs(names, args, variant, log_folder):
    specs = {}
    for name in names:
        kind, backend, jit_compile, remat, optimizer, *options = CONFIGURATIONS[name]
        specs[name] = {
            **(options[0] if options else {}),
            "profile_folder": os.path.abspath(os.path.join(log_folder, name.replace(" ", "_") + "-profile")),
            "kind": kind,
            "backend": backend,
            "jit_compile": jit_compile,
            "remat": remat,
            "optimizer": optimizer,
            "precision": args.precision,
            "variant": variant,
            "image_size": args.image_size,
            "classes": args.classes,
            "train_batch_size": args.train_batch_size,
            "inference_batch_size": args.inference_batch_size,
            # Keras imports jax wherever it is installed: a torch row runs as it would where jax is not.
            "absent_frameworks": ["jax", "jaxlib", "jax_plugins"] if backend == "torch" else [],
        }
    if args.matmul_size:
        specs[CEILING] = {"kind": "ceiling", "backend": "torch", "matmul_size": args.matmul_size}
    return specs


class Worker:
    """One configuration's process, its protocol lines gathered on a shared queue by a reader thread."""

    def __init__(self, name, spec, log_folder, events):
        self.name = name
        self.spec = spec
        self.log_path = os.path.join(log_folder, name.replace(" ", "_") + ".log")
        environment = dict(
            os.environ,
            KERAS_BACKEND=spec["backend"],
            # Several processes share the device: each takes the memory it uses, not 75 % of it up front.
            XLA_PYTHON_CLIENT_PREALLOCATE="false",
            PYTHONUNBUFFERED="1",
            TF_CPP_MIN_LOG_LEVEL="2",
        )
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.accelerator_worker", json.dumps(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                env=environment,
            )
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events):
        for line in self.process.stdout:
            if line.startswith(PROTOCOL_PREFIX):
                events.put((self.name, json.loads(line[len(PROTOCOL_PREFIX) :])))
        events.put((self.name, {"event": "exit"}))

    def send(self, command):
        try:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it has exited: its reader reports that

    def log_tail(self, characters=3000):
        with open(self.log_path, errors="replace") as log:
            return log.read()[-characters:]

    def stop(self):
        self.send("quit")
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _wait_for(events, names, deadline, on_answer=None):
    """The next protocol event of each of `names` ({name: event}), each passed to `on_answer(name, event)` as it
    comes; a name still silent at `deadline` is left out."""
    answers = {}
    while len(answers) < len(names):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            name, event = events.get(timeout=remaining)
        except queue.Empty:
            break
        if name in names and name not in answers:
            answers[name] = event
            if on_answer is not None:
                on_answer(name, event)
    return answers


def measure(
    specs, rounds, steps, calls, ready_timeout, window_timeout, log_folder, log=print, after_round=None, profile_calls=0
):
    """Runs every spec in its own process and interleaves their timed windows; returns {name: record}.

    With `profile_calls`, each torch row then runs that many training steps and inference calls under
    torch.profiler (after the timed rounds, so the profiler's overhead is in no timing).

    `after_round(records)` is called after each round (a report written then survives a run cut short)."""
    events = queue.Queue()
    workers = {name: Worker(name, spec, log_folder, events) for name, spec in specs.items()}
    records = {
        name: {"spec": spec, "status": "not ready", "train_s": [], "inference_s": []} for name, spec in specs.items()
    }
    try:
        started = time.monotonic()

        def on_ready(name, event):
            ready = event["event"] == "ready"
            records[name].update(event if ready else {"error": event.get("error") or workers[name].log_tail()})
            records[name]["status"] = "ok" if ready else "failed"
            log(f"{name}: {'ready' if ready else 'FAILED'} after {time.monotonic() - started:.0f} s")

        _wait_for(events, list(workers), started + ready_timeout, on_ready)
        active = [name for name in workers if records[name]["status"] == "ok"]
        for round_index in range(rounds):
            shift = round_index % max(len(active), 1)
            for name in active[shift:] + active[:shift]:
                for command, count, key in (("train", steps, "train_s"), ("infer", calls, "inference_s")):
                    if records[name]["status"] != "ok" or (command == "infer" and specs[name]["kind"] == "ceiling"):
                        continue
                    workers[name].send(f"{command} {count}")
                    answer = _wait_for(events, [name], time.monotonic() + window_timeout).get(name)
                    if answer is None or answer["event"] != "done":
                        records[name]["status"] = "failed"
                        records[name]["error"] = (answer or {}).get("error") or workers[name].log_tail()
                        log(f"{name}: FAILED in round {round_index + 1} ({command})")
                        continue
                    records[name][key].append(answer["seconds"])
                    if command == "train" and answer.get("peak_restarted"):
                        records[name]["train_peak_bytes"] = max(
                            records[name].get("train_peak_bytes") or 0, answer["peak_bytes"] or 0
                        )
            log(f"round {round_index + 1} of {rounds} done")
            if after_round is not None:
                after_round(records)
        for name in active:
            if not profile_calls or records[name]["status"] != "ok":
                continue
            if specs[name]["kind"] == "ceiling":
                continue
            for command in ("train", "infer"):
                workers[name].send(f"profile {command} {profile_calls}")
                answer = _wait_for(events, [name], time.monotonic() + window_timeout).get(name) or {}
                records[name].setdefault("profile", {})[command] = answer.get("profile") or answer.get("error")
    finally:
        for name, worker in workers.items():
            if records[name]["status"] == "not ready":
                records[name]["error"] = f"not ready within {ready_timeout:.0f} s; the end of its log:\n" + (
                    worker.log_tail()
                )
            worker.process.kill() if records[name]["status"] == "not ready" else worker.stop()
    return records


def _median(values):
    return runner._median_of(values) if values else None


def summarize(records, steps, calls, flops):
    """Per row: median training and inference images/s, ratios to timm compiled, % of the matrix-product rate."""
    ceiling = records.get(CEILING, {})
    ceiling_flops_s = None
    if ceiling.get("status") == "ok" and ceiling["train_s"]:
        size = ceiling["spec"]["matmul_size"]
        ceiling_flops_s = 2 * size**3 * steps / _median(ceiling["train_s"])
    rows = {}
    for name, record in records.items():
        if name == CEILING:
            continue
        spec = record["spec"]
        train_s, inference_s = _median(record["train_s"]), _median(record["inference_s"])
        row = {
            "status": record["status"],
            "train_images_per_s": spec["train_batch_size"] * steps / train_s if train_s else None,
            "inference_images_per_s": spec["inference_batch_size"] * calls / inference_s if inference_s else None,
            "train_peak_gib": record["train_peak_bytes"] / 2**30 if record.get("train_peak_bytes") else None,
            "first_train_step_s": record.get("first_train_step_s"),
            "flash_attention": record.get("flash_attention"),
            "rounds": len(record["train_s"]),
        }
        for key, per_image in (("train", flops["training"]), ("inference", flops["forward"])):
            images_per_s = row[f"{key}_images_per_s"]
            row[f"{key}_percent_of_peak"] = (
                100 * images_per_s * per_image / ceiling_flops_s if images_per_s and ceiling_flops_s else None
            )
        rows[name] = row
    reference = rows.get(REFERENCE, {})
    for row in rows.values():
        for key in ("train_images_per_s", "inference_images_per_s"):
            row[key.replace("images_per_s", "vs_timm")] = runner.ratio(row[key], reference.get(key))
    device = next((record["device"] for record in records.values() if record.get("device")), None)
    return {"device": device, "matmul_tflops": ceiling_flops_s / 1e12 if ceiling_flops_s else None, "rows": rows}


def format_table(summary, train_batch_size, inference_batch_size):
    def number(value, digits=1, suffix=""):
        return "-" if value is None else f"{value:.{digits}f}{suffix}"

    lines = [
        f"| configuration | training b{train_batch_size} (img/s) | vs timm compiled | % of peak | "
        f"inference b{inference_batch_size} (img/s) | vs timm compiled | % of peak | "
        "peak device memory, training (GiB) | first step (s) | flash attention |",
        "|---" * 10 + "|",
    ]
    for name, row in summary["rows"].items():
        if row["status"] != "ok":
            lines.append(f"| {name} | {row['status']} |" + " |" * 8)
            continue
        flash = row["flash_attention"] or "-"
        lines.append(
            f"| {name} | {number(row['train_images_per_s'])} | {number(row['train_vs_timm'], 2, 'x')} | "
            f"{number(row['train_percent_of_peak'], 0, ' %')} | {number(row['inference_images_per_s'])} | "
            f"{number(row['inference_vs_timm'], 2, 'x')} | {number(row['inference_percent_of_peak'], 0, ' %')} | "
            f"{number(row['train_peak_gib'], 2)} | {number(row['first_train_step_s'])} | {flash} |"
        )
    return "\n".join(lines)


def format_profiles(records):
    """Device milliseconds per call by kind of kernel, for the rows that were profiled."""
    lines = []
    for name, record in records.items():
        for command, measured in record.get("profile", {}).items():
            if not isinstance(measured, dict):
                continue
            kinds = ", ".join(f"{kind} {ms:.1f}" for kind, ms in measured["kinds_ms"].items())
            lines.append(f"| {name} | {command} | {measured['wall_ms']:.1f} | {measured['device_ms']:.1f} | {kinds} |")
    if not lines:
        return ""
    header = "| configuration | call | wall ms per call | device ms per call | device ms by kernel kind |"
    return "\n".join([header, "|---" * 5 + "|", *lines])


def add_arguments(parser):
    runner.add_model_arguments(parser)
    parser.add_argument(
        "--configurations",
        default=",".join(CONFIGURATIONS),
        help="comma-separated names of CONFIGURATIONS (default: all of them)",
    )
    parser.add_argument("--precision", choices=runner.PRECISIONS, default="mixed_bfloat16")
    parser.add_argument("--train-batch-size", type=int, default=128, help="(default: %(default)s)")
    parser.add_argument("--inference-batch-size", type=int, default=256, help="(default: %(default)s)")
    parser.add_argument("--classes", type=int, default=1000, help="size of the head (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=10, help="training steps per window (default: %(default)s)")
    parser.add_argument("--calls", type=int, default=10, help="inference calls per window (default: %(default)s)")
    parser.add_argument(
        "--matmul-size", type=int, default=8192, help="side of the ceiling's products; 0: none (default: %(default)s)"
    )
    parser.add_argument(
        "--ready-timeout", type=float, default=600, help="seconds for all to compile (default: %(default)s)"
    )
    parser.add_argument("--window-timeout", type=float, default=120, help="seconds per window (default: %(default)s)")
    parser.add_argument("--profile", type=int, default=0, help="calls profiled after the rounds (default: none)")
    parser.add_argument("--output", default="accelerator.json", help="the JSON report (default: %(default)s)")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.accelerator", description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.configurations.split(",") if name.strip()]
    unknown = [name for name in names if name not in CONFIGURATIONS]
    if unknown:
        parser.error(f"unknown configurations {unknown}; choose from: {', '.join(CONFIGURATIONS)}")
    from keras_vit_cli import quiet

    quiet.install()  # the variant table imports keras_vit, hence Keras: no framework log lines
    from keras_vit.models import flops, variants

    if args.variant not in variants.VARIANTS:
        parser.error(f"unknown --variant {args.variant!r}; choose one of: {', '.join(variants.VARIANTS)}")
    variant = variants.VARIANTS[args.variant]
    log_folder = os.path.splitext(args.output)[0] + "-logs"
    specs = _specs(names, args, variant, log_folder)
    os.makedirs(log_folder, exist_ok=True)
    counts = {
        "training": flops.training_flops(variant, args.image_size, args.classes),
        "forward": flops.forward_flops(variant, args.image_size, args.classes),
    }

    def write_report(records):
        summary = summarize(records, args.steps, args.calls, counts)
        table = format_table(summary, args.train_batch_size, args.inference_batch_size)
        report = {"arguments": vars(args), "records": records, "summary": summary, "table": table}
        report["profiles"] = format_profiles(records)
        with open(args.output, "w") as handle:
            json.dump(report, handle, indent=1, default=str)
        return summary, table

    records = measure(
        specs,
        args.rounds,
        args.steps,
        args.calls,
        args.ready_timeout,
        args.window_timeout,
        log_folder,
        log=lambda text: print(text, file=sys.stderr, flush=True),
        after_round=write_report,
        profile_calls=args.profile,
    )
    summary, table = write_report(records)
    print(
        f"{args.variant} at {args.image_size} px, {args.precision}, on {summary['device']} "
        f"(matrix products: {summary['matmul_tflops'] or 0:.3g} TFLOP/s)"
    )
    print(table)
    profiles = format_profiles(records)
    if profiles:
        print("\n" + profiles)
    for name, record in records.items():
        if record["status"] != "ok":
            print(f"\n{name} {record['status']}:\n{record.get('error', '')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
