"""Convert a checkpoint between the official .npz, timm and Hugging Face layouts.

The source layout (or a .keras model) is detected; an existing DST is replaced
only with --overwrite.
"""

import os


def add_arguments(parser):
    parser.add_argument("src", help="a checkpoint (.npz, .safetensors, save_pretrained folder) or a .keras model")
    parser.add_argument("dst", help="output: a folder for --to hf, a .safetensors file for timm, an .npz for official")
    parser.add_argument("--to", help="hf, timm or official (default: .npz official, .safetensors timm, else hf)")
    parser.add_argument("--num-heads", type=int, help="attention heads (default: from the variant table)")
    size_help = "the image size of the position embedding (default: from the file, else square)"
    parser.add_argument("--image-size", type=int, nargs=2, metavar=("HEIGHT", "WIDTH"), help=size_help)
    parser.add_argument("--overwrite", action="store_true", help="replace DST if it exists (default: refuse)")


def check(args):
    if os.path.lexists(args.dst) and not args.overwrite:
        raise FileExistsError(f"{args.dst} exists: choose a new path, or pass --overwrite to replace it.")


def run(args):
    from keras_vit.pretrained.export import convert_checkpoint

    written, format = convert_checkpoint(
        args.src, args.dst, args.to, args.num_heads, args.image_size, replace=args.overwrite
    )
    print(f"wrote {written} ({format} layout)")
    return 0
