"""Every code block of README.md runs, and the README's lists match the code.

A fenced block is `python`, shell (`bash`, `shell`, `console`) or `text`. Every code block runs, in README order, in
one fresh tensorflow process (this file run as a script, in a folder standing in for a clone, with a fresh HOME),
unless the line before it says why not: `<!-- not run by tests/test_readme.py: REASON -->`. `keras-vit` runs through
`keras_vit_cli.main`, `make TARGET` as its recipe's commands (`make -n`), each command once. What differs from the
README: the SUBSTITUTIONS below and the reader's world (`put_world_in_place`): every variant at 2 blocks, 4 wide per
head; the reader's files; a local Hugging Face Hub; tfds:cifar10 from 24 random images; no XLA.
"""

import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

import numpy as np
import pytest

from keras_vit_cli.commands import COMMANDS
from tests.helpers import BACKEND, REPO_ROOT, write_images

README = pathlib.Path(REPO_ROOT, "README.md").read_text(encoding="utf-8")
SHELL = ("bash", "shell", "console")
LANGUAGES = ("python", "text", *SHELL)
NOT_RUN = re.compile(r"<!-- not run by tests/test_readme\.py: (.*) -->")
# `(pattern, replacement)` for each shell command (re.sub), in order; each must apply somewhere.
SUBSTITUTIONS = (
    (r"^make test\b", "make -n test"),  # the suite this test runs in: a dry run
    (r"^make run$", 'make run RUN_ARGS="--steps 2 --epochs 1"'),  # 2 updates, not 1,500
    (r"(?<!\S)finetune(?!\S).*", r"\g<0> --steps 2 --epochs 1"),  # argparse: the last value given wins
    (r"(?<!\S)finetune(?!\S).*--data .*", r"\g<0> --image-size 32 --batch-size 8"),  # not 224-384 px, 512 a batch
)


def readme_blocks():
    """`(line, language, code, reason it is not run or None)` for every fenced block of the README."""
    blocks = []
    for match in re.finditer(r"^```(.*)\n((?:.*\n)*?)```$", README, re.MULTILINE):
        line_before = README[: match.start() - 1].rsplit("\n", 1)[-1]
        not_run = NOT_RUN.fullmatch(line_before.strip())
        line = README.count("\n", 0, match.start()) + 1
        blocks.append((line, match.group(1).strip(), match.group(2), not_run and not_run.group(1)))
    return blocks


def shell_commands(code, used):
    """The commands of a shell block, comments dropped and SUBSTITUTIONS made; counts each substitution in `used`."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            command = shlex.join(words)
            for pattern, replacement in SUBSTITUTIONS:
                command, count = re.subn(pattern, replacement, command)
                used[pattern] = used.get(pattern, 0) + count
            commands.append(command)
    return commands


def test_every_block_is_code_or_text_and_says_why_it_is_not_run():
    blocks = readme_blocks()
    assert len(blocks) > 10
    for line, language, _, not_run in blocks:
        assert language in LANGUAGES, f"README.md:{line}: fence language {language!r}"
        assert not_run is None or (language != "text" and len(not_run.split()) >= 4), f"README.md:{line}"
    assert README.count("not run by tests/test_readme.py") == sum(block[3] is not None for block in blocks)
    used = {}
    for _, language, code, not_run in blocks:
        if language in SHELL and not not_run:
            shell_commands(code, used)
    assert [pattern for pattern, _ in SUBSTITUTIONS if not used[pattern]] == []


def test_readme_lists_every_command():
    listed = re.search(r"`keras-vit ((?:[a-z]+ / )+[a-z]+)`", README)
    assert listed and tuple(listed.group(1).split(" / ")) == COMMANDS


def test_readme_lists_every_extra():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as file:
        extras = tomllib.load(file)["project"]["optional-dependencies"]
    install = README.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    cells = [line.split("|")[1] for line in install.splitlines() if line.startswith("| `")]
    assert sorted(name for cell in cells for name in re.findall(r"`([a-z]+)`", cell)) == sorted(extras)


# One process, on tensorflow: Keras's default backend (a reader who sets none gets it) and the one tf.data and
# TFDS need anyway; the blocks are backend-agnostic and tested per backend elsewhere.
@pytest.mark.slow
@pytest.mark.skipif(BACKEND != "tensorflow", reason="the README runs once, on the tensorflow backend")
def test_every_readme_block_runs(tmp_path):
    clone = tmp_path / "clone"  # the repository's files linked, outputs written beside them
    clone.mkdir()
    for name in os.listdir(REPO_ROOT):
        if name not in ("outputs", ".git") and not name.startswith(".pytest"):
            os.symlink(os.path.join(REPO_ROOT, name), clone / name)
    (tmp_path / "home").mkdir()
    environment = dict(os.environ, KERAS_BACKEND="tensorflow", HOME=str(tmp_path / "home"), HF_HUB_OFFLINE="1")
    environment["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "tests", "test_readme.py")],
        cwd=clone,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    print(*[line for line in result.stdout.splitlines() if line.startswith("README.md:")], sep="\n")  # with -s
    for name in os.listdir(clone / "outputs" / "finetune"):
        assert f"`{name}`" in README, f"the README names every file the main job writes: {name}"


# ---- The process that runs the blocks: `python tests/test_readme.py`, in the folder that stands in for a clone.


def write_cifar10_release(folder):
    """CIFAR-10's binary release (a label byte and 3,072 pixel bytes per image), 4 random images per file."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    names = [f"data_batch_{index}.bin" for index in range(1, 6)] + ["test_batch.bin"]
    for offset, name in enumerate(names):
        records = rng.integers(0, 256, (4, 1 + 3072), dtype=np.uint8)
        records[:, 0] = (np.arange(4) + offset) % 10
        (folder / name).write_bytes(records.tobytes())
    (folder / "batches.meta.txt").write_text("airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n")


def put_world_in_place(patch):
    """The reader's world, in the working folder and HOME (both temporary)."""
    import dataclasses

    import pretrained_helpers
    import tensorflow_datasets as tfds

    import keras_vit
    from keras_vit import inspection
    from keras_vit.models import variants
    from keras_vit.pretrained import export, registry
    from keras_vit.training import distribute

    # Every variant at 2 blocks, 4 wide per head, the MLP 1/32 of its own (rows stay distinct); heads, patch kept.
    for name, row in list(variants.VARIANTS.items()):
        width = 4 * row["num_heads"]
        patch.setitem(variants.VARIANTS, name, dict(row, num_layers=2, hidden_dim=width, mlp_dim=row["mlp_dim"] // 32))

    # The reader's files.
    os.symlink(inspection.sample_image_path(), "photo.jpg")
    write_images("photos", ("cat", "dog"), count=5, suffix=".jpg", seed=0)
    for split, count in (("train", 4), ("val", 2)):
        write_images(os.path.join("imagenet", split), ("n01440764", "n01443537"), count, ".JPEG", seed=count)
    small = dict(patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64, input_shape=(32, 32, 3))
    keras_vit.VisionTransformer(**small, classes=3).save("my_model.keras")

    # The Hub: each catalogue file asked for is a random model of its (small) variant, head and layout.
    catalogue = {info.hub_repo: info for info in registry.checkpoints()}
    written = {}

    def hub_file(repo_id, filename):
        if repo_id not in catalogue:  # a timm model of the ViT family: its architecture, 64 wide, one block
            folder = os.path.abspath(os.path.join("hub", repo_id.replace("/", "--")))
            if not os.path.isdir(folder):
                architecture = repo_id.split("/")[1].split(".")[0]
                pretrained_helpers.timm_saved_like_the_hub(architecture, folder, embed_dim=64, num_heads=1)
            return os.path.join(folder, filename)
        if repo_id not in written:
            info = catalogue[repo_id]
            row = variants.VARIANTS[info.variant]
            model = keras_vit.VisionTransformer(
                **row,
                **info.options,
                input_shape=(info.resolution, info.resolution, 3),
                include_top=info.classes is not None,
                classes=info.classes or 1000,
                representation_size=row["hidden_dim"] if info.pre_logits else None,
            )
            target = os.path.abspath(os.path.join("hub", repo_id.replace("/", "--")))
            path = export.export_weights(
                model, target + ".safetensors" if info.format == "timm" else target, info.format
            )
            written[repo_id] = os.path.join(path, info.hub_filename) if os.path.isdir(path) else path
        return written[repo_id]

    pretrained_helpers.fake_hub(patch, hub_file)

    # tfds:cifar10, prepared by TFDS's own builder from the release above (its download replaced).
    release = os.path.abspath("cifar10_release")
    write_cifar10_release(pathlib.Path(release, "cifar-10-batches-bin"))
    with pytest.MonkeyPatch.context() as download:
        download.setattr(tfds.download.DownloadManager, "download_and_extract", lambda self, url: release)
        tfds.builder("cifar10", data_dir=os.path.expanduser("~/tensorflow_datasets")).download_and_prepare()

    configure = distribute.configure
    patch.setattr(distribute, "configure", lambda *a, **k: dataclasses.replace(configure(*a, **k), jit_compile=False))


def run_command(command):
    import keras_vit_cli

    words = [os.path.expanduser(word) for word in shlex.split(command)]
    if words[0] == "make":
        recipe = ["make", "--no-print-directory", "-n", "-o", "bootstrap", *words[1:]]
        dry_run = subprocess.run(recipe, capture_output=True, text=True, check=True).stdout
        if "-n" not in words:
            for line in filter(str.strip, dry_run.splitlines()):
                run_command(line)
        return
    assert os.path.basename(words[0]) == "keras-vit", f"the README runner runs keras-vit and make only: {command}"
    try:
        code = keras_vit_cli.main(words[1:])
    except SystemExit as exit:
        code = exit.code
    assert not code, f"exit code {code}: {command}"


def run_python(code, line):
    import keras

    # Padded so that a traceback names the README's own line numbers.
    exec(compile("\n" * line + code, "README.md", "exec"), {"__name__": "__main__"})
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()


def main():
    put_world_in_place(pytest.MonkeyPatch())
    done = set()
    for line, language, code, not_run in readme_blocks():
        if not_run or language == "text":
            continue
        print(f"README.md:{line}: running the {language} block", flush=True)
        start = time.perf_counter()
        if language == "python":
            run_python(code, line)
        else:
            for command in shell_commands(code, {}):
                if command not in done:
                    run_command(command)
                    done.add(command)
        print(f"README.md:{line}: ok in {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
