"""Maintainer tool: fetch published checkpoints, load them, check them against a reference.

    python weights/verify.py B/16 augreg_in21k_ft_in1k            # one checkpoint
    python weights/verify.py --all --reference                   # every row (downloads ~15 GB)

For each registry row it

1. downloads the Hub copy through the same code path users get
   (`keras_vit.pretrained.sources.fetch`: the huggingface_hub cache),
   and prints the file's sha256 (to fill the registry's `sha256` column);
2. builds the keras_vit model from it (strict conversion, nothing missing or
   unexpected);
3. with `--reference`, runs the same random batch through an independent
   implementation of the same file: `transformers` for `google/` copies,
   `timm` (if installed) for `timm/` copies, and prints the max abs logit
   difference, failing above `--tolerance` (default 1e-4 in float32).

It needs network access, so it is not part of the test suite; the tests
cover every row with synthetic files of the same layout.
"""

import argparse
import sys

import numpy as np


def _reference_outputs(info, path, images):
    import torch

    pixels = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))
    if info.format == "hf":
        import os

        from transformers import ViTForImageClassification, ViTModel

        folder = os.path.dirname(path)
        cls = ViTForImageClassification if info.classes else ViTModel
        model = cls.from_pretrained(folder).eval()
        with torch.no_grad():
            out = model(pixels)
        return out.logits.numpy() if info.classes else out.last_hidden_state.numpy()
    import timm  # optional: only the maintainer's machine needs it

    name = info.hub_repo.split("/", 1)[1]
    if info.options.get("mlp_activation") == "quick_gelu":
        # timm's QuickGELU towers read the OpenAI weights from the `*_clip_*` repos under their own names.
        name = name.replace("_clip_", "_clip_quickgelu_")
    model = timm.create_model(name, pretrained=True, pretrained_cfg_overlay={"file": path}).eval()
    with torch.no_grad():
        return model(pixels).numpy() if info.classes else model.forward_features(pixels).numpy()


def verify(info, reference, tolerance):
    import keras

    import keras_vit
    from keras_vit.models.variants import constructor_name
    from keras_vit.pretrained import download, sources

    path, _ = sources.fetch(sources.WeightsSource("registry", info=info))
    print(f"{info.name}: {path}\n  sha256 {download.sha256_of(path)}")
    constructor = keras_vit.models.applications.CONSTRUCTORS[constructor_name(info.variant)]
    kwargs = dict(input_shape=(info.resolution, info.resolution, 3), classifier_activation=None)
    if info.classes:
        kwargs["classes"] = info.classes
    else:
        kwargs["include_top"] = False
    model = constructor(weights=info.tag, **kwargs)
    print(f"  loaded: {model.count_params():,} parameters")
    if not reference:
        return True
    images = np.random.default_rng(0).uniform(-1, 1, (2, info.resolution, info.resolution, 3)).astype("float32")
    ours = keras.ops.convert_to_numpy(model(images))
    theirs = _reference_outputs(info, path, images)
    difference = float(np.abs(ours - theirs).max())
    print(f"  max |keras_vit - reference| = {difference:.2e}")
    return difference <= tolerance


def main(argv=None):
    from keras_vit.pretrained import registry

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variant", nargs="?")
    parser.add_argument("tag", nargs="?")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args(argv)
    if args.all:
        rows = list(registry.CHECKPOINTS)
    elif args.variant and args.tag:
        rows = [info for info in registry.checkpoints(args.variant) if info.tag == args.tag]
    else:
        parser.error("give VARIANT TAG or --all")
    failures = [info.name for info in rows if not verify(info, args.reference, args.tolerance)]
    if failures:
        print("FAILED: " + ", ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
