"""Convert a checkpoint between the official .npz, timm and Hugging Face layouts.

The source layout is detected from the tensor names; a .keras model file is
exported too. Every tensor is mapped with strict accounting, and the output
is written atomically (`keras_vit.pretrained.export.convert_checkpoint`).
An existing output is replaced only with --overwrite, as `export` never
replaces one: a mistyped destination must not cost a file.
"""

import os


def add_arguments(parser):
    parser.add_argument("src", help="a checkpoint (.npz, .safetensors, save_pretrained folder) or a .keras model")
    parser.add_argument("dst", help="output: a folder for --to hf, a .safetensors file for timm, an .npz for official")
    parser.add_argument(
        "--to", default=None, help="hf, timm or official (default: from DST: .npz official, .safetensors timm, else hf)"
    )
    parser.add_argument(
        "--num-heads", type=int, default=None, help="attention heads (default: from the variant table by hidden size)"
    )
    parser.add_argument(
        "--image-size",
        type=int,
        nargs=2,
        metavar=("HEIGHT", "WIDTH"),
        default=None,
        help="image size the position embedding is for (default: from the file, else square)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace DST if it exists (default: refuse)")


def run(args):
    from keras_vit.pretrained.export import convert_checkpoint

    if os.path.lexists(args.dst) and not args.overwrite:
        raise FileExistsError(f"{args.dst} exists: choose a new path, or pass --overwrite to replace it.")
    written, format = convert_checkpoint(
        args.src, args.dst, args.to, args.num_heads, args.image_size, replace=args.overwrite
    )
    print(f"wrote {written} ({format} layout)")
    return 0
