"""The published ViT variants: one table, keyed by the paper's notation (a new variant is one new row).

Keras-free, so that the `keras-vit variants` command imports no framework.

>>> VARIANTS["B/16"]["hidden_dim"], VARIANTS["B/16"]["patch_size"]
(768, 16)
"""

from keras_vit.utils import validation

# Dosovitskiy et al. 2021, Table 1 (B, L, H), Steiner et al. 2021, "How to train your ViT?" (Ti, S), and the shape
# SigLIP's So400m/14 is (Alabdulmohsin et al. 2023, "Getting ViT in Shape", SoViT-400m/14); g is DINOv2's giant
# (Oquab et al. 2024).
SIZES = {
    "Ti": dict(hidden_dim=192, num_layers=12, num_heads=3, mlp_dim=768),
    "S": dict(hidden_dim=384, num_layers=12, num_heads=6, mlp_dim=1536),
    "B": dict(hidden_dim=768, num_layers=12, num_heads=12, mlp_dim=3072),
    "L": dict(hidden_dim=1024, num_layers=24, num_heads=16, mlp_dim=4096),
    "H": dict(hidden_dim=1280, num_layers=32, num_heads=16, mlp_dim=5120),
    "So400m": dict(hidden_dim=1152, num_layers=27, num_heads=16, mlp_dim=4304),
    "g": dict(hidden_dim=1536, num_layers=40, num_heads=24, mlp_dim=4096),
}

# Each row is the architecture's arguments of `keras_vit.VisionTransformer`.
VARIANTS = {
    "Ti/16": dict(SIZES["Ti"], patch_size=16),
    "S/16": dict(SIZES["S"], patch_size=16),
    "S/32": dict(SIZES["S"], patch_size=32),
    "B/8": dict(SIZES["B"], patch_size=8),
    "B/16": dict(SIZES["B"], patch_size=16),
    "B/32": dict(SIZES["B"], patch_size=32),
    "L/16": dict(SIZES["L"], patch_size=16),
    "L/32": dict(SIZES["L"], patch_size=32),
    "H/14": dict(SIZES["H"], patch_size=14),
    # The 14-pixel patches of DINOv2 (Oquab et al. 2024), CLIP (Radford et al. 2021) and SigLIP (Zhai et al. 2023).
    "S/14": dict(SIZES["S"], patch_size=14),
    "B/14": dict(SIZES["B"], patch_size=14),
    "L/14": dict(SIZES["L"], patch_size=14),
    "So400m/14": dict(SIZES["So400m"], patch_size=14),
    # SigLIP 2's So400m/16 (its NaFlex checkpoint among them).
    "So400m/16": dict(SIZES["So400m"], patch_size=16),
    # DINOv2's giant: a SwiGLU MLP, 4096 wide after the gate.
    "g/14": dict(SIZES["g"], patch_size=14, mlp_activation="swiglu"),
    # DINOv3's S+ (Simeoni et al. 2025): S with a SwiGLU MLP, 1536 wide after the gate.
    "S+/16": dict(SIZES["S"], patch_size=16, mlp_activation="swiglu"),
    # EVA-02 (Fang et al. 2024): SwiGLU MLPs 8/3 as wide as the hidden size (timm's `int(dim * 4 * 2 / 3)`).
    "EVA02-Ti/14": dict(SIZES["Ti"], mlp_dim=512, patch_size=14, mlp_activation="swiglu"),
    "EVA02-S/14": dict(SIZES["S"], mlp_dim=1024, patch_size=14, mlp_activation="swiglu"),
    "EVA02-B/14": dict(SIZES["B"], mlp_dim=2048, patch_size=14, mlp_activation="swiglu"),
    "EVA02-L/14": dict(SIZES["L"], mlp_dim=2730, patch_size=14, mlp_activation="swiglu"),
    # The hybrids (paper section 3.1; vit_jax `configs/models.py`): patches of a ResNet's feature map. The suffix
    # is the official name's: R+Ti/16's root alone downsamples 4x, so its 8x8 patches cover 32 px.
    "R+Ti/16": dict(SIZES["Ti"], patch_size=8, resnet_stages=()),
    "R26+S/32": dict(SIZES["S"], patch_size=1, resnet_stages=(2, 2, 2, 2)),
    "R26+B/32": dict(SIZES["B"], patch_size=1, resnet_stages=(2, 2, 2, 2)),
    "R50+B/16": dict(SIZES["B"], patch_size=1, resnet_stages=(3, 4, 9)),
    "R50+L/32": dict(SIZES["L"], patch_size=1, resnet_stages=(3, 4, 6, 3)),
}

DEFAULT_INPUT_SHAPE = (224, 224, 3)


def num_heads_for(hidden_dim):
    """The attention heads of the published size with this hidden size, or None.

    >>> num_heads_for(768), num_heads_for(100)
    (12, None)
    """
    return {size["hidden_dim"]: size["num_heads"] for size in SIZES.values()}.get(hidden_dim)


def variant_of(config):
    """The `VARIANTS` key whose row a model's checked arguments `config` have, or None.

    Of two rows that fit, the one that fixes more arguments (S+/16's SwiGLU on S/16's sizes).

    >>> variant_of(dict(VARIANTS["B/16"], patch_size=(16, 16), resnet_stages=None))
    'B/16'
    >>> variant_of(dict(VARIANTS["S/16"], patch_size=(16, 16), resnet_stages=None, mlp_activation="swiglu"))
    'S+/16'
    """
    found = []
    for variant, row in VARIANTS.items():
        patch_size = validation.pair("patch_size", row["patch_size"])
        wanted = dict(row, patch_size=patch_size, resnet_stages=row.get("resnet_stages"))
        if all(config.get(key) == value for key, value in wanted.items()):
            found.append(variant)
    return max(found, key=lambda variant: len(VARIANTS[variant]), default=None)


def constructor_name(variant):
    """The name of `variant`'s constructor (a size's own "+" is "Plus"; a hybrid's is dropped).

    >>> [constructor_name(variant) for variant in ("B/16", "R50+B/16", "S+/16", "EVA02-B/14")]
    ['ViTB16', 'ViTR50B16', 'ViTSPlus16', 'ViTEVA02B14']
    """
    return "ViT" + variant.replace("+/", "Plus/").replace("/", "").replace("+", "").replace("-", "")


def channels_last(input_shape, data_format):
    """`(height, width, channels)` of an `input_shape` given in `data_format`.

    >>> channels_last((3, 224, 160), "channels_first")
    (224, 160, 3)
    """
    if data_format == "channels_first":
        return (input_shape[1], input_shape[2], input_shape[0])
    return tuple(input_shape)
