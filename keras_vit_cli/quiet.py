"""Quiet frameworks for programs: `keras-vit`, `make run`, the examples and the notebook.

TensorFlow's import prints from native code (absl's "All log messages before
absl::InitializeLog()" line, CUDA probes such as `cudart_stub.cc`, oneDNN and
CPU-feature notes) whatever `TF_CPP_MIN_LOG_LEVEL` says, and its later native
logs obey that variable only if it is set before the import. Export tools
(tf2onnx, the LiteRT converter) log through Python's `logging` and `absl`, and
dependencies emit deprecation and future warnings a user can do nothing about.

`install()`, called first thing (before Keras is imported), turns all of
that off: it sets `TF_CPP_MIN_LOG_LEVEL=3` (unless already set), raises the
framework loggers to ERROR, drops the advice some packages log to the root
logger, ignores deprecation and future warnings from other packages, and
imports TensorFlow with file descriptor 2 sent to /dev/null when the program
will use it (the Keras backend is TensorFlow, or `tensorflow=True`). Python
exceptions, keras_vit's own messages and warnings, and the warnings of code
run as `__main__` (a script, a notebook cell) still show.

`KERAS_VIT_VERBOSE=1` is the one switch that brings every framework log
back: `install()` then changes nothing.

This module imports nothing heavy, so a script can call it before `import keras`:

    from keras_vit_cli import quiet

    quiet.install(tensorflow=True)  # the script uses tf.data on every backend
    import keras  # imported quietly from here on
"""

import contextlib
import json
import logging
import os
import sys
import warnings

VERBOSE_ENV = "KERAS_VIT_VERBOSE"
# Loggers of the frameworks and export tools, raised to ERROR.
FRAMEWORK_LOGGERS = ("tensorflow", "absl", "tf2onnx", "onnx", "jax", "h5py", "openvino", "etils")
# Packages that log advice to the root logger (`logging.warning(...)`), dropped below ERROR.
ROOT_LOGGING_PACKAGES = ("onnxruntime", "tensorflow", "tf2onnx", "onnx", "openvino", "absl")
# Warnings from modules other than these are third-party ones.
OWN_MODULES = r"(keras_vit|keras_vit_cli|benchmarks|examples|__main__)(\.|$)"
THIRD_PARTY = r"(?!" + OWN_MODULES + ")"


class _NoThirdPartyRootRecords(logging.Filter):
    """Drops records that framework code logs straight to the root logger below ERROR (onnxruntime's advice)."""

    def filter(self, record):
        if record.levelno >= logging.ERROR:
            return True
        path = record.pathname.replace(os.sep, "/")
        return not any(f"/{package}/" in path for package in ROOT_LOGGING_PACKAGES)


def verbose():
    """Whether `KERAS_VIT_VERBOSE` asks for the framework logs (any value but empty or 0)."""
    return os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0")


def keras_backend():
    """The backend Keras will load, read as Keras reads it (`KERAS_BACKEND`, then `keras.json`), without Keras."""
    if "KERAS_BACKEND" in os.environ:
        return os.environ["KERAS_BACKEND"]
    keras_home = os.environ.get("KERAS_HOME", os.path.join(os.path.expanduser("~"), ".keras"))
    try:
        with open(os.path.join(keras_home, "keras.json")) as file:
            return json.load(file).get("backend", "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"


@contextlib.contextmanager
def native_stderr_silenced():
    """Sends what native code writes to file descriptor 2 to /dev/null for the duration of the block."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real stderr (an embedded interpreter): nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def import_tensorflow():
    """Imports TensorFlow (if installed) with its native start-up lines sent to /dev/null (not if verbose)."""
    if verbose() or "tensorflow" in sys.modules:
        return
    with native_stderr_silenced():
        try:
            import tensorflow  # noqa: F401
        except ImportError:
            pass  # the command that needs it says which extra to install


def install(tensorflow=None):
    """Silences framework logs and third-party warnings in this process (see the module docstring).

    Call it before Keras or TensorFlow is imported (a package imported
    earlier has printed already); calling it again does nothing more.
    Subprocesses inherit `TF_CPP_MIN_LOG_LEVEL`, not the rest: a program
    that starts Python children calls `install()` in each.

    Args:
        tensorflow: bool, import TensorFlow now, quietly: `True` where the
            program uses it (tf.data) on JAX or PyTorch too, `False` to
            leave it to `import_tensorflow()`. Defaults to whether the Keras
            backend is TensorFlow.

    Returns:
        False with `KERAS_VIT_VERBOSE` set (nothing changed), else True.
    """
    if verbose():
        return False
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in FRAMEWORK_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    root = logging.getLogger()
    if not any(isinstance(existing, _NoThirdPartyRootRecords) for existing in root.filters):
        root.addFilter(_NoThirdPartyRootRecords())
    for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category, module=THIRD_PARTY)
    if tensorflow or (tensorflow is None and keras_backend() == "tensorflow"):
        import_tensorflow()
    return True
