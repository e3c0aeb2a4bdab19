"""Analytic counts of a Vision Transformer, plain or hybrid: floating-point operations and parameters.

One multiply-add counts as two operations, the convention of the published
figures (ViT-B/16 at 224 px: 17.6 GMACs, 35.1 GFLOPs) and of
`torch.utils.flop_counter.FlopCounterMode`. Only the matrix products and
convolutions are counted: patch embedding, the QKV / output / MLP projections,
the two attention products and the head, and for a hybrid every convolution of
its ResNet (a strided convolution counts its whole kernel at every output
position, "same" padding included, as FlopCounterMode does). LayerNorm, GELU,
softmax and the residual additions are a fraction of a percent and are left
out, so "percent of the matrix-multiply ceiling" compares like with like; so
are the ResNet's GroupNorms, ReLUs, max pooling and residual sums (about ten
operations per activation: 0.3 % of R50+B/16's count, 1 % of R26+S/32's) and
its weight standardisation (about five operations per kernel weight, once per
forward pass: 0.1 % of R50+B/16's count, 1 % of R26+S/32's, whose ResNet is
large next to its transformer).

These counts equal FlopCounterMode's on timm's models exactly (B/16, R+Ti/16,
R26+S/32, R26+B/32, R50+B/16, R50+L/32 at 224 and 250 px; timm's fused CPU
attention must be switched off, or FlopCounterMode misses the two attention
products): `docs/hybrid.md`.

The token grid is the model's: `ceil(side / token)` per side (images, or a
hybrid's feature map, are padded up to whole patches).
"""

from keras_vit.utils.patches import patch_grid

# The hybrid ResNet's layout (keras_vit.layers.resnet): a 7x7 stride-2 root convolution to `width` channels and a
# stride-2 max pooling, then bottleneck stages; stage i has width * 2**i bottleneck channels, outputs 4x that,
# and stride 2 on its first unit except in stage 0.
ROOT_KERNEL = 7
DEFAULT_RESNET_WIDTH = 64


def _ceil_div(size, divisor):
    return -(-size // divisor)


def resnet_convolutions(stage_depths, image_size, width=DEFAULT_RESNET_WIDTH, channels=3):
    """Every convolution of a hybrid's ResNet, in order: the one walk the MAC and parameter counts share.

    Args:
        stage_depths: the units per stage (`()` for the root only).
        image_size: `(height, width)` in pixels.
        width: the root's channels. Defaults to `64`.
        channels: the image channels. Defaults to `3`.

    Returns:
        `(convolutions, (rows, cols, channels))`: a list of
        `(kernel_side, in_channels, out_channels, out_rows, out_cols)`, one per
        convolution (each followed by a GroupNorm), and the feature map's shape.

    Example:

    >>> resnet_convolutions((), (224, 224))
    ([(7, 3, 64, 112, 112)], (56, 56, 64))
    """
    rows, cols = (_ceil_div(size, 2) for size in image_size)  # the stride-2 root convolution
    convolutions = [(ROOT_KERNEL, channels, width, rows, cols)]
    rows, cols = _ceil_div(rows, 2), _ceil_div(cols, 2)  # the stride-2 max pooling
    in_channels = width
    for stage, depth in enumerate(stage_depths):
        filters = width * 2**stage
        for unit in range(depth):
            stride = 2 if stage > 0 and unit == 0 else 1
            out_rows, out_cols = _ceil_div(rows, stride), _ceil_div(cols, stride)
            if in_channels != 4 * filters or stride != 1:
                convolutions.append((1, in_channels, 4 * filters, out_rows, out_cols))  # conv_proj, the shortcut
            convolutions.append((1, in_channels, filters, rows, cols))  # conv1
            convolutions.append((3, filters, filters, out_rows, out_cols))  # conv2 (strided)
            convolutions.append((1, filters, 4 * filters, out_rows, out_cols))  # conv3
            rows, cols, in_channels = out_rows, out_cols, 4 * filters
    return convolutions, (rows, cols, in_channels)


def resnet_macs(stage_depths, image_size, width=DEFAULT_RESNET_WIDTH, channels=3):
    """Returns the multiply-adds of a hybrid's ResNet and its feature map's shape.

    Args:
        stage_depths: the units per stage (`()` for the root only).
        image_size: `(height, width)` in pixels.
        width: the root's channels. Defaults to `64`.
        channels: the image channels. Defaults to `3`.

    Returns:
        `(macs, (rows, cols, channels))`.

    Example:

    >>> resnet_macs((), (224, 224))
    (118013952, (56, 56, 64))
    """
    convolutions, shape = resnet_convolutions(stage_depths, image_size, width, channels)
    return _macs(convolutions), shape


def _macs(convolutions):
    return sum(rows * cols * side * side * fan_in * fan_out for side, fan_in, fan_out, rows, cols in convolutions)


def _tokens_input(variant, image_size):
    """`(height, width)`, the ResNet's convolutions (none for a plain ViT) and the `(rows, cols, channels)`
    the patch embedding cuts into patches."""
    height, width = (image_size, image_size) if isinstance(image_size, int) else image_size
    if variant.get("resnet_stages") is None:
        return [], (height, width, 3)
    return resnet_convolutions(
        variant["resnet_stages"], (height, width), variant.get("resnet_width", DEFAULT_RESNET_WIDTH)
    )


def parameter_count(variant, image_size=224, classes=1000):
    """Returns the parameters of a ViT or hybrid, counted from its sizes (no model is built).

    Equal to `count_params()` of the model the constructors build (checked
    for every variant in tests/test_models.py): the patch embedding (kernel
    and bias), class token, position embedding (one row per patch plus the
    class token's), per block two LayerNorms, the fused query/key/value and
    output projections and the two MLP layers (all with biases), the final
    LayerNorm and the head; for a hybrid, the ResNet's unbiased
    weight-standardised convolutions and their GroupNorms.

    Args:
        variant: a value of `keras_vit.models.variants.VARIANTS` (see `forward_flops`).
        image_size: int or `(height, width)`: the position embedding has
            one row per patch of it.
        classes: int, the size of the head (0 for none).

    Returns:
        An int.

    Example:

    >>> import keras_vit
    >>> b16 = keras_vit.models.variants.VARIANTS["B/16"]
    >>> parameter_count(b16), parameter_count(b16, classes=0)
    (86567656, 85798656)
    """
    patch = variant["patch_size"]
    patch_h, patch_w = (patch, patch) if isinstance(patch, int) else patch
    dim, mlp, layers = variant["hidden_dim"], variant["mlp_dim"], variant["num_layers"]
    convolutions, (rows, cols, channels) = _tokens_input(variant, image_size)
    resnet = sum(side * side * fan_in * fan_out + 2 * fan_out for side, fan_in, fan_out, _, _ in convolutions)
    grid = patch_grid((rows, cols), (patch_h, patch_w))
    embedding = patch_h * patch_w * channels * dim + dim  # the patch projection
    tokens = dim + (grid[0] * grid[1] + 1) * dim  # class token, position embedding
    per_block = 2 * dim + (dim * 3 * dim + 3 * dim) + (dim * dim + dim) + 2 * dim + (2 * dim * mlp + mlp + dim)
    head = dim * classes + classes if classes else 0
    return resnet + embedding + tokens + layers * per_block + 2 * dim + head


def forward_flops(variant, image_size=224, classes=1000):
    """Returns the forward-pass FLOPs of one image through a ViT or a hybrid.

    Args:
        variant: a dict with `patch_size`, `hidden_dim`, `num_layers`,
            `mlp_dim` and, for a hybrid, `resnet_stages` (and optionally
            `resnet_width`): a value of `keras_vit.models.variants.VARIANTS`.
        image_size: int or `(height, width)`, the input size in pixels.
        classes: int, the size of the head (0 for none).

    Returns:
        An int, the FLOPs (2 per multiply-add).

    Example:

    >>> import keras_vit
    >>> round(forward_flops(keras_vit.models.variants.VARIANTS["B/16"]) / 1e9, 1)
    35.1
    >>> round(forward_flops(keras_vit.models.variants.VARIANTS["R50+B/16"]) / 1e9, 1)
    43.1
    """
    patch = variant["patch_size"]
    patch_h, patch_w = (patch, patch) if isinstance(patch, int) else patch
    dim, mlp, layers = variant["hidden_dim"], variant["mlp_dim"], variant["num_layers"]
    convolutions, (rows, cols, channels) = _tokens_input(variant, image_size)
    macs = _macs(convolutions)
    grid = patch_grid((rows, cols), (patch_h, patch_w))
    patches = grid[0] * grid[1]
    tokens = patches + 1  # the class token
    macs += patches * (patch_h * patch_w * channels) * dim  # the patch-embedding convolution
    per_block = (
        tokens * dim * 3 * dim  # fused query/key/value projection
        + 2 * tokens * tokens * dim  # q @ k^T and weights @ v, over all heads
        + tokens * dim * dim  # output projection
        + 2 * tokens * dim * mlp  # the two MLP layers
    )
    macs += layers * per_block + dim * classes
    return 2 * macs


def training_flops(variant, image_size=224, classes=1000):
    """Returns the FLOPs of one training step per image: forward plus backward.

    The backward pass of each matrix product costs two forward ones (the
    gradients of the input and of the weight), hence 3x the forward pass; the
    input gradient of the first convolution is not needed, which this ignores
    (< 0.5 % for a plain ViT).
    """
    return 3 * forward_flops(variant, image_size, classes)
