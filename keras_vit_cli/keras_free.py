"""keras_vit's pure-Python modules, imported without Keras.

`import keras_vit` imports Keras, and so its backend (seconds of start-up):
that is what registers every layer, so that a saved model revives after it.
The variant table, the analytic counts and the argument checks need none of
it. `load` imports such modules under their real names without running the
package `__init__` files above them (stand-ins with the real folders take
their place while it runs), then leaves `sys.modules` as it found it.

Example:

>>> (flops,) = load("keras_vit.models.flops")
>>> flops.parameter_count({"patch_size": 16, "hidden_dim": 192, "num_layers": 12, "mlp_dim": 768})
5717416
"""

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types

PACKAGE = "keras_vit"


def _stand_in(name, folder):
    module = types.ModuleType(name)
    module.__path__ = [folder]
    module.__package__ = name
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__spec__.submodule_search_locations = [folder]
    return module


def load(*names, keep=False):
    """Imports the modules `names` (dotted `keras_vit.…` paths) without Keras; returns them in order.

    If `keras_vit` is imported already, its modules are returned. A module
    that imports Keras (directly or not) still does: this only skips the
    package `__init__` files.

    Args:
        *names: the modules.
        keep: bool, leave the modules `names` themselves registered in
            `sys.modules` (not the stand-ins of their packages, nor what
            they imported), so that the library, once imported, uses these
            very module objects (declarations the command line read first).
    """
    if PACKAGE in sys.modules or (keep and all(name in sys.modules for name in names)):
        return tuple(importlib.import_module(name) for name in names)
    root = list(importlib.util.find_spec(PACKAGE).submodule_search_locations)[0]
    before = set(sys.modules)
    try:
        sys.modules[PACKAGE] = _stand_in(PACKAGE, root)
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.is_dir() and os.path.exists(os.path.join(entry.path, "__init__.py")):
                    sys.modules[f"{PACKAGE}.{entry.name}"] = _stand_in(f"{PACKAGE}.{entry.name}", entry.path)
        return tuple(importlib.import_module(name) for name in names)
    finally:
        for name in set(sys.modules) - before - (set(names) if keep else set()):
            del sys.modules[name]
