"""The `keras-vit` command line (also `python -m keras_vit_cli`).

    keras-vit --help                     # the commands
    keras-vit demo                       # build ViT-Ti/16, time a forward pass
    KERAS_BACKEND=jax keras-vit demo --model ViTS16 --batch-size 8

The backend is Keras's: set `KERAS_BACKEND` (`tensorflow`, `jax`, `torch`)
before the command; it cannot be switched once Keras is imported.

This package sits above the library: it imports `keras_vit`, never the
reverse, and it imports it (and so Keras) only when a command runs, so
`keras-vit --help` and `keras-vit COMMAND --help` answer at once.

Adding a command: write `keras_vit_cli/commands/NAME.py` with

- a module docstring: its first line is the one-line help of
  `keras-vit --help`, the whole docstring the description of
  `keras-vit NAME --help`;
- `add_arguments(parser)`: adds the command's options to an argparse parser;
- `run(args) -> int`: does the work and returns the exit code,
- optionally `TENSORFLOW_ON`: the backends on which it uses TensorFlow
  (default `("tensorflow",)`), and `USES_KERAS = False` for a command that
  imports no Keras,

then add NAME to `COMMANDS` in `keras_vit_cli/commands/__init__.py`. A
command module imports nothing heavy at module level (no `keras`, no
`keras_vit`): `run` imports what it needs. Models are named through
`keras_vit.models.applications.constructor_for` (`ViTB16` or `B/16`), and arguments are
checked with `keras_vit.utils.validation` inside `run`.

Framework logs are off (`keras_vit_cli.quiet`): TensorFlow, absl, XLA and
export-tool lines and third-party deprecation warnings do not show (a
command that uses TensorFlow imports it first, its native output sent to
/dev/null); `KERAS_VIT_VERBOSE=1` brings them back.

Errors the user can fix end as one line on stderr, never a traceback:
usage errors (argparse, and `ValueError` from the library: bad values,
unknown tags, bad checkpoints) exit 2; I/O errors (`OSError`: missing files,
downloads, offline) exit 1, and so does a missing optional dependency (the
line names the extra to install, `keras_vit.utils.extras`).

Example:

>>> parser = build_parser()
>>> parser.parse_args(["demo", "--batch-size", "4"]).batch_size
4
"""

import argparse
import importlib
import inspect
import os
import sys

from keras_vit_cli import quiet
from keras_vit_cli.commands import COMMANDS

__all__ = ["COMMANDS", "build_parser", "command_module", "main"]


def command_module(name):
    """The module of command `name` (see the protocol above)."""
    return importlib.import_module(f"keras_vit_cli.commands.{name}")


def _version():
    from importlib import metadata

    try:
        return metadata.version("keras-vision-transformer")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser():
    """Returns the `argparse.ArgumentParser` of `keras-vit` with every command (imports no Keras)."""
    parser = argparse.ArgumentParser(
        prog="keras-vit",
        description="Vision Transformers in Keras 3. The backend comes from KERAS_BACKEND (tensorflow, jax, torch).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = command_module(name)
        description = inspect.cleandoc(module.__doc__)
        subparser = subparsers.add_parser(
            name,
            help=description.splitlines()[0].rstrip("."),
            description=description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(subparser)
        subparser.set_defaults(run=module.run)
    return parser


# The backends Keras 3 can import; the commands are tested on the first three.
KERAS_BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")


def _check_backend_setting():
    """A `KERAS_BACKEND` that Keras does not know fails here, naming the choices (Keras's own import error says
    "Unable to import backend : mxnet" and nothing more)."""
    backend = os.environ.get("KERAS_BACKEND")
    if backend is not None and backend not in KERAS_BACKENDS:
        raise ValueError(f"KERAS_BACKEND={backend!r} is not a Keras backend: set it to tensorflow, jax or torch.")


def _stdout_reader_gone():
    """Whether the reader of standard output closed it (`keras-vit variants | head -3`).

    The write end of a pipe whose reader is gone polls as an error. If so, standard output goes to /dev/null
    from here: Python flushes it at exit, which would fail again.
    """
    import select

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        gone = any(events & select.POLLERR for _, events in poll.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll() (Windows), or no real stdout
        return False
    if gone:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return gone


def _prepare_frameworks(module):
    """Before a command runs: TensorFlow imported quietly where it uses it, and not imported where it does not."""
    if quiet.keras_backend() in getattr(module, "TENSORFLOW_ON", ("tensorflow",)):
        quiet.import_tensorflow()
    if getattr(module, "USES_KERAS", True):
        from keras_vit.utils import keras_compat

        # Keras's serializer would import TensorFlow on jax / torch at the first get_config() (seconds).
        keras_compat.serializer_imports_no_tensorflow()


def main(argv=None):
    """Runs `keras-vit` with `argv` (default: `sys.argv[1:]`) and returns the exit code."""
    quiet.install(tensorflow=False)  # before any command imports Keras
    args = build_parser().parse_args(argv)
    try:
        _check_backend_setting()
        module = command_module(args.command)
        if hasattr(module, "check"):
            module.check(args)  # a command's own checks that need no framework: they fail before any import
        _prepare_frameworks(module)
        return args.run(args)
    except BrokenPipeError as error:
        if _stdout_reader_gone():
            return 141  # 128 + SIGPIPE, as `yes | head` reports it: the reader had what it wanted
        print(f"keras-vit {args.command}: {error}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as error:
        print(f"keras-vit {args.command}: {error}", file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 1
    except KeyboardInterrupt:
        # Ctrl-C is the user's own choice, not a fault: one line, no traceback. Outputs are staged and renamed
        # into place (keras_vit.utils.files), so none is left half-written; `finetune` resumes from its backup.
        print(f"keras-vit {args.command}: interrupted; no output was left half-written", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports it
    except ImportError as error:
        # A missing optional dependency says which extra to install: one line, exit 1. (Imported here, once
        # keras_vit is loaded anyway, so that building the parser stays free of Keras.)
        from keras_vit.utils import extras

        missing = extras.from_import_error(error)
        if missing is None:
            raise
        print(f"keras-vit {args.command}: {missing}", file=sys.stderr)
        return 1
