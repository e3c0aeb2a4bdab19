"""`python -m benchmarks.memory`: the plan, and a tiny run (keras_vit with remat and timm with checkpointing,
each in its own worker) that writes the report. No timing is asserted."""

import importlib.util
import json

import keras
import pytest

from benchmarks import memory

TINY = dict(patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64)


def test_plan_pairs_every_configuration_with_and_without_remat():
    specs = memory.plan("tiny", TINY, 4, backends=("tensorflow", "jax"), image_size=16)
    rows = [(spec["kind"], spec["backend"], spec["jit_compile"], spec["remat"]) for spec in specs]
    assert rows == [
        ("keras_vit", "tensorflow", False, False),
        ("keras_vit", "tensorflow", False, True),
        ("keras_vit", "jax", True, False),
        ("keras_vit", "jax", True, True),
        ("timm", "torch", False, False),
        ("timm", "torch", False, True),
    ]
    assert all(spec["train_batch_size"] == 4 and spec["inference_batch_sizes"] == [] for spec in specs)
    with pytest.raises(ValueError, match="Unknown backend"):
        memory.plan("tiny", TINY, 4, backends=("numpy",))
    specs = memory.plan("tiny", TINY, 4, backends=("jax", "torch"), torch_only=True)
    torch_only = ["jax", "tensorflow"]
    assert [spec.get("absent_frameworks") for spec in specs] == [None, None, torch_only, torch_only, None, None]


def test_tiny_run_writes_the_report_with_ratios(tmp_path):
    backend = keras.backend.backend()
    # Each row is a fresh worker process (its peak memory is its own): ~7 s of CPU for a keras_vit row, ~5 s for
    # a timm row. timm's rows (eager PyTorch) are the same whatever Keras backend runs the tests: they, and the
    # ratios against them, are checked on the torch run only.
    with_timm = backend == "torch"
    if with_timm and importlib.util.find_spec("timm") is None:
        pytest.skip("timm is not installed")
    # On torch, keras_vit's rows run as in a torch-only install: jax, which Keras imports wherever it can, hidden.
    specs = memory.plan(
        "tiny", TINY, 2, backends=(backend,), timm=with_timm, image_size=16, classes=10, torch_only=with_timm
    )
    output = tmp_path / "memory.json"
    report = memory.run(specs, timeout=600, output=str(output), log=lambda message: None)
    assert [record["status"] for record in report["records"]] == ["ok"] * (4 if with_timm else 2), report["table"]
    plain, remat = report["records"][:2]
    assert plain["step_time_vs_no_remat"] == 1.0 and remat["step_time_vs_no_remat"] > 0
    assert f"keras_vit, {backend}" in report["table"]
    assert json.loads(output.read_text())["table"] == report["table"]
    # No row's process holds TensorFlow unless it is the backend (~460 MiB of resident memory). Keras 3.15 itself
    # imports jax wherever it is installed (its Orbax checkpoint callback): every Keras user's process has it.
    for record in report["records"][:2]:
        imported = record["result"]["frameworks_imported"]
        assert backend in imported and ("tensorflow" in imported) == (backend == "tensorflow"), imported
        assert imported == ["torch"] or not with_timm, imported
    if not with_timm:
        assert remat["memory_vs_timm_checkpointed"] is None  # no reference row, no ratio
        return
    timm, timm_checkpointed = report["records"][2:]
    assert timm_checkpointed["memory_vs_timm_checkpointed"] == 1.0 and remat["memory_vs_timm_checkpointed"] > 0
    assert timm["result"]["parameters"] == timm_checkpointed["result"]["parameters"] > 0
    assert "timm, torch eager, float32, gradient checkpointing" in report["table"]
    assert "keras_vit, torch, float32, remat, no jax, no tensorflow" in report["table"]
    assert all(record["result"]["frameworks_imported"] == ["torch"] for record in report["records"][2:])
