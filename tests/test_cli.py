"""The `keras-vit` command: parser structure and the `demo` subcommand."""

import argparse
import re

import pytest

from keras_vit import cli


def test_every_registered_subcommand_has_a_parser_and_a_handler():
    parser = cli.build_parser()
    (subparsers,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    assert list(subparsers.choices) == [name for name, _, _, _ in cli.SUBCOMMANDS]
    for name, _, _, run in cli.SUBCOMMANDS:
        assert subparsers.choices[name].get_default("run") is run
        assert run.__doc__, f"subcommand {name!r} needs a docstring: it is its --help description"


def test_a_subcommand_is_required(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([])
    assert info.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("keras-vit ")


def test_demo_runs_a_small_model(capsys):
    code = cli.main(["demo", "--image-size", "32", "--batch-size", "3", "--classes", "7"])
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


def test_demo_rejects_an_unknown_model(capsys):
    assert cli.main(["demo", "--model", "ViTXL99"]) == 2
    assert "ViTTi16" in capsys.readouterr().err


def test_demo_rejects_a_non_positive_batch(capsys):
    assert cli.main(["demo", "--batch-size", "0"]) == 2
    assert "--batch-size must be positive" in capsys.readouterr().err
