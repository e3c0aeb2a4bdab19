"""Attention rollout and the paper's inspection figures for an image.

Writes five PNGs (attention rollout, class-token attention, mean attention
distance, position-embedding similarity, embedding filters) to --out. Needs
matplotlib: pip install "keras-vision-transformer[inspect]".
"""

import sys

from keras_vit_cli import options


def add_arguments(parser):
    parser.add_argument("image", nargs="?", default=None, help="the image file (default: keras_vit's sample photo)")
    options.add_model(parser, "ViTB16", saved_model=True)
    options.add_weights(parser)
    parser.add_argument("--image-size", type=int, default=None, help="a constructor's square input size")
    parser.add_argument("--out", default="inspect", help="folder for the PNGs (default: %(default)s)")
    parser.add_argument("--head-fusion", default="mean", help="rollout head fusion: mean, max or min")
    parser.add_argument("--discard-ratio", type=float, default=0.0, help="rollout discard ratio in [0, 1)")
    parser.add_argument("--num-components", type=int, default=28, help="embedding-filter components to draw")
    parser.add_argument("--dpi", type=int, default=100, help="resolution of the PNGs (default: %(default)s)")


def check(args):
    if args.model.endswith(".keras") and (args.weights is not None or args.image_size is not None):
        raise ValueError(
            f"--weights and --image-size apply to constructor names; the saved model {args.model!r} has its own "
            f"weights and input size. Received: weights={args.weights!r}, image_size={args.image_size!r}"
        )


def run(args):
    from keras_vit.inspection import report
    from keras_vit.models import metadata
    from keras_vit.utils import extras, files, validation

    extras.check("matplotlib", "PIL", needed_for="keras-vit inspect", extra="inspect")
    files.check_output_folder(args.out)
    validation.rate("discard_ratio", args.discard_ratio)
    validation.positive_int("num_components", args.num_components)
    validation.finite_float("dpi", args.dpi, minimum=0, include_minimum=False)
    model = options.load_model(args.model, args.weights, args.image_size)
    if args.weights is None and not args.model.endswith(".keras"):
        print("keras-vit inspect: no --weights: the figures show a randomly initialised model", file=sys.stderr)
    image = args.image or report.sample_image_path()
    figures = dict(head_fusion=args.head_fusion, discard_ratio=args.discard_ratio, num_components=args.num_components)
    paths = report.write_report(model, image, args.out, dpi=args.dpi, **figures)
    print(*paths.values(), sep="\n")
    names = metadata.class_names(model)
    if names is not None:
        print(f"class names ({len(names)}): {', '.join(names)}")
    return 0
