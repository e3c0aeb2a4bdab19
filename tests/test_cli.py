"""The `keras-vit` command: one protocol for every command, help without Keras (but finetune's), one-line errors.

Commands run in this process through `keras_vit_cli.main`; a fresh process only where what is imported, or what a
closed pipe does, is the behaviour tested. Hostile arguments: tests/test_hostile_inputs.py.
"""

import argparse
import os
import subprocess
import sys

import pytest

import keras_vit_cli as cli
from keras_vit.models import flops
from keras_vit.models.applications import CONSTRUCTORS
from keras_vit.models.variants import VARIANTS
from tests.helpers import BACKEND, REPO_ROOT

one_backend = pytest.mark.skipif(BACKEND != "tensorflow", reason="argument parsing: one run is enough")
ENV = dict(os.environ, PYTHONPATH=REPO_ROOT)

HELP_AND_TABLE = """
import contextlib, io, os, sys
import keras_vit_cli

def imported():
    return sorted(m for m in ("keras", "keras_vit", "tensorflow", "jax", "torch") if m in sys.modules)

def shown(argv):
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
        keras_vit_cli.main(argv)
    return out.getvalue()

light = [name for name in keras_vit_cli.COMMANDS if name != "finetune"]
helps = [shown(argv) for argv in [["--help"]] + [[name, "--help"] for name in light]]
print(all("usage: keras-vit" in text for text in helps), imported())
print("--steps" in shown(["finetune", "--help"]), "keras_vit" in sys.modules)  # its flags are the library's settings
code = keras_vit_cli.main(["variants", "--image-size", "384", "--classes", "10"])
os.environ["KERAS_VIT_OFFLINE"] = "1"  # an unprepared TFDS dataset offline fails before any work
print(code, keras_vit_cli.main(["finetune", "--data", "tfds:cifar10", "--data-dir", sys.argv[1], "--out", sys.argv[2]]))
"""


def _subparsers():
    (action,) = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


@one_backend
def test_every_command_follows_the_protocol_and_takes_the_same_weights_values():
    subparsers = _subparsers()
    assert list(subparsers) == list(cli.COMMANDS)
    taking = set()
    for name, subparser in subparsers.items():
        module = sys.modules[f"keras_vit_cli.commands.{name}"]
        assert module.__doc__.splitlines()[0].strip(), f"{name}: the docstring is its help"
        assert subparser.get_default("run") is module.run
        for action in subparser._actions:
            if "--weights" in action.option_strings:
                taking.add(name)
                values = [action.type(text) for text in ("none", "None", "imagenet", "hf://org/repo")]
                assert values == [None, None, "imagenet", "hf://org/repo"], name
    assert taking == {"download", "evaluate", "export", "finetune", "inspect", "predict"}


@one_backend
def test_help_imports_no_keras_but_finetunes_and_the_table_counts_analytically(tmp_path):
    command = [sys.executable, "-c", HELP_AND_TABLE, str(tmp_path / "tfds"), str(tmp_path / "run")]
    result = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["True []", "True True"] and lines[-1] == "0 1"
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("keras-vit ")]
    assert line.startswith("keras-vit finetune: TFDS dataset 'cifar10' is not prepared in ")
    assert "`tfds build cifar10 --data_dir DIR`" in line and "--data-dir DIR" in line
    assert not os.path.exists(tmp_path / "run")
    rows = [line.split(" | ") for line in lines if line.startswith("| `ViT")]
    assert [row[0] for row in rows] == [f"| `{name}`" for name in CONSTRUCTORS]
    assert [row[1] for row in rows] == list(VARIANTS)
    assert [row[7] for row in rows] == [f"{flops.parameter_count(VARIANTS[row[1]], 384, 10):,}" for row in rows]


@one_backend
def test_python_dash_m_is_the_command_and_a_closed_pipe_ends_it_quietly():
    # `keras-vit variants | head -1`: the reader here is gone before the command writes at all.
    command = [sys.executable, "-m", "keras_vit_cli", "variants"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    process.stdout.close()
    assert process.wait(timeout=120) == 141
    assert process.stderr.read() == b""
    process.stderr.close()


@one_backend
@pytest.mark.parametrize("argv, code, stream", [([], 2, "err"), (["--version"], 0, "out"), (["--help"], 0, "out")])
def test_argparse_answers_usage_version_and_help(argv, code, stream, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == code
    assert "keras-vit" in getattr(capsys.readouterr(), stream)


@one_backend
@pytest.mark.parametrize("command", [["finetune"], ["inspect"], ["evaluate", "ViTTi16"]], ids=lambda argv: argv[0])
def test_an_output_folder_that_is_a_file_is_one_line_before_any_work(capsys, tmp_path, command):
    taken = tmp_path / "notes.txt"
    taken.write_text("kept")
    assert cli.main([*command, "--out", str(taken)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"keras-vit {command[0]}: ") and str(taken) in err and err.count("\n") == 1
    assert taken.read_text() == "kept" and os.listdir(tmp_path) == ["notes.txt"]


@one_backend
def test_an_unknown_keras_backend_is_one_line_naming_it(monkeypatch, capsys):
    monkeypatch.setenv("KERAS_BACKEND", "mxnet")
    assert cli.main(["demo"]) == 2
    err = capsys.readouterr().err
    assert "mxnet" in err and "jax" in err and err.count("\n") == 1


def test_demo_runs_a_small_model(capsys):
    assert cli.main(["demo", "--model", "Ti/16", "--image-size", "32", "--batch-size", "3", "--classes", "7"]) == 0
    shown = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines())
    assert shown["model"].split()[0] == "ViTTi16"
    assert shown["input shape"].strip() == "(3, 32, 32, 3)" and shown["output shape"].strip() == "(3, 7)"
    # Ti/16 at 32 px: the 5,524,416-parameter backbone at 224 px less 192 position rows, plus a 7-class head.
    assert shown["parameters"].strip() == f"{5_524_416 - 192 * 192 + 192 * 7 + 7:,}"


@one_backend
@pytest.mark.parametrize("tty, argv, verbose", [(False, [], 2), (True, [], None), (False, ["--verbose", "1"], 1)])
def test_finetune_logs_one_line_per_epoch_when_piped(monkeypatch, tty, argv, verbose):
    from keras_vit.training import finetune

    received = {}

    def fake_finetune(**settings):
        received.update(settings)
        raise ValueError("stop here")

    monkeypatch.setattr(finetune, "finetune", fake_finetune)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    assert cli.main(["finetune", "--steps", "1", *argv]) == 2
    assert received.get("verbose") == verbose  # None: not passed, the library's default (a progress bar)


@pytest.mark.skipif(BACKEND == "jax", reason="the launcher refuses the other backends")
def test_launch_refuses_a_backend_other_than_jax_before_starting_processes(monkeypatch, capsys):
    monkeypatch.setattr(subprocess, "Popen", lambda *args, **kwargs: pytest.fail("a process was started"))
    assert cli.main(["launch", "--processes", "2", "finetune", "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert BACKEND in err and "jax" in err.lower() and err.count("\n") == 1
