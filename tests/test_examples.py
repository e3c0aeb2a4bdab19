"""The example scripts and the Colab notebook run on tiny settings: a few CPU steps on random images and weights."""

import os
import pathlib
import re
import runpy
import subprocess
import sys
import warnings

import numpy as np
import pytest

from keras_vit.models.variants import VARIANTS
from tests.helpers import BACKEND, REPO_ROOT, write_images

EXAMPLES = os.path.join(REPO_ROOT, "examples")
SCRIPTS = ("finetune_official_recipe.py", "distributed_training.py")
pytestmark = pytest.mark.skipif(BACKEND != "tensorflow", reason="the examples run once, on the tensorflow run")


@pytest.fixture()
def folder(tmp_path):
    write_images(tmp_path / "images" / "train", ("a", "b"), count=6, suffix=".png", seed=0)
    write_images(tmp_path / "images" / "test", ("a", "b"), count=3, suffix=".png", seed=1)
    return str(tmp_path / "images")


def run_script(name, argv, monkeypatch):
    """Runs an example's `main(argv)` with ViTTi16 cut to one block of width 16 (its row of the variant table)."""
    monkeypatch.setitem(VARIANTS, "Ti/16", dict(patch_size=16, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32))
    monkeypatch.setattr(sys, "argv", [name])
    module = runpy.run_path(os.path.join(EXAMPLES, name), run_name="example")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = module["main"](argv)
    # A finished run shows the user no warning (Keras's "ran out of data", its shuffle note).
    assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == []
    return result


@pytest.mark.slow
def test_finetune_official_recipe_script(folder, tmp_path, monkeypatch):
    arguments = "--model ViTTi16 --weights none --image-size 16 --batch-size 4 --accumulation-steps 2 --steps 2"
    arguments += " --warmup-steps 1 --eval-every 1 --layer-decay 0.75"
    out = str(tmp_path / "out")
    result = run_script(SCRIPTS[0], [*arguments.split(), "--data", folder, "--out", out], monkeypatch)
    assert 0.0 <= result["accuracy"] <= 1.0
    assert os.path.exists(os.path.join(out, "model.keras"))


def test_distributed_training_script(folder, monkeypatch):
    arguments = "--model ViTTi16 --image-size 16 --per-replica-batch 4 --steps 2".split()
    history = run_script(SCRIPTS[1], [*arguments, "--data", folder], monkeypatch)
    assert len(history["loss"]) == 1 and np.isfinite(history["loss"][0])


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_example_states_command_runtime_and_result(name):
    header = pathlib.Path(EXAMPLES, name).read_text().split('"""')[1]
    assert "python examples/" in header and "Runtime" in header and "%" in header


# `--help` answers at once: the scripts and the benchmark import Keras and the frameworks after parsing arguments.
HELP = """
import contextlib, io, runpy, sys
sys.argv = [sys.argv[1], "--help"]
with contextlib.redirect_stdout(io.StringIO()) as shown, contextlib.suppress(SystemExit):
    if sys.argv[0].endswith(".py"):
        runpy.run_path(sys.argv[0], run_name="__main__")
    else:
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
heavy = ("keras", "keras_vit", "tensorflow", "jax", "torch")
print("usage:" in shown.getvalue(), sorted(name for name in heavy if name in sys.modules))
"""


@pytest.mark.parametrize("program", [*SCRIPTS, "benchmarks"])
def test_help_answers_without_importing_a_framework(program):
    path = program if program == "benchmarks" else os.path.join(EXAMPLES, program)
    result = subprocess.run(
        [sys.executable, "-c", HELP, path], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True []"


@pytest.mark.slow
def test_transfer_learning_notebook_runs_through_its_quick_switch(tmp_path, monkeypatch):
    # As shipped, through its own quick/offline switch: no cell edited, nothing downloaded, no framework log lines.
    import nbclient
    import nbformat

    notebook = nbformat.read(os.path.join(EXAMPLES, "transfer_learning.ipynb"), as_version=4)
    switch = [index for index, cell in enumerate(notebook.cells) if "QUICK = " in cell.source]
    assert switch and switch[0] <= 3, "the switch sits in the first cells"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("KERAS_VIT_QUICK", "1")
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)  # the notebook quiets TensorFlow itself
    resources = {"metadata": {"path": str(tmp_path)}}
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3", resources=resources).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    stdout = "".join(output.get("text", "") for output in outputs if output.get("name") == "stdout")
    stderr = "".join(output.get("text", "") for output in outputs if output.get("name") == "stderr")
    assert "held-out accuracy:" in stdout
    assert os.path.exists(tmp_path / "vit_finetuned.keras")
    assert not re.search(r"absl|I0000|E0000|W0000|cuda|WARNING:tensorflow|Warning:|ran out of data", stderr), stderr
