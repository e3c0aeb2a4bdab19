"""The benchmark's plan, arithmetic and report; one tiny real run per backend.

Wall-clock speed is never asserted: only that the measurements exist, are
positive and are combined correctly.
"""

import json

import keras
import pytest

import benchmarks as benchmarking
import keras_vit
from benchmarks import runner
from benchmarks.__main__ import main as benchmark_main
from keras_vit.models.variants import VARIANTS

TINY = dict(patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32)


def test_forward_flops_match_the_published_figure():
    b16 = VARIANTS["B/16"]
    assert round(benchmarking.forward_flops(b16) / 1e9, 1) == 35.1
    # By hand for the tiny config at 16 px: 4 patches, 5 tokens, no head.
    per_block = 5 * 16 * 48 + 2 * 25 * 16 + 5 * 16 * 16 + 2 * 5 * 16 * 32
    assert benchmarking.forward_flops(TINY, 16, classes=0) == 2 * (4 * 8 * 8 * 3 * 16 + per_block)
    assert benchmarking.training_flops(TINY, 16, 10) == 3 * benchmarking.forward_flops(TINY, 16, 10)


def test_hybrid_forward_flops_match_an_independent_count():
    # torch's FlopCounterMode on timm's vit_tiny_r_s16_p8_224 / vit_base_r50_s16_224 (1000-class heads,
    # explicit attention), docs/hybrid.md; tests/test_hybrid.py compares a tiny hybrid live.
    assert benchmarking.forward_flops(VARIANTS["R+Ti/16"]) == 867_363_840
    assert benchmarking.forward_flops(VARIANTS["R50+B/16"]) == 43_070_717_952
    # The root alone by hand at 20 px: 10x10 after the 7x7 stride-2 convolution, 5x5 after pooling, padded to
    # 3x3 patches of 2x2 on the 32 channels; 9 tokens + the class token; no head.
    tiny = dict(TINY, patch_size=2, resnet_stages=(), resnet_width=32)
    root = 10 * 10 * 49 * 3 * 32
    per_block = 10 * 16 * 48 + 2 * 100 * 16 + 10 * 16 * 16 + 2 * 10 * 16 * 32
    assert benchmarking.forward_flops(tiny, 20, classes=0) == 2 * (root + 9 * 2 * 2 * 32 * 16 + per_block)


def test_default_plan_covers_backends_jit_modes_and_peers():
    specs = benchmarking.plan("B/16", VARIANTS["B/16"])
    labels = [runner.label(spec) for spec in specs]
    assert labels[0] == "matmul ceiling"
    assert "keras_vit, tensorflow, XLA, float32" in labels and "keras_vit, tensorflow, float32" in labels
    assert "keras_vit, jax, mixed_bfloat16" in labels and "keras_vit, torch, float32" in labels
    assert "keras-hub, torch, mixed_bfloat16" in labels and "keras-hub, jax, float32" not in labels
    assert "HF transformers, torch torch.compile, mixed_bfloat16" in labels
    assert "timm, torch torch.compile, float32" in labels and "timm, torch eager, mixed_bfloat16" in labels
    # The exported artefacts: float32 inference, exported from each backend that writes the format.
    assert "keras_vit artefact, OpenVINO (exported from tensorflow), float32" in labels
    assert "keras_vit artefact, OpenVINO (exported from torch), float32" in labels
    assert "keras_vit artefact, ONNX Runtime (exported from tensorflow), float32" in labels
    assert len(labels) == len(set(labels)) == 1 + 8 + 4 + 3 + 4 + 4
    jax_only = benchmarking.plan("B/16", VARIANTS["B/16"], backends=("jax",))
    assert not any(spec["kind"] == "artefact" for spec in jax_only)  # JAX writes neither format
    both = [runner.label(spec) for spec in benchmarking.plan("B/16", VARIANTS["B/16"], jit="both")]
    assert "keras_vit, torch, torch.compile, float32" in both and "keras_vit, jax, no jit, float32" in both
    assert len(both) == len(set(both))
    quick = benchmarking.plan("B/16", VARIANTS["B/16"], jit="single", ceiling=False)
    assert not any(spec["jit_compile"] for spec in quick if spec["backend"] != "jax")
    bfloat16 = benchmarking.plan("B/16", VARIANTS["B/16"], precisions=("mixed_bfloat16",))
    assert not any(spec["kind"] == "artefact" for spec in bfloat16)
    with pytest.raises(ValueError, match="Unknown artefact format 'tflite'"):
        benchmarking.plan("B/16", VARIANTS["B/16"], artefacts=("tflite",))
    with pytest.raises(ValueError, match="Unknown backend 'mxnet'"):
        benchmarking.plan("B/16", VARIANTS["B/16"], backends=("mxnet",))


def _record(kind, backend, precision, infer, train, memory, jit_compile=False):
    spec = dict(
        kind=kind,
        backend=backend,
        precision=precision,
        jit_compile=jit_compile,
        variant=TINY,
        image_size=16,
        classes=10,
        train_batch_size=2,
    )
    result = {
        "inference": {"4": {"images_per_s": infer}},
        "train": {"images_per_s": train},
        "peak_rss_train_mb": memory,
        "first_train_step_s": 1.0,
    }
    return dict(spec, label=runner.label(spec), status="ok", result=result)


def test_summary_ratios_ceiling_share_and_targets():
    ceiling = dict(
        kind="ceiling",
        backend="-",
        precision="-",
        jit_compile=False,
        label="matmul ceiling",
        status="ok",
        result={"numpy_float32_gflops": 10.0, "torch_float32_gflops": 20.0, "torch_bfloat16_gflops": 40.0},
    )
    records = [
        ceiling,
        _record("keras_vit", "tensorflow", "mixed_bfloat16", infer=30.0, train=6.0, memory=500.0),
        _record("keras_hub", "tensorflow", "mixed_bfloat16", infer=10.0, train=4.0, memory=1000.0),
        _record("transformers", "torch", "mixed_bfloat16", infer=40.0, train=3.0, memory=450.0, jit_compile=True),
        _record("transformers", "torch", "mixed_bfloat16", infer=20.0, train=5.0, memory=400.0),
        _record("transformers", "torch", "float32", infer=1.0, train=1.0, memory=1.0),
    ]
    summary = benchmarking.summarize(records)
    assert summary["ceilings_gflops"] == {"float32": 20.0, "mixed_bfloat16": 40.0}
    mine = records[1]
    # Compared only with peers of the same precision.
    assert set(mine["ratios"]) == {records[2]["label"], records[3]["label"], records[4]["label"]}
    assert mine["ratios"][records[2]["label"]] == {"inference": 3.0, "train": 1.5, "memory": 0.5}
    assert mine["ratios"][records[3]["label"]]["inference"] == pytest.approx(0.75)
    flops_per_image = benchmarking.forward_flops(TINY, 16, 10)
    assert mine["percent_of_ceiling"]["inference"] == pytest.approx(100 * 30.0 * flops_per_image / 40e9)
    targets = {check["target"]: check for check in summary["targets"]}
    assert targets["TensorFlow mixed_bfloat16 inference b4 vs keras-hub"]["met"] is True  # 3.0 >= 2
    assert targets["TensorFlow float32 inference b4 vs keras-hub"]["met"] is None  # not measured
    assert targets["best mixed_bfloat16 inference b4 vs HF torch.compile"]["ratio"] == pytest.approx(0.75)
    assert targets["best mixed_bfloat16 training step vs HF eager"]["met"] is True  # 6 / 5
    assert targets["lowest training peak memory vs HF eager (<=)"]["ratio"] == pytest.approx(1.25)
    table = benchmarking.format_table(records, summary)
    assert "| keras_vit, tensorflow, mixed_bfloat16 | 30.00 | 6.00 | 1.0 | 500 |" in table
    assert (
        "| keras_vit, tensorflow, mixed_bfloat16 | keras-hub, tensorflow, mixed_bfloat16 | 3.00 | 1.50 | 0.50 |"
        in table
    )


def test_float32_targets_take_keras_vits_best_path_against_the_best_torch_peer():
    def artefact(infer):
        spec = dict(kind="artefact", backend="tensorflow", precision="float32", jit_compile=False, format="openvino")
        spec.update(variant=TINY, image_size=16, classes=10, train_batch_size=2)
        result = {"inference": {"4": {"images_per_s": infer}}, "peak_rss_mb": 300.0}
        return dict(spec, label=runner.label(spec), status="ok", result=result)

    records = [
        _record("keras_vit", "torch", "float32", infer=9.0, train=5.0, memory=700.0),
        _record("keras_vit", "jax", "float32", infer=8.0, train=4.0, memory=600.0),
        artefact(12.0),
        _record("transformers", "torch", "float32", infer=10.0, train=6.0, memory=400.0, jit_compile=True),
        _record("timm", "torch", "float32", infer=11.0, train=5.5, memory=450.0, jit_compile=True),
        _record("timm", "torch", "float32", infer=10.5, train=4.0, memory=500.0),
        _record("transformers", "torch", "float32", infer=10.0, train=4.5, memory=300.0),
    ]
    summary = benchmarking.summarize(records)
    targets = {check["target"]: check for check in summary["targets"]}
    # The artefact (12) against the best compiled peer (timm, 11); eager peers do not count here.
    assert targets["best keras_vit float32 inference b4 vs best torch.compile peer"]["ratio"] == pytest.approx(12 / 11)
    assert targets["best keras_vit float32 inference b4 vs best torch.compile peer"]["met"] is True
    # Training against the best eager peer (HF, 4.5): the compiled peers' 6.0 and 5.5 are not the yardstick.
    assert targets["best keras_vit float32 training step vs best eager torch peer"]["ratio"] == pytest.approx(5 / 4.5)
    # The lowest keras_vit training peak (600; the artefact does not train) against timm eager's (500).
    memory = targets["lowest keras_vit float32 training peak memory vs timm eager (<=)"]
    assert memory["ratio"] == pytest.approx(1.2) and memory["met"] is False
    assert set(records[2]["ratios"]) == {record["label"] for record in records[3:]}
    assert records[2]["ratios"][records[4]["label"]] == {
        "inference": pytest.approx(12 / 11),
        "train": None,
        "memory": None,
    }
    table = benchmarking.format_table(records, summary)
    assert "| keras_vit artefact, OpenVINO (exported from tensorflow), float32 | 12.00 | - | - | - |" in table


def _tiny_plan(**options):
    """The plan of one tiny float32 keras_vit row on this backend (jit: its first default mode), no peers."""
    return benchmarking.plan(
        "tiny",
        TINY,
        backends=(keras.backend.backend(),),
        precisions=("float32",),
        jit="single",
        peers=(),
        ceiling=False,
        image_size=16,
        classes=10,
        repeats=1,
        **options,
    )


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="JAX writes no OpenVINO artefact")
def test_tiny_artefact_runs_in_its_runtime_for_inference_only(tmp_path):
    backend = keras.backend.backend()
    specs = _tiny_plan(artefacts=("openvino",), inference_batch_sizes=(1, 3))
    specs = [spec for spec in specs if spec["kind"] == "artefact"]  # not the Keras model's own row
    report = benchmarking.run(specs, timeout=600, log=lambda message: None)
    (record,) = report["records"]
    assert record["status"] == "ok", record.get("error")
    result = record["result"]
    assert set(result["inference"]) == {"1", "3"} and "train" not in result
    assert all(entry["images_per_s"] > 0 for entry in result["inference"].values())
    assert result["export_s"] > 0 and backend in result["frameworks_imported"]
    assert (
        result["parameters"] == keras_vit.VisionTransformer(**TINY, input_shape=(16, 16, 3), classes=10).count_params()
    )
    assert f"keras_vit artefact, OpenVINO (exported from {backend}), float32" in report["table"]


def test_tiny_run_in_a_subprocess_writes_the_report(tmp_path):
    backend = keras.backend.backend()
    specs = _tiny_plan(artefacts=(), inference_batch_sizes=(1, 2), train_batch_size=2)
    output = tmp_path / "benchmark.json"
    report = benchmarking.run(specs, timeout=600, output=str(output), log=lambda message: None)
    (record,) = report["records"]
    assert record["status"] == "ok", record.get("error")
    result = record["result"]
    assert set(result["inference"]) == {"1", "2"}
    assert all(entry["images_per_s"] > 0 and len(entry["seconds"]) == 1 for entry in result["inference"].values())
    assert result["train"]["images_per_s"] > 0 and result["first_train_step_s"] > 0
    assert result["peak_rss_train_mb"] >= result["rss_after_build_mb"] > 0
    assert (
        result["parameters"] == keras_vit.VisionTransformer(**TINY, input_shape=(16, 16, 3), classes=10).count_params()
    )
    assert json.loads(output.read_text())["table"] == report["table"]
    assert f"keras_vit, {backend}" in report["table"]


def test_cli_rejects_bad_options(capsys):
    assert benchmark_main(["--variant", "Q/7"]) == 2
    assert "Unknown --variant 'Q/7'" in capsys.readouterr().err
    assert benchmark_main(["--variant", "Ti/16", "--image-size", "30"]) == 2
    assert "multiple of the patch size 16" in capsys.readouterr().err


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="NumPy and PyTorch only: one backend's run is enough"
)
def test_ceiling_measures_the_models_own_product_shape():
    from benchmarks import worker

    spec = dict(variant=TINY, image_size=16, classes=10, inference_batch_sizes=[1, 4], repeats=1, threads=2)
    assert worker.mlp_gemm_shape(spec) == (4 * 5, 16, 32)  # 4 images x (4 patches + class token)
    result = worker._run_ceiling(spec)
    assert result["model_gemm_shape"] == [20, 16, 32]
    assert result["numpy_float32_model_gemm_gflops"] > 0 and result["numpy_float32_gflops"] > 0

    ceiling = dict(
        spec,
        kind="ceiling",
        backend="-",
        precision="-",
        jit_compile=False,
        label="matmul ceiling",
        status="ok",
        result={
            "numpy_float32_gflops": 10.0,
            "numpy_float32_model_gemm_gflops": 4.0,
            "torch_float32_model_gemm_gflops": 5.0,
        },
    )
    summary = benchmarking.summarize([ceiling])
    assert summary["ceilings_gflops"]["float32_model_gemm"] == 5.0
    assert summary["model_gemm_images_per_s"] == pytest.approx(5e9 / benchmarking.forward_flops(TINY, 16, 10))
    assert "5.0 GFLOP/s in NumPy / PyTorch float32" in benchmarking.format_table([ceiling], summary)


def test_rounds_merge_to_the_median_of_each_measurement():
    def attempt(infer, memory, status="ok"):
        result = {"inference": {"16": {"images_per_s": infer, "seconds": [infer]}}, "peak_rss_train_mb": memory}
        return dict(kind="keras_vit", label="x", status=status, elapsed_s=1.0, result=result)

    merged = runner.merge_rounds(
        [
            attempt(1.0, 300),
            attempt(3.0, 100),
            attempt(2.0, 200),
            dict(kind="keras_vit", label="x", status="timeout", elapsed_s=5.0),
        ]
    )
    assert merged["result"]["inference"]["16"]["images_per_s"] == 2.0
    assert merged["result"]["peak_rss_train_mb"] == 200
    assert merged["result"]["inference"]["16"]["seconds"] == [1.0]  # lists are not averaged: the first round's
    assert merged["rounds_ok"] == 3 and merged["elapsed_s"] == 8.0
    assert [r["peak_rss_train_mb"] for r in merged["round_results"]] == [300, 100, 200]
    failed = dict(kind="keras_vit", label="x", status="failed", elapsed_s=1.0, error="boom")
    assert runner.merge_rounds([failed]) is failed
    with pytest.raises(ValueError, match="rounds"):
        benchmarking.run([], rounds=0)
