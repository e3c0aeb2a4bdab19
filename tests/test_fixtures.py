"""`.keras` files saved by an earlier keras_vit load and predict exactly as they did then.

`tests/fixtures/` holds a plain ViT, a hybrid, an int8-quantized ViT and the
output of `keras-vit finetune`, saved before the package moved into room
folders (the commit is in `fixtures.json`), and the outputs each gave on each
backend. Saved configs name layers by their registered names
(`keras_vit>ClassName`), never by module path, so moving modules must not
change what a user's saved model does.
"""

import json
import pathlib

import keras
import numpy as np
import pytest

import keras_vit  # noqa: F401 (registers the layers)

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
NAMES = ("plain_vit", "hybrid_vit", "quantized_vit", "finetune")


def fixture_inputs(name):
    # The same inputs as tests/fixtures/make_fixtures.py, which wrote the expected outputs.
    shape = {"hybrid_vit": (2, 16, 16, 3), "finetune": (2, 16, 16, 3)}.get(name, (2, 8, 8, 3))
    return np.random.default_rng(7).uniform(0, 255, size=shape).astype("float32")


def test_fixtures_were_saved_before_the_move():
    saved = json.loads((FIXTURES / "fixtures.json").read_text())
    assert saved["saved_by_commit"].startswith("6c2b48b")


@pytest.mark.parametrize("name", NAMES)
def test_saved_model_loads_and_predicts_bit_identically(name):
    expected = np.load(FIXTURES / f"outputs-{keras.backend.backend()}.npz")[name]
    model = keras.saving.load_model(FIXTURES / f"{name}.keras", safe_mode=True)
    outputs = keras.ops.convert_to_numpy(model(fixture_inputs(name), training=False))
    np.testing.assert_array_equal(outputs, expected)
