"""`.keras` files saved by an earlier keras_vit load and predict exactly as they did then.

`tests/fixtures/` holds a plain ViT, a hybrid, an int8-quantized ViT and the output of `keras-vit finetune`, saved as
`keras_vit.VisionTransformer`s (the commit is in `fixtures.json`), and the outputs each gave on each backend and CPU
class (the last bits depend on the CPU: `tests/cpu_class.py`). Saved configs name classes by their registered names
(`keras_vit>ClassName`), never by module path, so moving modules must not change what a user's saved model does.
"""

import json
import os
import pathlib
import platform

import keras
import numpy as np
import pytest

import keras_vit
from tests.compute_settings import FAST_COMPILE_FLAGS, TORCH_THREADS
from tests.cpu_class import cpu_class

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
NAMES = ("plain_vit", "hybrid_vit", "quantized_vit", "finetune")
# On a CPU class with no recording: float32 kernels of another instruction set moved these outputs (|values| up to
# ~0.4) by at most 6e-8 (an AVX2 recording read on AVX-512 BF16); a wrongly revived layer or weight moves them by
# orders of magnitude more.
OTHER_CPU_ATOL = 1e-6
SAVED = json.loads((FIXTURES / "fixtures.json").read_text())


def fixture_inputs(name):
    # The same inputs as tests/fixtures/make_fixtures.py, which wrote the expected outputs.
    shape = {"hybrid_vit": (2, 16, 16, 3), "finetune": (2, 16, 16, 3)}.get(name, (2, 8, 8, 3))
    return np.random.default_rng(7).uniform(0, 255, size=shape).astype("float32")


@pytest.fixture(scope="module")
def outputs():
    results = {}
    for name in NAMES:
        model = keras.saving.load_model(FIXTURES / f"{name}.keras", safe_mode=True)
        assert isinstance(keras_vit.models.find_vit(model), keras_vit.VisionTransformer)
        results[name] = keras.ops.convert_to_numpy(model(fixture_inputs(name), training=False))
    return results


def test_outputs_were_recorded_at_the_suites_compute_settings():
    # XLA's settings (every op on JAX) and torch's thread count move the last bits: the outputs were recorded, by the
    # commit that saved the models, at the suite's settings (conftest.py). Changing those settings means recording
    # them again (tests/fixtures/make_fixtures.py says how).
    assert SAVED["jax_xla_flags"] == list(FAST_COMPILE_FLAGS) and SAVED["torch_threads"] == TORCH_THREADS
    assert set(FAST_COMPILE_FLAGS) <= set(os.environ["XLA_FLAGS"].split())
    if keras.backend.backend() == "torch":
        assert {name: os.environ[name] for name in TORCH_THREADS} == TORCH_THREADS


def recorded_outputs(cpu):
    return FIXTURES / f"outputs-{keras.backend.backend()}-{cpu}.npz"


def assert_as_recorded(actual, name, cpu):
    """Bit for bit on a recorded CPU class with the recording's Keras; elsewhere (another instruction set, another
    Keras: 3.16's ops round a few last bits differently) within another instruction set's rounding."""
    if cpu in SAVED["outputs_recorded_on"] and keras.__version__ == SAVED["keras"]:
        np.testing.assert_array_equal(actual, np.load(recorded_outputs(cpu))[name])
        return
    for recorded_on in SAVED["outputs_recorded_on"]:
        expected = np.load(recorded_outputs(recorded_on))[name]
        np.testing.assert_allclose(actual, expected, rtol=0, atol=OTHER_CPU_ATOL, err_msg=recorded_on)


@pytest.mark.parametrize("name", NAMES)
def test_saved_model_loads_and_predicts_bit_identically(name, outputs):
    assert len(SAVED["saved_by_commit"]) == 40
    assert SAVED["outputs_recorded_on"] and all(recorded_outputs(cpu).is_file() for cpu in SAVED["outputs_recorded_on"])
    assert_as_recorded(outputs[name], name, cpu_class())


def test_an_unrecorded_cpu_class_allows_rounding_and_nothing_more(outputs):
    # This machine's outputs read as if from an unrecorded CPU: every recording (other classes' included) within the
    # tolerance; a change well below any wrongly revived weight's still fails.
    for name in NAMES:
        assert_as_recorded(outputs[name], name, "unrecorded-cpu")
        with pytest.raises(AssertionError):
            assert_as_recorded(outputs[name] + 10 * OTHER_CPU_ATOL, name, "unrecorded-cpu")


def test_cpu_class_names_the_vendor_and_the_widest_float_instruction_set(tmp_path):
    def classify(vendor, flags):
        (tmp_path / "cpuinfo").write_text(f"processor\t: 0\nvendor_id\t: {vendor}\nflags\t\t: {flags}\n")
        return cpu_class(tmp_path / "cpuinfo")

    assert classify("AuthenticAMD", "sse2 fma avx2") == "AuthenticAMD-avx2"
    assert classify("GenuineIntel", "fma avx2 avx512f avx512_bf16") == "GenuineIntel-avx512-bf16"
    assert classify("GenuineIntel", "fma avx2 avx512f avx512_bf16 amx_tile amx_bf16") == "GenuineIntel-amx"
    assert classify("AuthenticAMD", "fma avx2 avx512f") == "AuthenticAMD-avx512"
    assert classify("GenuineIntel", "sse2") == "GenuineIntel-baseline"
    assert cpu_class(tmp_path / "missing") == platform.machine()
