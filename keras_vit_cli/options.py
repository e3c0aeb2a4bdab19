"""Options several `keras-vit` commands share, spelled (and documented) once.

Example:

>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_model(parser, "ViTB16")
>>> add_image_size(parser)
>>> add_classes(parser)
>>> vars(parser.parse_args(["--model", "B/16"]))
{'model': 'B/16', 'image_size': 224, 'classes': 1000}
"""


def add_model(parser, default, saved_model=False):
    """`--model`: a constructor (`ViTB16`) or variant (`B/16`), or also a saved `.keras` model."""
    what = "a constructor (ViTB16), a variant (B/16)" + (" or a saved .keras model" if saved_model else "")
    parser.add_argument("--model", default=default, help=f"{what} (default: %(default)s)")


def add_image_size(parser, default=224, help="square image side in pixels"):
    """`--image-size`: a square input size."""
    parser.add_argument("--image-size", type=int, default=default, help=f"{help} (default: %(default)s)")


def add_classes(parser, help="size of the head"):
    """`--classes`: the head's number of classes."""
    parser.add_argument("--classes", type=int, default=1000, help=f"{help} (default: %(default)s)")
