"""Shared fixtures: a fixed seed and the float32 policy restored for every test; fast XLA compiles; the run's own
compile caches."""

import gc
import os
import shutil
import tempfile

import xla_settings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# XLA compiles every program the tests run the fast way (tests/xla_settings.py): on the tiny models here
# compiling, not running, is the cost (JAX compiles each eager op and every jitted step; TensorFlow its
# jit_compile=True steps). Set before any framework loads; subprocesses inherit it. Results differ from a user's
# default settings in the last bits only: the bit-exact check of outputs recorded by an earlier commit
# (test_fixtures.py) reads JAX outputs recorded at these settings.
os.environ["XLA_FLAGS"] = xla_settings.with_fast_compile(os.environ.get("XLA_FLAGS", ""))

# One folder of compile caches for the whole run, empty at its start: JAX's persistent compilation cache and
# TorchInductor's (compiled kernels and graphs). Made by the first process that loads this file (the xdist
# controller, or a plain pytest), inherited by the rest, removed at the end by its maker. A user's caches are never
# read or written:
# - JAX: the two xdist workers and every interpreter the tests start (the reviving interpreter, the two-process
#   runs, the CLI checks) compile many of the same small programs, and reading one back costs a third of compiling
#   it.
# - TorchInductor keeps its kernels in /tmp/torchinductor_<user> by default, across runs: a machine that ran the
#   suite before compiles the torch.compile test in 64-75 s, a fresh CI machine in 80-120 s. An empty cache each
#   run makes every run pay what CI pays, so the budget measured here is the budget CI meets.
_OWN_COMPILE_CACHES = "KERAS_VIT_TESTS_COMPILE_CACHES" not in os.environ
if _OWN_COMPILE_CACHES:
    os.environ["KERAS_VIT_TESTS_COMPILE_CACHES"] = tempfile.mkdtemp(prefix="keras-vit-tests-compile-caches-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(os.environ["KERAS_VIT_TESTS_COMPILE_CACHES"], "jax")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.environ["KERAS_VIT_TESTS_COMPILE_CACHES"], "inductor")
    for cache in (os.environ["JAX_COMPILATION_CACHE_DIR"], os.environ["TORCHINDUCTOR_CACHE_DIR"]):
        os.mkdir(cache)
    # Every program, however quick to compile: most here compile in tens of milliseconds.
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
    # Without its full garbage collection (free_memory): with a framework loaded that pass walks ~0.5 million
    # objects, 0.1-0.2 s of CPU after every test; Python's own collector still frees what a test left behind.
    keras.backend.clear_session(free_memory=False)


def pytest_configure(config):
    # The per-test time limit (tests/budget.py); under xdist the controller sees every report, and each worker
    # adds to its reports how long the test's threads waited for a CPU.
    from budget import ThreadClock, from_environment

    config.pluginmanager.register(ThreadClock(), "keras_vit_budget_thread_clock")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(from_environment(keras.backend.backend()), "keras_vit_budget")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    # The named end-to-end tests (tests/budget.py SLOW_TESTS) run first, each with its parameters together (they
    # share module fixtures). pytest-xdist hands each worker runs of consecutive tests and queues the last ones
    # ahead, so a minute-long test late in the alphabet left the other worker idle at the end: ~35 s of a
    # 393 s tensorflow run, simulated from a run's own durations (359 s with these first).
    from budget import SLOW_TESTS

    items.sort(key=lambda item: item.nodeid.split("[")[0] not in SLOW_TESTS)


def pytest_unconfigure(config):
    if _OWN_COMPILE_CACHES:
        shutil.rmtree(os.environ["KERAS_VIT_TESTS_COMPILE_CACHES"], ignore_errors=True)


def pytest_collection_finish(session):
    # A full garbage collection walks every tracked object: with TensorFlow imported (~400,000 of them) each takes
    # ~0.4 s of CPU, and Keras runs one in every clear_session (after each test, above) and after each kernel that
    # Dense.quantize deletes (0.4 s a layer). What the imports and the collection made (modules, classes, test
    # functions) is never garbage: frozen, later collections skip it, and what the tests create is collected as before.
    gc.collect()
    gc.freeze()
