"""The example scripts and the Colab notebook, executed on tiny settings
(an image folder written here, a few CPU steps, random weights)."""

import os
import re
import runpy
import subprocess
import sys
import warnings

import numpy as np
import pytest

from keras_vit.models.variants import VARIANTS
from tests.helpers import BACKEND, REPO_ROOT

EXAMPLES = os.path.join(REPO_ROOT, "examples")
pytestmark = pytest.mark.skipif(BACKEND != "tensorflow", reason="the examples run once, on the tensorflow run")


@pytest.fixture()
def folder(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, count in (("train", 6), ("test", 3)):
        for name in ("a", "b"):
            os.makedirs(tmp_path / "images" / split / name)
            for index in range(count):
                Image.fromarray(rng.integers(0, 256, (20, 20, 3), dtype=np.uint8)).save(
                    tmp_path / "images" / split / name / f"{index}.png"
                )
    return str(tmp_path / "images")


@pytest.fixture()
def tiny_ti16(monkeypatch):
    # The scripts build `CONSTRUCTORS[--model]`: the ViTTi16 they are given is shrunk from 12 blocks of
    # width 192 to 1 block of width 16 (its row of the variant table, which the constructor reads), the 16 px
    # patches kept. The path is the real one (name -> constructor -> table row -> model); tracing and compiling
    # the 12 blocks was most of each script's cost (~34 s of CPU each on TensorFlow).
    monkeypatch.setitem(VARIANTS, "Ti/16", dict(patch_size=16, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32))


def _run_script(name, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [name])
    module = runpy.run_path(os.path.join(EXAMPLES, name), run_name="example")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = module["main"](argv)
    # What the scripts' quiet setup leaves visible: warnings meant for the user (Keras's "ran out of data", its
    # shuffle note). A finished run shows none.
    shown = [str(warning.message) for warning in caught if issubclass(warning.category, UserWarning)]
    assert shown == [], shown
    return result


def test_finetune_official_recipe_script(tiny_ti16, folder, tmp_path, monkeypatch):
    result = _run_script(
        "finetune_official_recipe.py",
        [
            "--model",
            "ViTTi16",
            "--weights",
            "none",
            "--data",
            folder,
            "--image-size",
            "16",
            "--batch-size",
            "4",
            "--accumulation-steps",
            "2",
            "--steps",
            "2",
            "--warmup-steps",
            "1",
            "--eval-every",
            "1",
            "--layer-decay",
            "0.75",
            "--out",
            str(tmp_path / "out"),
        ],
        monkeypatch,
    )
    assert 0.0 <= result["accuracy"] <= 1.0
    assert os.path.exists(tmp_path / "out" / "model.keras")


def test_distributed_training_script(tiny_ti16, folder, monkeypatch):
    history = _run_script(
        "distributed_training.py",
        ["--model", "ViTTi16", "--data", folder, "--image-size", "16", "--per-replica-batch", "4", "--steps", "2"],
        monkeypatch,
    )
    assert len(history["loss"]) == 1 and np.isfinite(history["loss"][0])


HELP_CODE = """
import contextlib, io, runpy, sys
sys.argv = [sys.argv[1], "--help"]
with contextlib.redirect_stdout(io.StringIO()) as shown:
    try:
        if sys.argv[0].endswith(".py"):
            runpy.run_path(sys.argv[0], run_name="__main__")
        else:
            runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
heavy = ("keras", "keras_vit", "tensorflow", "jax", "torch")
print("usage:" in shown.getvalue(), sorted(name for name in heavy if name in sys.modules))
"""


@pytest.mark.parametrize("program", ["finetune_official_recipe.py", "distributed_training.py", "benchmarks"])
def test_help_answers_without_importing_a_framework(program):
    # What makes `--help` instant (20-28 s when it imported Keras first): the scripts and the benchmark import
    # Keras, keras_vit and the frameworks after parsing their arguments. Cost: one bare Python process, < 1 s.
    path = program if program == "benchmarks" else os.path.join(EXAMPLES, program)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    result = subprocess.run(
        [sys.executable, "-c", HELP_CODE, path], capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True []", result.stdout


def test_every_example_states_command_runtime_and_result():
    for name in ("finetune_official_recipe.py", "distributed_training.py"):
        header = open(os.path.join(EXAMPLES, name)).read().split('"""')[1]
        assert "python examples/" in header and "Runtime" in header and "%" in header, name


# Cost: one Jupyter kernel, ~1-2 min on 2 CPU cores (the Keras import, two steps of a tiny ViT).
def test_transfer_learning_notebook_runs_through_its_quick_switch(tmp_path):
    # The notebook as shipped, run through its own quick/offline switch (KERAS_VIT_QUICK=1 sets QUICK = True):
    # no cell is edited, nothing is downloaded, and the cells print no framework log lines.
    import nbclient
    import nbformat

    notebook = nbformat.read(os.path.join(EXAMPLES, "transfer_learning.ipynb"), as_version=4)
    switch = [cell for cell in notebook.cells if "QUICK = " in cell.source]
    assert switch and notebook.cells.index(switch[0]) <= 3, "the switch sits in the first cells"
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", "KERAS_VIT_QUICK", "TF_CPP_MIN_LOG_LEVEL")}
    os.environ["PYTHONPATH"] = REPO_ROOT + (os.pathsep + saved["PYTHONPATH"] if saved["PYTHONPATH"] else "")
    os.environ["KERAS_VIT_QUICK"] = "1"
    os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the notebook quiets TensorFlow itself
    try:
        client = nbclient.NotebookClient(
            notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        )
        client.execute()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    stdout = "".join(output.get("text", "") for output in outputs if output.get("name") == "stdout")
    stderr = "".join(output.get("text", "") for output in outputs if output.get("name") == "stderr")
    assert "held-out accuracy:" in stdout
    assert os.path.exists(tmp_path / "vit_finetuned.keras")
    assert not re.search(r"absl|I0000|E0000|W0000|cuda|WARNING:tensorflow|Warning:|ran out of data", stderr), stderr
