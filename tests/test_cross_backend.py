"""The same weights give the same logits on TensorFlow, JAX and PyTorch."""

import os
import subprocess
import sys

import numpy as np
import pytest

import keras_vit
from tests.helpers import BACKEND, REPO_ROOT, random_inputs, randomize_weights, to_numpy

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
PREDICT = """
import sys, numpy as np, keras_vit
model = keras_vit.VisionTransformer(**{config})
model.load_weights(sys.argv[1])
np.save(sys.argv[3], np.asarray(model.predict(np.load(sys.argv[2]), verbose=0)))
"""


@pytest.mark.slow
@pytest.mark.cross_backend
@pytest.mark.skipif(BACKEND != "tensorflow", reason="run once, from the tensorflow run, against the other two")
def test_same_weights_same_logits_on_every_backend(tmp_path):
    model = keras_vit.VisionTransformer(**CONFIG)
    randomize_weights(model)
    images = random_inputs((3, 32, 24, 3))
    expected = to_numpy(model(images))
    assert np.abs(expected).max() > 1e-2  # far from zero: the comparison means something
    model.save_weights(tmp_path / "tiny.weights.h5")
    np.save(tmp_path / "images.npy", images)
    for backend in ("jax", "torch"):
        environment = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
        arguments = [tmp_path / "tiny.weights.h5", tmp_path / "images.npy", tmp_path / f"{backend}.npy"]
        result = subprocess.run(
            [sys.executable, "-c", PREDICT.format(config=repr(CONFIG)), *map(str, arguments)],
            capture_output=True,
            text=True,
            env=environment,
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert np.abs(np.load(tmp_path / f"{backend}.npy") - expected).max() <= 1e-4, backend
