"""The shape of the house: imports run down the rooms, no private name crosses a module, no import cycle.

The rooms are those of docs/development.md ("How the code is laid out"), lowest first; a module belongs to the room
of its longest matching prefix and imports only its own room and the rooms below. Function-level imports count too.
Source analysis with `ast` (one backend), except the last test, which imports keras_vit in a fresh interpreter.
"""

import ast
import graphlib
import importlib
import json
import pathlib
import subprocess
import sys

import pytest

from tests.helpers import BACKEND, REPO_ROOT

pytestmark = pytest.mark.skipif(BACKEND != "tensorflow", reason="source analysis: one run is enough")

LIBRARY = ("keras_vit", "keras_vit_cli")
ROOMS = (
    ("keras_vit.utils",),
    ("keras_vit.layers", "keras_vit.models"),
    ("keras_vit.pretrained",),
    ("keras_vit.models.applications",),
    ("keras_vit.training",),
    ("keras_vit",),
    ("keras_vit.training.finetune", "keras_vit.inspection", "keras_vit.deploy", "keras_vit.evaluation"),
    ("keras_vit_cli",),
    ("benchmarks",),
)
# `VisionTransformer(weights=...)` reads the checkpoint before it builds its graph (the loader is imported lazily).
ALLOWED_UPWARD = {("keras_vit.models.vit", "keras_vit.pretrained.loader")}
MAX_FUNCTION_LINES = 80


def parse_modules():
    """`{module name: ast}` for every file of the library, the command line and the benchmarks."""
    trees = {}
    for package in (*LIBRARY, "benchmarks"):
        for path in sorted(pathlib.Path(REPO_ROOT, package).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            trees[name] = ast.parse(path.read_text(), filename=str(path))
    return trees


MODULES = parse_modules()


def imports(module):
    """`(node, imported name)` for every import in `module`; `from a import b` names `a.b` when that is a module."""
    for node in ast.walk(MODULES[module]):
        if isinstance(node, ast.Import):
            yield from ((node, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield node, full if full in MODULES else node.module


def room_of(module):
    matches = [
        (len(prefix), level)
        for level, room in enumerate(ROOMS)
        for prefix in room
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert matches, f"{module} belongs to no room: add it to ROOMS here and to docs/development.md"
    return max(matches)[1]


def test_every_room_exists():
    for prefix in (prefix for room in ROOMS for prefix in room):
        assert prefix in MODULES, prefix


def test_imports_run_down_the_rooms():
    wrong = []
    for module in MODULES:
        for node, target in imports(module):
            assert not getattr(node, "level", 0), f"{module}: relative import (the house uses absolute ones)"
            if target in MODULES and room_of(target) > room_of(module):
                if not any(module == a and target.startswith(b) for a, b in ALLOWED_UPWARD):
                    wrong.append(f"{module} imports {target}")
    assert not wrong, "imports must point down the rooms:\n" + "\n".join(wrong)


def test_no_import_cycle():
    graph = {}
    for module in MODULES:
        graph[module] = {name for _, name in imports(module) if name in MODULES and name != module}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError, naming the circle


def is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_name_crosses_a_module():
    found = []
    for module, tree in MODULES.items():
        if not module.startswith(LIBRARY):
            continue
        modules_here = set()  # local names bound to this repository's modules (`from keras_vit import x`)
        private_attributes = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if any(is_private(part) for part in alias.name.split(".")):
                        found.append(f"{module}: import {alias.name}")
                    if alias.name.split(".")[0] in LIBRARY:
                        modules_here.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARY:
                for alias in node.names:
                    if is_private(alias.name):
                        found.append(f"{module}: from {node.module} import {alias.name}")
                    if f"{node.module}.{alias.name}" in MODULES:
                        modules_here.add(alias.asname or alias.name)
            elif isinstance(node, ast.Attribute) and is_private(node.attr):
                private_attributes.append(node)
        for node in private_attributes:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules_here:
                found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "private names used across modules (make them public or move the code):\n" + "\n".join(found)


FRAMEWORKS = ("keras", "tensorflow", "jax", "jaxlib", "torch")
SYS_MODULES_CHANGES = ("update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__")


def patches(node, framework_names):
    """Whether `node` sets or deletes an attribute or item of a name in `framework_names`, or changes `sys.modules`."""

    def framework_or_sys_modules(target):
        if ast.unparse(target).startswith("sys.modules"):
            return True
        while isinstance(target, (ast.Attribute, ast.Subscript)):
            target = target.value
        return isinstance(target, ast.Name) and target.id in framework_names

    if isinstance(node, (ast.Assign, ast.Delete, ast.AugAssign, ast.AnnAssign)):
        targets = list(getattr(node, "targets", [getattr(node, "target", None)]))
        while any(isinstance(target, (ast.Tuple, ast.List)) for target in targets):
            targets = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
        return any(isinstance(t, (ast.Attribute, ast.Subscript)) and framework_or_sys_modules(t) for t in targets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
        return bool(node.args) and framework_or_sys_modules(node.args[0])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SYS_MODULES_CHANGES:
        return ast.unparse(node.func.value) == "sys.modules"
    return False


def test_nothing_patched():
    # The library and the command line use the frameworks as they are: no attribute of a Keras, TensorFlow, JAX or
    # torch module (or of what it exports) is set or deleted, and no module is put into `sys.modules`.
    found = []
    for module, tree in MODULES.items():
        if not module.startswith(LIBRARY):
            continue
        framework_names = set()  # local names bound by an import of a framework (`from keras.src import x`)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [(alias.asname or alias.name.split(".")[0], alias.name) for alias in node.names]
                framework_names.update(local for local, name in roots if name.split(".")[0] in FRAMEWORKS)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FRAMEWORKS:
                framework_names.update(alias.asname or alias.name for alias in node.names)
        found += [
            f"{module}:{node.lineno}: {ast.unparse(node).splitlines()[0]}"
            for node in ast.walk(tree)
            if patches(node, framework_names)
        ]
    assert not found, "framework modules patched or stand-ins put into sys.modules:\n" + "\n".join(found)


def test_no_library_function_is_longer_than_80_lines():
    long = []
    for module, tree in MODULES.items():
        for node in ast.walk(tree):
            if module.startswith(LIBRARY) and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # The body after the docstring: a signature of many keyword arguments is no logic.
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                length = node.end_lineno - body[0].lineno + 1 if body else 0
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{module}.{node.name}: {length} lines")
    assert not long, "functions longer than 80 lines, docstring aside (split them):\n" + "\n".join(long)


PUBLIC = {
    "keras_vit.models": ("VisionTransformer", "find_vit"),
    "keras_vit.models.metadata": ("ClassNames", "class_names", "find_vit", "load_classifier", "top_classes"),
    "keras_vit.pretrained": ("build_from_checkpoint", "load_checkpoint", "available_tags"),
    "keras_vit.pretrained.export": ("export_weights", "convert_checkpoint", "write_weights"),
    "keras_vit.inspection": ("attention_maps", "attention_rollout", "mean_attention_distance", "write_report"),
    "keras_vit.deploy": ("export", "load_artefact"),
    "keras_vit.training": ("finetune_optimizer",),
    "keras_vit.training.layer_decay": ("layer_decay_multipliers", "LayerwiseAdamW", "LayerwiseSGD"),
    "keras_vit.training.finetune": ("FinetuneConfig", "finetune"),
    "keras_vit.training.data": ("train_pipeline", "naflex_patches"),
    "keras_vit.utils.files": ("atomic_file",),
    "keras_vit.layers.resampling": ("resample_position_embedding",),
}


def test_the_public_names_import():
    import keras_vit
    from keras_vit.models.applications import CONSTRUCTORS
    from keras_vit.models.variants import VARIANTS

    assert len(CONSTRUCTORS) == len(VARIANTS)
    assert all(getattr(keras_vit, name) is constructor for name, constructor in CONSTRUCTORS.items())
    missing = []
    for module, names in {**PUBLIC, "keras_vit": (), "keras_vit.layers": ()}.items():
        imported = importlib.import_module(module)
        names = (*names, *getattr(imported, "__all__", ()))
        missing += [f"{module}.{name}" for name in names if getattr(imported, name, None) is None]
    assert not missing, f"public names that no longer import: {missing}"


# `import keras_vit` adds no import hook, changes no attribute of a loaded Keras module, imports no command line.
SIDE_EFFECTS = """
import json, sys
import keras
hooks = list(sys.meta_path)
before = {name: dict(vars(module)) for name, module in list(sys.modules.items()) if name.split(".")[0] == "keras"}
import keras_vit
changed = sorted(
    f"{name}.{attribute}"
    for name, attributes in before.items()
    for attribute in set(attributes) | set(vars(sys.modules[name]))
    if vars(sys.modules[name]).get(attribute, before) is not attributes.get(attribute, before)
    # A submodule imported since becomes an attribute of its package: not a change.
    and (attribute in attributes or f"{name}.{attribute}" not in sys.modules)
)
cli = sorted(name for name in sys.modules if name.split(".")[0] == "keras_vit_cli")
print(json.dumps({"hooks": sys.meta_path == hooks, "changed": changed, "cli": cli}))
"""


def test_importing_keras_vit_changes_nothing_else():
    result = subprocess.run(
        [sys.executable, "-c", SIDE_EFFECTS], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {"hooks": True, "changed": [], "cli": []}
