"""The published ViT checkpoints as data (from timm's `default_cfgs` and the vision_transformer README).

One row per file: its Hub copy (`timm/...` in timm's layout, `google/...` in transformers'), the official bucket
file it came from (provenance: the bucket refuses anonymous downloads) and its ImageNet-1k top-1 (timm's
`results-imagenet.csv` unless a row says otherwise). `orig_*` tags are the paper's, `augreg_*` "How to train your
ViT?" (Steiner et al. 2021), `augreg2_*` timm's further fine-tune; `"imagenet"` is the best ImageNet-1k
classifier at the resolution nearest the model's input.

The family rows (DINOv2, SigLIP, CLIP image towers, DeiT, DeiT III, and the RoPE ViTs timm builds as `Eva`:
DINOv3, EVA-02, PE, Naver's RoPE-ViT, sbb; timm's `default_cfgs`, its `results-imagenet.csv` for the top-1, the
license of timm's cfg or else of the original repository) also carry their architecture: `options`, the
`keras_vit.VisionTransformer` arguments a model built from the tag takes. FlexiViT's rows also load at the other
patch sizes they were trained at (`patch_sizes`), their patch kernel resized by the pseudo-inverse.
"""

import dataclasses

BUCKET = "https://storage.googleapis.com/vit_models/"
IMAGENET_ALIAS = "imagenet"
IMAGENET_1K_TAGS = ("augreg2_in21k_ft_in1k", "augreg_in21k_ft_in1k", "orig_in21k_ft_in1k", "augreg_in1k")
HALF = (0.5, 0.5, 0.5)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
# DINOv3's satellite-imagery model (SAT-493M).
SAT_MEAN, SAT_STD = (0.430, 0.411, 0.296), (0.213, 0.156, 0.143)
# Not Apache-2.0: redistribution carries the agreement, and the Hub serves the files only to accounts that accepted it.
DINOV3_LICENSE = "DINOv3 License (gated)"
# The patch sizes FlexiViT (Beyer et al. 2023) trained each model at: big_vision's `flexi.seqhw` grids 30 ... 5 of its
# 240 px images.
FLEXIVIT_PATCH_SIZES = (8, 10, 12, 15, 16, 20, 24, 30, 40, 48)

# Things worth saying about a variant when a user asks for what does not exist.
VARIANT_NOTES = {
    "H/14": (
        "ViT-H/14 was only published as an ImageNet-21k backbone ('orig_in21k', with pre_logits and "
        "no usable head); there is no public ImageNet-1k classifier of the paper's architecture (DeiT III's "
        "'deit3_fb_in22k_ft_in1k' is one with its own options). Load it with include_top=False, "
        "or include_top=True and your own `classes` for a new zero-initialised head, and fine-tune."
    ),
}


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
    """One published checkpoint file (`classes` None: no head; `url`: the official file it came from).

    `mean`, `std`, `crop_pct` and `interpolation` are its evaluation preprocessing (timm's `pretrained_cfg`);
    `options` the `VisionTransformer` arguments of its architecture beyond the variant's row (the pixel mean and
    std among them where they are not 0.5); `patch_sizes` the patch sizes it was trained at, where a model of
    another patch size than the variant's loads it with its patch kernel resized (FlexiViT), else `()`.
    """

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
    family: str = "ViT"
    options: dict = dataclasses.field(default_factory=dict, hash=False)
    mean: tuple = HALF
    std: tuple = HALF
    crop_pct: float = 0.9
    interpolation: str = "bicubic"
    patch_sizes: tuple = ()

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
        # timm crops 224 px evaluations at 0.9; transformers' ViTImageProcessor resizes bilinearly without a crop.
        crop_pct=1.0 if format == "hf" or resolution != 224 else 0.9,
        interpolation="bilinear" if format == "hf" else "bicubic",
    )


# The `VisionTransformer` arguments of each family (timm's model definitions, docs/DESIGN section 8), resampling
# the position embedding as timm does.
FAMILY_OPTIONS = {
    "DINOv2": dict(layer_scale_init=1e-5),
    "DINOv2 registers": dict(layer_scale_init=1e-5, num_register_tokens=4, no_embed_class=True),
    "SigLIP": dict(class_token=False, pooling="map"),
    "CLIP": dict(pre_norm=True, patch_bias=False, layer_norm_epsilon=1e-5),
    "DeiT": {},
    "DeiT distilled": dict(distillation_token=True),
    "DeiT III": dict(no_embed_class=True, layer_scale_init=1e-6),
    # timm resizes FlexiViT's position table and patch kernel bilinearly without antialias.
    "FlexiViT": dict(no_embed_class=True, resample_method="bilinear", resample_antialias=False),
    # SigLIP 2 NaFlex: a 16 x 16 table resized per image bilinearly with antialias (transformers, timm, big_vision).
    "SigLIP 2 NaFlex": dict(
        class_token=False,
        pooling="map",
        mlp_activation="gelu_tanh",
        resample_method="bilinear",
        resample_antialias=True,
    ),
}
# The RoPE families (timm's `models/eva.py`, docs/DESIGN section 9): their rotary embeddings, as the loader's name
# rules give them (`loader.TIMM_EVA_RULES`; tests/test_pretrained_registry.py holds the two together).
DINOV3_ROPE = dict(rope_type="dinov3", temperature=100.0, rotate_half=True)
EVA02_ROPE = dict(rope_type="cat", temperature=10000.0, ref_grid=(16, 16))
PE_ROPE = dict(rope_type="cat", temperature=10000.0, grid_offset=1.0, grid_indexing="xy", ref_grid=(32, 32))
NAVER_AXIAL_ROPE = dict(rope_type="cat", temperature=100.0, grid_indexing="xy")
NAVER_MIXED_ROPE = dict(rope_type="mixed", temperature=10.0, grid_indexing="xy")
PE = dict(pre_norm=True, patch_bias=False, layer_norm_epsilon=1e-5)
FAMILY_OPTIONS.update(
    {
        # Four registers, layer scale, no qkv bias (timm's `_qkvb` twins hold zero biases), no position table.
        "DINOv3": dict(
            num_register_tokens=4,
            position_embedding=False,
            qkv_bias=False,
            layer_scale_init=1e-5,
            layer_norm_epsilon=1e-5,
            rope=DINOV3_ROPE,
        ),
        # A learned table and RoPE; the MIM models and their fine-tunes average the patches under fc_norm.
        "EVA-02": dict(fc_norm=True, pooling="gap", rope=EVA02_ROPE),
        "EVA-02 CLIP": dict(attention_norm=True, mlp_norm=True, rope=EVA02_ROPE),
        # PE core's head is its CLIP projection after a MAP head of 8 heads over the class token too; its RoPE's
        # reference grid is its pretraining grid.
        "PE core": dict(
            PE, pooling="map", pooling_heads=8, pooling_include_prefix=True, rope=dict(PE_ROPE, ref_grid=(24, 24))
        ),
        "PE spatial": dict(PE, final_norm=False, rope=PE_ROPE),
        "RoPE-ViT": dict(position_embedding=False, layer_scale_init=1e-5, rope=NAVER_AXIAL_ROPE),
        # "ape": a learned table of the patches only, besides the RoPE.
        "RoPE-ViT ape": dict(no_embed_class=True, layer_scale_init=1e-5, rope=NAVER_AXIAL_ROPE),
        "RoPE-ViT mixed": dict(position_embedding=False, layer_scale_init=1e-5, rope=NAVER_MIXED_ROPE),
        "RoPE-ViT mixed ape": dict(no_embed_class=True, layer_scale_init=1e-5, rope=NAVER_MIXED_ROPE),
        "sbb RoPE": dict(
            class_token=False,
            num_register_tokens=1,
            fc_norm=True,
            pooling="gap",
            position_embedding=False,
            layer_scale_init=1e-5,
            rope=EVA02_ROPE,
        ),
    }
)
QUICK_GELU, TANH_GELU = dict(mlp_activation="quick_gelu"), dict(mlp_activation="gelu_tanh")
HALF_PIXELS = dict(pixel_mean=HALF, pixel_std=HALF)
# The family, pixel mean and std, and license of each family tag.
FAMILY_TAGS = {
    "dinov2_lvd142m": ("DINOv2", IMAGENET_MEAN, IMAGENET_STD, "Apache-2.0"),
    "dinov2_reg4_lvd142m": ("DINOv2 registers", IMAGENET_MEAN, IMAGENET_STD, "Apache-2.0"),
    "siglip_webli": ("SigLIP", HALF, HALF, "Apache-2.0"),
    "siglip2_webli": ("SigLIP", HALF, HALF, "Apache-2.0"),
    "siglip2_naflex_webli": ("SigLIP 2 NaFlex", HALF, HALF, "Apache-2.0"),
    "clip_openai": ("CLIP", CLIP_MEAN, CLIP_STD, "MIT"),
    "clip_laion2b": ("CLIP", CLIP_MEAN, CLIP_STD, "MIT"),
    "deit_fb_in1k": ("DeiT", IMAGENET_MEAN, IMAGENET_STD, "Apache-2.0"),
    "deit_distilled_fb_in1k": ("DeiT distilled", IMAGENET_MEAN, IMAGENET_STD, "Apache-2.0"),
    "deit3_fb_in1k": ("DeiT III", IMAGENET_MEAN, IMAGENET_STD, "Apache-2.0"),
    "deit3_fb_in22k_ft_in1k": ("DeiT III", IMAGENET_MEAN, IMAGENET_STD, "Apache-2.0"),
    "dinov3_lvd1689m": ("DINOv3", IMAGENET_MEAN, IMAGENET_STD, DINOV3_LICENSE),
    "dinov3_sat493m": ("DINOv3", SAT_MEAN, SAT_STD, DINOV3_LICENSE),
    **{
        f"eva02_{tag}": ("EVA-02", CLIP_MEAN, CLIP_STD, "MIT")
        for tag in (
            "mim_in22k",
            "mim_m38m",
            "mim_in22k_ft_in1k",
            "mim_in22k_ft_in22k",
            "mim_in22k_ft_in22k_in1k",
            "mim_m38m_ft_in1k",
            "mim_m38m_ft_in22k",
            "mim_m38m_ft_in22k_in1k",
        )
    },
    "eva02_clip_merged2b": ("EVA-02 CLIP", CLIP_MEAN, CLIP_STD, "MIT"),
    "pe_core_fb": ("PE core", HALF, HALF, "Apache-2.0"),
    "pe_spatial_fb": ("PE spatial", HALF, HALF, "Apache-2.0"),
    "rope_naver_in1k": ("RoPE-ViT", IMAGENET_MEAN, IMAGENET_STD, "Apache-2.0"),
    "rope_ape_naver_in1k": ("RoPE-ViT ape", IMAGENET_MEAN, IMAGENET_STD, "Apache-2.0"),
    "rope_mixed_naver_in1k": ("RoPE-ViT mixed", IMAGENET_MEAN, IMAGENET_STD, "Apache-2.0"),
    "rope_mixed_ape_naver_in1k": ("RoPE-ViT mixed ape", IMAGENET_MEAN, IMAGENET_STD, "Apache-2.0"),
    "rope_reg1_gap_sbb_in1k": ("sbb RoPE", HALF, HALF, "MIT"),
    **{
        f"flexivit_{tag}": ("FlexiViT", HALF, HALF, "Apache-2.0")
        for tag in ("1200ep_in1k", "600ep_in1k", "300ep_in1k", "1000ep_in21k", "300ep_in21k")
    },
}
SUB_LN = dict(mlp_norm=True)  # EVA-02 B and L: a LayerNorm inside the SwiGLU, before fc2
# (variant, tag, resolution, classes, top-1, crop, timm's `model.tag` on the Hub[, options beyond the family's]);
# a CLIP tower's classes are its projection, which timm holds as the head; timm's `*_clip_quickgelu_*` models read
# the OpenAI weights from the `*_clip_*` repos.
_FAMILY_ROWS = (
    ("S/14", "dinov2_lvd142m", 518, None, None, 1.0, "vit_small_patch14_dinov2.lvd142m"),
    ("B/14", "dinov2_lvd142m", 518, None, None, 1.0, "vit_base_patch14_dinov2.lvd142m"),
    ("L/14", "dinov2_lvd142m", 518, None, None, 1.0, "vit_large_patch14_dinov2.lvd142m"),
    ("g/14", "dinov2_lvd142m", 518, None, None, 1.0, "vit_giant_patch14_dinov2.lvd142m"),
    ("S/14", "dinov2_reg4_lvd142m", 518, None, None, 1.0, "vit_small_patch14_reg4_dinov2.lvd142m"),
    ("B/14", "dinov2_reg4_lvd142m", 518, None, None, 1.0, "vit_base_patch14_reg4_dinov2.lvd142m"),
    ("L/14", "dinov2_reg4_lvd142m", 518, None, None, 1.0, "vit_large_patch14_reg4_dinov2.lvd142m"),
    ("g/14", "dinov2_reg4_lvd142m", 518, None, None, 1.0, "vit_giant_patch14_reg4_dinov2.lvd142m"),
    ("B/16", "siglip_webli", 224, None, None, 0.9, "vit_base_patch16_siglip_224.webli"),
    ("B/16", "siglip_webli", 256, None, None, 0.9, "vit_base_patch16_siglip_256.webli"),
    ("B/16", "siglip_webli", 384, None, None, 0.9, "vit_base_patch16_siglip_384.webli"),
    ("B/16", "siglip_webli", 512, None, None, 0.9, "vit_base_patch16_siglip_512.webli"),
    ("L/16", "siglip_webli", 256, None, None, 0.9, "vit_large_patch16_siglip_256.webli"),
    ("L/16", "siglip_webli", 384, None, None, 0.9, "vit_large_patch16_siglip_384.webli"),
    ("So400m/14", "siglip_webli", 224, None, None, 0.9, "vit_so400m_patch14_siglip_224.webli"),
    # The official "384" model: its 27 x 27 patches see 378 px (timm's `_384.webli` holds the same weights).
    ("So400m/14", "siglip_webli", 378, None, None, 0.9, "vit_so400m_patch14_siglip_378.webli"),
    ("B/16", "siglip2_webli", 224, None, None, 0.9, "vit_base_patch16_siglip_224.v2_webli"),
    ("B/16", "siglip2_webli", 256, None, None, 0.9, "vit_base_patch16_siglip_256.v2_webli"),
    ("B/16", "siglip2_webli", 384, None, None, 0.9, "vit_base_patch16_siglip_384.v2_webli"),
    ("B/16", "siglip2_webli", 512, None, None, 0.9, "vit_base_patch16_siglip_512.v2_webli"),
    ("L/16", "siglip2_webli", 256, None, None, 0.9, "vit_large_patch16_siglip_256.v2_webli"),
    ("L/16", "siglip2_webli", 384, None, None, 0.9, "vit_large_patch16_siglip_384.v2_webli"),
    ("L/16", "siglip2_webli", 512, None, None, 0.9, "vit_large_patch16_siglip_512.v2_webli", TANH_GELU),
    ("So400m/14", "siglip2_webli", 224, None, None, 0.9, "vit_so400m_patch14_siglip_224.v2_webli"),
    ("So400m/14", "siglip2_webli", 378, None, None, 0.9, "vit_so400m_patch14_siglip_378.v2_webli"),
    # timm's copies of google/siglip2-{base,so400m}-patch16-naflex's image towers: 256 px is the table's 16 x 16
    # grid (the processor's default max_num_patches, 256); the NaFlex input takes any aspect ratio.
    ("B/16", "siglip2_naflex_webli", 256, None, None, 1.0, "naflexvit_base_patch16_siglip.v2_webli"),
    ("So400m/16", "siglip2_naflex_webli", 256, None, None, 1.0, "naflexvit_so400m_patch16_siglip.v2_webli"),
    ("B/32", "clip_openai", 224, 512, None, 0.9, "vit_base_patch32_clip_224.openai", QUICK_GELU),
    ("B/16", "clip_openai", 224, 512, None, 0.9, "vit_base_patch16_clip_224.openai", QUICK_GELU),
    ("L/14", "clip_openai", 224, 768, None, 1.0, "vit_large_patch14_clip_224.openai", QUICK_GELU),
    ("L/14", "clip_openai", 336, 768, None, 1.0, "vit_large_patch14_clip_336.openai", QUICK_GELU),
    ("B/32", "clip_laion2b", 224, 512, None, 0.9, "vit_base_patch32_clip_224.laion2b"),
    ("B/16", "clip_laion2b", 224, 512, None, 1.0, "vit_base_patch16_clip_224.laion2b"),
    # OpenCLIP trained this one with the 0.5 mean and std.
    ("L/14", "clip_laion2b", 224, 768, None, 1.0, "vit_large_patch14_clip_224.laion2b", HALF_PIXELS),
    ("H/14", "clip_laion2b", 224, 1024, None, 1.0, "vit_huge_patch14_clip_224.laion2b"),
    ("Ti/16", "deit_fb_in1k", 224, 1000, 72.190, 0.9, "deit_tiny_patch16_224.fb_in1k"),
    ("S/16", "deit_fb_in1k", 224, 1000, 79.856, 0.9, "deit_small_patch16_224.fb_in1k"),
    ("B/16", "deit_fb_in1k", 224, 1000, 81.980, 0.9, "deit_base_patch16_224.fb_in1k"),
    ("B/16", "deit_fb_in1k", 384, 1000, 83.108, 1.0, "deit_base_patch16_384.fb_in1k"),
    ("Ti/16", "deit_distilled_fb_in1k", 224, 1000, 74.538, 0.9, "deit_tiny_distilled_patch16_224.fb_in1k"),
    ("S/16", "deit_distilled_fb_in1k", 224, 1000, 81.204, 0.9, "deit_small_distilled_patch16_224.fb_in1k"),
    ("B/16", "deit_distilled_fb_in1k", 224, 1000, 83.384, 0.9, "deit_base_distilled_patch16_224.fb_in1k"),
    ("B/16", "deit_distilled_fb_in1k", 384, 1000, 85.438, 1.0, "deit_base_distilled_patch16_384.fb_in1k"),
    ("S/16", "deit3_fb_in1k", 224, 1000, 81.382, 0.9, "deit3_small_patch16_224.fb_in1k"),
    ("S/16", "deit3_fb_in1k", 384, 1000, 83.432, 1.0, "deit3_small_patch16_384.fb_in1k"),
    ("B/16", "deit3_fb_in1k", 224, 1000, 83.800, 0.9, "deit3_base_patch16_224.fb_in1k"),
    ("B/16", "deit3_fb_in1k", 384, 1000, 85.088, 1.0, "deit3_base_patch16_384.fb_in1k"),
    ("L/16", "deit3_fb_in1k", 224, 1000, 84.772, 0.9, "deit3_large_patch16_224.fb_in1k"),
    ("L/16", "deit3_fb_in1k", 384, 1000, 85.820, 1.0, "deit3_large_patch16_384.fb_in1k"),
    ("H/14", "deit3_fb_in1k", 224, 1000, 85.204, 0.9, "deit3_huge_patch14_224.fb_in1k"),
    ("S/16", "deit3_fb_in22k_ft_in1k", 224, 1000, 83.082, 1.0, "deit3_small_patch16_224.fb_in22k_ft_in1k"),
    ("S/16", "deit3_fb_in22k_ft_in1k", 384, 1000, 84.846, 1.0, "deit3_small_patch16_384.fb_in22k_ft_in1k"),
    ("B/16", "deit3_fb_in22k_ft_in1k", 224, 1000, 85.728, 1.0, "deit3_base_patch16_224.fb_in22k_ft_in1k"),
    ("B/16", "deit3_fb_in22k_ft_in1k", 384, 1000, 86.742, 1.0, "deit3_base_patch16_384.fb_in22k_ft_in1k"),
    ("L/16", "deit3_fb_in22k_ft_in1k", 224, 1000, 86.990, 1.0, "deit3_large_patch16_224.fb_in22k_ft_in1k"),
    ("L/16", "deit3_fb_in22k_ft_in1k", 384, 1000, 87.736, 1.0, "deit3_large_patch16_384.fb_in22k_ft_in1k"),
    ("H/14", "deit3_fb_in22k_ft_in1k", 224, 1000, 87.180, 1.0, "deit3_huge_patch14_224.fb_in22k_ft_in1k"),
    # DINOv3 (gated on the Hub); H+/16 (841 M) and 7B are larger than keras_vit registers.
    ("S/16", "dinov3_lvd1689m", 256, None, None, 1.0, "vit_small_patch16_dinov3.lvd1689m"),
    ("S+/16", "dinov3_lvd1689m", 256, None, None, 1.0, "vit_small_plus_patch16_dinov3.lvd1689m"),
    ("B/16", "dinov3_lvd1689m", 256, None, None, 1.0, "vit_base_patch16_dinov3.lvd1689m"),
    ("L/16", "dinov3_lvd1689m", 256, None, None, 1.0, "vit_large_patch16_dinov3.lvd1689m"),
    ("L/16", "dinov3_sat493m", 256, None, None, 1.0, "vit_large_patch16_dinov3.sat493m"),
    # EVA-02; timm resizes the ImageNet-22k fine-tunes' images whole to 448 x 448 (its crop_mode "squash").
    ("EVA02-Ti/14", "eva02_mim_in22k", 224, None, None, 0.9, "eva02_tiny_patch14_224.mim_in22k"),
    ("EVA02-Ti/14", "eva02_mim_in22k_ft_in1k", 336, 1000, None, 1.0, "eva02_tiny_patch14_336.mim_in22k_ft_in1k"),
    ("EVA02-S/14", "eva02_mim_in22k", 224, None, None, 0.9, "eva02_small_patch14_224.mim_in22k"),
    ("EVA02-S/14", "eva02_mim_in22k_ft_in1k", 336, 1000, None, 1.0, "eva02_small_patch14_336.mim_in22k_ft_in1k"),
    ("EVA02-B/14", "eva02_mim_in22k", 224, None, None, 0.9, "eva02_base_patch14_224.mim_in22k", SUB_LN),
    ("EVA02-B/14", "eva02_mim_in22k_ft_in1k", 448, 1000, None, 1.0, "eva02_base_patch14_448.mim_in22k_ft_in1k", SUB_LN),
    (
        "EVA02-B/14",
        "eva02_mim_in22k_ft_in22k",
        448,
        21841,
        None,
        1.0,
        "eva02_base_patch14_448.mim_in22k_ft_in22k",
        SUB_LN,
    ),
    (
        "EVA02-B/14",
        "eva02_mim_in22k_ft_in22k_in1k",
        448,
        1000,
        None,
        1.0,
        "eva02_base_patch14_448.mim_in22k_ft_in22k_in1k",
        SUB_LN,
    ),
    ("EVA02-L/14", "eva02_mim_in22k", 224, None, None, 0.9, "eva02_large_patch14_224.mim_in22k", SUB_LN),
    ("EVA02-L/14", "eva02_mim_m38m", 224, None, None, 0.9, "eva02_large_patch14_224.mim_m38m", SUB_LN),
    (
        "EVA02-L/14",
        "eva02_mim_in22k_ft_in1k",
        448,
        1000,
        None,
        1.0,
        "eva02_large_patch14_448.mim_in22k_ft_in1k",
        SUB_LN,
    ),
    (
        "EVA02-L/14",
        "eva02_mim_in22k_ft_in22k",
        448,
        21841,
        None,
        1.0,
        "eva02_large_patch14_448.mim_in22k_ft_in22k",
        SUB_LN,
    ),
    (
        "EVA02-L/14",
        "eva02_mim_in22k_ft_in22k_in1k",
        448,
        1000,
        None,
        1.0,
        "eva02_large_patch14_448.mim_in22k_ft_in22k_in1k",
        SUB_LN,
    ),
    ("EVA02-L/14", "eva02_mim_m38m_ft_in1k", 448, 1000, None, 1.0, "eva02_large_patch14_448.mim_m38m_ft_in1k", SUB_LN),
    (
        "EVA02-L/14",
        "eva02_mim_m38m_ft_in22k",
        448,
        21841,
        None,
        1.0,
        "eva02_large_patch14_448.mim_m38m_ft_in22k",
        SUB_LN,
    ),
    (
        "EVA02-L/14",
        "eva02_mim_m38m_ft_in22k_in1k",
        448,
        1000,
        None,
        1.0,
        "eva02_large_patch14_448.mim_m38m_ft_in22k_in1k",
        SUB_LN,
    ),
    # EVA-02's CLIP image tower (its head is the projection); timm's B/16 tower is a size keras_vit has no row for.
    ("EVA02-L/14", "eva02_clip_merged2b", 224, 768, None, 0.9, "eva02_large_patch14_clip_224.merged2b"),
    ("EVA02-L/14", "eva02_clip_merged2b", 336, 768, None, 1.0, "eva02_large_patch14_clip_336.merged2b"),
    # Perception Encoder: core (a CLIP tower, its head the projection) and spatial (no head).
    ("Ti/16", "pe_core_fb", 384, 512, None, 1.0, "vit_pe_core_tiny_patch16_384.fb"),
    ("S/16", "pe_core_fb", 384, 512, None, 1.0, "vit_pe_core_small_patch16_384.fb"),
    (
        "B/16",
        "pe_core_fb",
        224,
        1024,
        None,
        1.0,
        "vit_pe_core_base_patch16_224.fb",
        dict(rope=dict(PE_ROPE, ref_grid=(14, 14))),
    ),
    ("L/14", "pe_core_fb", 336, 1024, None, 1.0, "vit_pe_core_large_patch14_336.fb"),
    ("Ti/16", "pe_spatial_fb", 512, None, None, 1.0, "vit_pe_spatial_tiny_patch16_512.fb"),
    ("S/16", "pe_spatial_fb", 512, None, None, 1.0, "vit_pe_spatial_small_patch16_512.fb"),
    ("B/16", "pe_spatial_fb", 512, None, None, 1.0, "vit_pe_spatial_base_patch16_512.fb"),
    ("L/14", "pe_spatial_fb", 448, None, None, 1.0, "vit_pe_spatial_large_patch14_448.fb"),
    # Naver's RoPE-ViT (Heo et al. 2024): axial or mixed (learned) frequencies, with or without a learned table.
    ("S/16", "rope_naver_in1k", 224, 1000, None, 0.9, "vit_small_patch16_rope_224.naver_in1k"),
    ("B/16", "rope_naver_in1k", 224, 1000, None, 0.9, "vit_base_patch16_rope_224.naver_in1k"),
    ("L/16", "rope_naver_in1k", 224, 1000, None, 0.9, "vit_large_patch16_rope_224.naver_in1k"),
    ("S/16", "rope_ape_naver_in1k", 224, 1000, None, 0.9, "vit_small_patch16_rope_ape_224.naver_in1k"),
    ("B/16", "rope_ape_naver_in1k", 224, 1000, None, 0.9, "vit_base_patch16_rope_ape_224.naver_in1k"),
    ("L/16", "rope_ape_naver_in1k", 224, 1000, None, 0.9, "vit_large_patch16_rope_ape_224.naver_in1k"),
    ("S/16", "rope_mixed_naver_in1k", 224, 1000, None, 0.9, "vit_small_patch16_rope_mixed_224.naver_in1k"),
    ("B/16", "rope_mixed_naver_in1k", 224, 1000, None, 0.9, "vit_base_patch16_rope_mixed_224.naver_in1k"),
    ("L/16", "rope_mixed_naver_in1k", 224, 1000, None, 0.9, "vit_large_patch16_rope_mixed_224.naver_in1k"),
    ("S/16", "rope_mixed_ape_naver_in1k", 224, 1000, None, 0.9, "vit_small_patch16_rope_mixed_ape_224.naver_in1k"),
    ("B/16", "rope_mixed_ape_naver_in1k", 224, 1000, None, 0.9, "vit_base_patch16_rope_mixed_ape_224.naver_in1k"),
    ("L/16", "rope_mixed_ape_naver_in1k", 224, 1000, None, 0.9, "vit_large_patch16_rope_mixed_ape_224.naver_in1k"),
    # timm's sbb RoPE with a register (medium, mediumd and betwixt are sizes keras_vit has no row for).
    ("B/16", "rope_reg1_gap_sbb_in1k", 256, 1000, None, 0.95, "vit_base_patch16_rope_reg1_gap_256.sbb_in1k"),
)


def _family_row(variant, tag, resolution, classes, top1, crop_pct, timm_name, extra=None):
    family, mean, std, license = FAMILY_TAGS[tag]
    options = {"resample_method": "bicubic", "resample_antialias": True, **FAMILY_OPTIONS[family]}
    if (mean, std) != (HALF, HALF):
        options.update(pixel_mean=mean, pixel_std=std)
    options.update(extra or {})
    mean, std = options.get("pixel_mean", HALF), options.get("pixel_std", HALF)
    info = CheckpointInfo(
        variant, tag, resolution, classes, False, f"timm/{timm_name}", "timm", None, top1, license=license
    )
    return dataclasses.replace(info, family=family, options=options, mean=mean, std=std, crop_pct=crop_pct)


# FlexiViT: (variant, tag, classes, top-1, big_vision file); timm's copies hold the patch kernel at 16 px and the
# position table of a 240 px image.
_FLEXIVIT_ROWS = (
    ("S/16", "flexivit_1200ep_in1k", 1000, 82.520, "flexivit_s_i1k"),
    ("S/16", "flexivit_600ep_in1k", 1000, 82.362, "flexivit_s_i1k_600ep"),
    ("S/16", "flexivit_300ep_in1k", 1000, 82.178, "flexivit_s_i1k_300ep"),
    ("B/16", "flexivit_1200ep_in1k", 1000, 84.678, "flexivit_b_i1k"),
    ("B/16", "flexivit_600ep_in1k", 1000, 84.522, "flexivit_b_i1k_600ep"),
    ("B/16", "flexivit_300ep_in1k", 1000, 84.406, "flexivit_b_i1k_300ep"),
    ("B/16", "flexivit_1000ep_in21k", 21843, None, "flexivit_b_i21k_1000ep"),
    ("B/16", "flexivit_300ep_in21k", 21843, None, "flexivit_b_i21k_300ep"),
    ("L/16", "flexivit_1200ep_in1k", 1000, 85.646, "flexivit_l_i1k"),
    ("L/16", "flexivit_600ep_in1k", 1000, 85.538, "flexivit_l_i1k_600ep"),
    ("L/16", "flexivit_300ep_in1k", 1000, 85.290, "flexivit_l_i1k_300ep"),
)


def _flexivit_row(variant, tag, classes, top1, official):
    size = {"S": "small", "B": "base", "L": "large"}[variant[0]]
    info = _family_row(variant, tag, 240, classes, top1, 0.95, f"flexivit_{size}.{tag.removeprefix('flexivit_')}")
    url = f"https://storage.googleapis.com/big_vision/flexivit/{official}.npz"
    return dataclasses.replace(info, url=url, patch_sizes=FLEXIVIT_PATCH_SIZES)


CHECKPOINTS = (
    tuple(_row("timm", *row) for row in _TIMM_ROWS)
    + tuple(_row("hf", *row) for row in _GOOGLE_ROWS)
    + tuple(_family_row(*row) for row in _FAMILY_ROWS)
    + tuple(_flexivit_row(*row) for row in _FLEXIVIT_ROWS)
)


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
