"""Resampling a position embedding to another patch grid, one interpolation matrix per axis, and a patch kernel
to another patch size (FlexiViT).

- `"official"` (default): linear with the corners aligned, the official code's `scipy.ndimage.zoom(order=1)`.
- `"bilinear"` / `"bicubic"`: half-pixel centres like `torch.nn.functional.interpolate(align_corners=False)`
  (bicubic a = -0.75); `antialias=True` widens the kernel when shrinking (PIL's rule, bicubic a = -0.5), timm's
  `resample_abs_pos_embed` default.
"""

import numpy as np
from keras import ops

from keras_vit.utils import validation

RESAMPLING_METHODS = ("official", "bilinear", "bicubic")


def _cubic(x, a):
    # Keys' cubic convolution kernel: torch's a = -0.75, PIL's a = -0.5.
    x = ops.abs(x)
    inner = ((a + 2) * x - (a + 3)) * x * x + 1
    outer = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return ops.where(x <= 1, inner, ops.where(x < 2, outer, ops.zeros_like(x)))


def _hat(x):
    return ops.maximum(1.0 - ops.abs(x), 0.0)


def interpolation_matrix(in_size, out_size, method="official", antialias=False, positions=None):
    """The `(out_size, in_size)` float32 matrix that resamples one axis of a grid, in `keras.ops`.

    Args:
        in_size: int, the input axis length.
        out_size: int or integer tensor (an image size known only at run time); with `positions`, any shape that
            broadcasts against them (each token's own grid, a NaFlex batch's).
        method: one of `RESAMPLING_METHODS`. Defaults to `"official"`.
        antialias: bool, half-pixel methods only. Defaults to `False`.
        positions: optional integer tensor of output positions, of any shape. Defaults to `arange(out_size)`.

    Returns:
        The weights `positions.shape + (in_size,)`: `(out_size, in_size)` without `positions`.

    Example:

    >>> keras.ops.convert_to_numpy(interpolation_matrix(2, 3)).tolist()
    [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]
    """
    taps = ops.arange(in_size, dtype="float32")
    outputs = ops.cast(ops.arange(out_size) if positions is None else positions, "float32")[..., None]
    out_float = ops.expand_dims(ops.cast(out_size, "float32"), -1)
    if method == "official":
        sources = outputs * float(in_size - 1) / ops.maximum(out_float - 1.0, 1.0)
        return _hat(sources - taps)
    scale = float(in_size) / out_float
    centres = (outputs + 0.5) * scale - 0.5
    if antialias:
        width = ops.maximum(scale, 1.0)
        distance = (taps - centres) / width
        weights = _hat(distance) if method == "bilinear" else _cubic(distance, a=-0.5)
        return weights / ops.sum(weights, axis=-1, keepdims=True)
    if method == "bilinear":
        return _hat(ops.clip(centres, 0.0, float(in_size - 1)) - taps)
    # Bicubic: the four taps around each centre, clamped to the border.
    first = ops.floor(centres) - 1.0
    matrix = ops.zeros_like(centres * taps)
    for offset in range(4):
        tap = first + offset
        border_tap = ops.clip(tap, 0.0, float(in_size - 1))
        matrix = matrix + ops.where(ops.equal(border_tap, taps), _cubic(tap - centres, a=-0.75), 0.0)
    return matrix


def token_places(spatial_shapes, length):
    """`(rows, cols, row, col)` of the `length` patch tokens of a NaFlex batch: each image's grid `(batch, 1)` (at
    least 1 x 1) and each token's row and column `(batch, length)` in it (a padding token's kept in the grid)."""
    spatial_shapes = ops.maximum(ops.cast(spatial_shapes, "int32"), 1)
    rows, cols = spatial_shapes[:, :1], spatial_shapes[:, 1:]
    index = ops.arange(length, dtype="int32")[None, :]
    return rows, cols, ops.minimum(ops.floor_divide(index, cols), rows - 1), ops.mod(index, cols)


def resample_position_embedding(
    embedding, source_grid, target_grid, num_prefix_tokens=1, method="official", antialias=False
):
    """Resamples a position embedding from one patch grid to another, in float64 NumPy.

    Args:
        embedding: array `(1, num_prefix_tokens + gh * gw, dim)` or `(num_prefix_tokens + gh * gw, dim)`.
        source_grid: `(gh, gw)` of `embedding`.
        target_grid: `(th, tw)` wanted.
        num_prefix_tokens: int, leading rows kept as they are. Defaults to `1`.
        method: one of `RESAMPLING_METHODS`. Defaults to `"official"`.
        antialias: bool, half-pixel methods only. Defaults to `False`.

    Returns:
        A NumPy array on the target grid, of the input's rank and dtype.

    Example:

    >>> embedding = np.random.rand(1, 1 + 14 * 14, 8).astype("float32")
    >>> resample_position_embedding(embedding, (14, 14), (24, 24)).shape
    (1, 577, 8)
    """
    embedding = np.asarray(embedding)
    source_grid, target_grid = tuple(source_grid), tuple(target_grid)
    validation.one_of("method", method, RESAMPLING_METHODS)
    if antialias and method == "official":
        raise ValueError("`antialias=True` applies to the 'bilinear' and 'bicubic' methods only.")
    squeeze = embedding.ndim == 2
    if squeeze:
        embedding = embedding[None]
    if embedding.ndim != 3 or embedding.shape[0] != 1:
        raise ValueError(
            "`embedding` must have shape (1, tokens, dim) or (tokens, dim). "
            f"Received: embedding.shape={embedding.shape}"
        )
    expected = num_prefix_tokens + source_grid[0] * source_grid[1]
    if embedding.shape[1] != expected:
        raise ValueError(
            f"A {source_grid[0]}x{source_grid[1]} grid with {num_prefix_tokens} prefix token(s) "
            f"has {expected} rows, but the embedding has {embedding.shape[1]}. Check "
            f"`source_grid` and `num_prefix_tokens`. Received: embedding.shape={embedding.shape}"
        )
    if source_grid == target_grid:
        return embedding[0] if squeeze else embedding

    prefix = embedding[:, :num_prefix_tokens]
    grid = embedding[0, num_prefix_tokens:].reshape(source_grid + (-1,)).astype(np.float64)
    rows, cols = (
        ops.convert_to_numpy(interpolation_matrix(source, target, method, antialias)).astype(np.float64)
        for source, target in zip(source_grid, target_grid)
    )
    grid = np.einsum("ti,ijd,uj->tud", rows, grid, cols)
    patches = grid.reshape(1, target_grid[0] * target_grid[1], -1).astype(embedding.dtype)
    result = np.concatenate([prefix, patches], axis=1)
    return result[0] if squeeze else result


def resample_patch_kernel(kernel, new_patch_size, method="bilinear", antialias=False):
    """Resizes a patch embedding kernel to another patch size so that a resized patch embeds as the original did.

    FlexiViT's pseudo-inverse resize (Beyer et al. 2023; big_vision's `resample_patchemb`, timm's
    `resample_patch_embed`): with `B` the matrix that resizes a `(ph, pw)` patch to `(nh, nw)`, the new kernel `k'`
    minimises `||B^T k' - k||`, so `<resize(x), k'> = <x, k>` for every patch `x` when enlarging. `B` is separable,
    so its pseudo-inverse is the Kronecker product of the two axes' pseudo-inverses. In float64 NumPy (at load time).

    Args:
        kernel: array `(ph, pw, channels, dim)` (HWIO).
        new_patch_size: int or `(nh, nw)`.
        method: one of `RESAMPLING_METHODS`, the resize `B` inverts. Defaults to `"bilinear"` (timm's for
            FlexiViT checkpoints).
        antialias: bool, half-pixel methods only. Defaults to `False`.

    Returns:
        A NumPy array `(nh, nw, channels, dim)` of the kernel's dtype.

    Example:

    >>> resample_patch_kernel(np.ones((16, 16, 3, 8), "float32"), 24).shape
    (24, 24, 3, 8)
    """
    kernel = np.asarray(kernel)
    new_patch_size = validation.pair("new_patch_size", new_patch_size)
    validation.one_of("method", method, RESAMPLING_METHODS)
    if antialias and method == "official":
        raise ValueError("`antialias=True` applies to the 'bilinear' and 'bicubic' methods only.")
    if kernel.ndim != 4:
        raise ValueError(f"`kernel` must have shape (ph, pw, channels, dim). Received: kernel.shape={kernel.shape}")
    if kernel.shape[:2] == new_patch_size:
        return kernel
    rows, cols = (
        np.linalg.pinv(ops.convert_to_numpy(interpolation_matrix(old, new, method, antialias)).astype(np.float64))
        for old, new in zip(kernel.shape[:2], new_patch_size)
    )
    return np.einsum("hi,wj,hwcd->ijcd", rows, cols, kernel.astype(np.float64)).astype(kernel.dtype)
