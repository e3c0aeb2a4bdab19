"""Every extra named: a missing optional dependency ends as one line that says which extra installs it
(`pip install "keras-vision-transformer[data]"`), in every command and public function; never a traceback.

A missing package is simulated the way Python itself reads it: `sys.modules[name] = None` makes
`import name` fail with ModuleNotFoundError.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tomllib

from keras_vit.utils import extras
from tests.helpers import BACKEND, REPO_ROOT

EXTRAS = ("tensorflow", "jax", "torch", "weights", "data", "inspect", "deploy")


@pytest.mark.skipif(BACKEND != "tensorflow", reason="pyproject.toml against a table: one run is enough")
def test_the_module_table_agrees_with_pyproject():
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as file:
        optional = tomllib.load(file)["project"]["optional-dependencies"]
    listed = {
        (re.split(r"[<>=!~;\[ ]", requirement)[0].lower().replace("_", "-"), extra)
        for extra in EXTRAS
        for requirement in optional[extra]
    }
    table = {(distribution.lower().replace("_", "-"), extra) for distribution, extra in extras.MODULES.values()}
    # Each module names one extra that installs it; every listed distribution has a module here.
    assert table <= listed and {name for name, _ in table} == {name for name, _ in listed}


DRIVER = """
import json, sys
from keras_vit_cli import main

results = []
for missing, argv in json.loads(sys.argv[1]):
    saved = {name: sys.modules.get(name) for name in missing}
    sys.modules.update({name: None for name in missing})
    try:
        code = main(argv)
    except BaseException as error:  # a traceback would have ended the command: record what escaped
        code = f"escaped {type(error).__name__}: {error}"
    sys.modules.update(saved)
    for name in [name for name, module in saved.items() if module is None]:
        del sys.modules[name]
    results.append(code)
print("RESULTS " + json.dumps(results))
"""


def _cases(tmp_path):
    image = os.path.join(REPO_ROOT, "keras_vit", "resources", "sample_image.jpg")
    checkpoint = str(tmp_path / "tiny.safetensors")
    from keras_vit.pretrained import io

    io.write_safetensors(checkpoint, {"cls_token": np.zeros((1, 1, 8), "float32")})
    out = ["--out", str(tmp_path / "out"), "--verbose", "0"]
    cases = [
        (["sklearn"], ["finetune", *out], "data", "scikit-learn"),
        (["matplotlib"], ["finetune", *out], "inspect", "matplotlib"),
        (["tensorflow_datasets"], ["finetune", "--data", "tfds:mnist", *out], "data", "tensorflow-datasets"),
        (["matplotlib"], ["inspect", image, "--model", "Ti/16"], "inspect", "matplotlib"),
        (["sklearn"], ["evaluate", "Ti/16", *out], "data", "scikit-learn"),
        (["matplotlib"], ["evaluate", "Ti/16", *out], "inspect", "matplotlib"),
        (["PIL"], ["predict", image, "--model", "Ti/16"], "data", "pillow"),
        (["huggingface_hub"], ["download", "ViTTi16", "--weights", "imagenet"], "weights", "huggingface-hub"),
        (["safetensors"], ["convert", checkpoint, str(tmp_path / "out.npz")], "weights", "safetensors"),
    ]
    deploy = {"tensorflow": ("onnx", "tf2onnx"), "jax": ("saved_model", "tensorflow"), "torch": ("openvino",) * 2}
    format, module = deploy[BACKEND]
    export = ["export", str(tmp_path / "model.keras"), str(tmp_path / "artefact"), "--format", format]
    cases.append(([module], export, "deploy", module))
    return cases


# Cost: one process per backend, ~15-30 s (the Keras import; every command stops at its dependency check,
# before a model is built or data read).
def test_every_command_names_the_extra_of_a_missing_package(tmp_path):
    cases = _cases(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps([(missing, argv) for missing, argv, _, _ in cases])],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=REPO_ROOT, KERAS_BACKEND=BACKEND, KERAS_VIT_OFFLINE="1"),
        timeout=600,
    )
    assert "RESULTS " in result.stdout, result.stderr[-3000:]
    codes = json.loads(result.stdout.split("RESULTS ", 1)[1])
    lines = [line for line in result.stderr.splitlines() if line.startswith("keras-vit ")]
    assert "Traceback" not in result.stderr and codes == [1] * len(cases), (codes, result.stderr[-3000:])
    assert len(lines) == len(cases), result.stderr
    for line, (_, argv, extra, package) in zip(lines, cases):
        assert line.startswith(f"keras-vit {argv[0]}: ") and package in line, line
        assert line.endswith(f'pip install "keras-vision-transformer[{extra}]"'), line


def test_public_functions_name_the_extra(monkeypatch, tmp_path):
    from keras_vit.evaluation import heldout
    from keras_vit.inspection import plots
    from keras_vit.models import preprocessing
    from keras_vit.training import data, finetune

    image = os.path.join(REPO_ROOT, "keras_vit", "resources", "sample_image.jpg")
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(extras.MissingDependencyError, match=re.escape('[data]"')):
        preprocessing.load_image(image, (16, 16))
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(extras.MissingDependencyError, match=re.escape('[inspect]"')):
        plots.plot_mean_attention_distance(np.ones((2, 3)), tmp_path / "plot.png")
    with pytest.raises(extras.MissingDependencyError, match=re.escape('[inspect]"')):
        heldout.plot_confusion({"confusion": [[1]], "class_names": ["a"]}, tmp_path / "confusion.png")
    with pytest.raises(extras.MissingDependencyError, match=re.escape('[inspect]"')):
        finetune.plot_curves({}, tmp_path / "curves.png")
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    with pytest.raises(extras.MissingDependencyError, match=re.escape('[data]"')):
        data.from_arrays(np.zeros((2, 4, 4, 3), np.uint8), np.zeros(2, np.int32), num_classes=2)


def test_an_unexpected_missing_optional_module_still_ends_in_one_line():
    # The command line's safety net: a ModuleNotFoundError of a known optional package, raised where no
    # check caught it, becomes the same one line.
    error = extras.from_import_error(ModuleNotFoundError("No module named 'onnx'", name="onnx"))
    assert isinstance(error, extras.MissingDependencyError)
    assert str(error).endswith('pip install "keras-vision-transformer[deploy]"')
    assert extras.from_import_error(ModuleNotFoundError("No module named 'mine'", name="mine")) is None
