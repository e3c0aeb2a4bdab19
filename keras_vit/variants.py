"""The ViT variant table and the shape rules every builder shares.

A leaf module (it imports only `keras_vit.validation`): the architecture
(`keras_vit.models`), the public constructors (`keras_vit.applications`), the
weights machinery (`keras_vit.pretrained`) and the CLIs all read the same
table and the same rules, so a new variant is one new row of `VARIANTS`.

Example:

>>> VARIANTS["B/16"]["hidden_dim"], VARIANTS["B/16"]["patch_size"]
(768, 16)
>>> patch_grid((224, 224), 16), patch_grid((123, 100), 16)
((14, 14), (8, 7))
"""

from keras_vit import validation

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
# value is the architecture's keyword arguments for `keras_vit.models.build_model`;
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

# "token": the class token (the published classifiers); "gap" (alias "avg",
# the keras.applications name): mean of the patch tokens after the final norm;
# "max": their maximum, as keras.applications' pooling="max".
POOLING_MODES = ("token", "gap", "max")
POOLING_ALIASES = {"avg": "gap"}


def patch_grid(image_size, patch_size):
    """The patch grid `(rows, cols)` of an image, padding included.

    Sides that are not a multiple of the patch are padded up to the next
    multiple (timm's `dynamic_img_pad`), so the grid is the ceiling of
    size / patch. Unknown sides (None) give None.

    Args:
        image_size: `(height, width)`; either may be None.
        patch_size: int or `(height, width)`.

    Returns:
        `(rows, cols)`, each an int or None.

    >>> patch_grid((None, 32), (8, 4))
    (None, 8)
    """
    patch = validation.pair("patch_size", patch_size)
    return tuple(None if size is None else -(-size // p) for size, p in zip(image_size, patch))


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


def resolve_input_shape(input_shape, input_tensor, patch_size):
    """The `(height, width, channels)` a model is built for, and its patch grid.

    Args:
        input_shape: None (the default 224x224x3) or a 3-tuple.
        input_tensor: None or a tensor whose shape (batch excluded) wins.
        patch_size: int or `(height, width)`.

    Returns:
        `(input_shape, grid)`.

    >>> resolve_input_shape((224, 224, 3), None, 16)
    ((224, 224, 3), (14, 14))
    """
    if input_tensor is not None:
        shape = tuple(input_tensor.shape[1:])
        if input_shape is not None and tuple(input_shape) != shape:
            raise ValueError(
                f"`input_shape` {tuple(input_shape)} does not match the shape of "
                f"`input_tensor` {shape}. Pass one or make them agree."
            )
        input_shape = shape
    input_shape = DEFAULT_INPUT_SHAPE if input_shape is None else tuple(input_shape)
    if len(input_shape) != 3 or any(dim is None for dim in input_shape):
        raise ValueError(
            "`input_shape` must be a fully known (height, width, channels) tuple: the "
            "position embedding is sized for one patch grid. To use another resolution, "
            "build the model at that size (pretrained weights are resampled). "
            f"Received: input_shape={input_shape}"
        )
    patch = validation.pair("patch_size", patch_size)
    for side, size, p in (("height", input_shape[0], patch[0]), ("width", input_shape[1], patch[1])):
        if size % p:
            raise ValueError(
                f"The image {side} must be divisible by the patch size {p}, but {size} "
                f"leaves a remainder of {size % p}; use e.g. {size - size % p} or "
                f"{size - size % p + p}. Received: input_shape={input_shape}"
            )
    return input_shape, (input_shape[0] // patch[0], input_shape[1] // patch[1])
