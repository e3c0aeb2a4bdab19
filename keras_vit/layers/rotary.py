"""`RotaryEmbedding`: the 2-D rotary position embedding (RoPE) of timm's `Eva` family, and `apply_rotary`.

One layer covers the published variants (timm `layers/pos_embed_sincos.py`): `"cat"` (EVA-02, PE, Naver axial, sbb;
timm's `RotaryEmbeddingCat` with `in_pixels=False`), `"dinov3"` (`RotaryEmbeddingDinoV3`) and `"mixed"` (Naver's
learned frequencies, `RotaryEmbeddingMixed`). The embedding is computed from each call's patch grid, so any
resolution works as is; every tensor is at most 4-D (a 6-D RoPE broke LiteRT's StridedSlice elsewhere).
"""

import math

import keras
import numpy as np
from keras import ops

from keras_vit.layers.resampling import token_places
from keras_vit.utils import serialization, validation

ROPE_TYPES = ("cat", "dinov3", "mixed")
GRID_INDEXINGS = ("ij", "xy")


def apply_rotary(x, cos, sin):
    """Rotates queries or keys `x` `(batch, tokens, heads, head_dim)` by a `RotaryEmbedding`'s `cos` and `sin`.

    Tables of `head_dim / 2` rotate the pairs `(i, i + head_dim / 2)` (`rotate_half`); tables of `head_dim`, with the
    rotation's sign folded into `sin`, the adjacent pairs `(2i, 2i + 1)`. Computed in the wider of the two dtypes and
    returned in `x`'s (as timm's `apply_rot_embed`); slices, not a gather (torch's CPU gather took 10x as long).
    """
    half = x.shape[-1] // 2
    # ops, not operators: TensorFlow's do not promote a bfloat16 `x` against float32 tables.
    if cos.shape[-1] == half:
        first, second = x[..., :half], x[..., half:]
        rotated = ops.concatenate(
            [
                ops.subtract(ops.multiply(first, cos), ops.multiply(second, sin)),
                ops.add(ops.multiply(second, cos), ops.multiply(first, sin)),
            ],
            axis=-1,
        )
    else:
        shape = ops.shape(x)
        pairs = ops.reshape(x, (shape[0], shape[1], -1, 2))  # at most 4-D
        partner = ops.reshape(ops.concatenate([pairs[..., 1:], pairs[..., :1]], axis=-1), shape)
        rotated = ops.add(ops.multiply(x, cos), ops.multiply(partner, sin))
    return ops.cast(rotated, x.dtype)


@serialization.register
class RotaryEmbedding(keras.layers.Layer):
    """The cosines, signed sines and pair indices that rotate the patch tokens' queries and keys (2-D RoPE).

    Pairs of channels of each head are rotated by angles from the patch's row and column; the prefix tokens (class,
    registers) are left as they are. Each call computes the embedding, in float32, for the grid it is given. Only
    inference is exact: timm's training-only coordinate augmentation (shift, jitter, rescale) is not implemented.

    Args:
        head_dim: int, the size of a head; a multiple of 4.
        num_heads: int, the number of heads.
        rope_type: `"cat"` (integer patch coordinates, frequencies `temperature ** (-4k / head_dim)`), `"dinov3"`
            (coordinates centred in `[-1, 1]` per axis, periods `temperature ** (4k / head_dim)`) or `"mixed"`
            (learned per-block, per-head frequencies mixing both axes). Defaults to `"cat"`.
        num_prefix_tokens: int, the tokens before the patches, left unrotated. Defaults to `1`.
        temperature: float, timm's `rope_temperature` (the period base for `"dinov3"`, the initialisation's theta
            for `"mixed"`). Defaults to `10000.0`.
        grid_offset: float, added to the patch coordinates (`"cat"` and `"dinov3"`). Defaults to `0.0`.
        grid_indexing: `"ij"` (angles of the row first, then of the column) or `"xy"` (column first). Defaults to
            `"ij"`.
        rotate_half: bool, pairs `(i, i + head_dim / 2)` (timm's `rope_rotate_half`) instead of adjacent channels
            `(2i, 2i + 1)`; `"mixed"` needs `False`. Defaults to `False`.
        ref_grid: optional int or `(rows, cols)`, timm's `ref_feat_shape` (`"cat"` only): coordinates are scaled by
            `ref_grid / grid`, so every grid spans the reference one. Defaults to `None`.
        depth: int, the number of blocks (`"mixed"` only, which learns frequencies per block). Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    The `"mixed"` layer holds one weight, `freqs` `(2, depth, num_heads, head_dim // 2)` (timm's `rope.freqs`:
    x then y frequencies), initialised as timm does (theta `temperature`, a random rotation per block and head).

    Call arguments:
        patch_grid: tensor `(batch, rows, cols, dim)`, the patch feature map; only its shape is read. With
            `spatial_shapes`, any tensor `(batch, N, ...)` of a NaFlex batch's N patch tokens (its length is read).
        spatial_shapes: optional int tensor `(batch, 2)`, each image's `(rows, cols)` in a NaFlex batch (its
            patches first, row-major): each image is rotated on its own grid. Not for `"mixed"`.

    Returns:
        `(cos, sin)`: float32 `(1, num_prefix_tokens + rows * cols, 1, width)` (with `spatial_shapes`,
        `(batch, num_prefix_tokens + N, 1, width)`; for `"mixed"`, `(depth, num_prefix_tokens + rows * cols,
        num_heads, width)`: block `i` uses `cos[i : i + 1]` and `sin[i : i + 1]`), `width` being `head_dim / 2` with
        `rotate_half`, else `head_dim`. `apply_rotary(x, cos, sin)` rotates a query or key `x`
        `(batch, num_prefix_tokens + rows * cols, num_heads, head_dim)`.

    Example:

    >>> rope = RotaryEmbedding(head_dim=8, num_heads=2, rope_type="dinov3", num_prefix_tokens=5, temperature=100.0,
    ...                        rotate_half=True)
    >>> cos, sin = rope(np.zeros((1, 3, 4, 16)))
    >>> keras.ops.shape(cos)
    (1, 17, 1, 4)
    >>> keras.ops.shape(apply_rotary(np.ones((2, 17, 2, 8), "float32"), cos, sin))
    (2, 17, 2, 8)
    """

    def __init__(
        self,
        head_dim,
        num_heads,
        rope_type="cat",
        num_prefix_tokens=1,
        temperature=10000.0,
        grid_offset=0.0,
        grid_indexing="ij",
        rotate_half=False,
        ref_grid=None,
        depth=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.head_dim = validation.positive_int("head_dim", head_dim)
        if head_dim % 4:
            raise ValueError(f"`head_dim` must be a multiple of 4. Received: head_dim={head_dim!r}")
        self.num_heads = validation.positive_int("num_heads", num_heads)
        self.rope_type = validation.one_of("rope_type", rope_type, ROPE_TYPES)
        self.num_prefix_tokens = validation.non_negative_int("num_prefix_tokens", num_prefix_tokens)
        self.temperature = validation.finite_float("temperature", temperature, minimum=0, include_minimum=False)
        self.grid_offset = validation.finite_float("grid_offset", grid_offset)
        self.grid_indexing = validation.one_of("grid_indexing", grid_indexing, GRID_INDEXINGS)
        self.rotate_half = validation.boolean("rotate_half", rotate_half)
        self.ref_grid = None if ref_grid is None else validation.pair("ref_grid", ref_grid)
        mixed = rope_type == "mixed"
        self.depth = validation.positive_int("depth", depth) if mixed else depth
        # timm ignores these where they do not apply; an argument that changes nothing is a mistake here.
        if not mixed and depth is not None:
            raise ValueError(f"`depth` is for rope_type='mixed' only. Received: depth={depth!r}")
        if mixed and (rotate_half or grid_offset):
            raise ValueError(
                "rope_type='mixed' takes no rotate_half or grid_offset. "
                f"Received: rotate_half={rotate_half!r}, grid_offset={grid_offset!r}"
            )
        if rope_type != "cat" and ref_grid is not None:
            raise ValueError(f"`ref_grid` is for rope_type='cat' only. Received: ref_grid={ref_grid!r}")

    def build(self, input_shape):
        if self.rope_type == "mixed":
            shape = (2, self.depth, self.num_heads, self.head_dim // 2)
            # Not autocast: a mixed policy would otherwise hand the frequencies to `call` in bfloat16.
            self.freqs = self.add_weight(shape=shape, initializer=self._initial_freqs, autocast=False, name="freqs")

    def _initial_freqs(self, shape, dtype=None):
        # timm's init_random_2d_freqs: magnitudes theta ** (-4k / head_dim), turned by a random angle per block
        # and head; x gets (cos a, cos(a + pi/2)) times them, y (sin a, sin(a + pi/2)).
        magnitudes = 1.0 / self.temperature ** (np.arange(0, self.head_dim, 4, dtype="float32") / self.head_dim)
        angles = keras.initializers.RandomUniform(0.0, 2 * math.pi)((self.depth, self.num_heads, 1), "float32")
        turned = ops.repeat(ops.concatenate([angles, angles + math.pi / 2], axis=-1), len(magnitudes), axis=-1)
        freqs = ops.multiply(ops.stack([ops.cos(turned), ops.sin(turned)]), np.tile(magnitudes, 2))
        return ops.cast(freqs, dtype or "float32")

    def _coordinates(self, rows, cols, row, col):
        """The tokens' two coordinates from their `row` and `col` indices in grids of `rows` x `cols` (shapes that
        broadcast), in the order `grid_indexing` gives."""
        y, x = ops.cast(row, "float32"), ops.cast(col, "float32")
        if self.rope_type == "dinov3":
            # Each axis normalised by its own grid's length (a NaFlex image's own rows and cols).
            y = 2.0 * ((y + 0.5 + self.grid_offset) / ops.cast(rows, "float32")) - 1.0
            x = 2.0 * ((x + 0.5 + self.grid_offset) / ops.cast(cols, "float32")) - 1.0
        else:
            y, x = y + self.grid_offset, x + self.grid_offset
            if self.ref_grid is not None:
                y = y / ops.cast(rows, "float32") * self.ref_grid[0]
                x = x / ops.cast(cols, "float32") * self.ref_grid[1]
        return (y, x) if self.grid_indexing == "ij" else (x, y)

    def _angles(self, first, second):
        """The angles `coordinates.shape + (head_dim / 2,)`, or `(depth, tokens, num_heads, head_dim / 2)` mixed."""
        quarter = ops.arange(self.head_dim // 4, dtype="float32")
        if self.rope_type == "mixed":
            freqs = ops.cast(self.freqs, "float32")
            # (tokens, 1, 1) times (depth, 1, num_heads, head_dim / 2): at most 4-D.
            return first[:, None, None] * freqs[0][:, None] + second[:, None, None] * freqs[1][:, None]
        if self.rope_type == "dinov3":
            periods = ops.power(self.temperature, 2.0 * quarter / (self.head_dim // 2))
            first, second = (ops.divide(2 * math.pi * axis[..., None], periods) for axis in (first, second))
        else:
            bands = 1.0 / ops.power(self.temperature, quarter / (self.head_dim // 4))
            first, second = (ops.multiply(axis[..., None], bands) for axis in (first, second))
        return ops.concatenate([first, second], axis=-1)

    def call(self, patch_grid, spatial_shapes=None):
        if spatial_shapes is None:
            rows, cols = ops.shape(patch_grid)[1], ops.shape(patch_grid)[2]
            grid = ops.meshgrid(ops.arange(rows), ops.arange(cols), indexing="ij")
            angles = self._angles(*self._coordinates(rows, cols, *(ops.reshape(axis, (-1,)) for axis in grid)))
            if self.rope_type != "mixed":
                angles = angles[None, :, None, :]
        elif self.rope_type == "mixed":
            raise ValueError("rope_type='mixed' learns one table for every image: it takes no `spatial_shapes`.")
        else:
            angles = self._angles(*self._coordinates(*token_places(spatial_shapes, ops.shape(patch_grid)[1])))
            angles = angles[:, :, None, :]
        # Zero angles for the prefix tokens: cos 1, sin 0, no rotation. Concatenated, not `ops.pad`: torch's breaks
        # torch.compile's graph at the next layer's call.
        prefix = ops.zeros_like(angles[:, :1])
        angles = ops.concatenate([prefix] * self.num_prefix_tokens + [angles], axis=1)
        if self.rotate_half:
            return ops.cos(angles), ops.sin(angles)
        # Each angle to both channels of its pair, the first of which gets minus its partner's sine.
        angles = ops.repeat(angles, 2, axis=-1)
        sign = ops.convert_to_tensor((-1.0, 1.0) * (self.head_dim // 2), "float32")
        return ops.cos(angles), ops.sin(angles) * sign

    def compute_output_shape(self, input_shape):
        rows, cols = input_shape[1], input_shape[2]
        length = None if rows is None or cols is None else self.num_prefix_tokens + rows * cols
        mixed = self.rope_type == "mixed"
        width = self.head_dim // 2 if self.rotate_half else self.head_dim
        table = (self.depth, length, self.num_heads, width) if mixed else (1, length, 1, width)
        return table, table

    def compute_output_spec(self, patch_grid, spatial_shapes=None):
        if spatial_shapes is None:
            table, _ = self.compute_output_shape(patch_grid.shape)
        else:
            length = patch_grid.shape[1]
            length = None if length is None else self.num_prefix_tokens + length
            table = (patch_grid.shape[0], length, 1, self.head_dim // 2 if self.rotate_half else self.head_dim)
        return keras.KerasTensor(table, "float32"), keras.KerasTensor(table, "float32")

    def get_config(self):
        return {**super().get_config(), **serialization.arguments(self)}
