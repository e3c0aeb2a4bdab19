"""The `keras-vit` command line (also `python -m keras_vit_cli`); the backend comes from `KERAS_BACKEND`.

A command is a module of `keras_vit_cli.commands` named in `COMMANDS` that imports no Keras at module level: its
docstring is its help, `add_arguments` adds its options (only when that command is run), the optional `check(args)`
runs before the work, `run(args)` returns the exit code. `TENSORFLOW_ON` names the backends on which it uses
TensorFlow (default: tensorflow), imported before `run` with its native start-up lines silenced.
"""

import argparse
import importlib
import inspect
import os
import select
import sys
from importlib import metadata

from keras_vit_cli import quiet
from keras_vit_cli.commands import COMMANDS

__all__ = ["COMMANDS", "build_parser", "main"]

KERAS_BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")


def build_parser(options_of=COMMANDS):
    """Returns the `argparse.ArgumentParser` of `keras-vit` with the options of the commands `options_of` only: a
    command's help line needs none, so `keras-vit --help` imports no Keras (finetune's options do)."""
    try:
        version = metadata.version("keras-vision-transformer")
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    parser = argparse.ArgumentParser(
        prog="keras-vit",
        description="Vision Transformers in Keras 3. The backend comes from KERAS_BACKEND (tensorflow, jax, torch).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"keras_vit_cli.commands.{name}")
        description = inspect.cleandoc(module.__doc__)
        subparser = subparsers.add_parser(
            name,
            help=description.splitlines()[0].rstrip("."),
            description=description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name in options_of:
            module.add_arguments(subparser)
        subparser.set_defaults(run=module.run)
    return parser


def _stdout_closed():
    """Whether the reader of stdout is gone (`keras-vit variants | head -1`); if so, stdout goes to /dev/null."""
    poll = select.poll()
    poll.register(sys.stdout.fileno(), select.POLLOUT)
    if not any(events & select.POLLERR for _, events in poll.poll(0)):
        return False
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return True


def _run(args):
    backend = os.environ.get("KERAS_BACKEND")
    if backend is not None and backend not in KERAS_BACKENDS:
        raise ValueError(f"KERAS_BACKEND={backend!r} is not a Keras backend: set it to tensorflow, jax or torch.")
    module = importlib.import_module(f"keras_vit_cli.commands.{args.command}")
    if hasattr(module, "check"):
        module.check(args)  # before the work: offline and bad inputs fail at once
    if quiet.keras_backend() in getattr(module, "TENSORFLOW_ON", ("tensorflow",)):
        quiet.import_tensorflow()
    return args.run(args)


def main(argv=None):
    """Runs `keras-vit` with `argv` (default: `sys.argv[1:]`) and returns the exit code."""
    quiet.install(tensorflow=False)
    argv = sys.argv[1:] if argv is None else list(argv)
    # `keras-vit` takes no option with a value: its first word not starting with "-" is the command.
    command = next((word for word in argv if not word.startswith("-")), None)
    args = build_parser(options_of=(command,)).parse_args(argv)
    prefix = f"keras-vit {args.command}:"
    try:
        return _run(args)
    except (ValueError, OSError) as error:
        if isinstance(error, BrokenPipeError) and _stdout_closed():
            return 141  # 128 + SIGPIPE, as `yes | head` ends
        print(prefix, error, file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 1
    except KeyboardInterrupt:
        print(prefix, "interrupted; no output was left half-written", file=sys.stderr)
        return 130  # 128 + SIGINT
    except ImportError as error:
        from keras_vit.utils import extras

        missing = extras.from_import_error(error)
        if missing is None:
            raise
        print(prefix, missing, file=sys.stderr)
        return 1
