"""The shape of the house, checked: imports run one way between rooms, and no private name crosses a module.

The rooms (docs/development.md, "How the code is laid out"), lowest first; a module may import its own
room and the rooms below it, never one above. A room is a set of module paths
(a folder, or one module of a folder); a module belongs to the room of its
longest matching path:

    leaf          keras_vit.utils (argument checks, registration, Keras internals, atomic files)
    architecture  keras_vit.layers, keras_vit.models (keras.ops only)
    pretrained    keras_vit.pretrained (registry, converters, loader, download, export of weights)
    applications  keras_vit.models.applications (the public constructors: architecture + weights loader)
    training      keras_vit.training (recipes, data, layer_decay, distribute, multihost)
    package       keras_vit/__init__ (registers every layer, loss and schedule at import)
    jobs          keras_vit.training.finetune, keras_vit.inspection, keras_vit.deploy, keras_vit.evaluation
    command line  keras_vit_cli (`keras-vit`, `python -m keras_vit_cli`)

Function-level imports count too: importing lazily is about start-up time,
not about which way a dependency points. Pure `ast`, no import: one backend.
"""

import ast
import pathlib

import keras
import pytest

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="source analysis: one run is enough")

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("keras_vit", "keras_vit_cli")

ROOMS = (
    ("leaf", ("keras_vit.utils",)),
    ("architecture", ("keras_vit.layers", "keras_vit.models")),
    ("pretrained", ("keras_vit.pretrained",)),
    ("applications", ("keras_vit.models.applications",)),
    ("training", ("keras_vit.training",)),
    ("package", ("keras_vit",)),
    ("jobs", ("keras_vit.training.finetune", "keras_vit.inspection", "keras_vit.deploy", "keras_vit.evaluation")),
    ("command line", ("keras_vit_cli",)),
)
# Dependencies that point the wrong way today, each with the change that removes it.
KNOWN_EXCEPTIONS = {
    # `VisionTransformer(weights=...)` reads the checkpoint (its grid, its pre_logits) before it builds its graph,
    # importing the loader only when weights are asked for; a `from_preset` classmethod above both would remove it.
    ("keras_vit.models.vit", "keras_vit.pretrained.loader"): "weights= of the model class",
}


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules():
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = ast.parse(path.read_text(), filename=str(path))
    return found


def room_of(module):
    """`(level, room name)` of a module of the two packages: the room of its longest matching path."""
    matches = [
        (len(path), level, room)
        for level, (room, paths) in enumerate(ROOMS)
        for path in paths
        if module == path or module.startswith(path + ".")
    ]
    if not matches:
        raise AssertionError(
            f"{module} belongs to no room: add it to ROOMS in tests/test_architecture.py (and to "
            "docs/development.md), in the lowest room whose modules it needs."
        )
    _, level, room = max(matches)
    return level, room


def test_every_room_exists():
    known = modules()
    for room, paths in ROOMS:
        for path in paths:
            assert any(m == path or m.startswith(path + ".") for m in known), f"room {room!r}: {path} does not exist"


def imported_modules(tree, known):
    """The modules of the two packages that `tree` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] in PACKAGES)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in PACKAGES:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in known else node.module)
    return found


def test_every_module_has_a_room():
    for module in modules():
        room_of(module)


def test_imports_run_one_way():
    known = modules()
    wrong = []
    for module, tree in known.items():
        level, room = room_of(module)
        for target in imported_modules(tree, known):
            target_level, target_room = room_of(target)
            exception = any(module == a and (target == b or target.startswith(b + ".")) for a, b in KNOWN_EXCEPTIONS)
            if target_level > level and not exception:
                wrong.append(f"{module} ({room}) imports {target} ({target_room})")
    assert not wrong, "Imports must point down the rooms (tests/test_architecture.py):\n" + "\n".join(wrong)


def test_the_library_never_imports_the_command_line_or_benchmarks():
    for module, tree in modules().items():
        if module.startswith("keras_vit_cli"):
            continue
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            bad = [name for name in names if name.split(".")[0] in ("keras_vit_cli", "benchmarks")]
            assert not bad, f"{module} imports {bad}: the library never imports what is built on it"


def module_aliases(tree, known):
    """Local names bound to modules of the two packages (`import keras_vit.x as y`, `from keras_vit import x`)."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    aliases.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in known:
                    aliases.add(alias.asname or alias.name)
    return aliases


def private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(tree, known):
    uses = []
    aliases = module_aliases(tree, known)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
            uses += [f"from {node.module} import {a.name}" for a in node.names if private(a.name)]
        elif isinstance(node, ast.Import):
            uses += [f"import {a.name}" for a in node.names if any(private(part) for part in a.name.split("."))]
        elif isinstance(node, ast.Attribute) and private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in aliases:
                uses.append(f"{ast.unparse(node)} (line {node.lineno})")
    return uses


def test_no_module_uses_another_modules_private_names():
    known = modules()
    found = {module: private_uses(tree, known) for module, tree in known.items()}
    found = {module: uses for module, uses in found.items() if uses}
    assert not found, f"Private names used across modules (make them public or move the code): {found}"


# --- function length ---------------------------------------------------------------------------------

MAX_FUNCTION_LINES = 80


def function_length(node):
    """Lines of a function from its `def` to its last line, its docstring aside."""
    length = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        length -= first.end_lineno - first.lineno + 1
    return length


def long_functions(tree, limit=MAX_FUNCTION_LINES):
    return [
        (node.name, node.lineno, function_length(node))
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and function_length(node) > limit
    ]


def test_no_library_function_is_longer_than_80_lines():
    found = {module: long for module, tree in modules().items() if (long := long_functions(tree))}
    assert not found, f"Functions longer than {MAX_FUNCTION_LINES} lines, docstring aside (split them): {found}"


# --- import cycles -----------------------------------------------------------------------------------

CYCLE_PACKAGES = ("keras_vit", "keras_vit_cli", "benchmarks")


def import_graph(trees, packages=CYCLE_PACKAGES):
    """`{module: modules it imports}` among `trees` (`{module: (is_package, ast)}`), module- and
    function-level imports alike; `from a import b` points at `a.b` when that is a module, else at `a`."""
    graph = {}
    for module, (is_package, tree) in trees.items():
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".")[: None if is_package else -1]
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    targets.add(full if full in trees else source)
        graph[module] = {t for t in targets if t in trees and t != module and t.split(".")[0] in packages}
    return graph


def import_cycles(graph):
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycle_in_the_tree_benchmarks_included():
    trees = {}
    for package in CYCLE_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            trees[module_name(path)] = (path.name == "__init__.py", ast.parse(path.read_text(), filename=str(path)))
    cycles = import_cycles(import_graph(trees))
    assert not cycles, f"Modules that import each other (directly or around a circle): {cycles}"


# --- public imports ----------------------------------------------------------------------------------


def test_the_public_imports_are_unchanged():
    import importlib

    import keras_vit
    from keras_vit.models.applications import CONSTRUCTORS
    from keras_vit.models.variants import VARIANTS

    for name in keras_vit.__all__:
        assert getattr(keras_vit, name) is not None, name
    for name, constructor in CONSTRUCTORS.items():
        assert getattr(keras_vit, name) is constructor
    assert len(CONSTRUCTORS) == len(VARIANTS) == 14
    for name in keras_vit.layers.__all__:
        assert getattr(importlib.import_module("keras_vit.layers"), name) is not None, name
    public = {
        "keras_vit.models": ("VisionTransformer", "find_vit"),
        "keras_vit.models.metadata": ("ClassNames", "class_names", "find_vit", "load_classifier", "top_classes"),
        "keras_vit.pretrained": ("build_pretrained", "load_checkpoint", "available_tags"),
        "keras_vit.pretrained.export": ("export_weights", "convert_checkpoint", "write_weights"),
        "keras_vit.inspection": ("attention_maps", "attention_rollout", "mean_attention_distance", "write_report"),
        "keras_vit.deploy": ("export", "load_artefact"),
        "keras_vit.training": ("finetune_optimizer",),
        "keras_vit.training.layer_decay": ("layer_decay_multipliers", "LayerwiseAdamW", "LayerwiseSGD"),
        "keras_vit.training.finetune": ("FinetuneConfig", "finetune"),
        "keras_vit.training.data": ("train_pipeline",),
        "keras_vit.utils.files": ("atomic_file",),
        "keras_vit.layers.resampling": ("resample_position_embedding",),
    }
    missing = []
    for module, names in public.items():
        imported = importlib.import_module(module)
        # Every name a module declares public imports too.
        names = names + tuple(getattr(imported, "__all__", ()))
        missing += [f"{module}.{name}" for name in names if not hasattr(imported, name)]
    assert not missing, f"Public names that no longer import: {missing}"


# Cost: one fresh process importing Keras and keras_vit (~5 s).
IMPORT_SIDE_EFFECTS = """
import json, sys
import keras
meta_path = list(sys.meta_path)
before = {name: dict(vars(module)) for name, module in list(sys.modules.items()) if name.split(".")[0] == "keras"}
import keras_vit
changed = sorted(
    f"{name}.{attribute}"
    for name, attributes in before.items()
    for attribute in set(attributes) | set(vars(sys.modules[name]))
    if vars(sys.modules[name]).get(attribute, before) is not attributes.get(attribute, before)
    # A submodule imported since (keras.src.x after keras.src) becomes an attribute of its package: not a change.
    and not (attribute not in attributes and f"{name}.{attribute}" in sys.modules)
)
print(json.dumps({
    "meta_path": sys.meta_path == meta_path,
    "changed": changed,
    "cli": sorted(name for name in sys.modules if name.split(".")[0] == "keras_vit_cli"),
}))
"""


def test_importing_keras_vit_imports_and_registers_nothing_else():
    # `import keras_vit` adds no import hook, changes no attribute of a loaded Keras module, and never
    # imports the command line.
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_SIDE_EFFECTS], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found == {"meta_path": True, "changed": [], "cli": []}, found
