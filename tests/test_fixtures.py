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
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_vit  # noqa: F401 (registers the layers)
from tests.xla_settings import without_fast_compile

REPO = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
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


# The outputs were recorded at a user's default compiler settings. On JAX every eager op is an XLA program, and the
# suite compiles without XLA's optimizing passes (conftest.py), which moves the last bits: the JAX outputs come from
# one interpreter at the default settings (~10 s). TensorFlow's and PyTorch's eager ops are not XLA programs.
USER_SETTINGS_CODE = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import tests.test_fixtures as fixtures
np.savez(sys.argv[2], **{name: fixtures.predict(name) for name in fixtures.NAMES})
"""


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    if keras.backend.backend() != "jax":
        return {name: predict(name) for name in NAMES}
    path = tmp_path_factory.mktemp("fixtures") / "outputs.npz"
    env = dict(os.environ, XLA_FLAGS=without_fast_compile(os.environ.get("XLA_FLAGS", "")), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", USER_SETTINGS_CODE, str(REPO), str(path)], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-4000:]
    with np.load(path) as data:
        return dict(data)


@pytest.mark.parametrize("name", NAMES)
def test_saved_model_loads_and_predicts_bit_identically(name, outputs):
    expected = np.load(FIXTURES / f"outputs-{keras.backend.backend()}.npz")[name]
    np.testing.assert_array_equal(outputs[name], expected)
