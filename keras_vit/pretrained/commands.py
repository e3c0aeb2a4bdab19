"""The `download`, `convert` and `predict` subcommands of `keras-vit`.

Registered in `keras_vit/cli.py`; each is an `_arguments(parser)` /
`run(args) -> exit code` pair. Errors that are the user's to fix (unknown tag,
bad file, offline) propagate to `keras_vit.cli.main`, which prints one clear
line and exits with 2 (ValueError: bad input) or 1 (download and I/O errors).
"""

import os

# --------------------------------------------------------------------------- download


def download_arguments(parser):
    parser.add_argument("model", help="ViTB16, ViTL16, ... (or B/16)")
    parser.add_argument("--weights", required=True, help="a checkpoint tag, 'imagenet', or hf://org/repo")
    parser.add_argument(
        "--image-size", type=int, default=224, help="picks the tag's nearest resolution (default: %(default)s)"
    )


def download(args):
    """Fetches a checkpoint into the cache, to pre-seed machines without network.

    Hub files go to the huggingface_hub cache (HF_HUB_CACHE), official URLs to
    KERAS_VIT_CACHE. Copy those folders to the offline machine and set
    HF_HUB_OFFLINE=1 (or KERAS_VIT_OFFLINE=1) there.
    """
    from keras_vit.models import constructor_for
    from keras_vit.pretrained import loader, sources

    variant = constructor_for(args.model).variant
    source = sources.resolve_source(variant, args.weights, (args.image_size, args.image_size))
    path, format = sources.fetch(source)
    checkpoint = loader.load_checkpoint(path, format)  # verifies the file is complete and readable
    print(f"{source.describe()}\n  cached at {os.path.realpath(path)}")
    print(f"  {checkpoint.layout}; {checkpoint.facts.describe()}")
    return 0


# --------------------------------------------------------------------------- convert


def convert_arguments(parser):
    parser.add_argument("src", help="a checkpoint (.npz, .safetensors, save_pretrained folder) or a .keras model")
    parser.add_argument("dst", help="output: a folder for --to hf, a .safetensors file for timm, an .npz for official")
    parser.add_argument(
        "--to",
        choices=("hf", "timm", "official"),
        default=None,
        help="target layout (default: from DST: .npz -> official, .safetensors -> timm, else hf)",
    )
    parser.add_argument(
        "--num-heads",
        type=int,
        default=None,
        help="attention heads (needed by hf/official; default: from the ViT size table by hidden size)",
    )
    parser.add_argument(
        "--image-size",
        type=int,
        nargs=2,
        metavar=("HEIGHT", "WIDTH"),
        default=None,
        help="image size the position embedding is for (default: from the file, else square)",
    )


def _target_format(args):
    if args.to:
        return args.to
    if args.dst.endswith(".npz"):
        return "official"
    if args.dst.endswith(".safetensors"):
        return "timm"
    return "hf"


def _heads_for(hidden_dim):
    import keras_vit

    heads = {spec["hidden_dim"]: spec["num_heads"] for spec in keras_vit.VARIANTS.values()}
    if hidden_dim not in heads:
        raise ValueError(f"Hidden size {hidden_dim} is not a published ViT size: pass --num-heads.")
    return heads[hidden_dim]


def convert(args):
    """Converts a checkpoint between the official .npz, timm and Hugging Face layouts.

    The source layout is detected from the tensor names; a .keras model file is
    exported too. Every tensor is mapped with strict accounting, and the output
    is written atomically.
    """
    from keras_vit.pretrained import export, loader

    to = _target_format(args)
    if args.src.endswith(".keras"):
        import keras

        model = keras.saving.load_model(args.src)
        written = export.export_weights(model, args.dst, to)
    else:
        checkpoint = loader.load_checkpoint(args.src)
        facts = checkpoint.facts
        patch = facts.patch_size
        grid = None
        if args.image_size:
            grid = (args.image_size[0] // patch[0], args.image_size[1] // patch[1])
        grid = loader.checkpoint_grid(checkpoint, target_grid=grid)
        architecture = {
            "num_heads": args.num_heads or _heads_for(facts.hidden_dim),
            "mlp_dim": int(checkpoint.weights["encoder_block_0/mlp/fc1/bias"].shape[0]),
            "hidden_dim": facts.hidden_dim,
            "patch_size": patch,
            "grid_size": grid,
            "num_layers": facts.num_layers,
            "gelu_approximate": False,
        }
        written = export.write_weights(checkpoint.weights, args.dst, to, architecture)
    print(f"wrote {written} ({to} layout)")
    return 0


# --------------------------------------------------------------------------- predict


def predict_arguments(parser):
    parser.add_argument("images", nargs="+", help="image files")
    parser.add_argument("--model", default="ViTB16", help="ViTB16, ... (default: %(default)s)")
    parser.add_argument(
        "--weights", default="imagenet", help="tag, 'imagenet', file or hf://org/repo (default: %(default)s)"
    )
    parser.add_argument("--image-size", type=int, default=224, help="square input size (default: %(default)s)")
    parser.add_argument(
        "--classes", type=int, default=1000, help="classes of the checkpoint's head (default: %(default)s)"
    )
    parser.add_argument("--top", type=int, default=5, help="how many classes to print (default: %(default)s)")


def _load_image(path, size):
    import numpy as np
    from PIL import Image

    with Image.open(path) as image:
        # The official evaluation: a plain bilinear resize to the input size.
        image = image.convert("RGB").resize((size, size), Image.BILINEAR)
        return np.asarray(image, dtype="float32")


def predict(args):
    """Classifies images with a pretrained ViT and prints the top classes.

    Images are resized bilinearly to --image-size and scaled to [-1, 1]; labels
    are the ImageNet-1k names for 1000-class heads, class indices otherwise.
    """
    import numpy as np

    from keras_vit.models import constructor_for

    if args.top < 1:
        raise ValueError(f"--top must be positive. Received: {args.top}")
    model = constructor_for(args.model)(
        weights=args.weights, input_shape=(args.image_size, args.image_size, 3), classes=args.classes
    )
    batch = np.stack([_load_image(path, args.image_size) for path in args.images])
    import keras

    from keras_vit.preprocessing import decode_predictions, preprocess_input

    probabilities = keras.ops.convert_to_numpy(model(preprocess_input(batch), training=False))
    top = min(args.top, probabilities.shape[-1])
    decoded = decode_predictions(probabilities, top=top) if probabilities.shape[-1] == 1000 else None
    for row, path in enumerate(args.images):
        print(path)
        if decoded is not None:
            for wnid, name, score in decoded[row]:
                print(f"  {score:.4f}  {name} ({wnid})")
            continue
        for index in np.argsort(-probabilities[row], kind="stable")[:top]:
            print(f"  {probabilities[row, index]:.4f}  class {index}")
    return 0
