"""No framework logs for `keras-vit`, the examples and the benchmarks (`KERAS_VIT_VERBOSE=1`: all of them).

Call `quiet.install()` before Keras is imported.
"""

import contextlib
import json
import logging
import os
import sys
import warnings

FRAMEWORK_LOGGERS = ("tensorflow", "absl", "tf2onnx", "onnx", "jax", "h5py", "openvino", "etils")
# Packages that log advice straight to the root logger (onnxruntime's quantizer).
ROOT_LOGGING_PACKAGES = ("onnxruntime", "tensorflow", "tf2onnx", "onnx", "openvino", "absl")
THIRD_PARTY = r"(?!(keras_vit|keras_vit_cli|benchmarks|examples|__main__)(\.|$))"


def _not_third_party_advice(record):
    path = record.pathname.replace(os.sep, "/")
    return record.levelno >= logging.ERROR or not any(f"/{name}/" in path for name in ROOT_LOGGING_PACKAGES)


def verbose():
    """Whether `KERAS_VIT_VERBOSE` asks for the framework logs (any value but empty or 0)."""
    return os.environ.get("KERAS_VIT_VERBOSE", "").strip() not in ("", "0")


def keras_backend():
    """The backend Keras will load (`KERAS_BACKEND`, else `keras.json`), read without importing Keras."""
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
    """Sends what native code writes to file descriptor 2 to /dev/null inside the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def import_tensorflow():
    """Imports TensorFlow (if installed): its native start-up lines ignore `TF_CPP_MIN_LOG_LEVEL`."""
    if verbose() or "tensorflow" in sys.modules:
        return
    # Not installed: the command that needs it names the extra to install.
    with native_stderr_silenced(), contextlib.suppress(ImportError):
        import tensorflow  # noqa: F401


def install(tensorflow=None):
    """Silences framework logs and third-party warnings; imports TensorFlow now if `tensorflow` (default: if it is
    the Keras backend). Returns False, changing nothing, when `KERAS_VIT_VERBOSE` is set."""
    if verbose():
        return False
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in FRAMEWORK_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    root = logging.getLogger()
    if _not_third_party_advice not in root.filters:
        root.addFilter(_not_third_party_advice)
    for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category, module=THIRD_PARTY)
    if tensorflow or (tensorflow is None and keras_backend() == "tensorflow"):
        import_tensorflow()
    return True
