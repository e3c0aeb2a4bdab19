"""The `keras-vit` command: one protocol for every command, help without Keras, one-line errors."""

import argparse
import importlib
import os
import re
import subprocess
import sys

import keras
import pytest

import keras_vit_cli as cli
from keras_vit.models.applications import CONSTRUCTORS
from keras_vit.models.variants import VARIANTS

ONE_BACKEND = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="argument parsing: one run is enough")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)


@ONE_BACKEND
def test_every_command_follows_the_protocol():
    parser = cli.build_parser()
    (subparsers,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    assert list(subparsers.choices) == list(cli.COMMANDS)
    for name in cli.COMMANDS:
        module = importlib.import_module(f"keras_vit_cli.commands.{name}")
        assert module.__doc__ and module.__doc__.splitlines()[0].strip(), f"{name}: the docstring is its help"
        assert callable(module.add_arguments) and callable(module.run)
        assert subparsers.choices[name].get_default("run") is module.run


@ONE_BACKEND
def test_help_imports_neither_keras_nor_the_library():
    # What makes `keras-vit --help` instant: building the parser and printing
    # every command's help must not import Keras (6-7 s) or keras_vit (which imports Keras).
    code = (
        "import sys, contextlib, io\n"
        "import keras_vit_cli\n"
        "parser = keras_vit_cli.build_parser()\n"
        "for argv in [['--help']] + [[name, '--help'] for name in keras_vit_cli.COMMANDS]:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            parser.parse_args(argv)\n"
        "        except SystemExit:\n"
        "            pass\n"
        "heavy = sorted(m for m in ('keras', 'keras_vit', 'tensorflow', 'jax', 'torch', 'numpy') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


HEAVY = ("keras", "tensorflow", "jax", "torch", "keras_vit")


@ONE_BACKEND
def test_variants_counts_without_keras_or_a_framework():
    # What makes `keras-vit variants` instant (1.0 s on a busy 2-core machine, 97 s when it built every model):
    # the counts are analytic, and neither Keras, a backend nor the keras_vit package (which imports Keras)
    # is imported. Cost: one bare Python process, ~1 s.
    code = (
        "import sys\n"
        "from keras_vit_cli import main\n"
        "code = main(['variants', '--image-size', '384', '--classes', '10'])\n"
        f"print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "0 []"
    from keras_vit.models import flops

    rows = [line.split(" | ") for line in lines if line.startswith("| `ViT")]
    assert [row[1] for row in rows] == list(VARIANTS)
    assert [row[0] for row in rows] == [f"| `{name}`" for name in CONSTRUCTORS]
    for row in rows:
        assert row[7] == f"{flops.parameter_count(VARIANTS[row[1]], 384, 10):,}"


@ONE_BACKEND
def test_python_dash_m_keras_vit_cli_is_the_command():
    result = subprocess.run(
        [sys.executable, "-m", "keras_vit_cli", "--help"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=120,
    )
    assert result.returncode == 0 and "predict" in result.stdout


@ONE_BACKEND
def test_every_command_takes_the_same_weights_values():
    parser = cli.build_parser()
    (subparsers,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    taking = {}
    for name, subparser in subparsers.choices.items():
        for action in subparser._actions:
            if "--weights" in action.option_strings:
                taking[name] = action
    assert set(taking) == {"download", "evaluate", "export", "finetune", "inspect", "predict"}
    for name, action in taking.items():
        values = [action.type(text) for text in ("none", "None", "imagenet", "hf://org/repo")]
        assert values == [None, None, "imagenet", "hf://org/repo"], name


@ONE_BACKEND
def test_weights_none_gives_random_weights_in_inspect_and_nothing_to_download(capsys, tmp_path):
    image = os.path.join(ROOT, "keras_vit", "resources", "sample_image.jpg")
    out = str(tmp_path / "figures")
    argv = ["inspect", image, "--model", "ViTTi16", "--weights", "none", "--image-size", "32", "--out", out]
    assert cli.main(argv) == 0
    assert os.listdir(out)
    capsys.readouterr()
    assert cli.main(["download", "ViTTi16", "--weights", "none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-vit download: ") and len(err.strip().splitlines()) == 1


@ONE_BACKEND
def test_a_reader_that_stops_early_ends_the_command_quietly():
    # `keras-vit variants | head -1` printed "keras-vit variants: [Errno 32] Broken pipe". Here the reader is gone
    # before the command writes at all (it closes the pipe at once; the command takes a moment to start).
    env = dict(os.environ, PYTHONPATH=ROOT)
    command = [sys.executable, "-c", "import sys, keras_vit_cli; sys.exit(keras_vit_cli.main(['variants']))"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    process.stdout.close()
    assert process.wait(timeout=120) == 141
    assert process.stderr.read() == b""
    process.stderr.close()


@ONE_BACKEND
def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([])
    assert info.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


@ONE_BACKEND
def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("keras-vit ")


@ONE_BACKEND
@pytest.mark.parametrize(
    "argv,code,message",
    [
        (["demo", "--model", "ViTXL99"], 2, "ViTTi16"),
        (["demo", "--batch-size", "0"], 2, "batch_size"),
        (["predict", "--model", "B/16", "--top", "0", "x.jpg"], 2, "top"),
        (["convert", "missing.npz", "out.safetensors"], 1, "missing.npz"),
        (["convert", "missing.npz", "out", "--to", "onnx"], 2, "format"),
    ],
)
def test_user_errors_are_one_line(capsys, argv, code, message):
    assert cli.main(argv) == code
    err = capsys.readouterr().err
    assert message in err and err.startswith(f"keras-vit {argv[0]}: ")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@ONE_BACKEND
@pytest.mark.parametrize("command", ["finetune", "inspect"])
def test_an_output_folder_that_is_a_file_is_one_line_before_any_work(capsys, tmp_path, command):
    taken = tmp_path / "notes.txt"
    taken.write_text("kept")
    assert cli.main([command, "--out", str(taken)]) == 1
    err = capsys.readouterr().err
    assert err == f"keras-vit {command}: The output folder {taken} is a file; choose another folder.\n"
    assert taken.read_text() == "kept" and os.listdir(tmp_path) == ["notes.txt"]


def test_demo_runs_a_small_model(capsys):
    code = cli.main(["demo", "--model", "Ti/16", "--image-size", "32", "--batch-size", "3", "--classes", "7"])
    out = capsys.readouterr().out
    assert code == 0
    assert "model:         ViTTi16" in out
    assert "output shape:  (3, 7)" in out
    assert "input shape:   (3, 32, 32, 3)" in out
    # Ti/16 at 32 px: the 5,524,416-parameter backbone at 224 px minus 192 rows of the
    # position embedding (197 -> 5 tokens), plus a 7-class head.
    params = int(re.search(r"parameters:\s+([\d,]+)", out).group(1).replace(",", ""))
    assert params == 5_524_416 - 192 * 192 + 192 * 7 + 7
    assert re.search(r"forward pass:\s+[\d.]+ s first call", out)


@ONE_BACKEND
@pytest.mark.parametrize("tty, argv, verbose", [(False, [], 2), (True, [], None), (False, ["--verbose", "1"], 1)])
def test_finetune_logs_one_line_per_epoch_when_piped(monkeypatch, tty, argv, verbose):
    from keras_vit.training import finetune

    received = {}

    def fake_finetune(**options):
        received.update(options)
        raise ValueError("stop here")

    monkeypatch.setattr(finetune, "finetune", fake_finetune)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    assert cli.main(["finetune", "--steps", "1", *argv]) == 2
    assert received.get("verbose") == verbose  # None: not passed, the library's default (a progress bar)


@ONE_BACKEND
def test_an_unknown_keras_backend_is_one_line_naming_the_choices(monkeypatch, capsys):
    monkeypatch.setenv("KERAS_BACKEND", "mxnet")
    assert cli.main(["demo"]) == 2
    err = capsys.readouterr().err
    assert err == "keras-vit demo: KERAS_BACKEND='mxnet' is not a Keras backend: set it to tensorflow, jax or torch.\n"


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="the launcher refuses the other backends")
def test_launch_refuses_a_backend_other_than_jax_before_starting_processes(monkeypatch, capsys):
    import subprocess

    monkeypatch.setattr(subprocess, "Popen", lambda *args, **kwargs: pytest.fail("a process was started"))
    assert cli.main(["launch", "--processes", "2", "finetune", "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-vit launch: Several processes train one model on the JAX backend only")
    assert len(err.splitlines()) == 1
