"""Shared set-up: a fixed seed and the float32 policy per test, the compute settings, one temporary folder per run."""

import gc
import os
import shutil
import tempfile

import compute_settings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Fast XLA compiles, one thread per torch process: before any framework loads, inherited by children.
compute_settings.apply(os.environ)

# One folder per run, made by the first process that loads this file and inherited by every process the tests start:
# a shared JAX compilation cache, TorchInductor's cache and TMPDIR empty as on a fresh CI machine, no user cache used.
OWN_RUN_FOLDER = "KERAS_VIT_TESTS_RUN_FOLDER" not in os.environ
if OWN_RUN_FOLDER:
    run_folder = tempfile.mkdtemp(prefix="keras-vit-tests-")
    os.environ["KERAS_VIT_TESTS_RUN_FOLDER"] = run_folder
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(run_folder, "jax")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(run_folder, "inductor")
    os.environ["TMPDIR"] = os.path.join(run_folder, "tmp")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # most programs here compile in milliseconds
    for variable in ("JAX_COMPILATION_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TMPDIR"):
        os.mkdir(os.environ[variable])
    tempfile.tempdir = os.environ["TMPDIR"]  # this process read TMPDIR already

import keras  # noqa: E402
import pytest  # noqa: E402

from keras_vit.utils import keras_compat  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_keras_state():
    keras_compat.set_random_seed(0)  # Keras's own imports TensorFlow on every backend: seconds per process
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session(free_memory=False)  # its full garbage collection costs 0.1-0.2 s per test


def pytest_collection_finish(session):
    # Keras runs full garbage collections; frozen, they skip the ~400,000 objects the imports and collection made.
    gc.collect()
    gc.freeze()


def pytest_unconfigure(config):
    if OWN_RUN_FOLDER:
        shutil.rmtree(os.environ["KERAS_VIT_TESTS_RUN_FOLDER"], ignore_errors=True)


def pytest_collection_modifyitems(items):
    # Long tests first: under xdist's worksteal scheduling a long test left for last ends a backend's run alone.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
