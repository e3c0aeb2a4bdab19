"""Prints (or checks) the checkpoint table of weights/README.md from the registry.

    python weights/catalogue.py            # print the table
    python weights/catalogue.py --check    # exit 1 if README.md is out of date
    python weights/catalogue.py --write    # rewrite the table in README.md

The registry (`keras_vit/pretrained/registry.py`) is the single source; this
table is generated from it so the two never disagree.
"""

import argparse
import os
import sys

BEGIN, END = "<!-- catalogue:begin -->", "<!-- catalogue:end -->"
README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md")


def table():
    from keras_vit.models.variants import constructor_name
    from keras_vit.pretrained import registry

    lines = [
        "| Model | `weights=` | Res. | Head | pre_logits | Hub copy (format) | Official file | ImageNet top-1 "
        "| License |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for info in registry.CHECKPOINTS:
        constructor = constructor_name(info.variant)
        head = f"{info.classes}" if info.classes else "none"
        url = f"[npz]({info.url})" if info.url else "-"
        top1 = f"{info.top1:.2f} %" if info.top1 is not None else "-"
        hub = f"[{info.hub_repo}](https://huggingface.co/{info.hub_repo}) ({info.format})"
        lines.append(
            f"| {constructor} | `{info.tag}` | {info.resolution} | {head} | {'yes' if info.pre_logits else 'no'} "
            f"| {hub} | {url} | {top1} | {info.license} |"
        )
    return "\n".join(lines)


def _replace(text, new_table):
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + new_table + "\n" + text[end:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    generated = table()
    if not (args.check or args.write):
        print(generated)
        return 0
    with open(README) as handle:
        text = handle.read()
    updated = _replace(text, generated)
    if args.check:
        if updated != text:
            print("weights/README.md is out of date: run python weights/catalogue.py --write", file=sys.stderr)
            return 1
        return 0
    from keras_vit.utils import files

    files.write_text(README, updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
