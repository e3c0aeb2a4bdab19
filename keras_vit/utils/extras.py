"""Optional dependencies: which extra installs each, and one error that says so.

The extras are those of `pyproject.toml` (`[project.optional-dependencies]`,
the source of truth; tests/test_extras.py checks that this table agrees with
it). A missing one raises `MissingDependencyError`, an `ImportError` whose
message is one line naming the extra:

    keras-vit finetune: the digits dataset needs scikit-learn (module sklearn), which is not installed:
    pip install "keras-vision-transformer[data]"

Example:

>>> install_hint("sklearn")
'pip install "keras-vision-transformer[data]"'
>>> require("math").sqrt(4.0)
2.0
"""

import importlib
import importlib.util
import sys

DISTRIBUTION = "keras-vision-transformer"
# module (the import name) -> (distribution on PyPI, the extra that installs it).
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


def install_hint(module, extra=None):
    """The `pip install` line of the extra that installs `module` (or of `extra`, where the use decides)."""
    extra = extra or MODULES[module.split(".")[0]][1]
    return f'pip install "{DISTRIBUTION}[{extra}]"'


def missing(module):
    """Whether `module` cannot be imported (looked up, not imported; a `None` entry in `sys.modules` is missing)."""
    top = module.split(".")[0]
    if top in sys.modules:
        return sys.modules[top] is None
    try:
        return importlib.util.find_spec(top) is None
    except (ImportError, ValueError):
        return True


def error(module, needed_for, extra=None):
    """The `MissingDependencyError` for `module`, which `needed_for` (e.g. "the digits dataset") needs."""
    top = module.split(".")[0]
    distribution = MODULES[top][0] if top in MODULES else top
    named = distribution if distribution.replace("-", "_").lower() == top.lower() else f"{distribution} (module {top})"
    return MissingDependencyError(f"{needed_for} needs {named}, which is not installed: {install_hint(top, extra)}")


def check(*modules, needed_for="this command", extra=None):
    """Raises `MissingDependencyError` for the first of `modules` that is not installed, importing none of them.

    For a job that needs several optional packages: it fails before the
    work starts, not after an hour of training when it comes to plotting.
    """
    for module in modules:
        if missing(module):
            raise error(module, needed_for, extra)


def require(module, needed_for="this command", extra=None):
    """Imports `module`, or raises `MissingDependencyError` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as caught:
        if module.split(".")[0] not in MODULES and not isinstance(caught, ModuleNotFoundError):
            raise
        raise error(module, needed_for, extra) from caught


def from_import_error(caught):
    """The `MissingDependencyError` for an `ImportError` of an optional module, else None.

    For the command line's last line of defence: a missing optional package
    that no `require` or `check` caught still ends as one line.
    """
    if isinstance(caught, MissingDependencyError):
        return caught
    name = getattr(caught, "name", None) or ""
    top = name.split(".")[0]
    if isinstance(caught, ModuleNotFoundError) and top in MODULES:
        return error(top, "this command")
    return None
