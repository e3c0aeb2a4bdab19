"""Analytic counts of a ViT or hybrid from its sizes, no model built: parameters and forward-pass FLOPs.

One multiply-add is two FLOPs, the convention of the published figures and of torch's `FlopCounterMode`, whose
counts on timm's models these equal (docs/hybrid.md). Only matrix products and convolutions are counted; norms,
activations, softmax and residual sums add about 1 %. `variant` is a row of `keras_vit.models.variants.VARIANTS`
(`patch_size`, `hidden_dim`, `num_layers`, `mlp_dim`, for a hybrid `resnet_stages` and optionally `resnet_width`).
"""

from keras_vit.utils import validation
from keras_vit.utils.patches import patch_grid


def _resnet(variant, image_size):
    """A hybrid ResNet's convolutions `(kernel_side, in_channels, out_channels, out_rows, out_cols)` (none for a
    plain ViT), the channels the patch embedding cuts into patches, the patch size and the token grid."""
    rows, cols = (image_size, image_size) if validation.is_int(image_size) else image_size
    patch = validation.pair("patch_size", variant["patch_size"])
    if variant.get("resnet_stages") is None:
        return [], 3, patch, patch_grid((rows, cols), patch)
    width = variant.get("resnet_width", 64)
    # keras_vit.layers.resnet: a 7x7 stride-2 root convolution and a stride-2 max pooling, then bottleneck units;
    # stage i has width * 2**i bottleneck channels and 4x that out, and strides 2 in its first unit but in stage 0.
    # "Same" padding: a stride s gives ceil(size / s) per side, the grid of whole s x s patches.
    rows, cols = patch_grid((rows, cols), 2)
    convolutions = [(7, 3, width, rows, cols)]
    (rows, cols), channels = patch_grid((rows, cols), 2), width
    for stage, depth in enumerate(variant["resnet_stages"]):
        filters = width * 2**stage
        for unit in range(depth):
            stride = 2 if stage > 0 and unit == 0 else 1
            out_rows, out_cols = patch_grid((rows, cols), stride)
            if channels != 4 * filters or stride != 1:
                convolutions.append((1, channels, 4 * filters, out_rows, out_cols))  # the projection shortcut
            convolutions.append((1, channels, filters, rows, cols))
            convolutions.append((3, filters, filters, out_rows, out_cols))
            convolutions.append((1, filters, 4 * filters, out_rows, out_cols))
            rows, cols, channels = out_rows, out_cols, 4 * filters
    return convolutions, channels, patch, patch_grid((rows, cols), patch)


def parameter_count(variant, image_size=224, classes=1000):
    """The parameters of the model `keras_vit.VisionTransformer(**variant)` builds at `image_size` (int or
    `(height, width)`) with a `classes` head (0 for none).

    >>> parameter_count({"patch_size": 16, "hidden_dim": 768, "num_layers": 12, "mlp_dim": 3072})
    86567656
    """
    convolutions, channels, (patch_h, patch_w), (grid_h, grid_w) = _resnet(variant, image_size)
    dim, mlp = variant["hidden_dim"], variant["mlp_dim"]
    # Unbiased weight-standardised convolutions, each with a GroupNorm.
    resnet = sum(side * side * fan_in * fan_out + 2 * fan_out for side, fan_in, fan_out, _, _ in convolutions)
    # The patch projection, the class token and the position embedding (a row per patch and one for the class).
    embedding = patch_h * patch_w * channels * dim + dim + dim + (grid_h * grid_w + 1) * dim
    # Two LayerNorms, the fused query/key/value and the output projections, the two MLP layers (a SwiGLU's first
    # gives the gate too).
    fc1 = mlp * (2 if variant.get("mlp_activation") == "swiglu" else 1)
    block = 2 * dim + (3 * dim * dim + 3 * dim) + (dim * dim + dim) + 2 * dim + (dim * fc1 + fc1 + mlp * dim + dim)
    return resnet + embedding + variant["num_layers"] * block + 2 * dim + (dim + 1) * classes


def forward_flops(variant, image_size=224, classes=1000):
    """The FLOPs of one image's forward pass at `image_size` (int or `(height, width)`), with a `classes` head.

    >>> from keras_vit.models.variants import VARIANTS
    >>> round(forward_flops(VARIANTS["B/16"]) / 1e9, 1), round(forward_flops(VARIANTS["R50+B/16"]) / 1e9, 1)
    (35.1, 43.1)
    """
    convolutions, channels, (patch_h, patch_w), (grid_h, grid_w) = _resnet(variant, image_size)
    dim, mlp = variant["hidden_dim"], variant["mlp_dim"]
    # A strided convolution counts its kernel at every output position, "same" padding included.
    macs = sum(out_h * out_w * side * side * fan_in * fan_out for side, fan_in, fan_out, out_h, out_w in convolutions)
    patches = grid_h * grid_w
    tokens = patches + 1
    macs += patches * patch_h * patch_w * channels * dim
    # Per block: the query/key/value and output projections, q @ k^T and weights @ v, the two MLP layers.
    fc1 = mlp * (2 if variant.get("mlp_activation") == "swiglu" else 1)
    block = 4 * tokens * dim * dim + 2 * tokens * tokens * dim + tokens * dim * (fc1 + mlp)
    return 2 * (macs + variant["num_layers"] * block + dim * classes)


def training_flops(variant, image_size=224, classes=1000):
    """The FLOPs of one training step per image: the backward pass costs two forward ones."""
    return 3 * forward_flops(variant, image_size, classes)
