"""The `keras-vit` command (also `python -m keras_vit`).

    keras-vit demo                       # build ViT-Ti/16, time a forward pass
    KERAS_BACKEND=jax keras-vit demo --model ViTS16 --batch-size 8

The backend is Keras's: set `KERAS_BACKEND` (`tensorflow`, `jax`, `torch`)
before the command; it cannot be switched once Keras is imported.

Adding a subcommand: write `_<name>_arguments(parser)` (adds its options) and
`_<name>(args)` (does the work, returns an exit code; its docstring is the
`--help` description), then add one row to `SUBCOMMANDS`. Import heavy modules
(TensorFlow, datasets, ...) inside `_<name>`, so `keras-vit --help` stays fast.
"""

import argparse
import inspect
import sys
import time


def _demo_arguments(parser):
    parser.add_argument(
        "--model", default="ViTTi16", help="a constructor name from keras_vit.CONSTRUCTORS (default: %(default)s)"
    )
    parser.add_argument("--batch-size", type=int, default=2, help="images per batch (default: %(default)s)")
    parser.add_argument(
        "--image-size", type=int, default=224, help="square image side in pixels (default: %(default)s)"
    )
    parser.add_argument("--classes", type=int, default=1000, help="size of the head (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the weights and the images")


def _demo(args):
    """Builds a randomly initialised ViT (no download) and runs it on a random batch.

    Prints the backend, the parameter count, the output shape and how long the
    first forward pass (which includes tracing) and a second one took.
    """
    import keras
    import numpy as np

    import keras_vit
    from keras_vit.preprocessing import preprocess_input

    constructors = keras_vit.CONSTRUCTORS
    if args.model not in constructors:
        print(f"keras-vit demo: unknown --model {args.model!r}; choose one of: {', '.join(constructors)}",
              file=sys.stderr)
        return 2
    for option in ("batch_size", "image_size", "classes"):
        if getattr(args, option) < 1:
            print(f"keras-vit demo: --{option.replace('_', '-')} must be positive", file=sys.stderr)
            return 2

    keras.utils.set_random_seed(args.seed)
    model = constructors[args.model](
        weights=None, input_shape=(args.image_size, args.image_size, 3), classes=args.classes
    )
    pixels = np.random.default_rng(args.seed).integers(0, 256, size=(args.batch_size, args.image_size,
                                                                      args.image_size, 3))
    images = preprocess_input(pixels)

    timings = []
    for _ in range(2):
        start = time.perf_counter()
        outputs = keras.ops.convert_to_numpy(model(images, training=False))
        timings.append(time.perf_counter() - start)

    print(f"backend:       {keras.backend.backend()}")
    print(f"model:         {args.model} ({model.name}), random weights")
    print(f"parameters:    {model.count_params():,}")
    print(f"input shape:   {tuple(images.shape)}")
    print(f"output shape:  {tuple(outputs.shape)}")
    print(f"forward pass:  {timings[0]:.3f} s first call (includes tracing), {timings[1]:.3f} s second call")
    if not np.all(np.isfinite(outputs)):
        print("keras-vit demo: the outputs are not all finite", file=sys.stderr)
        return 1
    return 0


# The one place subcommands are registered: (name, one-line help, add_arguments(parser), run(args) -> exit code).
SUBCOMMANDS = (
    ("demo", "build a random-weight ViT and time a forward pass on a random batch", _demo_arguments, _demo),
)


def _version():
    from importlib import metadata

    try:
        return metadata.version("keras-vision-transformer")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser():
    """Returns the `argparse.ArgumentParser` of `keras-vit` with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="keras-vit",
        description="Vision Transformers in Keras 3. The backend comes from KERAS_BACKEND (tensorflow, jax, torch).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text, add_arguments, run in SUBCOMMANDS:
        subparser = subparsers.add_parser(
            name, help=help_text, description=inspect.cleandoc(run.__doc__ or help_text), formatter_class=argparse.RawDescriptionHelpFormatter
        )
        add_arguments(subparser)
        subparser.set_defaults(run=run)
    return parser


def main(argv=None):
    """Runs `keras-vit` with `argv` (default: `sys.argv[1:]`) and returns the exit code."""
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
