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

# download / convert / predict live with the weights machinery (no heavy imports at module level).
from keras_vit.pretrained import commands as _weights_commands


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
        print(
            f"keras-vit demo: unknown --model {args.model!r}; choose one of: {', '.join(constructors)}", file=sys.stderr
        )
        return 2
    for option in ("batch_size", "image_size", "classes"):
        if getattr(args, option) < 1:
            print(f"keras-vit demo: --{option.replace('_', '-')} must be positive", file=sys.stderr)
            return 2

    keras.utils.set_random_seed(args.seed)
    model = constructors[args.model](
        weights=None, input_shape=(args.image_size, args.image_size, 3), classes=args.classes
    )
    pixels = np.random.default_rng(args.seed).integers(
        0, 256, size=(args.batch_size, args.image_size, args.image_size, 3)
    )
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


def _inspect_arguments(parser):
    parser.add_argument(
        "image", nargs="?", default=None, help="the image file (default: the photograph bundled with keras_vit)"
    )
    parser.add_argument(
        "--model",
        default="ViTB16",
        help="a constructor (ViTB16), a variant (B/16) or the path of a saved .keras model (default: %(default)s)",
    )
    parser.add_argument(
        "--weights", default=None, help="passed as the constructor's weights= argument (default: random weights)"
    )
    parser.add_argument("--image-size", type=int, default=None, help="a constructor's square input size")
    parser.add_argument("--out", default="inspect", help="folder for the PNGs (default: %(default)s)")
    parser.add_argument("--head-fusion", choices=("mean", "max", "min"), default="mean", help="rollout head fusion")
    parser.add_argument("--discard-ratio", type=float, default=0.0, help="rollout discard ratio in [0, 1)")
    parser.add_argument("--num-components", type=int, default=28, help="embedding-filter components to draw")
    parser.add_argument("--dpi", type=int, default=100, help="resolution of the PNGs (default: %(default)s)")


def _inspect(args):
    """Writes the paper's "Inspecting Vision Transformer" figures for one image.

    attention_rollout.png, class_token_attention.png (last layer, every head),
    mean_attention_distance.png, position_embedding_similarity.png and
    embedding_filters.png go to --out. Needs matplotlib
    (pip install "keras-vision-transformer[inspect]").
    """
    from keras_vit.inspection import report

    if args.weights is None and not args.model.endswith(".keras"):
        print("keras-vit inspect: no --weights: the figures show a randomly initialised model", file=sys.stderr)
    model = report.build_model(args.model, weights=args.weights, image_size=args.image_size)
    paths = report.write_report(
        model,
        args.image or report.sample_image_path(),
        args.out,
        head_fusion=args.head_fusion,
        discard_ratio=args.discard_ratio,
        num_components=args.num_components,
        dpi=args.dpi,
    )
    for path in paths.values():
        print(path)
    return 0


def _finetune_arguments(parser):
    from keras_vit import finetune

    finetune.add_arguments(parser)


def _finetune(args):
    """Trains a small ViT on the bundled digits (no arguments) or fine-tunes any variant.

    Writes model.keras, metrics.json (held-out accuracy, steps, images/s) and
    training_curves.png to --out; a killed run resumes from out/backup when
    restarted with the same command.
    """
    from keras_vit import finetune

    return finetune.run(args)


def _variants_arguments(parser):
    parser.add_argument(
        "--image-size", type=int, default=224, help="square image side in pixels (default: %(default)s)"
    )
    parser.add_argument("--classes", type=int, default=1000, help="size of the head (default: %(default)s)")


def _variants(args):
    """Prints the variant table (a Markdown table, as in the README): the
    architecture, the parameter count of the model as built, and the analytic
    forward-pass GFLOPs (2 per multiply-add) of one image."""
    import keras

    import keras_vit
    from keras_vit.flops import forward_flops

    print(
        f"| constructor | variant | patch | hidden | layers | heads | MLP | params ({args.classes}-class head) "
        f"| GFLOPs at {args.image_size} |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, constructor in keras_vit.CONSTRUCTORS.items():
        variant_name = constructor.variant
        variant = keras_vit.VARIANTS[variant_name]
        model = constructor(input_shape=(args.image_size, args.image_size, 3), classes=args.classes)
        gflops = forward_flops(variant, args.image_size, args.classes) / 1e9
        print(
            f"| `{name}` | {variant_name} | {variant['patch_size']} | {variant['hidden_dim']} | "
            f"{variant['num_layers']} | {variant['num_heads']} | {variant['mlp_dim']} | "
            f"{model.count_params():,} | {gflops:.1f} |"
        )
        del model
        keras.backend.clear_session()
    return 0


# The one place subcommands are registered: (name, one-line help, add_arguments(parser), run(args) -> exit code).
SUBCOMMANDS = (
    ("demo", "build a random-weight ViT and time a forward pass on a random batch", _demo_arguments, _demo),
    ("variants", "the table of ViT variants: sizes, parameter counts, GFLOPs", _variants_arguments, _variants),
    ("inspect", "attention rollout and the paper's inspection figures for an image", _inspect_arguments, _inspect),
    ("finetune", "train a ViT on the bundled digits, or fine-tune any variant", _finetune_arguments, _finetune),
    (
        "download",
        "fetch a pretrained checkpoint into the cache (pre-seed offline machines)",
        _weights_commands.download_arguments,
        _weights_commands.download,
    ),
    (
        "convert",
        "convert a checkpoint between the official .npz, timm and Hugging Face layouts",
        _weights_commands.convert_arguments,
        _weights_commands.convert,
    ),
    (
        "predict",
        "classify images with a pretrained ViT and print the top classes",
        _weights_commands.predict_arguments,
        _weights_commands.predict,
    ),
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
            name,
            help=help_text,
            description=inspect.cleandoc(run.__doc__ or help_text),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_arguments(subparser)
        subparser.set_defaults(run=run)
    return parser


def main(argv=None):
    """Runs `keras-vit` with `argv` (default: `sys.argv[1:]`) and returns the exit code."""
    args = build_parser().parse_args(argv)
    # Errors the user can fix end as one line, not a traceback: bad input
    # (ValueError, including unknown tags and bad checkpoints) exits 2,
    # downloads and files (OSError, including offline and hash errors) exit 1.
    try:
        return args.run(args)
    except (ValueError, OSError) as error:
        print(f"keras-vit {args.command}: {error}", file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 1


if __name__ == "__main__":
    sys.exit(main())
