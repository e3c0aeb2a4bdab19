"""Quiet frameworks for programs: `keras-vit`, `make run`, the examples and the notebook.

TensorFlow logs from native code (absl's "All log messages before
absl::InitializeLog()" line, CUDA probes such as `cudart_stub.cc` and
`failed call to cuInit`, CPU-feature notes), and those lines obey
`TF_CPP_MIN_LOG_LEVEL` only when it is set before TensorFlow is imported; the
first of them print while TensorFlow's shared libraries load, whatever the
level. Export tools (tf2onnx, the LiteRT converter) log through Python's
`logging` and `absl`, and dependencies emit deprecation and future warnings
a user can do nothing about.

`install()`, called first thing (before Keras is imported), turns all of
that off: it sets `TF_CPP_MIN_LOG_LEVEL=3` (unless already set), sends the
native output of TensorFlow's import to /dev/null, raises the framework
loggers to ERROR and ignores deprecation and future warnings from other
packages. Python exceptions, keras_vit's own messages and warnings, and the
warnings of code run as `__main__` (a script, a notebook cell) still show.

`KERAS_VIT_VERBOSE=1` is the one switch that brings every framework log
back: `install()` then changes nothing.

This module imports nothing heavy (it lives in `keras_vit_cli`, which never
imports Keras at import time), so a script can call it before `import keras`:

    from keras_vit_cli import quiet

    quiet.install()
    import keras  # imported quietly from here on
"""

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import sys
import warnings

VERBOSE_ENV = "KERAS_VIT_VERBOSE"
# Loggers of the frameworks and export tools, raised to ERROR.
FRAMEWORK_LOGGERS = ("tensorflow", "absl", "tf2onnx", "onnx", "jax._src.xla_bridge", "h5py", "openvino", "etils")
# Packages that log advice to the root logger (`logging.warning(...)`), dropped below ERROR.
ROOT_LOGGING_PACKAGES = ("onnxruntime", "tensorflow", "tf2onnx", "onnx", "openvino", "absl")
# Packages whose import prints from native code (fd 2) before any log level applies.
NATIVE_NOISE = ("tensorflow",)
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


class _QuietLoader(importlib.abc.Loader):
    """Runs a module's real loader with fd 2 silenced, then hands the module its real loader back."""

    def __init__(self, loader, finder):
        self.loader = loader
        self.finder = finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        with native_stderr_silenced():
            self.loader.exec_module(module)
        module.__loader__ = module.__spec__.loader = self.loader
        self.finder.pending.discard(module.__name__)


class _QuietImports(importlib.abc.MetaPathFinder):
    """The import of each of `names` (whoever imports it: Keras, tf.data, an exporter) runs silenced.

    A lookup that does not import (`importlib.util.find_spec`, which the
    extras check uses) gets a spec too; only an actual import ends the watch.
    """

    def __init__(self, names):
        self.pending = set(names)
        self.looking = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.pending or self.looking:
            return None
        self.looking = True  # the real lookup below passes through here again
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.looking = False
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader, self)
        return spec


def install():
    """Silences framework logs and third-party warnings in this process (see the module docstring).

    Call it before Keras or TensorFlow is imported (a package imported
    earlier has printed already); calling it again does nothing more.
    Subprocesses inherit `TF_CPP_MIN_LOG_LEVEL`, not the rest: a program
    that starts Python children calls `install()` in each.

    Returns:
        False with `KERAS_VIT_VERBOSE` set (nothing changed), else True.
    """
    if verbose():
        return False
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    pending = [name for name in NATIVE_NOISE if name not in sys.modules]
    if pending and not any(isinstance(finder, _QuietImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietImports(pending))
    for name in FRAMEWORK_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    root = logging.getLogger()
    if not any(isinstance(existing, _NoThirdPartyRootRecords) for existing in root.filters):
        root.addFilter(_NoThirdPartyRootRecords())
    for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category, module=THIRD_PARTY)
    return True
