"""The same weights give the same logits on TensorFlow, JAX and PyTorch."""

import numpy as np
import pytest

import keras_vit
from tests.helpers import BACKEND, predict_in_fresh_process, random_inputs, randomize_weights, to_numpy

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


@pytest.mark.slow
@pytest.mark.cross_backend
@pytest.mark.skipif(BACKEND != "tensorflow", reason="run once, from the tensorflow run, against the other two")
def test_same_weights_same_logits_on_every_backend(tmp_path):
    model = keras_vit.VisionTransformer(**CONFIG)
    randomize_weights(model)
    images = random_inputs((3, 32, 24, 3))
    expected = to_numpy(model(images))
    assert np.abs(expected).max() > 1e-2  # far from zero: the comparison means something
    model.save(tmp_path / "tiny.keras")
    for backend in ("jax", "torch"):
        (logits,) = predict_in_fresh_process(str(tmp_path / "tiny.keras"), images, str(tmp_path), backend)
        assert np.abs(logits - expected).max() <= 1e-4, backend
