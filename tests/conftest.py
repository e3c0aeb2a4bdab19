"""Shared fixtures: a fixed seed and the float32 policy restored for every test; fast XLA compiles; the run's own
folder for compile caches and temporary files; the tests that run alone."""

import gc
import os
import shutil
import tempfile

import alone
import xla_settings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# XLA compiles every program the tests run the fast way (tests/xla_settings.py): on the tiny models here
# compiling, not running, is the cost (JAX compiles each eager op and every jitted step; TensorFlow its
# jit_compile=True steps). Set before any framework loads; subprocesses inherit it. Results differ from a user's
# default settings in the last bits only: the bit-exact check of outputs recorded by an earlier commit
# (test_fixtures.py) reads JAX outputs recorded at these settings.
os.environ["XLA_FLAGS"] = xla_settings.with_fast_compile(os.environ.get("XLA_FLAGS", ""))

# One folder for the whole run, empty at its start: the compile caches, every temporary file, the locks of
# tests/alone.py. Made by the first process that loads this file (the xdist controller, or a plain pytest), inherited
# by the rest, removed at the end by its maker. A user's caches are never read or written:
# - JAX's persistent compilation cache: the two xdist workers and every interpreter the tests start (the reviving
#   interpreter, the two-process runs, the CLI checks) compile many of the same small programs, and reading one back
#   costs a third of compiling it.
# - TorchInductor keeps its kernels in /tmp/torchinductor_<user> by default, across runs: a machine that ran the
#   suite before compiles the torch.compile test in 64-75 s, a fresh CI machine in 80-120 s. Its precompiled C++
#   header (150 MB, 9-11 s of g++ per set of compiler flags) it keeps under the temporary folder whatever
#   TORCHINDUCTOR_CACHE_DIR says, hence TMPDIR too. Empty caches each run make every run pay what CI pays, so the
#   budget measured here is the budget CI meets.
# - TMPDIR: pytest's tmp_path folders and every test's temporary files go with the run (pass --basetemp to keep a
#   failed test's files).
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
    # The locks of `@pytest.mark.alone` tests: one folder per run, made by the process that hands out the tests (a
    # pytest run that a test starts makes its own), read by its xdist workers.
    if not hasattr(config, "workerinput"):
        os.environ[alone.LOCKS_VARIABLE] = tempfile.mkdtemp(prefix="alone-locks-")
    config.pluginmanager.register(alone.Alone(os.environ[alone.LOCKS_VARIABLE]), "keras_vit_alone")

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
    # 393 s tensorflow run, simulated from a run's own durations (359 s with these first). Except the tests that
    # run alone (tests/alone.py), last: by then the other worker has little left to finish before it waits.
    from budget import SLOW_TESTS

    items.sort(key=lambda item: (alone.runs_alone(item), item.nodeid.split("[")[0] not in SLOW_TESTS))


def pytest_unconfigure(config):
    if _OWN_RUN_FOLDER:
        shutil.rmtree(os.environ["KERAS_VIT_TESTS_RUN_FOLDER"], ignore_errors=True)


def pytest_collection_finish(session):
    # A full garbage collection walks every tracked object: with TensorFlow imported (~400,000 of them) each takes
    # ~0.4 s of CPU, and Keras runs one in every clear_session (after each test, above) and after each kernel that
    # Dense.quantize deletes (0.4 s a layer). What the imports and the collection made (modules, classes, test
    # functions) is never garbage: frozen, later collections skip it, and what the tests create is collected as before.
    gc.collect()
    gc.freeze()
