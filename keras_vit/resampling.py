"""Moving a position embedding from one patch grid to another.

A ViT trained at 224 px with 16 px patches has a 14x14 grid of patch position
embeddings; fine-tuning or evaluating at 384 px needs a 24x24 grid. The
published implementations resample the grid as an image and keep the class
token's row unchanged, but disagree on the interpolation:

- `"official"` (default): the official code's `scipy.ndimage.zoom(order=1)`,
  i.e. linear interpolation with the corner samples aligned.
- `"bilinear"` / `"bicubic"`: half-pixel-centre interpolation like
  `torch.nn.functional.interpolate(align_corners=False)` (bicubic with
  a = -0.75, or PIL's a = -0.5 when antialiased); with `antialias=True` the kernel widens when shrinking, which
  is timm's `resample_abs_pos_embed` default for its checkpoints.

The function is pure NumPy, float64 internally, and separable: each axis is
one interpolation matrix, so non-square grids are no special case.
"""

import numpy as np

RESAMPLING_METHODS = ("official", "bilinear", "bicubic")


def _cubic(x, a=-0.75):
    # Keys' cubic convolution kernel with torch's a = -0.75.
    x = np.abs(x)
    return np.where(
        x <= 1,
        ((a + 2) * x - (a + 3)) * x * x + 1,
        np.where(x < 2, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0),
    )


def _linear(x):
    return np.maximum(0.0, 1.0 - np.abs(x))


def _align_corners_matrix(in_size, out_size):
    """Linear interpolation with corners aligned, as scipy.ndimage.zoom(order=1)."""
    matrix = np.zeros((out_size, in_size))
    if in_size == 1 or out_size == 1:
        matrix[:, 0] = 1.0
        return matrix
    positions = np.arange(out_size) * (in_size - 1) / (out_size - 1)
    left = np.minimum(np.floor(positions).astype(int), in_size - 2)
    frac = positions - left
    matrix[np.arange(out_size), left] = 1.0 - frac
    matrix[np.arange(out_size), left + 1] += frac
    return matrix


def _half_pixel_matrix(in_size, out_size, method, antialias):
    """Interpolation with half-pixel centres, as torch's align_corners=False."""
    kernel, support = (_linear, 1.0) if method == "bilinear" else (_cubic, 2.0)
    if method == "bicubic" and antialias:
        # torch's antialiased bicubic follows PIL and uses a = -0.5.
        kernel = lambda x: _cubic(x, a=-0.5)  # noqa: E731
    scale = in_size / out_size
    centres = (np.arange(out_size) + 0.5) * scale - 0.5
    matrix = np.zeros((out_size, in_size))
    if antialias:
        # Widen the kernel when shrinking; taps outside the input are dropped
        # and the rest renormalised (PIL's and torch's antialias rule).
        width = max(scale, 1.0)
        for i, centre in enumerate(centres):
            taps = np.arange(int(np.floor(centre - support * width)), int(np.ceil(centre + support * width)) + 1)
            taps = taps[(taps >= 0) & (taps < in_size)]
            weights = kernel((taps - centre) / width)
            matrix[i, taps] = weights / weights.sum()
        return matrix
    # Without antialias, taps outside the input repeat the border sample.
    if method == "bilinear":
        centres = np.maximum(centres, 0.0)
    first = np.floor(centres).astype(int) - (0 if method == "bilinear" else 1)
    for offset in range(int(2 * support)):
        taps = first + offset
        weights = kernel(taps - centres)
        np.add.at(matrix, (np.arange(out_size), np.clip(taps, 0, in_size - 1)), weights)
    return matrix


def resample_position_embedding(
    embedding, source_grid, target_grid, num_prefix_tokens=1, method="official", antialias=False
):
    """Resamples a position embedding from one patch grid to another.

    Args:
        embedding: array of shape `(1, num_prefix_tokens + gh * gw, dim)` or
            `(num_prefix_tokens + gh * gw, dim)`, patches in row-major order
            after the prefix (class) tokens.
        source_grid: `(gh, gw)` of `embedding`.
        target_grid: `(th, tw)` wanted.
        num_prefix_tokens: int, leading rows kept as they are. Defaults to `1`.
        method: one of `"official"`, `"bilinear"`, `"bicubic"`; see the module
            docstring. Defaults to `"official"`.
        antialias: bool, widen the kernel when shrinking (half-pixel methods
            only). Defaults to `False`.

    Returns:
        A NumPy array of shape `(1, num_prefix_tokens + th * tw, dim)` (or
        without the leading 1 if the input had none), in the input's dtype.
        Same-size resampling returns the input values unchanged.

    Example:

    >>> embedding = np.random.rand(1, 1 + 14 * 14, 8).astype("float32")
    >>> resample_position_embedding(embedding, (14, 14), (24, 24)).shape
    (1, 577, 8)
    """
    embedding = np.asarray(embedding)
    source_grid, target_grid = tuple(source_grid), tuple(target_grid)
    if method not in RESAMPLING_METHODS:
        raise ValueError(f"`method` must be one of {RESAMPLING_METHODS}. Received: method={method!r}")
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
    if method == "official":
        rows = _align_corners_matrix(source_grid[0], target_grid[0])
        cols = _align_corners_matrix(source_grid[1], target_grid[1])
    else:
        rows = _half_pixel_matrix(source_grid[0], target_grid[0], method, antialias)
        cols = _half_pixel_matrix(source_grid[1], target_grid[1], method, antialias)
    grid = np.einsum("ti,ijd,uj->tud", rows, grid, cols)
    patches = grid.reshape(1, target_grid[0] * target_grid[1], -1).astype(embedding.dtype)
    result = np.concatenate([prefix, patches], axis=1)
    return result[0] if squeeze else result
