"""int8 vs float32 in each runtime, measured in one process, alternating.

Used by `python -m benchmarks.deploy` (the README's int8 table, see there).

Each runtime's int8 artefact is timed against that runtime's own float32
artefact, both under the same settings, in rounds that alternate between all
artefacts and batch sizes (the machine is shared: only same-run ratios count):

- ONNX Runtime: float32; int8 dynamic (`export(..., int8=True)`); int8 static
  (calibrated QDQ, per-channel int8 weights and int8 activations for MatMul,
  Gemm and Conv only, LayerNorm/Softmax/GELU stay float32).
- OpenVINO: float32; int8 by NNCF `nncf.quantize` (transformer preset), when
  `nncf` is installed (it is not pinned: `pip install nncf==3.4.0`); both
  compiled with the same `ov.Core` config (latency hint, f32 inference
  precision, one stream, the same threads).
- LiteRT (XNNPACK): float32; int8 dynamic range (`export(..., int8=True)`);
  int8 full integer with float fallback (representative dataset).

Calibration images come from the training split, never the held-out one.
`--profile` adds per-op-type time shares: ONNX Runtime's `enable_profiling`
JSON summed by op type, OpenVINO's `PERF_COUNT` per node type with the
kernels that ran.
"""

import collections
import json
import os
import tempfile
import time

import numpy as np

from benchmarks import deploy_models

OV_CONFIG = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32", "NUM_STREAMS": 1}


class _CalibrationReader:
    """ONNX Runtime's calibration interface over a list of batches."""

    def __init__(self, input_name, batches):
        self.input_name, self.batches = input_name, iter(batches)

    def get_next(self):
        batch = next(self.batches, None)
        return None if batch is None else {self.input_name: batch}


def _batches(images, size=32):
    return [images[i : i + size] for i in range(0, len(images), size)]


def _onnx_static(float_path, out, calibration):
    import onnxruntime
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = out + ".prepared.onnx"
    quant_pre_process(float_path, prepared, skip_symbolic_shape=True)
    input_name = onnxruntime.InferenceSession(prepared, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    quantize_static(
        prepared,
        out,
        _CalibrationReader(input_name, _batches(calibration, size=8)),
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=["MatMul", "Gemm", "Conv"],
        per_channel=True,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=CalibrationMethod.MinMax,
        extra_options={"ActivationSymmetric": True},
    )
    return out


def _openvino_runs(xml, calibration, threads):
    import openvino as ov

    core = ov.Core()
    config = {**OV_CONFIG, "INFERENCE_NUM_THREADS": threads}
    models = {"float32": core.read_model(xml)}
    try:
        import nncf
    except ImportError:
        return {}, {"openvino int8 (NNCF)": "skipped: nncf is not installed (pip install nncf==3.4.0)"}
    models["int8 (NNCF)"] = nncf.quantize(
        core.read_model(xml),
        nncf.Dataset(_batches(calibration)),
        model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(calibration),
    )
    return {name: (core, model, config) for name, model in models.items()}, {}


def _openvino_runner(core, model, config):
    request = core.compile_model(model, "CPU", config).create_infer_request()

    def run(images):
        request.infer([images])
        return request.get_output_tensor(0).data.copy()

    return run


def artefacts(model, workdir, calibration, threads):
    """{"runtime variant": run}, the profiling handles, and notes on skipped rows."""
    from keras_vit import deploy

    def path(name):
        return os.path.join(workdir, name)

    onnx_float = deploy.export(model, path("float"), format="onnx")
    onnx_paths = {
        "onnxruntime float32": onnx_float,
        "onnxruntime int8 dynamic": deploy.export(model, path("dynamic"), format="onnx", int8=True),
        "onnxruntime int8 static QDQ": _onnx_static(onnx_float, path("static.onnx"), calibration),
    }
    runs = {name: deploy.load_artefact(file, "onnx") for name, file in onnx_paths.items()}
    openvino, notes = _openvino_runs(deploy.export(model, path("float"), format="openvino"), calibration, threads)
    for name, handle in openvino.items():
        runs[f"openvino {name}"] = _openvino_runner(*handle)
    litert = {
        "float32": deploy.export(model, path("litert_float"), format="litert"),
        "int8 dynamic range": deploy.export(model, path("litert_dynamic"), format="litert", int8=True),
        "int8 full integer": _litert_full_integer(model, path("litert_full.tflite"), calibration),
    }
    for name, file in litert.items():
        runs[f"litert {name}"] = deploy.load_artefact(file, "litert")
    return runs, {"onnx": onnx_paths, "openvino": openvino}, notes


def _litert_full_integer(model, out, calibration):
    import tensorflow as tf

    from keras_vit import deploy

    serving = deploy.serving_model(model)
    serving.export(
        out,
        format="litert",
        verbose=False,
        optimizations=[tf.lite.Optimize.DEFAULT],
        representative_dataset=lambda: ([calibration[i : i + 1]] for i in range(len(calibration))),
    )
    return out


def own_float(name):
    return name.split(" ")[0] + " float32"


def alternating_images_per_second(runs, batches, seconds, rounds):
    """Images/s of every run on every batch, in `rounds` rounds that each give every pair `seconds`."""
    totals = collections.defaultdict(lambda: [0, 0.0])
    for _ in range(rounds):
        for batch_name, images in batches.items():
            for name, run in runs.items():
                run(images)  # warm-up (and a batch-size change)
                count, start = 0, time.perf_counter()
                while time.perf_counter() - start < seconds:
                    run(images)
                    count += len(images)
                total = totals[(name, batch_name)]
                total[0] += count
                total[1] += time.perf_counter() - start
    return {name: {batch: totals[(name, batch)][0] / totals[(name, batch)][1] for batch in batches} for name in runs}


def ratios(speeds):
    return {
        name: {batch: value / speeds[own_float(name)][batch] for batch, value in by_batch.items()}
        for name, by_batch in speeds.items()
        if "int8" in name and own_float(name) in speeds
    }


def onnx_profile(path, images, repeats):
    """{op type: % of kernel time} and the kernel ms per call, from ONNX Runtime's profiler."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = path + ".profile"
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for _ in range(repeats):
        session.run(None, {name: images})
    trace = session.end_profiling()
    with open(trace) as handle:
        events = json.load(handle)
    os.remove(trace)
    microseconds = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            microseconds[event["args"]["op_name"]] += event["dur"]
    return _shares(microseconds, repeats)


def openvino_profile(handle, images, repeats):
    """{node type: % of time} and ms per call from OpenVINO's PERF_COUNT, with the kernels that ran."""
    core, model, config = handle
    request = core.compile_model(model, "CPU", {**config, "PERF_COUNT": True}).create_infer_request()
    microseconds, kernels = collections.Counter(), collections.defaultdict(set)
    for _ in range(repeats):
        request.infer([images])
        for node in request.profiling_info:
            if node.status == node.Status.EXECUTED:
                microseconds[node.node_type] += node.real_time.total_seconds() * 1e6
                kernels[node.node_type].add(node.exec_type)
    shares = _shares(microseconds, repeats)
    shares["kernels"] = {op: sorted(kinds) for op, kinds in kernels.items()}
    return shares


def _shares(microseconds, repeats):
    total = sum(microseconds.values())
    return {
        "ms_per_call": total / repeats / 1000,
        "percent": {op: round(100 * value / total, 1) for op, value in microseconds.most_common()},
    }


def profiles(handles, images, repeats):
    result = {}
    for name, path in handles["onnx"].items():
        result[name] = onnx_profile(path, images, repeats)
    for name, handle in handles["openvino"].items():
        result[f"openvino {name}"] = openvino_profile(handle, images, repeats)
    return result


def compare(model, calibration, images, batches, seconds, rounds, labels=None, profile_batch=None, profile_calls=360):
    """The int8 table for one model: agreement with its own float32, accuracy when `labels` are given, and speeds."""
    threads = os.cpu_count()
    with tempfile.TemporaryDirectory() as workdir:
        runs, handles, notes = artefacts(model, workdir, calibration, threads)
        outputs = {name: run(images) for name, run in runs.items()}
        quality = {}
        for name, output in outputs.items():
            reference = outputs[own_float(name)]
            quality[name] = {
                "top1_agreement_with_own_float32": float(np.mean(output.argmax(-1) == reference.argmax(-1))),
                "relative_max_logit_error": float(np.max(np.abs(output - reference)) / np.max(np.abs(reference))),
            }
            if labels is not None:
                quality[name]["accuracy"] = float(np.mean(output.argmax(-1) == labels))
        speeds = alternating_images_per_second(runs, batches, seconds, rounds)
        result = {"quality": quality, "images_per_s": speeds, "int8_over_own_float32": ratios(speeds), "notes": notes}
        if profile_batch is not None:
            result["profiles"] = {
                batch: profiles(handles, batches[batch], repeats=max(3, profile_calls // len(batches[batch])))
                for batch in profile_batch
            }
    return result


def digits_comparison(model_path, seconds, rounds, profile):
    from keras_vit.models import metadata

    model = metadata.load_classifier(model_path)
    (train_images, _), (images, labels) = deploy_models.digits(model.input_shape[1], with_train=True)
    calibration = train_images[np.random.default_rng(0).choice(len(train_images), 128, replace=False)]
    batches = {"1": images[:1], "32": images[:32], str(len(images)): images}
    profile_batch = ("1", str(len(images))) if profile else None
    return compare(model, calibration, images, batches, seconds, rounds, labels, profile_batch)


def b16_comparison(seconds, rounds, profile, batch):
    model = deploy_models.b16_model()
    rng = np.random.default_rng(1)
    # ONNX Runtime's MinMax calibration keeps every intermediate tensor of every calibration image (~1 GB per
    # B/16 image): 4 images, the weights are random anyway.
    calibration = rng.integers(0, 256, (4, 224, 224, 3)).astype("uint8")
    images = rng.integers(0, 256, (batch, 224, 224, 3)).astype("uint8")
    batches = {"1": images[:1], str(batch): images}
    # One B/16 call takes ~1 s here: 3x the window of the digits rows.
    profile_batch = ("1",) if profile else None
    return compare(model, calibration, images, batches, 3 * seconds, rounds, None, profile_batch, profile_calls=3)
