"""One smoke run of every benchmark script at its tiniest arguments: each exits 0 and reports the expected rows.

A backend's scripts run in one process (each one's `main(argv)`), with Ti/16 cut to one block; the main benchmark
runs on every backend, for the plain ViT and for DINOv3, the others on the backend they are for. What a benchmark
measures is never asserted.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import BACKEND, REPO_ROOT

# Runs `[(module, argv), ...]`; prints `[[exit code, stdout], ...]` as its last line.
DRIVER = """
import contextlib, importlib, io, json, sys
from keras_vit.models import variants
variants.VARIANTS["Ti/16"] = dict(variants.VARIANTS["Ti/16"], num_layers=1)  # read by every worker's spec
results = []
for module, argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        code = importlib.import_module(module).main(argv)
    results.append((code, shown.getvalue()))
print(json.dumps(results))
"""
TINY_VARIANT = ["--variant", "Ti/16", "--image-size", "16"]
# `--family dinov3`, on the torch run (every peer runs there): the `--peers` value and the rows it adds.
FAMILY_PEERS = (
    "keras_hub,transformers,timm",
    [
        "keras-hub DINOv3, torch, float32",
        "HF transformers DINOv3, torch eager, float32",
        "timm Eva, torch eager, float32",
    ],
)


def run_benchmarks(tmp_path, *calls):
    """Runs `(module, argv)` calls, then (on torch) the main benchmark for DINOv3 and then for the plain ViT, in one
    process; checks the main benchmark's reports and returns each call's stdout."""
    # The main benchmark: keras_vit on this backend, and on torch on Keras's OpenVINO backend and its OpenVINO
    # artefact too.
    artefacts = "openvino" if BACKEND == "torch" else "none"
    backends = "torch,openvino" if BACKEND == "torch" else BACKEND
    arguments = ["--quick", "--backends", backends, "--precisions", "float32", "--peers", "none", "--no-ceiling"]
    arguments += ["--artefacts", artefacts, "--batch-sizes", "1", "--train-batch-size", "2", "--classes", "2"]
    arguments += ["--threads", "1", "--output", str(tmp_path / "main.json")]
    # DINOv3, each keras_vit row beside its twin of the plain ViT.
    peers, family_peers = FAMILY_PEERS
    family = ["--family", "dinov3", "--quick", "--backends", BACKEND, "--precisions", "float32", "--peers", peers]
    family += ["--no-ceiling", "--artefacts", "none", "--batch-sizes", "1", "--train-batch-size", "2"]
    family += ["--classes", "2", "--threads", "1", "--output", str(tmp_path / "family.json")]
    calls = [*calls, ("benchmarks.__main__", [*TINY_VARIANT, *arguments])]
    if BACKEND == "torch":
        calls.insert(-1, ("benchmarks.__main__", [*TINY_VARIANT, *family]))
    completed = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(calls)],
        cwd=REPO_ROOT,
        env=dict(os.environ, KERAS_BACKEND=BACKEND),
        capture_output=True,
        text=True,
        timeout=500,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads(completed.stdout.splitlines()[-1])
    assert [code for code, _ in results] == [0] * len(calls), completed.stderr[-3000:]

    report = json.loads((tmp_path / "main.json").read_text())
    assert {"records", "targets", "table", "machine"} <= set(report)
    labels = [record["label"] for record in report["records"]]
    assert labels[0] == f"keras_vit, {BACKEND}, float32"
    assert labels[1:2] == (["keras_vit, openvino, float32"] if BACKEND == "torch" else [])
    assert len(labels) == (3 if BACKEND == "torch" else 1)
    assert all(record["status"] == "ok" for record in report["records"]), report["table"]
    assert all(set(record["result"]["inference"]) == {"1"} for record in report["records"])
    assert ["train" in record["result"] for record in report["records"]] == [True] + [False] * (len(labels) - 1)
    assert all(label in report["table"] for label in labels)

    if BACKEND != "torch":
        return [shown for _, shown in results[:-1]]
    report = json.loads((tmp_path / "family.json").read_text())
    dinov3, plain = f"keras_vit DINOv3, {BACKEND}, float32", f"keras_vit, {BACKEND}, float32"
    assert [record["label"] for record in report["records"]] == [dinov3, plain, *family_peers]
    assert all(record["status"] == "ok" for record in report["records"]), report["table"]
    assert set(report["records"][0]["ratios"]) == {*family_peers, plain}  # the twin, never a plain peer
    assert report["records"][1]["ratios"] == {}
    rows = {row["configuration"]: set(row["ratios"]) for row in report["family_over_plain"]}
    assert rows == {
        dinov3: {"inference b1", "training"},
        "best keras_vit path of each, float32": {"inference b1", "training"},
    }
    assert results[-2][1].startswith("DINOv3 ViT-Ti/16 at 16 px")
    assert "| images/s over keras_vit's plain ViT of the same configuration |" in report["table"]
    return [shown for _, shown in results[:-2]]


@pytest.mark.slow
@pytest.mark.skipif(BACKEND != "tensorflow", reason="the tensorflow scripts: the tensorflow run")
def test_tensorflow_benchmarks(tmp_path):
    import keras_vit

    model = keras_vit.VisionTransformer(
        patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(16, 16, 3), classes=10
    )
    model.save(tmp_path / "model.keras")
    data = ["--files", "20", "--repeats", "1", "--image-size", "16", "--pipeline-batches", "1", "--models", "ViTTi16"]
    data += ["--model-batch-size", "2", "--model-steps", "1", "--threads", "1", "--output", str(tmp_path / "data.json")]
    evaluation = ["--repeats", "1", "--small-images", "40", "--b16-images", "", "--output", str(tmp_path / "eval.json")]
    deploy = ["--finetuned", str(tmp_path / "model.keras"), "--skip-b16", "--seconds", "0.05", "--rounds", "1"]
    run_benchmarks(
        tmp_path,
        ("benchmarks.data", data),  # first: it sets TensorFlow's thread counts, which only a fresh runtime takes
        ("benchmarks.evaluation", evaluation),
        ("benchmarks.deploy", [*deploy, "--out", str(tmp_path / "deploy.json")]),
    )
    report = json.loads((tmp_path / "data.json").read_text())
    assert set(report["indexing_seconds"]) == {"keras_vit", "keras"}
    assert set(report["model_images_per_second"]) == {"ViTTi16"} and report["pipeline_images_per_second"] > 0
    report = json.loads((tmp_path / "eval.json").read_text())
    assert set(report["ridge"]) >= {"solve_seconds", "per_extra_l2_seconds"}
    assert [(row["model"], row["images"]) for row in report["extraction"]] == [("small", 40)]
    report = json.loads((tmp_path / "deploy.json").read_text())
    assert "onnx_float32_images_per_s" in report["digits"] and "keras_int8_top1_agreement" in report["digits"]
    assert {"quality", "images_per_s", "int8_over_own_float32"} <= set(report["digits_int8"])


@pytest.mark.slow
@pytest.mark.skipif(BACKEND != "jax", reason="the jax scripts: the jax run")
def test_jax_benchmarks(tmp_path):
    # xla_cpu_depth's sizes are B/16's (it measures XLA's behaviour at that width): one block only.
    (depth,) = run_benchmarks(tmp_path, ("benchmarks.xla_cpu_depth", ["--depths", "1"]))
    assert "\n| 1 |" in depth


@pytest.mark.slow
@pytest.mark.skipif(BACKEND != "torch", reason="the torch scripts: the torch run")
def test_torch_benchmarks(tmp_path):
    small = [*TINY_VARIANT, "--threads", "1"]
    accelerator = ["--configurations", "keras_vit torch eager", "--precision", "float32", "--classes", "2"]
    accelerator += ["--train-batch-size", "2", "--inference-batch-size", "2", "--rounds", "1", "--steps", "1"]
    accelerator += ["--calls", "1", "--matmul-size", "64", "--profile", "1", "--output", str(tmp_path / "acc.json")]
    memory = ["--batch-size", "2", "--backends", "torch", "--torch-only", "--lora", "2"]
    memory += ["--output", str(tmp_path / "memory.json")]
    largest = ["--batch-sizes", "2", "--output", str(tmp_path / "largest.json")]
    naflex = ["--images", "4", "--held-out", "3", "--steps", "2", "--batch-size", "4", "--max-patches", "16"]
    _, largest_shown, _, tensors_shown, naflex_shown = run_benchmarks(
        tmp_path,
        ("benchmarks.accelerator", [*TINY_VARIANT, *accelerator]),
        ("benchmarks.largest_batch", [*small, *largest]),
        ("benchmarks.memory", [*small, *memory]),
        ("benchmarks.tensor_memory", [*small, "--batch-size", "2"]),
        ("benchmarks.naflex", naflex),  # the finetune job compiles fastest on torch
    )
    report = json.loads((tmp_path / "acc.json").read_text())
    assert {"arguments", "records", "summary", "table"} <= set(report)
    record = report["records"]["keras_vit torch eager"]
    assert record["status"] == "ok" and "| keras_vit torch eager |" in report["table"]
    assert set(record["profile"]) == {"train", "infer"} and record["profile"]["train"]["device_ms"] > 0
    report = json.loads((tmp_path / "largest.json").read_text())
    (record,) = report["records"]
    assert record["status"] == "ok" and record["train_batch_size"] == 2
    assert report["largest"] == 2 and "Largest measured batch within 20 GB: 2" in largest_shown
    report = json.loads((tmp_path / "memory.json").read_text())
    assert [record["label"] for record in report["records"]] == [
        "keras_vit, torch, float32, torch-only install",
        "keras_vit, torch, float32, remat, torch-only install",
        "keras_vit, torch, float32, LoRA rank 2, torch-only install",
        "timm, torch eager, float32",
        "timm, torch eager, float32, gradient checkpointing",
    ]
    assert all(record["status"] == "ok" for record in report["records"]), report["table"]
    for label in ("keras_vit, torch", "keras_vit, torch, remat", "timm, torch eager"):
        assert f"| {label} |" in tensors_shown
    assert "keras_vit, torch, saved storages" in tensors_shown
    assert "| square 16 px |" in naflex_shown and "| NaFlex, at most 16 patches |" in naflex_shown
