"""Old public module paths that keep working after a module moved into a room folder.

`install(package, aliases)` lets `import keras_vit.data`,
`from keras_vit.files import atomic_file` and `keras_vit.data.load(...)` reach
the module's new home (`keras_vit.training.data`, ...). The alias and the real
path name the same module object, so state and monkeypatches are shared, and
nothing is imported until it is used: `import keras_vit` stays free of
TensorFlow.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target, deprecation):
        self.target = target
        self.deprecation = deprecation

    def create_module(self, spec):
        if self.deprecation:
            warnings.warn(self.deprecation, DeprecationWarning, stacklevel=2)
        # The real module itself goes into sys.modules under the alias.
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass  # already executed under its real name


class _AliasFinder(importlib.abc.MetaPathFinder):
    def __init__(self, package, aliases, deprecated):
        self.package = package
        self.aliases = aliases
        self.deprecated = deprecated

    def find_spec(self, fullname, path=None, target=None):
        prefix, _, name = fullname.rpartition(".")
        if prefix != self.package or name not in self.aliases:
            return None
        loader = _AliasLoader(f"{self.package}.{self.aliases[name]}", self.deprecated.get(name))
        return importlib.util.spec_from_loader(fullname, loader)


def install(package, aliases, deprecated=None):
    """Makes `package.<alias>` import `package.<target>` for each `alias: target`.

    Args:
        package: the package name, e.g. `"keras_vit"`.
        aliases: dict of old module name -> new dotted path inside `package`.
        deprecated: optional dict of old module name -> the `DeprecationWarning`
            text its import gives.

    Returns:
        A module-level `__getattr__` for `package`, so that attribute access
        (`keras_vit.data` after `import keras_vit`) imports the alias too.
    """
    finder = _AliasFinder(package, dict(aliases), dict(deprecated or {}))
    sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "package", None) != package] + [finder]

    def module_getattr(name):
        if name in finder.aliases:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return module_getattr
