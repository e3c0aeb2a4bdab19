"""The ViT variant table and the shape rules every builder shares.

It imports only argument checks and the patch-grid rule, no Keras: the architecture
(`keras_vit.models`), the public constructors (`keras_vit.models.applications`), the
weights machinery (`keras_vit.pretrained`) and the CLIs all read the same
table and the same rules, so a new variant is one new row of `VARIANTS`.

Example:

>>> VARIANTS["B/16"]["hidden_dim"], VARIANTS["B/16"]["patch_size"]
(768, 16)
"""

from keras_vit.utils import validation
from keras_vit.utils.patches import patch_grid

# Sizes from Dosovitskiy et al. 2021, Table 1 (B, L, H) and Steiner et al.
# 2021, "How to train your ViT?" (Ti, S): hidden size, depth, heads, MLP size.
SIZES = {
    "Ti": dict(hidden_dim=192, num_layers=12, num_heads=3, mlp_dim=768),
    "S": dict(hidden_dim=384, num_layers=12, num_heads=6, mlp_dim=1536),
    "B": dict(hidden_dim=768, num_layers=12, num_heads=12, mlp_dim=3072),
    "L": dict(hidden_dim=1024, num_layers=24, num_heads=16, mlp_dim=4096),
    "H": dict(hidden_dim=1280, num_layers=32, num_heads=16, mlp_dim=5120),
}

# The published size/patch combinations, keyed by the paper's notation. Each
# value is the architecture's keyword arguments for `keras_vit.VisionTransformer`;
# a new family (e.g. hybrids) adds rows with whatever extra keys its builder takes.
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
    # The hybrids (paper section 3.1; AugReg): a ResNet's feature map instead of pixels, `patch_size`
    # patches of it (vit_jax `configs/models.py`). The suffix is the official name's: R+Ti/16's root
    # alone downsamples 4x, so with 8x8 patches its tokens cover 32 px (7x7 at 224), like the others'
    # /32; R50+B/16 uses (3, 4, 9) units to stop at stride 16.
    "R+Ti/16": dict(SIZES["Ti"], patch_size=8, resnet_stages=()),
    "R26+S/32": dict(SIZES["S"], patch_size=1, resnet_stages=(2, 2, 2, 2)),
    "R26+B/32": dict(SIZES["B"], patch_size=1, resnet_stages=(2, 2, 2, 2)),
    "R50+B/16": dict(SIZES["B"], patch_size=1, resnet_stages=(3, 4, 9)),
    "R50+L/32": dict(SIZES["L"], patch_size=1, resnet_stages=(3, 4, 6, 3)),
}

DEFAULT_INPUT_SHAPE = (224, 224, 3)


def num_heads_for(hidden_dim):
    """The attention heads of the published size with this hidden size, or None (not a published size).

    Each published hidden size has one head count, so a checkpoint whose fused attention tensors do not
    say their heads can take them from here.

    >>> num_heads_for(768), num_heads_for(100)
    (12, None)
    """
    return {size["hidden_dim"]: size["num_heads"] for size in SIZES.values()}.get(hidden_dim)


def variant_of(config):
    """The `VARIANTS` key whose row `config` (a model's arguments) has, or None (not a published size).

    >>> variant_of(dict(VARIANTS["B/16"], patch_size=(16, 16), resnet_stages=None))
    'B/16'
    """
    for variant, row in VARIANTS.items():
        wanted = dict(row, patch_size=validation.pair("patch_size", row["patch_size"]))
        if all(config.get(key) == value for key, value in wanted.items()) and config.get("resnet_stages") == (
            wanted.get("resnet_stages")
        ):
            return variant
    return None


def constructor_name(variant):
    """The name of `variant`'s public constructor (`keras_vit.models.applications.CONSTRUCTORS`).

    >>> constructor_name("B/16"), constructor_name("R50+B/16")
    ('ViTB16', 'ViTR50B16')
    """
    return "ViT" + variant.replace("/", "").replace("+", "")


# "token": the class token (the published classifiers); "gap" (alias "avg",
# the keras.applications name): mean of the patch tokens after the final norm;
# "max": their maximum, as keras.applications' pooling="max".
POOLING_MODES = ("token", "gap", "max")
POOLING_ALIASES = {"avg": "gap"}


def resolve_pooling(pooling, include_top):
    """Normalises `pooling` (aliases resolved; None means "token" under a head).

    Args:
        pooling: None or one of `POOLING_MODES` / `POOLING_ALIASES`.
        include_top: bool, whether a classification head follows.

    Returns:
        A `POOLING_MODES` entry, or None (no pooling: features out).

    >>> resolve_pooling("avg", include_top=False), resolve_pooling(None, include_top=True)
    ('gap', 'token')
    """
    pooling = POOLING_ALIASES.get(pooling, pooling)
    if pooling is None:
        # The published classifiers read the class token.
        return "token" if include_top else None
    if pooling not in POOLING_MODES:
        raise ValueError(
            f"`pooling` must be one of {POOLING_MODES} (or 'avg', an alias of 'gap'), or None for "
            f"the features without pooling (include_top=False only). Received: pooling={pooling!r}"
        )
    return pooling


def default_grid(patch_size):
    """The patch grid of a `DEFAULT_INPUT_SHAPE` image: where a model whose
    input size is left open stores its position embedding.

    >>> default_grid(16), default_grid(14)
    ((14, 14), (16, 16))
    """
    return patch_grid(DEFAULT_INPUT_SHAPE[:2], patch_size)


def channels_last(input_shape, data_format):
    """`(height, width, channels)` of an `input_shape` given in `data_format`.

    >>> channels_last((3, 224, 160), "channels_first")
    (224, 160, 3)
    """
    if data_format == "channels_first":
        return (input_shape[1], input_shape[2], input_shape[0])
    return tuple(input_shape)


def resolve_input_shape(input_shape, input_tensor, include_top=True, data_format="channels_last"):
    """The image shape (batch excluded) a model is built for, checked.

    Height and width may be None (any size, the keras.applications default
    without a head) and need not be multiples of the patch (the images are
    padded); the channels must be a known positive int.

    Args:
        input_shape: None or a 3-tuple in `data_format` order.
        input_tensor: None or a tensor whose shape (batch excluded) is used.
        include_top: bool; without a head the default size is open.
        data_format: `"channels_last"` or `"channels_first"`.

    Returns:
        The 3-tuple, in `data_format` order.

    >>> resolve_input_shape(None, None, include_top=False)
    (None, None, 3)
    >>> resolve_input_shape(None, None, data_format="channels_first")
    (3, 224, 224)
    """
    if input_tensor is not None:
        shape = tuple(input_tensor.shape[1:])
        if input_shape is not None and tuple(input_shape) != shape:
            raise ValueError(
                f"`input_shape` {tuple(input_shape)} does not match the shape of "
                f"`input_tensor` {shape}. Pass one or make them agree."
            )
        input_shape = shape
    if input_shape is None:
        size = DEFAULT_INPUT_SHAPE[:2] if include_top else (None, None)
        input_shape = (3, *size) if data_format == "channels_first" else (*size, 3)
    if not isinstance(input_shape, (tuple, list)) or len(input_shape) != 3:
        raise ValueError(
            "`input_shape` must be a 3-tuple (height, width, channels), or (channels, height, width) "
            f"under the channels_first image data format. Received: input_shape={input_shape!r}"
        )
    input_shape = tuple(input_shape)
    height, width, channels = channels_last(input_shape, data_format)
    sizes_ok = all(size is None or (validation.static_dim(size) == size and size >= 1) for size in (height, width))
    if not sizes_ok or channels is None or validation.static_dim(channels) != channels or channels < 1:
        raise ValueError(
            "`input_shape` needs a known number of channels >= 1 and a height and width that are "
            f"each >= 1 or None (any size). Received: input_shape={input_shape!r} ({data_format})"
        )
    # Python ints (a shape taken from a NumPy array holds NumPy's), so configs stay plain JSON.
    return tuple(None if size is None else int(size) for size in input_shape)
