"""keras_vit's pure-Python modules, imported without the package `__init__` files (which import Keras).

>>> (flops,) = load("keras_vit.models.flops")
>>> flops.parameter_count({"patch_size": 16, "hidden_dim": 192, "num_layers": 12, "mlp_dim": 768})
5717416
"""

import importlib
import importlib.util
import os
import sys
import types


def _stand_in(name, folder):
    module = types.ModuleType(name)
    module.__path__ = [folder]
    return module


def load(*names, keep=False):
    """Imports the modules `names` (`keras_vit.…`) and returns them; then forgets the keras_vit modules it imported
    but, with `keep`, these ones (so that the library, once imported, uses these very module objects)."""
    if "keras_vit" in sys.modules or (keep and all(name in sys.modules for name in names)):
        return tuple(importlib.import_module(name) for name in names)
    root = importlib.util.find_spec("keras_vit").submodule_search_locations[0]
    before = set(sys.modules)
    try:
        sys.modules["keras_vit"] = _stand_in("keras_vit", root)
        for entry in os.scandir(root):
            if os.path.exists(os.path.join(entry.path, "__init__.py")):
                sys.modules[f"keras_vit.{entry.name}"] = _stand_in(f"keras_vit.{entry.name}", entry.path)
        return tuple(importlib.import_module(name) for name in names)
    finally:
        for name in set(sys.modules) - before - set(names if keep else ()):
            if name.split(".")[0] == "keras_vit":
                del sys.modules[name]
