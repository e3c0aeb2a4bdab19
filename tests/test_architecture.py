"""The shape of the house, checked: imports run one way between rooms, and no private name crosses a module.

The rooms (README "Architecture"), lowest first; a module may import its own
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
    command line  keras_vit_cli (and `python -m keras_vit`, which only delegates to it)

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
    ("command line", ("keras_vit_cli", "keras_vit.__main__")),
)
# Dependencies that point the wrong way today, each with the change that removes it.
KNOWN_EXCEPTIONS = {}


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
            f"{module} belongs to no room: add it to ROOMS in tests/test_architecture.py (and to the README's "
            "Architecture section), in the lowest room whose modules it needs."
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
        if module.startswith("keras_vit_cli") or module == "keras_vit.__main__":
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


def test_the_private_name_check_catches_each_form():
    source = (
        "from keras_vit.models import _helper\n"
        "from keras_vit.inspection import analysis\n"
        "import keras_vit.pretrained.loader as loader\n"
        "x = analysis._vit_parts\n"
        "y = loader._plan_top(1)\n"
        "z = self._own\n"
    )
    known = {"keras_vit.inspection.analysis": None, "keras_vit.pretrained.loader": None}
    uses = private_uses(ast.parse(source), known)
    assert len(uses) == 3 and "self._own" not in str(uses)
