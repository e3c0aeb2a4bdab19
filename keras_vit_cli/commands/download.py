"""Fetch a pretrained checkpoint into the cache (pre-seed offline machines).

Hub files go to the huggingface_hub cache (HF_HUB_CACHE), https URLs to
KERAS_VIT_CACHE. Copy those folders to the offline machine and set
HF_HUB_OFFLINE=1 (or KERAS_VIT_OFFLINE=1) there. The file is read and
converted once to check it is complete.
"""

from keras_vit_cli import options


def add_arguments(parser):
    parser.add_argument("model", help="a constructor (ViTB16) or variant (B/16)")
    options.add_weights(parser, None, help="a checkpoint tag, 'imagenet', hf://org/repo or an https URL", required=True)
    parser.add_argument(
        "--image-size", type=int, default=224, help="picks the tag's nearest resolution (default: %(default)s)"
    )


def run(args):
    import os

    from keras_vit.models.applications import constructor_for
    from keras_vit.pretrained import loader, sources
    from keras_vit.utils import validation

    if args.weights is None:
        raise ValueError("--weights none: random weights, nothing to download")
    variant = constructor_for(args.model).variant
    size = validation.positive_int("image_size", args.image_size)
    source = sources.resolve_source(variant, args.weights, (size, size))
    path, format = sources.fetch(source)
    checkpoint = loader.load_checkpoint(path, format)  # verifies the file is complete and readable
    print(f"{source.describe()}\n  cached at {os.path.realpath(path)}")
    print(f"  {checkpoint.layout}; {checkpoint.describe()}")
    return 0
