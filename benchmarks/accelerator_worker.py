"""One configuration of `python -m benchmarks.accelerator`, in its own process, taking turns on the device.

`python -m benchmarks.accelerator_worker '<json spec>'` builds the model the
spec names on the process's accelerator (the CPU where there is none), puts one
batch of random images and labels on the device, runs the training step and
the inference twice each (the first call compiles: XLA, `torch.compile`), and
prints one protocol line `KERAS_VIT_ACCELERATOR {"event": "ready", ...}`. Then
it answers the coordinator's commands on stdin, one per line:

- `train N`: N training steps back to back, timed together (keras rows:
  one `model.fit` of N steps; torch rows: the same loop by hand);
- `infer N`: N inference calls on the inference batch, timed together;
- `profile train N`, `profile infer N` (torch rows): the same under
  torch.profiler, answered with the device time by kind of kernel;
- `quit`.

Each answer is one protocol line, `{"event": "done", "seconds": ...,
"peak_bytes": ...}`; a failure is `{"event": "error", "error": ...}`. A
window returns only once its results are on the host: the last step's loss
(read once, as a training loop that logs now and then does: the host may
queue a step while the device computes the one before), and each inference
call's logits. So a window's time is the device's time for that work, plus
whatever host time the device waited for. Nothing else goes to stdout (the
frameworks' own output goes to stderr).

Spec keys: `kind` ("keras_vit", "keras_hub", "timm", or "ceiling": bfloat16
matrix products of `matmul_size`, the device's measured rate), `backend`
("jax" or "torch"), `jit_compile`, `remat`, `precision`, `variant` (a dict
of `keras_vit.models.variants.VARIANTS`), `image_size`, `classes`, `train_batch_size`,
`inference_batch_size`.
"""

import json
import os
import sys
import time
import traceback

PROTOCOL_PREFIX = "KERAS_VIT_ACCELERATOR "


class Session:
    """What the coordinator drives: `train(count)` and `infer(count)` on the device-resident batches, and the
    device memory high-water mark (`peak_bytes()`, None where the device reports none) that `reset_peak()` restarts
    (False where it cannot: JAX's mark counts from the start of the process)."""

    def __init__(
        self, train, infer, peak_bytes, reset_peak, device, flash_attention=None, backend="torch", profile_folder=None
    ):
        self.backend = backend
        self.profile_folder = profile_folder
        self.train = train
        self.infer = infer
        self.peak_bytes = peak_bytes
        self.reset_peak = reset_peak
        self.device = device
        self.flash_attention = flash_attention


def _batches(spec):
    from benchmarks import worker

    channels_first = spec["kind"] == "timm"
    train = worker._images(spec["train_batch_size"], spec["image_size"], channels_first)
    labels = worker._labels(spec["train_batch_size"], spec["classes"])
    inference = worker._images(spec["inference_batch_size"], spec["image_size"], channels_first, seed=1)
    return train, labels, inference


def _attention_shape(spec, heads_first):
    variant = spec["variant"]
    tokens = (spec["image_size"] // variant["patch_size"]) ** 2 + 1
    heads, head_dim = variant["num_heads"], variant["hidden_dim"] // variant["num_heads"]
    return (1, heads, tokens, head_dim) if heads_first else (1, tokens, heads, head_dim)


def _torch_memory():
    import torch

    if not torch.cuda.is_available():
        return (lambda: None), (lambda: False), "cpu", "CPU"

    def reset():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return True

    return torch.cuda.max_memory_allocated, reset, "cuda", torch.cuda.get_device_name()


def _torch_flash_attention(spec):
    """Where torch's flash kernel takes this model's bfloat16 attention inputs (heads first, as Keras and timm pass
    them to `scaled_dot_product_attention`): "yes" (training and inference), "no", or None where torch cannot
    say."""
    import torch

    if not torch.cuda.is_available():
        return "no"
    query = torch.zeros(_attention_shape(spec, heads_first=True), dtype=torch.bfloat16, device="cuda")
    try:
        params = torch.backends.cuda.SDPAParams(query, query, query, None, 0.0, False, False)
        return "yes" if torch.backends.cuda.can_use_flash_attention(params, False) else "no"
    except Exception:  # an older torch: another SDPAParams signature
        return None


def _jax_flash_attention(spec):
    """Where Keras's JAX backend takes cuDNN's fused attention for this model's bfloat16 inputs: Keras's own check
    (inference), and for training calls cuDNN's refusal of an odd number of tokens (keras_vit pads those to an even
    length; keras-hub's call fails inside Keras, which logs it and runs XLA's attention): "yes", "yes, padded in
    training" or "no"."""
    import jax
    import jax.numpy as jnp

    if jax.default_backend() == "cpu":
        return "no"
    from keras.src.backend.jax.nn import _can_use_flash_attention

    shape = _attention_shape(spec, heads_first=False)
    query = jnp.zeros(shape, dtype=jnp.bfloat16)
    if not _can_use_flash_attention(query, query, query, None):
        return "no"
    if shape[1] % 2 == 0:
        return "yes"
    return (
        "yes, padded in training"
        if spec["kind"] == "keras_vit" and spec.get("attention") != "xla"
        else "inference only"
    )


def _jax_memory():
    import jax

    device = jax.local_devices()[0]

    def peak():
        stats = device.memory_stats()
        return stats.get("peak_bytes_in_use") if stats else None

    return peak, (lambda: False), device.platform, getattr(device, "device_kind", device.platform)


def _keras_session(spec):
    import keras

    from benchmarks import worker
    from keras_vit.utils import keras_compat

    keras.config.set_dtype_policy(spec["precision"])
    keras_compat.set_random_seed(0)
    if spec.get("attention") == "xla":  # the path before padded cuDNN attention, for comparison
        keras.config.disable_flash_attention()
    if spec.get("attention_multiple"):
        keras_compat.ATTENTION_LENGTH_MULTIPLE = spec["attention_multiple"]
    model, _, train_steps = worker.keras_trainer(spec)
    train, labels, inference = (keras.ops.convert_to_tensor(array) for array in _batches(spec))
    if spec["backend"] == "jax":
        peak, reset, _, device = _jax_memory()
        flash = _jax_flash_attention(spec)
    else:
        peak, reset, _, device = _torch_memory()
        flash = _torch_flash_attention(spec)
    return Session(
        train=lambda count: train_steps(train, labels, count),
        infer=lambda count: _repeat(lambda: model.predict_on_batch(inference), count),
        backend=spec["backend"],
        profile_folder=spec.get("profile_folder"),
        peak_bytes=peak,
        reset_peak=reset,
        device=device,
        flash_attention=flash,
    )


def _timm_session(spec):
    import torch

    from benchmarks import worker

    peak, reset, device_type, device = _torch_memory()
    torch.manual_seed(0)
    model = worker.timm_vision_transformer(spec["variant"], spec["image_size"], spec["classes"], spec["remat"])
    model = model.to(device_type)
    compiled = torch.compile(model) if spec["jit_compile"] else model
    infer, _, train_steps = worker.torch_trainer(spec, model, compiled, device=device_type)
    train, labels, inference = (torch.as_tensor(array, device=device_type) for array in _batches(spec))
    return Session(
        train=lambda count: train_steps(train, labels, count),
        infer=lambda count: _repeat(lambda: infer(inference), count),
        peak_bytes=peak,
        reset_peak=reset,
        device=device,
        flash_attention=_torch_flash_attention(spec),
    )


def _ceiling_session(spec):
    """bfloat16 square matrix products (float32 on a CPU, which is what it has fast), one per "step": the device's
    measured matrix-multiply rate, the ceiling of the rows' "% of peak"."""
    import torch

    _, _, device_type, device = _torch_memory()
    size = spec["matmul_size"]
    dtype = torch.bfloat16 if device_type == "cuda" else torch.float32
    generator = torch.Generator(device=device_type).manual_seed(0)
    left, right = (torch.randn(size, size, dtype=dtype, device=device_type, generator=generator) for _ in range(2))

    def products(count):
        for _ in range(count):
            result = left @ right
        if device_type == "cuda":
            torch.cuda.synchronize()
        return result

    return Session(train=products, infer=None, peak_bytes=lambda: None, reset_peak=lambda: False, device=device)


SESSIONS = {
    "keras_vit": _keras_session,
    "keras_hub": _keras_session,
    "timm": _timm_session,
    "ceiling": _ceiling_session,
}


def _say(event, **fields):
    sys.__stdout__.write(PROTOCOL_PREFIX + json.dumps(dict(fields, event=event)) + "\n")
    sys.__stdout__.flush()


def _repeat(function, count):
    for _ in range(count):
        function()


def _timed(run, count):
    start = time.perf_counter()
    run(count)
    return time.perf_counter() - start


def warm_up(session):
    """Two training steps and two inference calls; the first of each timed alone (tracing, compilation,
    autotuning). The training peak is the second step's where the mark can be restarted (torch), else the
    process's so far (JAX: the first step's compilation included)."""
    ready = {"device": session.device, "flash_attention": session.flash_attention}
    ready["first_train_step_s"] = _timed(session.train, 1)
    session.reset_peak()
    session.train(1)
    ready["train_peak_bytes"] = session.peak_bytes()
    if session.infer is not None:
        ready["first_inference_s"] = _timed(session.infer, 1)
        session.infer(1)
    return ready


# Kernel names by what they do (lowercase substrings; the first match wins): Triton kernels that torch.compile
# generated first (their names list the ops they fused: "triton_poi_fused__to_copy_add_..." is no copy kernel), then
# cuBLAS / CUTLASS matrix products, fused attention, the optimizer's multi-tensor updates and copies.
KERNEL_KINDS = (
    ("compiled fusions", ("triton",)),
    ("matrix products", ("gemm", "nvjet", "cutlass", "xmma", "cublas")),
    ("attention", ("flash", "fmha", "attention")),
    ("optimizer", ("foreach", "multi_tensor")),
    ("copies", ("copy", "memcpy", "memset")),
)


def kernel_kind(name):
    lowered = name.lower()
    return next((kind for kind, parts in KERNEL_KINDS if any(part in lowered for part in parts)), "other")


# XLA's kernels on a GPU are named after their HLO: cuBLAS / CUTLASS products (or "gemm_fusion" Triton ones), cuDNN's
# fused attention, reduction fusions (layer norm, softmax), elementwise "loop" fusions, copies and transposes.
JAX_KERNEL_KINDS = (
    ("matrix products", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "dot")),
    ("attention", ("sdpa", "flash", "fmha", "attention", "cudnn")),
    ("reductions", ("reduce", "softmax", "norm")),
    ("copies", ("copy", "transpose", "memcpy", "memset", "concatenate", "pad", "slice")),
    ("elementwise fusions", ("fusion", "loop")),
)


def jax_kernel_kind(name):
    lowered = name.lower()
    return next((kind for kind, parts in JAX_KERNEL_KINDS if any(part in lowered for part in parts)), "other")


def jax_profile(run, count, folder, top=25):
    """`jax.profiler.trace` over `run(count)`: wall and device milliseconds per step or call, device time by
    kernel kind and the `top` kernels, read from the trace's GPU streams (on a CPU, from XLA's host ops). The trace
    stays in `folder`."""
    import glob

    import jax
    from jax.profiler import ProfileData

    os.makedirs(folder, exist_ok=True)
    start = time.perf_counter()
    with jax.profiler.trace(folder):
        run(count)
    wall_ms = (time.perf_counter() - start) * 1e3 / count
    path = max(glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True), key=os.path.getmtime)
    data = ProfileData.from_file(path)
    lines, kernels = {}, {}
    on_device = any(plane.name.startswith("/device:GPU") for plane in data.planes)
    for plane in data.planes:
        if not plane.name.startswith("/device:GPU" if on_device else "/host:CPU"):
            continue
        for line in plane.lines:
            total, names = 0.0, {}
            for event in line.events:
                total += event.duration_ns / 1e6 / count
                names[event.name] = names.get(event.name, 0.0) + event.duration_ns / 1e6 / count
                if line.name.startswith("Stream") or (not on_device and "XLA Ops" in line.name):
                    entry = kernels.setdefault(event.name, [0.0, 0])
                    entry[0] += event.duration_ns / 1e6 / count
                    entry[1] += 1
            lines[f"{plane.name} {line.name}"] = {
                "ms": total,
                "top": sorted(((ms, name[:120]) for name, ms in names.items()), reverse=True)[:top],
            }
    ranked = sorted(((ms, name, calls / count) for name, (ms, calls) in kernels.items()), reverse=True)
    return dict(_summary(wall_ms, ranked, jax_kernel_kind, top), lines_ms=lines, trace=path)


def _summary(wall_ms, kernels, kind_of, top):
    """A profile's report from `(milliseconds, name, calls)` per kernel, largest first."""
    kinds = {}
    for milliseconds, name, _ in kernels:
        kinds[kind_of(name)] = kinds.get(kind_of(name), 0.0) + milliseconds
    return {
        "wall_ms": wall_ms,
        "device_ms": sum(milliseconds for milliseconds, _, _ in kernels),
        "kinds_ms": dict(sorted(kinds.items(), key=lambda item: -item[1])),
        "top": [{"ms": ms, "calls": calls, "kernel": name[:160]} for ms, name, calls in kernels[:top]],
    }


def profile(run, count, top=15):
    """torch.profiler over `run(count)` (`count` steps or calls): wall and device milliseconds per step or call,
    device time by kernel kind and the `top` kernels (a CPU stands in for the device where there is none, its
    operators for kernels)."""
    import torch
    from torch.profiler import ProfilerActivity

    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    start = time.perf_counter()
    with torch.profiler.profile(activities=activities) as profiler:
        run(count)
    wall_ms = (time.perf_counter() - start) * 1e3 / count
    kernels = []
    for event in profiler.key_averages():
        if cuda and event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        milliseconds = (event.self_device_time_total if cuda else event.self_cpu_time_total) / 1e3 / count
        if milliseconds > 0:
            kernels.append((milliseconds, event.key, event.count / count))
    kernels.sort(reverse=True)
    return _summary(wall_ms, kernels, kernel_kind, top)


def serve(session, commands):
    """Answers `train N`, `infer N`, `profile train N`, `profile infer N` and `quit` lines from `commands` until
    `quit` or their end."""
    for line in commands:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            return
        profiled = words[0] == "profile"
        words = words[1:] if profiled else words
        run = {"train": session.train, "infer": session.infer}.get(words[0] if words else None)
        if run is None or len(words) != 2 or not words[1].isdigit():
            _say(
                "error",
                error=f"unknown command {line.strip()!r}; expected '[profile] train N', '[profile] infer N' or 'quit'",
            )
            continue
        try:
            if profiled and session.backend == "jax":
                folder = os.path.join(session.profile_folder or "jax-profile", words[0])
                _say("done", profile=jax_profile(run, int(words[1]), folder))
                continue
            if profiled:
                _say("done", profile=profile(run, int(words[1])))
                continue
            restarted = session.reset_peak()
            seconds = _timed(run, int(words[1]))
        except Exception:  # out of device memory, say: the coordinator reports it and goes on without this row
            _say("error", error=traceback.format_exc(limit=-8))
            return
        _say("done", seconds=seconds, peak_bytes=session.peak_bytes(), peak_restarted=restarted)


def main(argv=None):
    from benchmarks import worker

    spec = worker.read_spec(sys.argv[1:] if argv is None else argv, "python -m benchmarks.accelerator_worker")
    if spec is None:
        return 2
    if spec.get("absent_frameworks"):
        worker.uninstall_for_this_process(spec["absent_frameworks"])
    # Python-level output of the frameworks goes to stderr; stdout carries the protocol (and the coordinator
    # skips any line without its prefix that a library writes there directly).
    sys.stdout = sys.stderr
    try:
        session = SESSIONS[spec["kind"]](spec)
        ready = warm_up(session)
    except Exception:
        _say("error", error=traceback.format_exc(limit=-8))
        return 1
    _say("ready", **ready)
    serve(session, sys.stdin)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
