"""Analytic floating-point operation counts of a Vision Transformer.

One multiply-add counts as two operations, the convention of the published
figures (ViT-B/16 at 224 px: 17.6 GMACs, 35.1 GFLOPs). Only the matrix
products are counted: patch embedding, the QKV / output / MLP projections,
the two attention products and the head. LayerNorm, GELU, softmax and the
residual additions are a fraction of a percent and are left out, so "percent
of the matrix-multiply ceiling" compares like with like.
"""


def forward_flops(variant, image_size=224, classes=1000):
    """Returns the forward-pass FLOPs of one image through a ViT.

    Args:
        variant: a dict with `patch_size`, `hidden_dim`, `num_layers`,
            `mlp_dim` (a value of `keras_vit.VARIANTS`).
        image_size: int or `(height, width)`, the input size in pixels.
        classes: int, the size of the head (0 for none).

    Returns:
        An int, the FLOPs (2 per multiply-add).

    Example:

    >>> import keras_vit
    >>> round(forward_flops(keras_vit.VARIANTS["B/16"]) / 1e9, 1)
    35.1
    """
    if variant.get("resnet_stages") is not None:
        raise ValueError(
            "forward_flops counts the plain ViT (patch embedding + transformer); a hybrid's ResNet is not "
            f"modelled. Received: a variant with resnet_stages={variant['resnet_stages']}"
        )
    height, width = (image_size, image_size) if isinstance(image_size, int) else image_size
    patch = variant["patch_size"]
    patch_h, patch_w = (patch, patch) if isinstance(patch, int) else patch
    dim, mlp, layers = variant["hidden_dim"], variant["mlp_dim"], variant["num_layers"]
    patches = (height // patch_h) * (width // patch_w)
    tokens = patches + 1  # the class token
    macs = patches * (patch_h * patch_w * 3) * dim  # the patch-embedding convolution
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
    patch-embedding input gradient is not needed, which this ignores (< 0.5 %).
    """
    return 3 * forward_flops(variant, image_size, classes)
