"""`python -m benchmarks.timm_coverage`: how many of timm's published ViT architectures `build_from_checkpoint` loads.

Every architecture of timm's `vision_transformer` module (`--module eva`: its `Eva` family, DINOv3, EVA-02, PE,
RoPE-ViT) with published weights and at most 700 M parameters is
built by timm at depth 1, its real width and an image of three patches a side, given random weights and saved as the
Hub has it (`model.safetensors` and timm's `config.json`, without `model_args`). `build_from_checkpoint` then
loads the folder, and its outputs (logits, or the pooled features of a backbone) are compared with timm's: within
1e-4 relative it loads; a `CheckpointError` is a refusal; anything else is wrong. Needs timm and torch.

Example:

    KERAS_BACKEND=torch python -m benchmarks.timm_coverage --names vit_small_patch14_dinov2,vit_base_patch16_rpn_224
    KERAS_BACKEND=torch python -m benchmarks.timm_coverage --module eva
"""

import argparse
import collections
import fnmatch
import sys
import tempfile

import keras
import numpy as np

from keras_vit.pretrained import CheckpointError, build_from_checkpoint
from tests import pretrained_helpers, timm_reference

MAX_PARAMETERS = 700e6
TOLERANCE = 1e-4
# timm arguments that building at depth 1 needs: Sapiens2 lists key-value heads for each of its blocks (its first
# blocks have as many as query heads).
AT_DEPTH_1 = (
    ("vit_base_patch16_sapiens2", dict(num_kv_heads=12)),
    ("vit_large_patch16_sapiens2", dict(num_kv_heads=16)),
)
FAMILIES = (
    ("dinov3", "DINOv3"),
    ("lingbot", "LingBot (DINOv3)"),
    ("eva02", "EVA-02"),
    ("vit_pe_", "Perception Encoder"),
    ("sapiens2", "Sapiens2"),
    ("aimv2", "AIMv2"),
    ("beit3", "BEiT-3"),
    ("dinov2", "DINOv2 (and with registers)"),
    ("siglip", "SigLIP / SigLIP 2"),
    ("clip", "CLIP"),
    ("radio", "RADIO"),
    ("tipsv2", "TIPSv2"),
    ("_reg", "registers (sbb, so150m)"),
    ("_gap_", "average pooled"),
)


def family(name):
    eva = "rope" in name and ("RoPE-ViT" if name.endswith("_224") else "sbb RoPE")
    return eva or next((label for marker, label in FAMILIES if marker in name), "ViT, EVA, FlexiViT, MIIL, others")


def census(module="vision_transformer"):
    """The architecture names with published weights and at most `MAX_PARAMETERS` parameters (meta device)."""
    import torch

    timm = timm_reference.import_timm()
    names = sorted({tag.split(".")[0] for tag in timm.list_models(pretrained=True, module=module)})
    kept = []
    for name in names:
        with torch.device("meta"):
            model = timm.create_model(name)
        if sum(parameter.numel() for parameter in model.parameters()) <= MAX_PARAMETERS:
            kept.append(name)
    return kept


def check(name):
    """`("loads" | "refused" | "wrong", detail)` for the architecture `name`."""
    arguments = next((values for pattern, values in AT_DEPTH_1 if fnmatch.fnmatchcase(name, pattern)), {})
    with tempfile.TemporaryDirectory() as folder:
        reference = pretrained_helpers.timm_saved_like_the_hub(name, folder, **arguments)
        size = reference.patch_embed.img_size
        images = np.random.default_rng(0).standard_normal((2, *size, 3)).astype("float32")
        expected = timm_reference.run_torch(reference, images)
        try:
            model = build_from_checkpoint(folder, include_preprocessing=False)
        except CheckpointError as error:
            return "refused", str(error).split(". ")[0]
        actual = keras.ops.convert_to_numpy(model(images))
    if actual.shape != expected.shape:
        return "wrong", f"shape {actual.shape} vs timm {expected.shape}"
    error = float(np.abs(actual - expected).max() / np.abs(expected).max())
    return ("loads" if error <= TOLERANCE else "wrong"), f"{error:.1e}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", default="", help="comma-separated timm names (default: the whole census)")
    parser.add_argument("--module", default="vision_transformer", help="the timm module of the census (or 'eva')")
    args = parser.parse_args(argv)
    names = [name for name in args.names.split(",") if name] or census(args.module)
    results = {}
    for name in names:
        try:
            results[name] = check(name)
        except Exception as error:  # a crash is counted as wrong, never hidden
            results[name] = ("wrong", f"{type(error).__name__}: {error}"[:200])
        print(f"{results[name][0]:8} {name:45} {results[name][1]}", flush=True)
    counts = collections.Counter(outcome for outcome, _ in results.values())
    print(
        f"\n{len(names)} architectures: {counts['loads']} load within {TOLERANCE:g}, {counts['refused']} refused, "
        f"{counts['wrong']} wrong"
    )
    table = collections.defaultdict(collections.Counter)
    for name, (outcome, _) in results.items():
        table[family(name)][outcome] += 1
    print("\n| family | architectures | load | refused | wrong |\n|---|---|---|---|---|")
    for label, row in sorted(table.items()):
        print(f"| {label} | {sum(row.values())} | {row['loads']} | {row['refused']} | {row['wrong']} |")
    return 1 if counts["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
