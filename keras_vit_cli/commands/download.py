"""Fetch a pretrained checkpoint into the cache (pre-seed offline machines).

Hub files go to HF_HUB_CACHE, https URLs to KERAS_VIT_CACHE: copy those folders
to the offline machine and set HF_HUB_OFFLINE=1 (or KERAS_VIT_OFFLINE=1) there.
"""

import os

from keras_vit_cli import options


def add_arguments(parser):
    parser.add_argument("model", help="a constructor (ViTB16) or variant (B/16)")
    weights_help = "a checkpoint tag, 'imagenet', hf://org/repo or an https URL"
    parser.add_argument("--weights", type=options.weights_value, required=True, help=weights_help)
    options.add_image_size(parser, help="picks the tag's nearest resolution")


def check(args):
    if args.weights is None:
        raise ValueError("--weights none: random weights, nothing to download")


def run(args):
    from keras_vit.models.applications import constructor_for
    from keras_vit.pretrained import loader, sources
    from keras_vit.utils import validation

    variant = constructor_for(args.model).variant
    size = validation.positive_int("image_size", args.image_size)
    source = sources.resolve_source(variant, args.weights, (size, size))
    path, format = sources.fetch(source)
    checkpoint = loader.load_checkpoint(path, format)
    print(f"{source.describe()}\n  cached at {os.path.realpath(path)}")
    print(f"  {checkpoint.layout}; {checkpoint.describe()}")
    return 0
