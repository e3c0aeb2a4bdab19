"""`python -m benchmarks.memory`: the plan, and a tiny run (keras_vit with remat and timm with checkpointing,
each in its own worker) that writes the report; `python -m benchmarks.largest_batch` on one tiny step. No timing is
asserted."""

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys

import keras
import pytest

from benchmarks import largest_batch, memory, runner, tensor_memory, worker
from tests.helpers import REPO_ROOT

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
    torch_only = list(worker.TORCH_INSTALL_LACKS)
    assert [spec.get("absent_frameworks") for spec in specs] == [None, None, torch_only, torch_only, None, None]
    assert "torch-only install" in runner.label(specs[2]) and "jax" not in runner.label(specs[2])


def _installed_with(distribution, extras):
    """The canonical names of every distribution that installing `distribution[extras]` installs, itself included."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    installed, pending = set(), [(distribution, tuple(extras))]
    while pending:
        name, wanted = pending.pop()
        if canonicalize_name(name) in installed:
            continue
        installed.add(canonicalize_name(name))
        for text in importlib.metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or any(requirement.marker.evaluate({"extra": e}) for e in wanted or ("",)):
                pending.append((requirement.name, tuple(requirement.extras)))
    return installed


def test_a_torch_only_row_hides_only_what_an_install_with_torch_lacks():
    from packaging.utils import canonicalize_name

    installed = _installed_with("keras-vision-transformer", ["torch"])
    assert {"keras", "numpy", "torch"} <= installed, installed
    distributions = importlib.metadata.packages_distributions()
    for module in worker.TORCH_INSTALL_LACKS:
        for distribution in distributions.get(module, [module]):
            assert canonicalize_name(distribution) not in installed, (module, distribution)
    # The extras do install some: the closure is not empty by accident.
    assert "scikit-learn" in _installed_with("keras-vision-transformer", ["evaluate"])


_IMPORTS_IN_A_TORCH_ONLY_ROW = """
import json, sys
from benchmarks import worker
worker.uninstall_for_this_process(worker.TORCH_INSTALL_LACKS)
import torch
before = set(sys.modules)
import keras, keras_vit
print(json.dumps(sorted({name.split(".")[0] for name in set(sys.modules) - before})))
"""


def test_a_torch_only_row_imports_nothing_an_install_with_torch_lacks():
    """With `TORCH_INSTALL_LACKS` hidden, Keras and keras_vit on torch import no package that an install of
    keras-vision-transformer[torch] lacks, whatever else this environment holds (what `import torch` itself imports
    is the same in timm's rows)."""
    if keras.backend.backend() != "torch":
        pytest.skip("one process on the torch run is enough: the row is the same whatever the tests' backend")
    from packaging.utils import canonicalize_name

    completed = subprocess.run(
        [sys.executable, "-c", _IMPORTS_IN_A_TORCH_ONLY_ROW],
        env=dict(os.environ, KERAS_BACKEND="torch"),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    imported = json.loads(completed.stdout.strip().splitlines()[-1])
    assert "keras" in imported and "jax" not in imported, imported
    installed = _installed_with("keras-vision-transformer", ["torch"])
    distributions = importlib.metadata.packages_distributions()
    outside = {
        module: distribution
        for module in imported
        for distribution in distributions.get(module, [])
        if canonicalize_name(distribution) not in installed
    }
    assert not outside, (
        f"Keras or keras_vit now imports {outside}, which keras-vision-transformer[torch] does not install: "
        "add the module to benchmarks.worker.TORCH_INSTALL_LACKS"
    )


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
    # The imports' resident memory, taken before the build: below the build's, which holds the model too.
    for record in report["records"]:
        result = record["result"]
        assert 0 < result["rss_after_imports_mb"] <= result["rss_after_build_mb"] <= result["peak_rss_train_mb"]
        for state in (result["malloc_after_build_mb"], result["malloc_after_training_mb"]):
            assert state is None or 0 <= state["heap_free"] <= state["heap"], state
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
    assert "keras_vit, torch, float32, remat, torch-only install" in report["table"]
    assert all(record["result"]["frameworks_imported"] == ["torch"] for record in report["records"][2:])


def test_largest_batch_reads_the_limit_off_the_measured_steps():
    def record(batch, peak_mib, status="ok"):
        return dict(train_batch_size=batch, status=status, result=dict(peak_rss_train_mb=peak_mib))

    mib_per_gb = largest_batch.MIB_PER_GB
    # 100 MiB per image from 1000 MiB at batch 10: 2 GB (1907 MiB) is crossed at batch 19.
    records = [record(10, 1000), record(15, 1500), record(20, 2000), record(40, 0, status="failed")]
    assert largest_batch.largest_within(records, 2.0) == (15, 19)
    assert largest_batch.largest_within(records[:1], 2.0) == (10, None)  # one point: no line
    assert largest_batch.largest_within([record(10, 3 * mib_per_gb)], 2.0) == (None, None)
    specs = largest_batch.plan("tiny", TINY, [4, 2, 4], backend="torch", remat=True, torch_only=True, image_size=16)
    assert [(spec["train_batch_size"], spec["remat"], spec["first_step_only"]) for spec in specs] == [
        (2, True, True),
        (4, True, True),
    ]
    assert all(spec["absent_frameworks"] == list(worker.TORCH_INSTALL_LACKS) for spec in specs)
    with pytest.raises(ValueError, match="at least one"):
        largest_batch.plan("tiny", TINY, [])
    # The comma-separated sizes of both benchmark commands.
    assert runner.batch_sizes("--batch-sizes", "128, 148") == (128, 148)
    for text in ("", "8,0", "8,x"):
        with pytest.raises(ValueError, match="--batch-sizes must be positive integers separated by commas"):
            runner.batch_sizes("--batch-sizes", text)


def test_largest_batch_command_measures_one_step_per_batch(tmp_path, capsys):
    # One worker process per batch size, one training step each (~7 s of CPU for the tiny model). The command is
    # the same on every backend (the worker is tested on each above): the torch run, whose workers start fastest.
    backend = keras.backend.backend()
    if backend != "torch":
        pytest.skip("backend-independent: the torch run")
    output = tmp_path / "largest.json"
    argv = ["--variant", "Ti/16", "--image-size", "16", "--batch-sizes", "2", "--backend", backend]
    assert largest_batch.main([*argv, "--limit-gb", "20", "--output", str(output)]) == 0
    report = json.loads(output.read_text())
    (record,) = report["records"]
    assert record["status"] == "ok" and record["first_step_only"] and "train" not in record["result"]
    assert report["largest"] == 2 and report["estimate"] is None
    assert "Largest measured batch within 20 GB: 2" in capsys.readouterr().out
    assert largest_batch.main([*argv, "--batch-sizes", "2,x", "--output", str(output)]) == 2
    assert "--batch-sizes must be positive integers separated by commas" in capsys.readouterr().err


def test_tensor_memory_profiles_one_step_of_each_configuration(monkeypatch):
    # In this process: timm through the tests' importer, which takes its torchvision stand-in away again.
    if keras.backend.backend() != "torch":
        pytest.skip("torch's profiler: the torch run")
    from benchmarks import worker
    from tests.timm_reference import import_timm

    monkeypatch.setattr(worker, "_import_timm", import_timm)
    rows = tensor_memory.measure(TINY, batch_size=2, image_size=16, classes=10)
    assert [row["label"] for row in rows] == [
        "keras_vit, torch",
        "keras_vit, torch, remat",
        "timm, torch eager",
        "timm, torch eager, gradient checkpointing",
    ]
    assert all(row["peak_live_mib"] > 0 and row["allocated_mib"] >= row["peak_live_mib"] for row in rows)
    # Recomputation allocates the recomputed activations again, in both frameworks.
    assert rows[1]["allocated_mib"] > rows[0]["allocated_mib"] and rows[3]["allocated_mib"] > rows[2]["allocated_mib"]
    # Autograd's saved activations, where no checkpointing hides them: every row without recomputation.
    assert [row["saved_mib"] is not None and row["saved_mib"] > 0 for row in rows] == [True, False, True, False]
    # keras_vit keeps timm's activations, storage for storage, and besides them only a copy of the patch kernel
    # (Keras's channels-last convolution on torch) and scalars: no copies around the attention.
    kept, kept_by_timm = dict(rows[0]["saved_storages"]), rows[2]["saved_storages"]
    assert kept.pop("(32, 3, 8, 8) float32") == [1, 32 * 3 * 8 * 8 * 4 / tensor_memory.MIB]
    assert {shape: found for shape, found in kept.items() if not shape.startswith("()")} == {
        shape: found for shape, found in kept_by_timm.items() if not shape.startswith("()")
    }
    table = tensor_memory.format_table(rows)
    assert "| timm, torch eager, gradient checkpointing |" in table and "keras_vit, torch, saved storages" in table
    # Each profiled keras_vit step starts as in `fit` with ReleaseGradients: no gradients held from the one before.
    step, weights = tensor_memory._keras_vit_step(TINY, 2, 16, 10, remat=False)
    step()
    assert all(weight.grad is None for weight in weights)


def test_saved_for_backward_counts_each_activation_storage_once_and_no_weight():
    if keras.backend.backend() != "torch":
        pytest.skip("torch's autograd hooks: the torch run")
    import torch

    weight = torch.nn.Parameter(torch.ones(4, 3))
    inputs = torch.ones(5, 4, requires_grad=True)

    def step():
        # `inputs` saved twice (by the product, through a view, and by the square), `weight` once, `hidden` once.
        hidden = inputs.view(20).view(5, 4) @ weight
        (hidden.square().sum() + inputs.square().sum()).backward()

    result = tensor_memory.saved_for_backward(step, [weight])
    assert result["saved_mib"] * tensor_memory.MIB == inputs.nbytes + 5 * 3 * 4
    assert result["saved_storages"] == {
        "(5, 4) float32": [1, inputs.nbytes / tensor_memory.MIB],
        "(5, 3) float32": [1, 60 / tensor_memory.MIB],
    }


def test_malloc_state_shows_a_large_block_mapped_on_its_own():
    import numpy as np

    before = worker.malloc_state_mb()
    if before is None:
        pytest.skip("not glibc 2.33+")
    block = np.ones(2**23)  # 64 MiB: above glibc's largest adaptive mmap threshold (32 MiB)
    after = worker.malloc_state_mb()
    assert after["mmapped"] - before["mmapped"] >= block.nbytes / 2**20
    del block
    assert worker.malloc_state_mb()["mmapped"] <= after["mmapped"] - 63  # returned to the system when freed


def test_a_worker_reports_its_own_peak_not_its_parents():
    # Linux's ru_maxrss starts a child at its parent's mark; this test process holds Keras and a backend.
    import subprocess
    import sys

    from benchmarks import worker

    parent = worker.peak_rss_mb()
    assert parent > 200, parent  # large enough for the difference to show
    code = "from benchmarks import worker; print(worker.peak_rss_mb())"
    child = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 0 < child < 100 < parent
