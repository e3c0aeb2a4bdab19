"""Quiet by default: at the default verbosity no `keras-vit` command prints a framework log or third-party warning
on stderr (`finetune --help` neither, though its flags import Keras); `KERAS_VIT_VERBOSE=1` brings them back; no
command imports TensorFlow on jax / torch unless it needs it.

The commands run in one fresh process per backend (`keras_vit_cli.main` called in turn), with stderr read at the
file-descriptor level, where native TensorFlow/absl/CUDA lines would show.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import BACKEND, FRAMEWORK_NOISE, REPO_ROOT, user_environment

# What may import TensorFlow on jax / torch: tf.data (finetune, evaluate), JAX's SavedModel export (jax2tf) and, on
# torch, Keras's serializer (export rebuilds a mixed-precision model in float32).
NEEDS_TENSORFLOW = {"jax": ("export", "finetune", "evaluate"), "torch": ("export", "finetune", "evaluate")}
EXPORT_FORMATS = {"tensorflow": ("onnx", "litert", "saved_model"), "jax": ("saved_model",), "torch": ("openvino",)}
# keras-vit's own messages for the user: the only stderr lines expected.
USER_LINES = ("keras-vit download: ", "keras-vit inspect: no --weights")

DRIVER = """
import json, sys
from keras_vit_cli import main

def run(argv):
    try:
        code = main(argv)
    except SystemExit as exit:
        code = exit.code
    return [" ".join(argv) if "--help" in argv else argv[0], code, "tensorflow" in sys.modules]

print("RESULTS " + json.dumps([run(argv) for argv in json.loads(sys.argv[1])]))
"""


def _folder(root):
    from PIL import Image

    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        os.makedirs(root / name)
        for index in range(5):
            Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(root / name / f"{index}.png")
    return str(root)


def _commands(tmp_path, tiny):
    image = os.path.join(REPO_ROOT, "keras_vit", "resources", "sample_image.jpg")
    folder = _folder(tmp_path / "images")
    train = ["--data", folder, "--image-size", "8", "--batch-size", "4", "--steps", "2", "--epochs", "2"]
    commands = [
        ["--help"],
        ["finetune", "--help"],
        ["variants"],
        ["demo", "--model", "Ti/16", "--image-size", "32", "--batch-size", "1"],
        ["inspect", image, "--model", "Ti/16", "--weights", "none", "--image-size", "32", "--out", str(tmp_path / "i")],
        ["download", "ViTTi16", "--weights", "imagenet"],  # offline: the one-line error path
        ["predict", image, "--model", tiny],
        ["convert", tiny, str(tmp_path / "tiny.safetensors"), "--to", "timm"],
    ]
    for format in EXPORT_FORMATS[BACKEND]:
        int8 = ["--int8"] if format == "onnx" else []  # ONNX Runtime's quantizer logs advice to the root logger
        commands.append(["export", tiny, str(tmp_path / f"artefact_{format}"), "--format", format, *int8])
    if BACKEND == "torch":  # rebuilt in float32 through Keras's serializer, which imports TensorFlow
        commands.append(["export", f"{tiny[:-6]}_mixed.keras", str(tmp_path / "mixed"), "--format", "openvino"])
    commands.append(["finetune", *train, "--verbose", "0", "--out", str(tmp_path / "run")])
    few_shot = ["--shots", "1", "--seeds", "1", "--k", "1", "--batch-size", "4", "--verbose", "0"]
    commands.append(["evaluate", tiny, "--data", folder, *few_shot, "--out", str(tmp_path / "evaluated")])
    return commands


def _quiet_env(**extra):
    return user_environment(**{"PYTHONPATH": REPO_ROOT, "KERAS_BACKEND": BACKEND, **extra})


# One process per backend (`keras-vit launch` is run by tests/test_multihost.py).
def test_every_command_is_quiet_at_the_default_verbosity(tmp_path):
    import keras

    import keras_vit

    # Saved here: Keras's serializer imports TensorFlow on every backend, which the commands' process must not.
    tiny = str(tmp_path / "tiny.keras")
    for policy, path in (("float32", tiny), ("mixed_bfloat16", f"{tiny[:-6]}_mixed.keras")):
        keras.config.set_dtype_policy(policy)
        keras_vit.VisionTransformer(
            patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(16, 16, 3), classes=3
        ).save(path)
        keras.config.set_dtype_policy("float32")  # the suite's policy (tests/conftest.py restores it after a failure)
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(_commands(tmp_path, tiny))],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_quiet_env(KERAS_VIT_OFFLINE="1", KERAS_VIT_CACHE=str(tmp_path / "cache"), HF_HUB_CACHE=str(tmp_path)),
        timeout=900,
    )
    assert "RESULTS " in result.stdout, result.stderr[-3000:]
    results = json.loads(result.stdout.split("RESULTS ", 1)[1])
    # Offline, the download is the one failing command, with a one-line error.
    assert [code for _, code, _ in results] == [1 if name == "download" else 0 for name, _, _ in results], results
    assert not FRAMEWORK_NOISE.findall(result.stderr), result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2 and all(line.startswith(USER_LINES) for line in lines), lines
    assert len(os.listdir(tmp_path / "i")) == 5  # `inspect --weights none`: a random model's five figures
    if BACKEND != "tensorflow":  # no TensorFlow import before the first command that needs it
        first = next(index for index, (name, _, _) in enumerate(results) if name in NEEDS_TENSORFLOW[BACKEND])
        assert [name for name, _, tensorflow in results[:first] if tensorflow] == [], results
        assert {"finetune --help", "demo", "inspect", "predict", "convert"} <= {name for name, _, _ in results[:first]}


# Two bare Python processes with a stub `tensorflow` package: no real framework.
@pytest.mark.skipif(BACKEND != "tensorflow", reason="no framework involved: one run is enough")
@pytest.mark.parametrize("verbose", ["", "1"])
def test_keras_vit_verbose_brings_the_framework_logs_back(tmp_path, verbose):
    # A stand-in for TensorFlow's import: native output on fd 2, a Python-logging warning, a FutureWarning.
    os.makedirs(tmp_path / "tensorflow")
    (tmp_path / "tensorflow" / "__init__.py").write_text(
        "import os, logging, warnings\n"
        "os.write(2, b'I0000 00:00 native noise\\n')\n"
        "logging.getLogger('tensorflow').warning('python noise')\n"
        "warnings.warn('future noise', FutureWarning)\n"
    )
    code = (
        "import logging, os, warnings\n"
        "from keras_vit_cli import quiet\n"
        "quiet.install(tensorflow=True)\n"
        "logging.basicConfig()\n"
        "import tensorflow\n"
        "warnings.warn('a warning of the program itself')\n"
        "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))\n"
    )
    env = _quiet_env(KERAS_VIT_VERBOSE=verbose, PYTHONPATH=os.pathsep.join([str(tmp_path), REPO_ROOT]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "a warning of the program itself" in result.stderr  # warnings meant for the user always show
    shown = [noise for noise in ("native noise", "python noise", "future noise") if noise in result.stderr]
    if verbose:
        assert shown == ["native noise", "python noise", "future noise"] and result.stdout.strip() == "None"
    else:
        assert shown == [] and result.stdout.strip() == "3"


PIPELINE_DRIVER = """
import logging
import numpy as np
import tensorflow as tf
from keras_vit.training import data

records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("tensorflow").addHandler(handler)
source, _ = data.from_arrays(np.zeros((4, 8, 8, 3), "uint8"), np.array([0, 1, 0, 1]), num_classes=2)
for pipeline in (data.eval_pipeline(source, image_size=8, batch_size=2),
                 data.train_pipeline(source, image_size=8, batch_size=2, num_classes=2)):
    for _ in pipeline:
        pass
print([message.splitlines()[0] for message in records if "AutoGraph" in message])
"""


@pytest.mark.skipif(BACKEND != "tensorflow", reason="the pipelines are TensorFlow's on every backend: one is enough")
def test_the_pipelines_trace_without_autograph_warnings():
    # A library user's own script has no quiet layer: a function tf.data traces must not make AutoGraph warn
    # ("could not transform <function _gcd_import>": an import run inside a traced function did).
    result = subprocess.run(
        [sys.executable, "-c", PIPELINE_DRIVER],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        env=user_environment(KERAS_BACKEND=BACKEND),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
