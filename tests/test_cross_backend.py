"""The same weights give the same logits on TensorFlow, JAX and PyTorch."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_vit
from tests.helpers import BACKEND, REPO_ROOT, random_inputs, randomize_weights, to_numpy

BACKENDS = ("tensorflow", "jax", "torch")
CONFIG = dict(
    patch_size=8,
    hidden_dim=32,
    num_layers=2,
    num_heads=4,
    mlp_dim=64,
    input_shape=(32, 24, 3),
    classes=7,
    classifier_activation=None,
    representation_size=16,
)

_SCRIPT = """
import sys, numpy as np, keras_vit
model = keras_vit.VisionTransformer(**{config})
model.load_weights(sys.argv[1])
np.save(sys.argv[3], np.asarray(model.predict(np.load(sys.argv[2]), verbose=0)))
"""


@pytest.mark.cross_backend
@pytest.mark.skipif(
    BACKEND != "tensorflow", reason="run once per suite, from the TensorFlow pass, against the other two"
)
def test_same_weights_same_logits_on_every_backend(tmp_path):
    model = keras_vit.VisionTransformer(**CONFIG)
    randomize_weights(model)
    images = random_inputs((3, 32, 24, 3))
    expected = to_numpy(model(images))
    weights_path, images_path = str(tmp_path / "tiny.weights.h5"), str(tmp_path / "images.npy")
    model.save_weights(weights_path)
    np.save(images_path, images)
    for backend in BACKENDS:
        if backend == BACKEND:
            continue
        out_path = str(tmp_path / f"{backend}.npy")
        env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
        result = subprocess.run(
            [sys.executable, "-c", _SCRIPT.format(config=repr(CONFIG)), weights_path, images_path, out_path],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        logits = np.load(out_path)
        assert np.abs(logits - expected).max() <= 1e-4, backend
        # Random weights give logits far from zero: the comparison means something.
        assert np.abs(expected).max() > 1e-2
    keras.backend.clear_session()
