"""The README is executable truth: every code block runs, and its lists match the code.

Every fenced block of README.md is Python (`python`), shell (`bash`, `shell`, `console`) or not code (`text`:
a tree or a diagram). Each code block runs, in README order, in one fresh process on the tensorflow backend
(`tests/readme_runner.py`), unless the line before it says why it cannot run here:

    <!-- not run by tests/test_readme.py: REASON -->

The changes made to a block before it runs are the rows of SUBSTITUTIONS; what stands in for the reader's world
(their photos, the Hub, a dataset download, the model sizes) is WORLD. Nothing else differs from the README.
"""

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest
import readme_world

from keras_vit_cli.commands import COMMANDS
from tests.helpers import BACKEND, REPO_ROOT

README = os.path.join(REPO_ROOT, "README.md")
SHELL = ("bash", "shell", "console")
LANGUAGES = ("python", "text", *SHELL)
NOT_RUN = re.compile(r"<!-- not run by tests/test_readme\.py: (.*) -->")


@dataclass(frozen=True)
class Substitution:
    language: str  # "python", or "shell" for each command of a shell block (continuation lines joined)
    pattern: str  # a regular expression (re.sub)
    replacement: str
    why: str


# Every change the test makes to a block before running it. Each row must apply somewhere
# (test_every_substitution_applies), so the table cannot outlive the text it edits.
SUBSTITUTIONS = (
    Substitution("shell", r"^make test\b", "make -n test", "`make test` is the suite this test runs in: dry run"),
    Substitution("shell", r"^make run$", 'make run RUN_ARGS="--steps 2 --epochs 1"', "2 updates, not 1,500"),
    Substitution(
        "shell",
        r"(?<!\S)finetune(?!\S).*",
        r"\g<0> --steps 2 --epochs 1",
        "2 updates in 1 epoch, not 1,500-10,000 (argparse: the last value given wins)",
    ),
    Substitution(
        "shell",
        r"(?<!\S)finetune(?!\S).*--data .*",
        r"\g<0> --image-size 32 --batch-size 8",
        "your own data at 32 px in batches of 8, not 224-384 px in batches of 512",
    ),
)

# What stands in for the reader's world, put in place by tests/readme_world.py (one function per row, same keys).
WORLD = {
    "model sizes": "every VARIANTS row at 2 blocks, 4 wide per head, MLP twice the width (heads, patch size and "
    "ResNet kept): a B/16 is 2 blocks of width 48 and trains in seconds",
    "reader's files": "photo.jpg (the bundled sample photograph), photos/ and imagenet/ (a few random JPEGs per "
    "class), my_model.keras (a small saved ViT)",
    "Hugging Face Hub": "each catalogue file asked for is a random model of its variant, head and layout, written "
    "locally (tests/pretrained_helpers.fake_hub); HOME is a fresh folder, so every cache starts empty",
    "tfds:cifar10": "prepared in ~/tensorflow_datasets by TFDS's own CIFAR-10 builder from 24 random images in "
    "the binary release's format (its download replaced)",
    "XLA": "off (`distribute.configure` asks for no jit_compile): compiling costs more than 2 steps; "
    "tests/test_finetune.py runs the job with XLA",
}


def _without_comment(line):
    """`line` up to a `#` that starts a word outside quotes, as the shell reads it."""
    quote = None
    for index, character in enumerate(line):
        if quote:
            quote = None if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].strip()
    return line.strip()


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    not_run: object  # the reason given in the README, or None

    def commands(self):
        """`(line, command)` for a shell block, continuation lines joined, blank lines and comments left out."""
        commands, pending, start = [], "", None
        for offset, text in enumerate(self.code.splitlines(), self.line + 1):
            start = offset if not pending else start
            pending += text.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            command = _without_comment(pending)
            if command:
                commands.append((start, re.sub(r"\s+", " ", command)))
            pending = ""
        return commands


def blocks(text):
    lines = text.splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = re.match(r"^```(.*)$", lines[index])
        if not opening:
            index += 1
            continue
        end = lines.index("```", index + 1)
        marker = NOT_RUN.fullmatch(lines[index - 1].strip()) if index else None
        code = "\n".join(lines[index + 1 : end]) + "\n"
        found.append(Block(index + 1, opening.group(1).strip(), code, marker.group(1) if marker else None))
        index = end + 1
    return found


def readme_text():
    with open(README, encoding="utf-8") as file:
        return file.read()


def substitute(language, text, used):
    for row in SUBSTITUTIONS:
        if row.language == language:
            text, count = re.subn(row.pattern, row.replacement, text, flags=re.MULTILINE)
            used[row] = used.get(row, 0) + count
    return text


def plan(used=None):
    """The blocks to run, substituted, in the runner's plan format."""
    used = {} if used is None else used
    steps = []
    for block in blocks(readme_text()):
        if block.not_run is not None or block.language == "text":
            continue
        if block.language == "python":
            steps.append({"line": block.line, "language": "python", "code": substitute("python", block.code, used)})
        else:
            commands = [(line, substitute("shell", command, used)) for line, command in block.commands()]
            steps.append({"line": block.line, "language": "shell", "commands": commands})
    return {"world": list(WORLD), "blocks": steps}


def test_every_block_is_code_of_a_known_language_or_says_why_it_is_not_run():
    found = blocks(readme_text())
    assert len(found) > 10
    for block in found:
        assert block.language in LANGUAGES, f"README.md:{block.line}: fence language {block.language!r}"
        if block.not_run is not None:
            assert block.language != "text" and len(block.not_run.split()) >= 4, f"README.md:{block.line}"
    assert readme_text().count("not run by tests/test_readme.py") == sum(b.not_run is not None for b in found)


def test_every_substitution_applies_and_the_world_is_the_runners():
    used = {}
    plan(used)
    assert [row.pattern for row in SUBSTITUTIONS if not used.get(row)] == []
    assert list(WORLD) == list(readme_world.WORLD)


def test_readme_lists_every_command():
    listed = re.search(r"`keras-vit ((?:[a-z]+ / )+[a-z]+)`", readme_text())
    assert listed and tuple(listed.group(1).split(" / ")) == COMMANDS


def test_readme_lists_every_extra():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as file:
        extras = tomllib.load(file)["project"]["optional-dependencies"]
    install = readme_text().split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in install.splitlines() if line.startswith("| `")]
    assert sorted(name for cell in rows for name in re.findall(r"`([a-z]+)`", cell)) == sorted(extras)


def _clone(root):
    """A working folder that stands in for a clone: the repository's files linked, outputs written beside them."""
    os.makedirs(root)
    for name in os.listdir(REPO_ROOT):
        if name not in ("outputs", ".git") and not name.startswith(".pytest"):
            os.symlink(os.path.join(REPO_ROOT, name), os.path.join(root, name))
    return root


# Cost: one process, ~15 s of TensorFlow import, then every block on small models (about a minute on 2 cores).
# TensorFlow only: Keras's default backend (a reader who sets none gets it), the one the Deploy commands name, and
# the one tf.data and TFDS need anyway; the blocks are backend-agnostic and tested per backend elsewhere.
@pytest.mark.skipif(BACKEND != "tensorflow", reason="the README runs once, on the tensorflow backend")
def test_every_readme_block_runs(tmp_path):
    work = _clone(str(tmp_path / "clone"))
    os.makedirs(tmp_path / "home")
    with open(tmp_path / "plan.json", "w") as file:
        json.dump(plan(), file)
    environment = dict(os.environ, KERAS_BACKEND="tensorflow", HOME=str(tmp_path / "home"), HF_HUB_OFFLINE="1")
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "tests", "readme_runner.py"), str(tmp_path / "plan.json")],
        cwd=work,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    print("\n".join(line for line in result.stdout.splitlines() if line.startswith("readme_runner:")))  # -s: timings
    # The README names every file the main job writes.
    for name in os.listdir(os.path.join(work, "outputs", "finetune")):
        assert f"`{name}`" in readme_text(), name
