"""Plans the benchmark's configurations, runs each in a subprocess, compares.

`plan()` turns the options into a list of specs (one per process),
`run_spec()` runs one with a timeout, `summarize()` adds the ratios to the
peers, the percent of the matrix-multiply ceiling and the issue's targets,
and `format_table()` renders the Markdown tables the README shows.
"""

import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks import worker
from benchmarks.worker import RESULT_PREFIX

BACKENDS = ("tensorflow", "jax", "torch")
# Keras's inference-only OpenVINO backend, measured when `--backends` names it: no training, artefacts or jit modes.
KERAS_BACKENDS = BACKENDS + ("openvino",)
PRECISIONS = ("float32", "mixed_bfloat16")
# jit_compile values worth measuring per backend on CPU: TensorFlow runs both
# its graph executor and XLA; JAX is always XLA (jit_compile=False would be
# op-by-op dispatch, nobody serves that way); on torch, jit_compile=True means
# torch.compile, measured only when asked for (`jit="both"`).
DEFAULT_JIT = {"tensorflow": (False, True), "jax": (True,), "torch": (False,)}
# "single": the first default mode per backend and no torch.compile peer (--quick).
JIT_OPTIONS = ("default", "on", "off", "both", "single")
PEERS = ("keras_hub", "transformers", "timm")
# keras_vit's own exported artefacts (`keras_vit.deploy.export`), float32, run for inference in their runtimes
# (`keras_vit.deploy.load_artefact`): the path to CPU serving without a Keras runtime. Each is exported from every
# measured backend that writes its format (OpenVINO: TensorFlow and torch; ONNX: TensorFlow).
ARTEFACT_FORMATS = ("openvino", "onnx")
_RUNTIMES = {"openvino": "OpenVINO", "onnx": "ONNX Runtime"}
# The kinds of rows that are keras_vit (compared with the peers), and the torch peers with a torch.compile mode.
KERAS_VIT_KINDS = ("keras_vit", "artefact")
TORCH_PEERS = ("transformers", "timm")
# keras-hub is measured on the TensorFlow and PyTorch backends, the ones its
# numbers in the issue come from (and the ones a user switching would use).
KERAS_HUB_BACKENDS = ("tensorflow", "torch")
# `--family`: keras_vit's options over the `--variant` sizes, every peer building the same model (keras-hub's
# `DINOV3Backbone`, transformers' `DINOv3ViTModel`, timm's `Eva` named in `worker.TIMM_FAMILY_MODELS`: at B/16
# timm's `vit_base_patch16_dinov3` with a head). A family's keras_vit rows each run beside a twin of the plain ViT
# (`baseline`), so the report shows what the family's options cost keras_vit, configuration by configuration.
FAMILIES = {
    "vit": {},
    "dinov3": dict(
        position_embedding=False,
        rope=dict(rope_type="dinov3", temperature=100.0, rotate_half=True),
        num_register_tokens=4,
        layer_scale_init=1e-5,
        layer_norm_epsilon=1e-5,
        qkv_bias=False,
    ),
}
FAMILY_NAMES = {"vit": "", "dinov3": " DINOv3"}


def jit_modes(backend, jit):
    """The `jit_compile` values measured for `backend` given the `--jit` option."""
    if backend == "openvino":
        return (False,)  # OpenVINO compiles every model itself
    if jit == "on":
        return (True,)
    if jit == "off":
        return (False,)
    if jit == "both":
        return (False, True)
    if jit == "default":
        return DEFAULT_JIT[backend]
    if jit == "single":
        return DEFAULT_JIT[backend][:1]
    raise ValueError(f"`jit` must be one of {JIT_OPTIONS}. Received: jit={jit!r}")


def add_model_arguments(parser):
    """`--variant` and `--image-size`, as every benchmark command takes them."""
    parser.add_argument("--variant", default="B/16", help="a key of keras_vit.models.variants.VARIANTS (%(default)s)")
    parser.add_argument("--image-size", type=int, default=224, help="square input side (default: %(default)s)")


def variant(name):
    """The `VARIANTS` entry of a `--variant` value; a one-line ValueError naming the choices otherwise."""
    from keras_vit.models.variants import VARIANTS  # here: `--help` imports no Keras

    if name not in VARIANTS:
        raise ValueError(f"Unknown --variant {name!r}; choose one of: {', '.join(VARIANTS)}.")
    return VARIANTS[name]


def batch_sizes(option, text):
    """The positive integers of a comma-separated command-line value; a clear ValueError otherwise."""
    try:
        sizes = tuple(int(word) for word in text.split(",") if word.strip())
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise ValueError(f"{option} must be positive integers separated by commas. Received: {text!r}")
    return sizes


def label(spec):
    """A short human-readable name of a configuration."""
    if spec["kind"] == "ceiling":
        return "matmul ceiling"
    family = FAMILY_NAMES[spec.get("family", "vit")]
    if spec["kind"] == "transformers":
        mode = "torch.compile" if spec["jit_compile"] else "eager"
        return f"HF transformers{family}, torch {mode}, {spec['precision']}"
    if spec["kind"] == "timm":
        mode = "torch.compile" if spec["jit_compile"] else "eager"
        checkpointing = ", gradient checkpointing" if spec.get("remat") else ""
        name = "timm Eva" if spec.get("family", "vit") != "vit" else "timm"
        return f"{name}, torch {mode}, {spec['precision']}{checkpointing}"
    if spec["kind"] == "artefact":
        runtime = _RUNTIMES[spec["format"]]
        return f"keras_vit{family} artefact, {runtime} (exported from {spec['backend']}), {spec['precision']}"
    name = ("keras_vit" if spec["kind"] == "keras_vit" else "keras-hub") + family
    # jit_compile=True is XLA on TensorFlow and torch.compile on torch; on JAX, XLA is the default and op-by-op
    # dispatch (`--jit both` or `off`) the exception named.
    if spec["backend"] == "jax":
        mode = "" if spec["jit_compile"] else ", no jit"
    else:
        mode = {"tensorflow": ", XLA", "torch": ", torch.compile"}[spec["backend"]] if spec["jit_compile"] else ""
    remat = ", remat" if spec.get("remat") else ""
    remat += f", LoRA rank {spec['lora']}" if spec.get("lora") else ""
    absent = tuple(spec.get("absent_frameworks", ()))
    if absent == worker.TORCH_INSTALL_LACKS:
        absent = ", torch-only install"
    else:
        absent = "".join(f", no {name}" for name in absent)
    return f"{name}, {spec['backend']}{mode}, {spec['precision']}{remat}{absent}"


def plan(
    variant_name,
    variant,
    backends=BACKENDS,
    precisions=PRECISIONS,
    jit="default",
    peers=PEERS,
    artefacts=ARTEFACT_FORMATS,
    ceiling=True,
    image_size=224,
    classes=1000,
    inference_batch_sizes=(1, 16),
    train_batch_size=8,
    repeats=3,
    threads=2,
    inference_only=False,
    family="vit",
):
    """Returns the list of specs to run: ceiling first, then keras_vit, its exported artefacts (inference only,
    float32: measured when float32 is, exported from each of `backends` that writes the format), then the peers.

    `family` (a key of `FAMILIES`) adds its options to `variant` in every row; each of keras_vit's rows of a family
    other than "vit" is followed by its twin of the plain ViT (`baseline=True`), which no peer is compared with."""
    if family not in FAMILIES:
        raise ValueError(f"Unknown family {family!r}; choose from {tuple(FAMILIES)}.")
    for backend in backends:
        if backend not in KERAS_BACKENDS:
            raise ValueError(f"Unknown backend {backend!r}; choose from {KERAS_BACKENDS}.")
    for precision in precisions:
        if precision not in PRECISIONS:
            raise ValueError(f"Unknown precision {precision!r}; choose from {PRECISIONS}.")
    for peer in peers:
        if peer not in PEERS:
            raise ValueError(f"Unknown peer {peer!r}; choose from {PEERS}.")
    for format in artefacts:
        if format not in ARTEFACT_FORMATS:
            raise ValueError(f"Unknown artefact format {format!r}; choose from {ARTEFACT_FORMATS}.")
    common = dict(
        family=family,
        variant_name=variant_name,
        variant=dict(variant, **FAMILIES[family]),
        image_size=image_size,
        classes=classes,
        inference_batch_sizes=list(inference_batch_sizes),
        train_batch_size=train_batch_size,
        repeats=repeats,
        threads=threads,
    )
    specs = []
    if ceiling:
        specs.append(dict(common, kind="ceiling", backend="numpy+torch", precision="-", jit_compile=False))
    for backend in backends:
        for precision in precisions:
            for jit_compile in jit_modes(backend, jit):
                spec = dict(
                    common,
                    kind="keras_vit",
                    backend=backend,
                    precision=precision,
                    jit_compile=jit_compile,
                    inference_only=inference_only or backend == "openvino",
                )
                specs.append(spec)
                if family != "vit":  # next to it: the machine's drift hits both alike
                    specs.append(dict(spec, family="vit", variant=dict(variant), baseline=True))
    if "keras_hub" in peers:
        for backend in backends:
            if backend in KERAS_HUB_BACKENDS:
                for precision in precisions:
                    specs.append(
                        dict(common, kind="keras_hub", backend=backend, precision=precision, jit_compile=False)
                    )
    if "float32" in precisions:
        from keras_vit.deploy.artefacts import UNSUPPORTED  # here: `python -m benchmarks --help` imports no Keras

        for format in artefacts:
            for backend in backends:
                if backend in BACKENDS and (format, backend) not in UNSUPPORTED:
                    specs.append(
                        dict(
                            common,
                            kind="artefact",
                            backend=backend,
                            precision="float32",
                            jit_compile=False,
                            format=format,
                        )
                    )
    compile_modes = (False,) if jit in ("off", "single") else (False, True)
    for peer in TORCH_PEERS:
        if peer in peers:
            for precision in precisions:
                for jit_compile in compile_modes:
                    specs.append(
                        dict(
                            common,
                            kind=peer,
                            backend="torch",
                            precision=precision,
                            jit_compile=jit_compile,
                            inference_only=inference_only,
                        )
                    )
    return specs


def run_spec(spec, timeout):
    """Runs one spec in a fresh Python process; returns the spec with its outcome.

    The outcome is `status` ("ok", "failed" or "timeout"), `result` (the
    worker's measurements) or `error` (the last lines of its output).
    """
    env = dict(os.environ)
    if spec["kind"] in ("keras_vit", "keras_hub", "artefact"):
        env["KERAS_BACKEND"] = spec["backend"]
    # The worker must import this very keras_vit, installed or not.
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    # The worker runs as a script, not `-m keras_vit...`: importing the
    # package would import Keras (and its backend) before the worker has
    # pinned the cores and sized the thread pools.
    command = [sys.executable, worker.__file__, json.dumps(spec)]
    record = dict(spec, label=label(spec))
    start = time.perf_counter()
    try:
        completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        record.update(status="timeout", error=f"no result within {timeout} s")
        record["elapsed_s"] = time.perf_counter() - start
        return record
    record["elapsed_s"] = time.perf_counter() - start
    for line in completed.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            record.update(status="ok", result=json.loads(line[len(RESULT_PREFIX) :]))
            return record
    tail = (completed.stdout + completed.stderr).strip().splitlines()[-15:]
    record.update(status="failed", error=f"exit code {completed.returncode}: " + "\n".join(tail))
    return record


def _inference(record, batch):
    if record.get("status") != "ok":
        return None
    entry = record["result"]["inference"].get(str(batch))
    return None if entry is None else entry["images_per_s"]


def _train(record):
    """Training images/s; None where the row failed or does not train (an exported artefact)."""
    if record.get("status") != "ok" or "train" not in record["result"]:
        return None
    return record["result"]["train"]["images_per_s"]


def _memory(record):
    return record["result"].get("peak_rss_train_mb") if record.get("status") == "ok" else None


def ratio(value, reference):
    """`value / reference`, or None when either is missing or the reference is 0."""
    if value is None or not reference:
        return None
    return value / reference


def percent_of_ceiling(images_per_s, flops_per_image, ceiling_gflops):
    """The share of the matmul ceiling a throughput uses, in percent."""
    if images_per_s is None or not ceiling_gflops:
        return None
    return 100.0 * images_per_s * flops_per_image / (ceiling_gflops * 1e9)


def ceilings(records):
    """`{"float32": GFLOP/s, "mixed_bfloat16": GFLOP/s}` from the ceiling record
    (best library), plus `"float32_model_gemm"`: the best float32 rate on the
    model's MLP product shape, when measured."""
    for record in records:
        if record["kind"] == "ceiling" and record.get("status") == "ok":
            result = record["result"]
            f32 = [result[key] for key in ("numpy_float32_gflops", "torch_float32_gflops") if key in result]
            # Without bfloat16 hardware (AVX2-only CPUs) PyTorch's bfloat16 GEMM
            # crawls while TensorFlow computes bfloat16 products in float32: the
            # attainable bfloat16 rate is then the float32 one.
            limits = {"float32": max(f32), "mixed_bfloat16": max(f32 + [result.get("torch_bfloat16_gflops", 0.0)])}
            model = [value for key, value in result.items() if key.endswith("_model_gemm_gflops")]
            if model:
                limits["float32_model_gemm"] = max(model)
            return limits
    return {}


def _family(record):
    return record.get("family", "vit")


def _twin(record, records):
    """A family's keras_vit record's twin of the plain ViT (same backend, precision and jit_compile), or None."""
    for other in records:
        if other.get("baseline") and all(other[key] == record[key] for key in ("kind", "backend", "precision")):
            if other["jit_compile"] == record["jit_compile"]:
                return other
    return None


def _peers_of(record, records):
    """The peer records a keras_vit record is compared with: same family and precision; keras-hub on the same
    backend; and a family's keras_vit row, its twin of the plain ViT."""
    if record.get("baseline"):
        return []
    peers = []
    for other in records:
        if other["kind"] == "keras_hub" and other["backend"] == record["backend"]:
            peers.append(other)
        elif other["kind"] in TORCH_PEERS:
            peers.append(other)
    peers = [peer for peer in peers if peer["precision"] == record["precision"] and _family(peer) == _family(record)]
    twin = _twin(record, records)
    return peers + ([twin] if twin else [])


def summarize(records):
    """Adds `percent_of_ceiling` to each record and `ratios` to keras_vit's; returns the summary dict."""
    from keras_vit.models import flops  # here, not at the top: `python -m benchmarks --help` imports no Keras

    limits = ceilings(records)
    large, batches = None, set()
    for record in records:
        if record["kind"] == "ceiling" or record.get("status") != "ok":
            continue
        batches.update(int(batch) for batch in record["result"]["inference"])
        large = max(batches)
        forward = flops.forward_flops(record["variant"], record["image_size"], record["classes"])
        training = flops.training_flops(record["variant"], record["image_size"], record["classes"])
        limit = limits.get(record["precision"])
        record["percent_of_ceiling"] = {
            "inference": percent_of_ceiling(_inference(record, large), forward, limit),
            "train": percent_of_ceiling(_train(record), training, limit),
        }
    for record in records:
        if record["kind"] not in KERAS_VIT_KINDS:
            continue
        record["ratios"] = {
            peer["label"]: {
                "inference": ratio(_inference(record, large), _inference(peer, large)),
                "train": ratio(_train(record), _train(peer)),
                "memory": ratio(_memory(record), _memory(peer)),
            }
            for peer in _peers_of(record, records)
        }
    # The targets are the measured family's: its twins of the plain ViT are not keras_vit's paths to it.
    measured = [record for record in records if not record.get("baseline")]
    summary = {"ceilings_gflops": limits, "targets": targets(measured, large, sorted(batches))}
    summary["family_over_plain"] = family_over_plain(records, sorted(batches))
    if "float32_model_gemm" in limits:
        ceiling = next(record for record in records if record["kind"] == "ceiling")
        # A yardstick, not a bound: about 95 % of a ViT's FLOPs are products of
        # this shape or its near relatives, but frameworks call other GEMM
        # libraries (oneDNN, XLA's Eigen) than NumPy's and PyTorch's.
        forward = flops.forward_flops(ceiling["variant"], ceiling["image_size"], ceiling["classes"])
        summary["model_gemm_images_per_s"] = limits["float32_model_gemm"] * 1e9 / forward
    return summary


def family_over_plain(records, batches):
    """What a family's options cost keras_vit: each family row's images/s over its plain twin's (inference at each
    of `batches`, training), then the best family row's over the best twin's per precision; [] without twins."""
    metrics = {f"inference b{size}": (lambda r, size=size: _inference(r, size)) for size in batches}
    metrics["training"] = _train
    rows = []
    for record in records:
        twin = _twin(record, records) if record["kind"] == "keras_vit" and not record.get("baseline") else None
        if twin is not None:
            ratios = {name: ratio(metric(record), metric(twin)) for name, metric in metrics.items()}
            rows.append({"configuration": record["label"], "ratios": ratios})
    for precision in sorted({record["precision"] for record in records if record.get("baseline")}):
        members = [r for r in records if r["kind"] == "keras_vit" and not r.get("baseline")]
        plain = [r for r in records if r.get("baseline")]
        ratios = {
            name: ratio(
                _best(members, "keras_vit", precision, metric)[0], _best(plain, "keras_vit", precision, metric)[0]
            )
            for name, metric in metrics.items()
        }
        rows.append({"configuration": f"best keras_vit path of each, {precision}", "ratios": ratios})
    return rows


def _best(records, kind, precision, metric, backend=None):
    candidates = [
        (metric(r), r)
        for r in records
        if r["kind"] == kind and r["precision"] == precision and (backend is None or r["backend"] == backend)
    ]
    candidates = [(value, r) for value, r in candidates if value is not None]
    return max(candidates, key=lambda pair: pair[0]) if candidates else (None, None)


def targets(records, batch, batches=None):
    """The issue's targets, each with the measured ratio and whether it holds.

    `batch`: the inference batch of the keras-hub and bfloat16 targets (the largest measured); `batches`: those of
    the float32 targets against the compiled torch peers (default: `batch` alone).
    """
    infer = lambda r: _inference(r, batch)  # noqa: E731
    low_memory = lambda r: -_memory(r) if _memory(r) is not None else None  # noqa: E731
    checks = []

    def add(name, mine, theirs, threshold, lower_is_better=False):
        value = ratio(mine, theirs)
        met = None if value is None else (value <= threshold if lower_is_better else value >= threshold)
        checks.append({"target": name, "ratio": value, "threshold": threshold, "met": met})

    def best_of(kinds, precision, metric, jit_compile=None):
        values = [
            _best(records, kind, precision, metric)[0]
            if jit_compile is None
            else _best([r for r in records if r["jit_compile"] == jit_compile], kind, precision, metric)[0]
            for kind in kinds
        ]
        values = [value for value in values if value is not None]
        return max(values) if values else None

    for precision, threshold in (("float32", 1.3), ("mixed_bfloat16", 2.0)):
        mine, _ = _best(records, "keras_vit", precision, infer, backend="tensorflow")
        theirs, _ = _best(records, "keras_hub", precision, infer, backend="tensorflow")
        add(f"TensorFlow {precision} inference b{batch} vs keras-hub", mine, theirs, threshold)
    # float32 on CPU: keras_vit's best path (any backend and compiler, or its exported artefact) against the best
    # compiled torch peer at every inference batch; training against the eager torch peers, speed and memory.
    for size in batches or (batch,):
        at_size = lambda r, size=size: _inference(r, size)  # noqa: E731
        add(
            f"best keras_vit float32 inference b{size} vs best torch.compile peer",
            best_of(KERAS_VIT_KINDS, "float32", at_size),
            best_of(TORCH_PEERS, "float32", at_size, jit_compile=True),
            1.0,
        )
    add(
        "best keras_vit float32 training step vs best eager torch peer",
        best_of(("keras_vit",), "float32", _train),
        best_of(TORCH_PEERS, "float32", _train, jit_compile=False),
        1.0,
    )
    lowest = best_of(("keras_vit",), "float32", low_memory)
    theirs = best_of(("timm",), "float32", low_memory, jit_compile=False)
    add(
        "lowest keras_vit float32 training peak memory vs timm eager (<=)",
        lowest and -lowest,
        theirs and -theirs,
        1.0,
        True,
    )
    compiled = [r for r in records if r["kind"] == "transformers" and r["jit_compile"]]
    eager = [r for r in records if r["kind"] == "transformers" and not r["jit_compile"]]
    mine, _ = _best(records, "keras_vit", "mixed_bfloat16", infer)
    theirs, _ = _best(compiled, "transformers", "mixed_bfloat16", infer)
    add(f"best mixed_bfloat16 inference b{batch} vs HF torch.compile", mine, theirs, 1.0)
    mine, _ = _best(records, "keras_vit", "mixed_bfloat16", _train)
    theirs, _ = _best(eager, "transformers", "mixed_bfloat16", _train)
    add("best mixed_bfloat16 training step vs HF eager", mine, theirs, 1.0)
    mine, _ = _best(records, "keras_vit", "mixed_bfloat16", low_memory)
    theirs, _ = _best(eager, "transformers", "mixed_bfloat16", low_memory)
    add("lowest training peak memory vs HF eager (<=)", mine and -mine, theirs and -theirs, 1.25, True)
    return checks


def _number(value, digits=1):
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(records, summary):
    """The results as Markdown: throughputs, then ratios to the peers, then targets."""
    batches = sorted(
        {
            int(b)
            for r in records
            if r.get("status") == "ok" and "inference" in r["result"]
            for b in r["result"]["inference"]
        }
    )
    train_batch = next((r["train_batch_size"] for r in records if r["kind"] != "ceiling"), None)
    header = (
        ["configuration"]
        + [f"inference b{b} (img/s)" for b in batches]
        + [
            f"training b{train_batch} (img/s)",
            "first train step (s)",
            "peak RSS training (MiB)",
            "% of ceiling (inference / training)",
        ]
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for record in records:
        if record["kind"] == "ceiling":
            continue
        if record.get("status") != "ok":
            cells = [record["label"]] + [record["status"]] + ["-"] * (len(header) - 2)
        else:
            result, share = record["result"], record.get("percent_of_ceiling", {})
            cells = (
                [record["label"]]
                + [_number(_inference(record, b), 2) for b in batches]
                + [
                    _number(_train(record), 2),
                    _number(result.get("first_train_step_s")),
                    _number(_memory(record), 0),
                    f"{_number(share.get('inference'))} / {_number(share.get('train'))}",
                ]
            )
        lines.append("| " + " | ".join(cells) + " |")
    limits = summary["ceilings_gflops"]
    lines.append("")
    lines.append(
        f"Matrix-multiply ceiling: float32 {_number(limits.get('float32'))} GFLOP/s, "
        f"bfloat16 {_number(limits.get('mixed_bfloat16'))} GFLOP/s."
    )
    if "float32_model_gemm" in limits:
        lines[-1] += (
            f" The model's own largest product (its first MLP layer at the largest inference batch) runs at "
            f"{_number(limits['float32_model_gemm'])} GFLOP/s in NumPy / PyTorch float32: "
            f"{_number(summary['model_gemm_images_per_s'], 2)} images/s if every FLOP of a forward pass ran "
            "at that rate."
        )
    ratio_rows = [
        (record["label"], peer, values)
        for record in records
        if record["kind"] in KERAS_VIT_KINDS
        for peer, values in record.get("ratios", {}).items()
    ]
    if ratio_rows:
        large = batches[-1] if batches else "?"
        lines += [
            "",
            f"| keras_vit configuration | peer | inference b{large} ratio | training ratio | memory ratio |",
            "|---|---|---|---|---|",
        ]
        for mine, peer, values in ratio_rows:
            lines.append(
                f"| {mine} | {peer} | {_number(values['inference'], 2)} | {_number(values['train'], 2)} | "
                f"{_number(values['memory'], 2)} |"
            )
    if summary.get("family_over_plain"):
        names = list(summary["family_over_plain"][0]["ratios"])
        lines += [
            "",
            "| images/s over keras_vit's plain ViT of the same configuration | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for row in summary["family_over_plain"]:
            cells = [_number(row["ratios"][name], 2) for name in names]
            lines.append(f"| {row['configuration']} | " + " | ".join(cells) + " |")
    if summary.get("targets"):
        lines += ["", "| target | ratio | threshold | met |", "|---|---|---|---|"]
        for check in summary["targets"]:
            met = {True: "yes", False: "no", None: "not measured"}[check["met"]]
            lines.append(f"| {check['target']} | {_number(check['ratio'], 2)} | {check['threshold']} | {met} |")
    failures = [r for r in records if r.get("status") not in (None, "ok")]
    for record in failures:
        lines.append(f"\n{record['label']}: {record['status']}: {record['error']}")
    return "\n".join(lines)


def machine_description():
    """CPU model, cores and the load average at the start, for the record."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"cpu": model, "cores": os.cpu_count(), "load_average": load}


def _median_of(values):
    """Element-wise median of the same structure measured several times:
    numbers become their median, dicts recurse, anything else is the first."""
    first = values[0]
    if isinstance(first, dict):
        return {
            key: _median_of([value[key] for value in values])
            if all(isinstance(value, dict) and key in value for value in values)
            else first[key]
            for key in first
        }
    numbers = all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in values)
    return statistics.median(values) if numbers else first


def merge_rounds(attempts):
    """One record from a spec's runs in several rounds: the median of every
    measurement over the rounds that succeeded (`rounds_ok` says how many)."""
    succeeded = [attempt for attempt in attempts if attempt.get("status") == "ok"]
    if not succeeded:
        return attempts[-1]
    merged = dict(succeeded[0], result=_median_of([attempt["result"] for attempt in succeeded]))
    merged["round_results"] = [attempt["result"] for attempt in succeeded]  # the spread, for the JSON
    merged["elapsed_s"] = sum(attempt["elapsed_s"] for attempt in attempts)
    merged["rounds_ok"] = len(succeeded)
    return merged


def run(specs, timeout=1800, output=None, log=None, rounds=1):
    """Runs every spec, summarises, writes the JSON to `output` (if given) and returns it.

    With `rounds > 1` the whole plan runs that many times, one configuration
    after another in each round, and each measurement is the median over
    the rounds: on a shared machine the speed drifts by 10-15 % over
    minutes, and interleaving spreads that drift over every configuration
    instead of favouring whichever ran in a quiet moment.
    """
    from keras_vit.utils import files, validation

    rounds = validation.positive_int("rounds", rounds)
    timeout = validation.finite_float("timeout", timeout, minimum=0, include_minimum=False)
    if output:
        files.check_output_path(output)  # before hours of measurements, not after
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    machine = machine_description()
    attempts = [[] for _ in specs]
    for round_index in range(rounds):
        prefix = f"round {round_index + 1}/{rounds} " if rounds > 1 else ""
        for index, spec in enumerate(specs, 1):
            log(f"{prefix}[{index}/{len(specs)}] {label(spec)} ...")
            record = run_spec(spec, timeout)
            log(f"{prefix}[{index}/{len(specs)}] {record['label']}: {record['status']} in {record['elapsed_s']:.0f} s")
            attempts[index - 1].append(record)
    records = [merge_rounds(spec_attempts) for spec_attempts in attempts]
    summary = summarize(records)
    report = {"started": started, "machine": machine, "command": " ".join(sys.argv), "records": records, **summary}
    report["table"] = format_table(records, summary)
    if output:
        files.write_json(output, report, indent=1, sort_keys=False)  # never a half-written report
    return report


def finish_report(result, format_table, load_before, output=None):
    """Adds the machine, the load average (before, after) and the date to `result`, prints the table and
    that line, and writes `result` as JSON to `output` when given (through the atomic writer)."""
    result["machine"] = machine_description()
    result["load_average_before_after"] = [round(load_before[0], 1), round(os.getloadavg()[0], 1)]
    result["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(format_table(result))
    machine = result["machine"]
    print(
        f"\n{machine['cpu']}, {machine['cores']} cores; 1-minute load average {result['load_average_before_after']} "
        f"(before, after); {result['date']}"
    )
    if output:
        from keras_vit.utils import files

        files.write_json(output, result)
    return result
