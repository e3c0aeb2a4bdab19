"""The published ViT checkpoints, as data.

One row per checkpoint file: variant, tag, training resolution, head classes,
whether it carries the `pre_logits` layer, where it lives on the Hugging Face
Hub (the maintained copies: `timm/...` in timm's layout, `google/...` in the
`transformers` layout), the official bucket URL it was converted from (a
second source; anonymous downloads from it have returned HTTP 403 since
February 2026) and the published ImageNet-1k top-1.

Provenance of the numbers:
- Hub repos and official URLs: timm `timm/models/vision_transformer.py`
  `default_cfgs` and the google-research/vision_transformer README and
  `vit_jax.ipynb` bucket listing.
- top-1: timm `results/results-imagenet.csv` (timm's own evaluation, bicubic
  resize, crop 0.9 at 224 / 1.0 at 384), except where `top1_source` says
  otherwise; `None` where no published number was found.
- License: Apache-2.0 for every row (the vision_transformer repository, the
  `google/vit-*` model cards and timm's `default_cfgs` all say so).
- sha256: not published for these files. Hub downloads are checked by
  `huggingface_hub`; a URL download with `sha256=None` is only checked for
  length and by the format's own checks (zip CRC, safetensors header).

Tags:
- `orig_in21k`: the paper's ImageNet-21k pre-training, with `pre_logits`
  (the Hub copy `google/vit-*-in21k` drops the all-zero 21843-class head).
- `orig_in21k_ft_in1k`: the paper's 21k -> 1k fine-tunes (224 and 384).
- `augreg_in21k`: "How to train your ViT?" (Steiner et al. 2021) ImageNet-21k
  pre-training, real 21843-class head.
- `augreg_in21k_ft_in1k`: AugReg 21k -> 1k fine-tunes (224 and 384).
- `augreg2_in21k_ft_in1k`: timm's further fine-tune of the AugReg 21k weights
  on ImageNet-1k (Ross Wightman), 224 only.
- `augreg_in1k`: AugReg trained on ImageNet-1k only.
"""

_BUCKET = "https://storage.googleapis.com/vit_models"
_AUGREG = _BUCKET + "/augreg/"


def _augreg_ft(stem, resolution):
    return f"{_AUGREG}{stem}--imagenet2012-steps_20k-lr_{{lr}}-res_{resolution}.npz"


# The AugReg file names encode the recipe; they differ per variant (timm's cfgs).
_AUGREG_I21K = {
    "Ti/16": ("Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0", "0.03"),
    "S/16": ("S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0", "0.03"),
    "S/32": ("S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0", "0.03"),
    "B/8": ("B_8-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0", "0.01"),
    "B/16": ("B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0", "0.01"),
    "B/32": ("B_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.03-do_0.0-sd_0.0", "0.03"),
    "L/16": ("L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1", "0.01"),
}
# B/32 at 384 was fine-tuned from a different pre-training run (timm's cfg).
_B32_384_STEM = "B_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0"
_AUGREG_I1K = {
    "S/16": "S_16-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0",
    "B/16": "B_16-i1k-300ep-lr_0.001-aug_strong2-wd_0.1-do_0.1-sd_0.1",
    "B/32": "B_32-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.1-sd_0.1",
}


def _augreg_i21k_url(variant):
    return f"{_AUGREG}{_AUGREG_I21K[variant][0]}.npz"


def _augreg_ft_url(variant, resolution):
    stem, lr = _AUGREG_I21K[variant]
    if variant == "B/32" and resolution == 384:
        stem = _B32_384_STEM
    return _augreg_ft(stem, resolution).format(lr=lr)


def _augreg_i1k_url(variant, resolution):
    return _augreg_ft(_AUGREG_I1K[variant], resolution).format(lr="0.01")


_TIMM_NAMES = {
    "Ti/16": "vit_tiny_patch16",
    "S/16": "vit_small_patch16",
    "S/32": "vit_small_patch32",
    "B/8": "vit_base_patch8",
    "B/16": "vit_base_patch16",
    "B/32": "vit_base_patch32",
    "L/16": "vit_large_patch16",
    "L/32": "vit_large_patch32",
    "H/14": "vit_huge_patch14",
}
_GOOGLE_NAMES = {
    "B/16": "vit-base-patch16",
    "B/32": "vit-base-patch32",
    "L/16": "vit-large-patch16",
    "L/32": "vit-large-patch32",
    "H/14": "vit-huge-patch14",
}


def _timm_repo(variant, tag, resolution):
    return f"timm/{_TIMM_NAMES[variant]}_{resolution}.{tag}"


# (variant, tag, resolution, classes, top-1) of the checkpoints kept by timm
# on the Hub; classes None means the file has no head.
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
)

# The `google/vit-*` transformers copies: the paper's original checkpoints.
# (variant, tag, resolution, classes, top-1, top-1 source, official file)
_GOOGLE_ROWS = (
    ("B/16", "orig_in21k", 224, None, None, None, "imagenet21k/ViT-B_16.npz"),
    ("B/32", "orig_in21k", 224, None, None, None, "imagenet21k/ViT-B_32.npz"),
    ("B/32", "orig_in21k_ft_in1k", 384, 1000, None, None, "imagenet21k+imagenet2012/ViT-B_32.npz"),
    ("L/16", "orig_in21k", 224, None, None, None, "imagenet21k/ViT-L_16.npz"),
    (
        "L/16",
        "orig_in21k_ft_in1k",
        224,
        1000,
        82.7,
        "google-research/vision_transformer README (expected accuracy of the -224 models)",
        "imagenet21k+imagenet2012/ViT-L_16-224.npz",
    ),
    ("L/16", "orig_in21k_ft_in1k", 384, 1000, None, None, "imagenet21k+imagenet2012/ViT-L_16.npz"),
    ("L/32", "orig_in21k", 224, None, None, None, "imagenet21k/ViT-L_32.npz"),
    ("H/14", "orig_in21k", 224, None, None, None, "imagenet21k/ViT-H_14.npz"),
)

# Official bucket files of the timm-kept original fine-tunes.
_ORIG_FT_URLS = {
    ("B/16", 224): "imagenet21k+imagenet2012/ViT-B_16-224.npz",
    ("B/16", 384): "imagenet21k+imagenet2012/ViT-B_16.npz",
    ("L/32", 384): "imagenet21k+imagenet2012/ViT-L_32.npz",
}

_TIMM_TOP1_SOURCE = "timm results/results-imagenet.csv"

# The hybrids (ResNet + ViT) timm keeps on the Hub, in its layout:
# (variant, tag, resolution, classes, top-1, timm model name, official file).
# Hub repos and official files: timm `vision_transformer_hybrid.py` default_cfgs; top-1: timm's
# results-imagenet.csv. R50+B/16's official files are named by the vision_transformer README's rule
# (file name = config.model_name, here `R50+ViT-B_16`), not listed there one by one, and timm's
# `orig_in21k` copy has neither head nor pre_logits (its cfg says num_classes=0): both unverified
# against the files themselves.
_HYBRID_ROWS = (
    (
        "R+Ti/16",
        "augreg_in21k_ft_in1k",
        224,
        1000,
        71.800,
        "vit_tiny_r_s16_p8_224",
        "augreg/R_Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224.npz",
    ),
    (
        "R+Ti/16",
        "augreg_in21k_ft_in1k",
        384,
        1000,
        75.962,
        "vit_tiny_r_s16_p8_384",
        "augreg/R_Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
    ),
    (
        "R+Ti/16",
        "augreg_in21k",
        224,
        21843,
        None,
        "vit_tiny_r_s16_p8_224",
        "augreg/R_Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0.npz",
    ),
    (
        "R26+S/32",
        "augreg_in21k_ft_in1k",
        224,
        1000,
        81.856,
        "vit_small_r26_s32_224",
        "augreg/R26_S_32-i21k-300ep-lr_0.001-aug_light0-wd_0.03-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.03-res_224.npz",
    ),
    (
        "R26+S/32",
        "augreg_in21k_ft_in1k",
        384,
        1000,
        84.066,
        "vit_small_r26_s32_384",
        "augreg/R26_S_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
    ),
    (
        "R26+S/32",
        "augreg_in21k",
        224,
        21843,
        None,
        "vit_small_r26_s32_224",
        "augreg/R26_S_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.03-do_0.0-sd_0.0.npz",
    ),
    (
        "R50+B/16",
        "orig_in21k_ft_in1k",
        384,
        1000,
        84.988,
        "vit_base_r50_s16_384",
        "imagenet21k+imagenet2012/R50+ViT-B_16.npz",
    ),
    ("R50+B/16", "orig_in21k", 224, None, None, "vit_base_r50_s16_224", "imagenet21k/R50+ViT-B_16.npz"),
    (
        "R50+L/32",
        "augreg_in21k_ft_in1k",
        224,
        1000,
        84.434,
        "vit_large_r50_s32_224",
        "augreg/R50_L_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224.npz",
    ),
    (
        "R50+L/32",
        "augreg_in21k_ft_in1k",
        384,
        1000,
        86.188,
        "vit_large_r50_s32_384",
        "augreg/R50_L_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384.npz",
    ),
    (
        "R50+L/32",
        "augreg_in21k",
        224,
        21843,
        None,
        "vit_large_r50_s32_224",
        "augreg/R50_L_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0.npz",
    ),
)


def _official_url(variant, tag, resolution):
    if tag == "augreg_in21k":
        return _augreg_i21k_url(variant)
    if tag == "augreg_in21k_ft_in1k":
        return _augreg_ft_url(variant, resolution)
    if tag == "augreg_in1k":
        return _augreg_i1k_url(variant, resolution)
    if tag == "orig_in21k_ft_in1k":
        return f"{_BUCKET}/{_ORIG_FT_URLS[(variant, resolution)]}"
    return None  # augreg2 is timm's own fine-tune: no official file.


def _preprocessing(resolution, source):
    # Every ViT checkpoint expects pixels scaled to [-1, 1] (mean = std = 0.5).
    # Eval resize: timm's published numbers use bicubic with crop_pct 0.9 at
    # 224 and 1.0 at 384; the google/ preprocessor configs resize bilinearly.
    if source == "timm":
        crop_pct, interpolation = (1.0 if resolution >= 384 else 0.9), "bicubic"
    else:
        crop_pct, interpolation = 1.0, "bilinear"
    return {"mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5), "crop_pct": crop_pct, "interpolation": interpolation}


def _timm_row(variant, tag, resolution, classes, top1, hub_repo, url):
    return {
        "variant": variant,
        "tag": tag,
        "resolution": resolution,
        "classes": classes,
        "pre_logits": False,
        "hub_repo": hub_repo,
        "hub_filename": "model.safetensors",
        "format": "timm",
        "url": url,
        "sha256": None,
        "top1": top1,
        "top1_source": _TIMM_TOP1_SOURCE if top1 is not None else None,
        "license": "Apache-2.0",
        "preprocessing": _preprocessing(resolution, "timm"),
    }


def _rows():
    for variant, tag, resolution, classes, top1 in _TIMM_ROWS:
        yield _timm_row(
            variant,
            tag,
            resolution,
            classes,
            top1,
            _timm_repo(variant, tag, resolution),
            _official_url(variant, tag, resolution),
        )
    for variant, tag, resolution, classes, top1, timm_name, official in _HYBRID_ROWS:
        yield _timm_row(variant, tag, resolution, classes, top1, f"timm/{timm_name}.{tag}", f"{_BUCKET}/{official}")
    for variant, tag, resolution, classes, top1, top1_source, official in _GOOGLE_ROWS:
        suffix = "-in21k" if tag == "orig_in21k" else ""
        yield {
            "variant": variant,
            "tag": tag,
            "resolution": resolution,
            "classes": classes,
            # The in21k repos are `ViTModel`s whose pooler is the original pre_logits.
            "pre_logits": tag == "orig_in21k",
            "hub_repo": f"google/{_GOOGLE_NAMES[variant]}-{resolution}{suffix}",
            "hub_filename": "model.safetensors",
            "format": "hf",
            "url": f"{_BUCKET}/{official}",
            "sha256": None,
            "top1": top1,
            "top1_source": top1_source,
            "license": "Apache-2.0",
            "preprocessing": _preprocessing(resolution, "hf"),
        }


CHECKPOINTS = tuple(_rows())

# `weights="imagenet"`: the best ImageNet-1k classifier of the variant at the
# resolution nearest the requested input (see registry.resolve).
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
