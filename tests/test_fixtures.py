"""`.keras` files saved by an earlier keras_vit load and predict exactly as they did then.

`tests/fixtures/` holds a plain ViT, a hybrid, an int8-quantized ViT and the
output of `keras-vit finetune`, saved before the package moved into room
folders (the commit is in `fixtures.json`), and the outputs each gave on each
backend. Saved configs name layers by their registered names
(`keras_vit>ClassName`), never by module path, so moving modules must not
change what a user's saved model does.
"""

import json
import os
import pathlib

import keras
import numpy as np
import pytest

import keras_vit  # noqa: F401 (registers the layers)
from tests.xla_settings import FAST_COMPILE_FLAGS

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
NAMES = ("plain_vit", "hybrid_vit", "quantized_vit", "finetune")


def fixture_inputs(name):
    # The same inputs as tests/fixtures/make_fixtures.py, which wrote the expected outputs.
    shape = {"hybrid_vit": (2, 16, 16, 3), "finetune": (2, 16, 16, 3)}.get(name, (2, 8, 8, 3))
    return np.random.default_rng(7).uniform(0, 255, size=shape).astype("float32")


def test_fixtures_were_saved_before_the_move():
    saved = json.loads((FIXTURES / "fixtures.json").read_text())
    assert saved["saved_by_commit"].startswith("6c2b48b")


def predict(name):
    model = keras.saving.load_model(FIXTURES / f"{name}.keras", safe_mode=True)
    return keras.ops.convert_to_numpy(model(fixture_inputs(name), training=False))


@pytest.fixture(scope="module")
def outputs():
    return {name: predict(name) for name in NAMES}


def test_jax_outputs_were_recorded_at_the_suites_xla_settings():
    # On JAX every op is an XLA program, and XLA's settings move the last bits: the JAX outputs were recorded, by
    # the commit that saved the models, at the suite's settings (conftest.py). Changing those settings means
    # recording them again (tests/fixtures/make_fixtures.py says how).
    saved = json.loads((FIXTURES / "fixtures.json").read_text())
    assert saved["jax_xla_flags"] == list(FAST_COMPILE_FLAGS)
    assert set(FAST_COMPILE_FLAGS) <= set(os.environ["XLA_FLAGS"].split())


@pytest.mark.parametrize("name", NAMES)
def test_saved_model_loads_and_predicts_bit_identically(name, outputs):
    expected = np.load(FIXTURES / f"outputs-{keras.backend.backend()}.npz")[name]
    np.testing.assert_array_equal(outputs[name], expected)
