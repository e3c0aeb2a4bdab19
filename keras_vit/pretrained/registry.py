"""The published ViT checkpoints as data (from timm's `default_cfgs` and the vision_transformer README).

One row per file: its Hub copy (`timm/...` in timm's layout, `google/...` in transformers'), the official bucket
file it came from (provenance: the bucket refuses anonymous downloads) and its ImageNet-1k top-1 (timm's
`results-imagenet.csv` unless a row says otherwise). `orig_*` tags are the paper's, `augreg_*` "How to train your
ViT?" (Steiner et al. 2021), `augreg2_*` timm's further fine-tune; `"imagenet"` is the best ImageNet-1k
classifier at the resolution nearest the model's input.
"""

import dataclasses

BUCKET = "https://storage.googleapis.com/vit_models/"
IMAGENET_ALIAS = "imagenet"
IMAGENET_1K_TAGS = ("augreg2_in21k_ft_in1k", "augreg_in21k_ft_in1k", "orig_in21k_ft_in1k", "augreg_in1k")

# Things worth saying about a variant when a user asks for what does not exist.
VARIANT_NOTES = {
    "H/14": (
        "ViT-H/14 was only published as an ImageNet-21k backbone ('orig_in21k', with pre_logits and "
        "no usable head); there is no public ImageNet-1k classifier. Load it with include_top=False, "
        "or include_top=True and your own `classes` for a new zero-initialised head, and fine-tune."
    ),
}


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
    """One published checkpoint file (`classes` None: no head; `url`: the official file it came from)."""

    variant: str
    tag: str
    resolution: int
    classes: object
    pre_logits: bool
    hub_repo: str
    format: str
    url: object
    top1: object
    hub_filename: str = "model.safetensors"
    license: str = "Apache-2.0"

    @property
    def name(self):
        return f"{self.variant} {self.tag} @{self.resolution}"


_TIMM_NAMES = {
    "Ti/16": "vit_tiny_patch16",
    "S/16": "vit_small_patch16",
    "S/32": "vit_small_patch32",
    "B/8": "vit_base_patch8",
    "B/16": "vit_base_patch16",
    "B/32": "vit_base_patch32",
    "L/16": "vit_large_patch16",
    "L/32": "vit_large_patch32",
    "R+Ti/16": "vit_tiny_r_s16_p8",
    "R26+S/32": "vit_small_r26_s32",
    "R50+B/16": "vit_base_r50_s16",
    "R50+L/32": "vit_large_r50_s32",
    "H/14": "vit_huge_patch14",
}

# The AugReg runs encode their recipe in the file name: the ImageNet-21k run of each variant and the
# learning rate of its ImageNet-1k fine-tunes.
_AUGREG_I21K = {
    "Ti/16": ("Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0", "0.03"),
    "S/16": ("S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0", "0.03"),
    "S/32": ("S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0", "0.03"),
    "B/8": ("B_8-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0", "0.01"),
    "B/16": ("B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0", "0.01"),
    "B/32": ("B_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.03-do_0.0-sd_0.0", "0.03"),
    "L/16": ("L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1", "0.01"),
    "R+Ti/16": ("R_Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0", "0.03"),
    "R26+S/32": ("R26_S_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.03-do_0.0-sd_0.0", "0.03"),
    "R50+L/32": ("R50_L_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0", "0.01"),
}
# Fine-tunes of another ImageNet-21k run than the variant's published one (timm's cfgs).
_FINETUNED_FROM = {
    ("B/32", 384): "B_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0",
    ("R26+S/32", 224): "R26_S_32-i21k-300ep-lr_0.001-aug_light0-wd_0.03-do_0.1-sd_0.1",
    ("R50+L/32", 224): "R50_L_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1",
}
_AUGREG_I1K = {
    "S/16": "S_16-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0",
    "B/16": "B_16-i1k-300ep-lr_0.001-aug_strong2-wd_0.1-do_0.1-sd_0.1",
    "B/32": "B_32-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.1-sd_0.1",
}

# (variant, tag, resolution, classes, top-1) of the checkpoints timm keeps on the Hub; classes None: no head.
_TIMM_ROWS = (
    ("Ti/16", "augreg_in21k_ft_in1k", 224, 1000, 75.452),
    ("Ti/16", "augreg_in21k_ft_in1k", 384, 1000, 78.438),
    ("Ti/16", "augreg_in21k", 224, 21843, None),
    ("S/16", "augreg_in21k_ft_in1k", 224, 1000, 81.402),
    ("S/16", "augreg_in21k_ft_in1k", 384, 1000, 83.814),
    ("S/16", "augreg_in21k", 224, 21843, None),
    ("S/16", "augreg_in1k", 224, 1000, 78.842),
    ("S/16", "augreg_in1k", 384, 1000, 81.130),
    ("S/32", "augreg_in21k_ft_in1k", 224, 1000, 76.010),
    ("S/32", "augreg_in21k_ft_in1k", 384, 1000, 80.476),
    ("S/32", "augreg_in21k", 224, 21843, None),
    ("B/8", "augreg2_in21k_ft_in1k", 224, 1000, 86.252),
    ("B/8", "augreg_in21k_ft_in1k", 224, 1000, 85.838),
    ("B/8", "augreg_in21k", 224, 21843, None),
    ("B/16", "augreg2_in21k_ft_in1k", 224, 1000, 85.108),
    ("B/16", "augreg_in21k_ft_in1k", 224, 1000, 84.534),
    ("B/16", "augreg_in21k_ft_in1k", 384, 1000, 86.010),
    ("B/16", "augreg_in21k", 224, 21843, None),
    ("B/16", "augreg_in1k", 224, 1000, 79.154),
    ("B/16", "augreg_in1k", 384, 1000, 81.102),
    ("B/16", "orig_in21k_ft_in1k", 224, 1000, 81.782),
    ("B/16", "orig_in21k_ft_in1k", 384, 1000, 84.212),
    ("B/32", "augreg_in21k_ft_in1k", 224, 1000, 80.732),
    ("B/32", "augreg_in21k_ft_in1k", 384, 1000, 83.358),
    ("B/32", "augreg_in21k", 224, 21843, None),
    ("B/32", "augreg_in1k", 224, 1000, 74.908),
    ("B/32", "augreg_in1k", 384, 1000, 78.750),
    ("L/16", "augreg_in21k_ft_in1k", 224, 1000, 85.856),
    ("L/16", "augreg_in21k_ft_in1k", 384, 1000, 87.096),
    ("L/16", "augreg_in21k", 224, 21843, None),
    ("L/32", "orig_in21k_ft_in1k", 384, 1000, 81.508),
    ("R+Ti/16", "augreg_in21k_ft_in1k", 224, 1000, 71.800),
    ("R+Ti/16", "augreg_in21k_ft_in1k", 384, 1000, 75.962),
    ("R+Ti/16", "augreg_in21k", 224, 21843, None),
    ("R26+S/32", "augreg_in21k_ft_in1k", 224, 1000, 81.856),
    ("R26+S/32", "augreg_in21k_ft_in1k", 384, 1000, 84.066),
    ("R26+S/32", "augreg_in21k", 224, 21843, None),
    ("R50+B/16", "orig_in21k_ft_in1k", 384, 1000, 84.988),
    # timm's copy has neither head nor pre_logits (its cfg says num_classes=0).
    ("R50+B/16", "orig_in21k", 224, None, None),
    ("R50+L/32", "augreg_in21k_ft_in1k", 224, 1000, 84.434),
    ("R50+L/32", "augreg_in21k_ft_in1k", 384, 1000, 86.188),
    ("R50+L/32", "augreg_in21k", 224, 21843, None),
)

# The `google/vit-*` transformers copies of the paper's checkpoints; the in21k repos are `ViTModel`s whose
# pooler is the original pre_logits (their all-zero 21843-class head dropped).
_GOOGLE_ROWS = (
    ("B/16", "orig_in21k", 224, None, None),
    ("B/32", "orig_in21k", 224, None, None),
    ("B/32", "orig_in21k_ft_in1k", 384, 1000, None),
    ("L/16", "orig_in21k", 224, None, None),
    ("L/16", "orig_in21k_ft_in1k", 224, 1000, 82.7),  # the vision_transformer README's expected accuracy
    ("L/16", "orig_in21k_ft_in1k", 384, 1000, None),
    ("L/32", "orig_in21k", 224, None, None),
    ("H/14", "orig_in21k", 224, None, None),
)


def _official_url(variant, tag, resolution):
    """The official bucket file of a checkpoint; None for timm's own augreg2 fine-tunes."""
    if tag in ("orig_in21k", "orig_in21k_ft_in1k"):
        backbone, plus, vit = variant.rpartition("+")
        name = f"{backbone}{plus}ViT-{vit.replace('/', '_')}"
        if tag == "orig_in21k":
            return f"{BUCKET}imagenet21k/{name}.npz"
        return f"{BUCKET}imagenet21k+imagenet2012/{name}{'-224' if resolution == 224 else ''}.npz"
    if tag == "augreg_in21k":
        return f"{BUCKET}augreg/{_AUGREG_I21K[variant][0]}.npz"
    if tag == "augreg_in21k_ft_in1k":
        stem, lr = _AUGREG_I21K[variant]
        stem = _FINETUNED_FROM.get((variant, resolution), stem)
    elif tag == "augreg_in1k":
        stem, lr = _AUGREG_I1K[variant], "0.01"
    else:
        return None
    return f"{BUCKET}augreg/{stem}--imagenet2012-steps_20k-lr_{lr}-res_{resolution}.npz"


def _row(format, variant, tag, resolution, classes, top1):
    name = _TIMM_NAMES[variant]
    if format == "timm":
        hub_repo = f"timm/{name}_{resolution}.{tag}"
    else:
        hub_repo = f"google/{name.replace('_', '-')}-{resolution}" + ("-in21k" if tag == "orig_in21k" else "")
    return CheckpointInfo(
        variant,
        tag,
        resolution,
        classes,
        pre_logits=format == "hf" and tag == "orig_in21k",
        hub_repo=hub_repo,
        format=format,
        url=_official_url(variant, tag, resolution),
        top1=top1,
    )


CHECKPOINTS = tuple(_row("timm", *row) for row in _TIMM_ROWS) + tuple(_row("hf", *row) for row in _GOOGLE_ROWS)


def checkpoints(variant=None):
    """Returns the `CheckpointInfo`s of one variant (or all), in catalogue order."""
    return [info for info in CHECKPOINTS if variant is None or info.variant == variant]


def available_tags(variant):
    """Returns the sorted tags of `variant`, plus `"imagenet"` where an ImageNet-1k classifier exists."""
    tags = sorted({info.tag for info in checkpoints(variant)})
    if any(tag in IMAGENET_1K_TAGS for tag in tags):
        tags.append(IMAGENET_ALIAS)
    return tags


def _nearest(candidates, image_size):
    size = (image_size[0] + image_size[1]) / 2
    # Nearest by the mean side; on a tie the larger (finer) training size.
    return min(candidates, key=lambda info: (abs(info.resolution - size), -info.resolution))


def unknown_tag_message(variant, weights):
    tags = available_tags(variant)
    message = (
        f"Unknown weights {weights!r} for ViT-{variant}. Valid tags for ViT-{variant}: "
        f"{', '.join(tags) if tags else '(none published)'}. `weights` also accepts None, a local "
        "checkpoint file (.npz, .safetensors) or directory, or a Hub handle 'hf://org/repo'."
    )
    note = VARIANT_NOTES.get(variant)
    return f"{message} {note}" if note else message


def resolve(variant, tag, image_size=(224, 224)):
    """Returns the `CheckpointInfo` of `tag` (or `"imagenet"`) for `variant` nearest `image_size`, offline.

    Raises:
        ValueError: the tag does not exist for the variant (the message lists the valid ones).
    """
    if tag not in available_tags(variant):
        raise ValueError(unknown_tag_message(variant, tag))
    if tag != IMAGENET_ALIAS:
        return _nearest([info for info in checkpoints(variant) if info.tag == tag], image_size)
    classifiers = [info for info in checkpoints(variant) if info.tag in IMAGENET_1K_TAGS and info.top1 is not None]
    resolution = _nearest(classifiers, image_size).resolution
    return max((info for info in classifiers if info.resolution == resolution), key=lambda info: info.top1)
