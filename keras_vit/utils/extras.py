"""Optional dependencies: which extra of `pyproject.toml` installs each, and the one-line error that says so.

>>> print(_error("sklearn", "the digits dataset"))
the digits dataset needs scikit-learn (module sklearn), which is not installed: pip install "...[data]"
"""

import importlib
import importlib.util
import sys

# import name -> (distribution, the extra that installs it), checked against pyproject.toml by tests/test_extras.py.
MODULES = {
    "tensorflow": ("tensorflow", "tensorflow"),
    "jax": ("jax", "jax"),
    "torch": ("torch", "torch"),
    "huggingface_hub": ("huggingface-hub", "weights"),
    "safetensors": ("safetensors", "weights"),
    "tensorflow_datasets": ("tensorflow-datasets", "data"),
    "importlib_resources": ("importlib_resources", "data"),
    "PIL": ("pillow", "data"),
    "sklearn": ("scikit-learn", "data"),
    "matplotlib": ("matplotlib", "inspect"),
    "tf2onnx": ("tf2onnx", "deploy"),
    "onnx": ("onnx", "deploy"),
    "onnxscript": ("onnxscript", "deploy"),
    "onnxruntime": ("onnxruntime", "deploy"),
    "openvino": ("openvino", "deploy"),
    "ai_edge_litert": ("ai-edge-litert", "deploy"),
}


class MissingDependencyError(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def _error(module, needed_for, extra=None):
    top = module.split(".")[0]
    distribution, default_extra = MODULES.get(top, (top, None))
    named = distribution if distribution.replace("-", "_").lower() == top.lower() else f"{distribution} (module {top})"
    hint = f'pip install "keras-vision-transformer[{extra or default_extra}]"'
    return MissingDependencyError(f"{needed_for} needs {named}, which is not installed: {hint}")


def _missing(module):
    # Looked up, not imported; a `None` entry in `sys.modules` is how Python marks a module unimportable.
    top = module.split(".")[0]
    if top in sys.modules:
        return sys.modules[top] is None
    try:
        return importlib.util.find_spec(top) is None
    except (ImportError, ValueError):
        return True


def check(*modules, needed_for="this command", extra=None):
    """Raises `MissingDependencyError` for the first of `modules` not installed, importing none (before any work)."""
    for module in modules:
        if _missing(module):
            raise _error(module, needed_for, extra)


def require(module, needed_for="this command", extra=None):
    """Imports `module`, or raises `MissingDependencyError` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as caught:
        if module.split(".")[0] not in MODULES and not isinstance(caught, ModuleNotFoundError):
            raise
        raise _error(module, needed_for, extra) from caught


def from_import_error(caught):
    """The `MissingDependencyError` for an `ImportError` of a known optional module, else None."""
    if isinstance(caught, MissingDependencyError):
        return caught
    top = (getattr(caught, "name", None) or "").split(".")[0]
    if isinstance(caught, ModuleNotFoundError) and top in MODULES:
        return _error(top, "this command")
    return None
