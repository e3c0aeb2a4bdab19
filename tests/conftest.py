"""Shared set-up: a fixed seed and the float32 policy restored for every test; fast XLA compiles; one folder of the
run's own for compile caches and temporary files."""

import gc
import os
import shutil
import tempfile

import xla_settings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# On the tiny test models compiling, not running, is the cost: XLA's fast settings (tests/xla_settings.py), set
# before any framework loads and inherited by subprocesses.
os.environ["XLA_FLAGS"] = xla_settings.with_fast_compile(os.environ.get("XLA_FLAGS", ""))

# One folder per run, made by the first process that loads this file (the xdist controller, or a plain pytest),
# inherited by the workers and every interpreter the tests start, removed at the end; a user's caches are never
# touched. JAX's compilation cache there is shared by all those processes (reading a program back is cheaper than
# compiling it); TorchInductor's cache and TMPDIR (where it keeps its precompiled header, and pytest its tmp_path)
# start empty, as on a fresh CI machine.
_OWN_RUN_FOLDER = "KERAS_VIT_TESTS_RUN_FOLDER" not in os.environ
if _OWN_RUN_FOLDER:
    _run_folder = tempfile.mkdtemp(prefix="keras-vit-tests-")
    os.environ["KERAS_VIT_TESTS_RUN_FOLDER"] = _run_folder
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(_run_folder, "jax")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_run_folder, "inductor")
    os.environ["TMPDIR"] = os.path.join(_run_folder, "tmp")
    for folder in ("JAX_COMPILATION_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TMPDIR"):
        os.mkdir(os.environ[folder])
    # This process read TMPDIR already (mkdtemp above); the processes it starts read it afresh.
    tempfile.tempdir = os.environ["TMPDIR"]
    # Cache every program: most here compile in tens of milliseconds.
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"

import keras  # noqa: E402
import pytest  # noqa: E402

from keras_vit.utils import keras_compat  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_keras_state():
    # Keras's own set_random_seed imports TensorFlow on every backend (seconds per test process on jax/torch).
    keras_compat.set_random_seed(0)
    yield
    keras.config.set_dtype_policy("float32")
    # free_memory=False: its full garbage collection costs 0.1-0.2 s after every test; Python's collector suffices.
    keras.backend.clear_session(free_memory=False)


def pytest_collection_finish(session):
    # Keras runs full collections (clear_session, Dense.quantize); frozen, they skip the ~400,000 objects the imports
    # and the collection made (0.4 s of CPU each with TensorFlow loaded).
    gc.collect()
    gc.freeze()


def pytest_unconfigure(config):
    if _OWN_RUN_FOLDER:
        shutil.rmtree(os.environ["KERAS_VIT_TESTS_RUN_FOLDER"], ignore_errors=True)
