"""One smoke run per benchmark script (`python -m benchmarks.<name>`) at its tiniest arguments: it exits 0 and
writes its report with the expected rows. What a benchmark measures is never asserted.

Each runs on the backend it is for (the main benchmark on every backend: its worker is the backend's own); each
takes 10-40 s of CPU, mostly the interpreters the script starts.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import BACKEND, REPO_ROOT

# The smallest catalogued variant at one 16x16 patch per image.
TINY_VARIANT = ("--variant", "Ti/16", "--image-size", "16")


def run_benchmark(module, *arguments):
    completed = subprocess.run(
        [sys.executable, "-m", module, *arguments],
        cwd=REPO_ROOT,
        env=dict(os.environ, KERAS_BACKEND=BACKEND),
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def on_backend(backend):
    return pytest.mark.skipif(BACKEND != backend, reason=f"the script runs on {backend}: the {backend} run")


def test_benchmarks_runs_keras_vit_on_this_backend(tmp_path):
    # JAX writes no exported artefact; the others also run one in OpenVINO.
    artefacts = "none" if BACKEND == "jax" else "openvino"
    output = tmp_path / "benchmark.json"
    run_benchmark(
        "benchmarks",
        *TINY_VARIANT,
        *("--quick", "--backends", BACKEND, "--precisions", "float32", "--peers", "none", "--no-ceiling"),
        *("--artefacts", artefacts, "--batch-sizes", "1", "--train-batch-size", "2", "--classes", "2"),
        *("--threads", "1", "--output", str(output)),
    )
    report = json.loads(output.read_text())
    assert {"records", "targets", "table", "machine"} <= set(report)
    labels = [record["label"] for record in report["records"]]
    assert labels[0] == f"keras_vit, {BACKEND}, float32"
    assert len(labels) == (1 if BACKEND == "jax" else 2)
    assert all(record["status"] == "ok" for record in report["records"]), report["table"]
    model, *artefact = report["records"]
    assert set(model["result"]["inference"]) == {"1"} and "train" in model["result"]
    assert all(set(record["result"]["inference"]) == {"1"} for record in artefact)
    assert all(label in report["table"] for label in labels)


@on_backend("torch")
def test_accelerator_benchmark(tmp_path):
    output = tmp_path / "accelerator.json"
    run_benchmark(
        "benchmarks.accelerator",
        *TINY_VARIANT,
        *("--configurations", "keras_vit torch eager", "--precision", "float32", "--classes", "2"),
        *("--train-batch-size", "2", "--inference-batch-size", "2", "--rounds", "1", "--steps", "1", "--calls", "1"),
        *("--matmul-size", "64", "--profile", "1", "--output", str(output)),
    )
    report = json.loads(output.read_text())
    assert {"arguments", "records", "summary", "table"} <= set(report)
    record = report["records"]["keras_vit torch eager"]
    assert record["status"] == "ok" and "| keras_vit torch eager |" in report["table"]
    assert set(record["profile"]) == {"train", "infer"} and record["profile"]["train"]["device_ms"] > 0


@on_backend("torch")
def test_largest_batch_benchmark(tmp_path):
    output = tmp_path / "largest.json"
    stdout = run_benchmark(
        "benchmarks.largest_batch", *TINY_VARIANT, "--batch-sizes", "2", "--threads", "1", "--output", str(output)
    )
    report = json.loads(output.read_text())
    (record,) = report["records"]
    assert record["status"] == "ok" and record["train_batch_size"] == 2
    assert report["largest"] == 2 and "Largest measured batch within 20 GB: 2" in stdout


@on_backend("torch")
def test_memory_benchmark(tmp_path):
    output = tmp_path / "memory.json"
    run_benchmark(
        "benchmarks.memory",
        *TINY_VARIANT,
        *("--batch-size", "2", "--backends", "torch", "--torch-only", "--threads", "1", "--output", str(output)),
    )
    report = json.loads(output.read_text())
    assert [record["label"] for record in report["records"]] == [
        "keras_vit, torch, float32, torch-only install",
        "keras_vit, torch, float32, remat, torch-only install",
        "timm, torch eager, float32",
        "timm, torch eager, float32, gradient checkpointing",
    ]
    assert all(record["status"] == "ok" for record in report["records"]), report["table"]


@on_backend("torch")
def test_tensor_memory_benchmark():
    stdout = run_benchmark("benchmarks.tensor_memory", *TINY_VARIANT, "--batch-size", "2", "--threads", "1")
    for label in ("keras_vit, torch", "keras_vit, torch, remat", "timm, torch eager"):
        assert f"| {label} |" in stdout
    assert "keras_vit, torch, saved storages" in stdout


@on_backend("jax")
def test_xla_cpu_depth_benchmark():
    # Its sizes are B/16's (what it measures is XLA's behaviour at that width): one block only.
    stdout = run_benchmark("benchmarks.xla_cpu_depth", "--depths", "1")
    assert "\n| 1 |" in stdout


@on_backend("tensorflow")
def test_data_benchmark(tmp_path):
    output = tmp_path / "data.json"
    run_benchmark(
        "benchmarks.data",
        *("--files", "20", "--repeats", "1", "--image-size", "16", "--pipeline-batches", "1", "--models", "ViTTi16"),
        *("--model-batch-size", "2", "--model-steps", "1", "--threads", "1", "--output", str(output)),
    )
    report = json.loads(output.read_text())
    assert set(report["indexing_seconds"]) == {"keras_vit", "keras"}
    assert set(report["model_images_per_second"]) == {"ViTTi16"} and report["pipeline_images_per_second"] > 0


@on_backend("tensorflow")
def test_evaluation_benchmark(tmp_path):
    output = tmp_path / "evaluation.json"
    run_benchmark(
        "benchmarks.evaluation", "--repeats", "1", "--small-images", "40", "--b16-images", "", "--output", str(output)
    )
    report = json.loads(output.read_text())
    assert set(report["ridge"]) >= {"solve_seconds", "per_extra_l2_seconds"}
    assert [(row["model"], row["images"]) for row in report["extraction"]] == [("small", 40)]


@on_backend("tensorflow")
def test_deploy_benchmark(tmp_path):
    import keras_vit

    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(16, 16, 3), classes=10
    )
    model.save(tmp_path / "model.keras")
    output = tmp_path / "deploy.json"
    arguments = ("--skip-b16", "--seconds", "0.05", "--rounds", "1", "--out", str(output))
    run_benchmark("benchmarks.deploy", "--finetuned", str(tmp_path / "model.keras"), *arguments)
    report = json.loads(output.read_text())
    assert "onnx_float32_images_per_s" in report["digits"] and "keras_int8_top1_agreement" in report["digits"]
    assert {"quality", "images_per_s", "int8_over_own_float32"} <= set(report["digits_int8"])
