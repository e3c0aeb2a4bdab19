"""The building blocks of a Vision Transformer, as Keras 3 layers.

Every layer here is written with `keras.ops` only, so it runs unchanged on the
TensorFlow, JAX and PyTorch backends, and follows the full Keras layer
contract: arguments validated in `__init__`, weights created in `build`,
sublayers built explicitly and given the layer's dtype policy,
`compute_output_shape`, and a `get_config` that returns exactly the
constructor arguments so that `keras.saving.load_model(safe_mode=True)`
revives every layer from its config.

Weight layouts follow the published checkpoints: the patch-embedding kernel is
HWIO like the official `embedding/kernel`, and the attention projection is one
fused `(D, 3D)` kernel whose columns are `[query | key | value]`, each in
`(head, head_dim)` order, like timm's `attn.qkv` (transposed).
"""

import math

import keras
from keras import ops

from keras_vit.layers import initializers, resampling
from keras_vit.utils import keras_compat, serialization, validation
from keras_vit.utils.patches import patch_grid  # keras-free, for the `keras-vit variants` table

# The official implementation (flax) and every published checkpoint use 1e-6;
# the Keras default of 1e-3 changes the outputs of converted weights.
LAYER_NORM_EPSILON = 1e-6


def patch_projection(hidden_dim, patch_size, dtype):
    """The linear projection of non-overlapping patches: one strided `Conv2D` named `projection`.

    Its kernel has the HWIO layout of the published checkpoints' `embedding/kernel`; shared by the
    plain patch embedding and the hybrid's (which cuts patches of the ResNet feature map).

    Args:
        hidden_dim: int, the size of each patch's embedding.
        patch_size: `(height, width)` of the patches.
        dtype: the dtype policy of the layer that owns the projection.

    Returns:
        An unbuilt `keras.layers.Conv2D`.
    """
    # lecun_normal is the flax default the official code trains with.
    return keras.layers.Conv2D(
        hidden_dim,
        kernel_size=patch_size,
        strides=patch_size,
        padding="valid",
        data_format="channels_last",
        kernel_initializer="lecun_normal",
        dtype=dtype,
        name="projection",
    )


def pad_to_patches(images, patch_size):
    """Zero-pads `(batch, height, width, channels)` at the bottom / right up to whole patches.

    timm's `dynamic_img_pad`; shared by the plain patch embedding (on pixels, where zero is the mean pixel once
    scaled to [-1, 1]) and the hybrid's (on the ResNet feature map).

    Args:
        images: a channels-last tensor.
        patch_size: `(height, width)` of the patches.

    Returns:
        The tensor, padded so that the patch divides both sides (unchanged when it already does).

    Example:

    >>> keras.ops.shape(pad_to_patches(np.zeros((2, 5, 8, 3)), (4, 4)))
    (2, 8, 8, 3)
    """
    shape = ops.shape(images)
    padding = [(-shape[axis]) % patch for axis, patch in ((1, patch_size[0]), (2, patch_size[1]))]
    if all(validation.static_dim(pad) == 0 for pad in padding):
        return images
    return ops.pad(images, [[0, 0], [0, padding[0]], [0, padding[1]], [0, 0]])


def empty_batch_output(inputs, compute_output_shape, dtype):
    """The output of a convolution for an empty batch, without running it: zeros, or `None` for any other batch.

    TensorFlow's oneDNN convolution kernels (on by default on Intel CPUs with
    AVX-512) hand an empty batch back unchanged, sides and channels included,
    so the next op fails on a shape mismatch; the shape of an empty batch's
    output is known without them. Only a batch known to be empty (an eager
    call) takes this path: a traced graph is left as it is.

    Args:
        inputs: a channels-last tensor.
        compute_output_shape: the convolution's `compute_output_shape`.
        dtype: the dtype of the convolution's output.

    Returns:
        A tensor of zeros of the output's shape when `inputs` has a batch of
        zero, else `None`.

    Example:

    >>> conv = keras.layers.Conv2D(8, 4, strides=4)
    >>> keras.ops.shape(empty_batch_output(np.zeros((0, 16, 12, 3)), conv.compute_output_shape, "float32"))
    (0, 4, 3, 8)
    >>> empty_batch_output(np.zeros((1, 16, 12, 3)), conv.compute_output_shape, "float32") is None
    True
    """
    shape = ops.shape(inputs)
    # A plain int only: turning a traced size into one (a torch.compile SymInt) would specialize the graph on it.
    if not (isinstance(shape[0], int) and shape[0] == 0):
        return None
    return ops.zeros(compute_output_shape(shape), dtype=dtype)


def project_patches(projection, images, patch_size):
    """Pads `images` to whole patches (`pad_to_patches`) and applies the patch `projection` to them.

    Shared by the plain patch embedding and the hybrid's; an empty batch gives an empty patch grid on every
    backend (`empty_batch_output`).
    """
    images = pad_to_patches(images, patch_size)
    empty = empty_batch_output(images, projection.compute_output_shape, projection.compute_dtype)
    return projection(images) if empty is None else empty


def dense_over_tokens(dense, tokens):
    """`dense` applied to `tokens` of shape `(..., features)` as one 2-D matrix product: the same result and shape.

    XLA's CPU compiler differentiates a Dense on a 3-D input through a
    transposed copy of its output's gradient that grows with depth
    (docs/performance.md, "XLA's CPU compiler grew each block's backward
    pass"); on a 2-D input the kernel's gradient takes no copy. The outputs are
    those of `dense(tokens)` bit for bit on TensorFlow and JAX. On torch,
    `keras_compat.dense` folds the axes itself and fuses the bias into the
    product: equal up to float rounding.

    Args:
        dense: a built `keras.layers.Dense` (or one quantized by Keras).
        tokens: tensor of shape `(..., features)`.

    Returns:
        `dense(tokens)`, of shape `(..., units)`.

    Example:

    >>> dense = keras.layers.Dense(4)
    >>> dense.build((None, 8))
    >>> keras.ops.shape(dense_over_tokens(dense, np.ones((2, 5, 8))))
    (2, 5, 4)
    """
    if isinstance(tokens, keras.KerasTensor):  # symbolic, its batch maybe unknown: only the output spec matters
        return dense(tokens)
    if keras.backend.backend() == "torch":  # torch folds the leading axes itself, with no Keras reshape around it
        return keras_compat.dense(dense, tokens)
    shape = ops.shape(tokens)
    rows = 1
    for size in shape[:-1]:
        rows = rows * size  # explicit sizes, never -1: a reshape cannot infer -1 for an empty batch
    outputs = keras_compat.call_sublayer(dense, ops.reshape(tokens, (rows, shape[-1])))
    return ops.reshape(outputs, (*shape[:-1], ops.shape(outputs)[-1]))


@serialization.register
class PatchEmbedding(keras.layers.Layer):
    """Splits images into patches and projects each patch linearly.

    One `Conv2D(hidden_dim, patch_size, strides=patch_size)`, as in the
    official implementation; its kernel has the HWIO layout of the published
    checkpoints' `embedding/kernel`. Images are channels-last, of any size:
    a side that is not a multiple of the patch is first padded with zeros at
    the bottom / right up to the next multiple (timm's `dynamic_img_pad`;
    zero is the mean pixel once pixels are scaled to [-1, 1]).

    Args:
        hidden_dim: int, the size of each patch's embedding.
        patch_size: int or `(height, width)`, the size of the patches.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        images: tensor of shape `(batch, height, width, channels)`.

    Returns:
        The patch grid, a tensor of shape `(batch, ceil(height / ph),
        ceil(width / pw), hidden_dim)`.

    Example:

    >>> layer = PatchEmbedding(hidden_dim=8, patch_size=4)
    >>> keras.ops.shape(layer(np.zeros((2, 16, 10, 3))))
    (2, 4, 3, 8)
    """

    def __init__(self, hidden_dim, patch_size, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = validation.positive_int("hidden_dim", hidden_dim)
        self.patch_size = validation.pair("patch_size", patch_size)
        self.projection = patch_projection(hidden_dim, self.patch_size, self.dtype_policy)

    @staticmethod
    def pixels_per_token_for(patch_size):
        """`(height, width)`: image pixels per token side of a `PatchEmbedding` with this patch: the patch."""
        return validation.pair("patch_size", patch_size)

    @property
    def pixels_per_token(self):
        """`(height, width)`: image pixels per token side (timm's `feat_ratio`), here the patch size."""
        return self.pixels_per_token_for(self.patch_size)

    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                "PatchEmbedding expects images of shape (batch, height, width, channels). "
                f"Received: input_shape={input_shape}"
            )
        # The projection sees the images padded to whole patches (`call`): an image smaller than one patch is one
        # padded patch, not a size the convolution refuses.
        grid = patch_grid(input_shape[1:3], self.patch_size)
        padded = tuple(None if cells is None else cells * side for cells, side in zip(grid, self.patch_size))
        self.projection.build((input_shape[0], *padded, input_shape[3]))

    def call(self, images):
        return project_patches(self.projection, images, self.patch_size)

    def compute_output_shape(self, input_shape):
        grid = patch_grid(input_shape[1:3], self.patch_size)
        return (input_shape[0], *grid, self.hidden_dim)

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_dim": self.hidden_dim, "patch_size": self.patch_size})
        return config


@serialization.register
class PatchTokens(keras.layers.Layer):
    """Flattens the patch grid into the sequence of patch tokens, row by row.

    Unlike `keras.layers.Reshape((-1, hidden_dim))`, the sizes are explicit,
    so an empty batch gives an empty sequence on every backend (JAX and torch
    cannot infer a `-1` for zero elements).

    Call arguments:
        patch_grid: tensor of shape `(batch, rows, cols, hidden_dim)`.

    Returns:
        A tensor of shape `(batch, rows * cols, hidden_dim)`.

    Example:

    >>> keras.ops.shape(PatchTokens()(np.zeros((2, 3, 4, 8))))
    (2, 12, 8)
    >>> keras.ops.shape(PatchTokens()(np.zeros((0, 3, 4, 8))))
    (0, 12, 8)
    """

    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                f"PatchTokens expects a patch grid (batch, rows, cols, hidden_dim). Received: input_shape={input_shape}"
            )

    def call(self, patch_grid):
        batch, rows, cols = (ops.shape(patch_grid)[axis] for axis in range(3))
        return ops.reshape(patch_grid, (batch, rows * cols, patch_grid.shape[-1]))

    def compute_output_shape(self, input_shape):
        rows, cols = input_shape[1:3]
        length = None if rows is None or cols is None else rows * cols
        return (input_shape[0], length, input_shape[3])


@serialization.register
class ClassToken(keras.layers.Layer):
    """Prepends a learned class token to a sequence of tokens.

    The token is a `(1, 1, hidden_dim)` weight, zero-initialised as in the
    official implementation, broadcast over the batch.

    Call arguments:
        tokens: tensor of shape `(batch, num_tokens, hidden_dim)`.

    Returns:
        A tensor of shape `(batch, num_tokens + 1, hidden_dim)` whose first
        token is the class token.

    Example:

    >>> keras.ops.shape(ClassToken()(np.ones((2, 5, 8))))
    (2, 6, 8)
    """

    def build(self, input_shape):
        self.token = self.add_weight(shape=(1, 1, input_shape[-1]), initializer="zeros", name="token")

    def call(self, tokens):
        batch = ops.shape(tokens)[0]
        token = ops.cast(self.token, tokens.dtype)
        token = ops.broadcast_to(token, (batch, 1, ops.shape(tokens)[-1]))
        return ops.concatenate([token, tokens], axis=1)

    def compute_output_shape(self, input_shape):
        length = None if input_shape[1] is None else input_shape[1] + 1
        return (input_shape[0], length, input_shape[2])


@serialization.register
class PositionEmbedding(keras.layers.Layer):
    """Adds a learned position embedding to the class token and patch tokens.

    The weight has shape `(1, num_prefix_tokens + grid_h * grid_w, hidden_dim)`
    with the class token first, the layout of the published checkpoints'
    `pos_embedding`. Given the patch grid of the images (`patch_grid`), the
    embedding follows the images' size: on another grid its patch rows are
    resampled at call time with `keras_vit.layers.resampling.interpolation_matrix`,
    the same matrices `resample_position_embedding` uses when weights are
    loaded at another size; on the trained grid nothing is resampled.

    Args:
        grid_size: int or `(grid_h, grid_w)`, the patch grid the embedding is
            stored for.
        num_prefix_tokens: int, the tokens before the patches (1 for the class
            token). Defaults to `1`.
        resample_method: how the embedding follows another grid, one of
            `keras_vit.layers.resampling.RESAMPLING_METHODS`. Defaults to
            `"official"`.
        resample_antialias: bool, antialias when shrinking (half-pixel
            methods only). Defaults to `False`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: tensor of shape `(batch, num_prefix_tokens + rows * cols,
            hidden_dim)`.
        patch_grid: optional tensor `(batch, rows, cols, ...)` whose shape
            gives the grid of `tokens` (only its shape is read). Without it,
            `tokens` must be on the stored grid.

    Returns:
        A tensor of the same shape as `tokens`.

    Example:

    >>> layer = PositionEmbedding(grid_size=(2, 3))
    >>> keras.ops.shape(layer(np.zeros((4, 7, 8))))
    (4, 7, 8)
    >>> keras.ops.shape(layer(np.zeros((4, 13, 8)), patch_grid=np.zeros((4, 3, 4, 8))))
    (4, 13, 8)
    """

    def __init__(self, grid_size, num_prefix_tokens=1, resample_method="official", resample_antialias=False, **kwargs):
        super().__init__(**kwargs)
        self.grid_size = validation.pair("grid_size", grid_size)
        self.num_prefix_tokens = validation.non_negative_int("num_prefix_tokens", num_prefix_tokens)
        self.resample_method = validation.one_of("resample_method", resample_method, resampling.RESAMPLING_METHODS)
        if not isinstance(resample_antialias, bool) or (resample_antialias and resample_method == "official"):
            raise ValueError(
                "`resample_antialias` must be a bool, and True only with the 'bilinear' or 'bicubic' "
                f"resample_method. Received: resample_antialias={resample_antialias!r}, "
                f"resample_method={resample_method!r}"
            )
        self.resample_antialias = resample_antialias

    @property
    def sequence_length(self):
        return self.num_prefix_tokens + self.grid_size[0] * self.grid_size[1]

    def _check_length(self, tokens_shape):
        """Without a `patch_grid` the tokens must be the stored grid's (a known count that differs is an error)."""
        count = validation.static_dim(tokens_shape[1])
        if count is not None and count != self.sequence_length:
            raise ValueError(
                f"PositionEmbedding for a {self.grid_size[0]}x{self.grid_size[1]} grid with "
                f"{self.num_prefix_tokens} prefix token(s) expects {self.sequence_length} "
                f"tokens; pass `patch_grid` for tokens of another grid. Received: input_shape={tuple(tokens_shape)}"
            )

    def build(self, tokens_shape, patch_grid_shape=None):
        if patch_grid_shape is None:
            self._check_length(tokens_shape)
        # Normal(0.02) is the initialiser of the official implementation.
        self.embedding = self.add_weight(
            shape=(1, self.sequence_length, tokens_shape[-1]),
            initializer=keras.initializers.RandomNormal(stddev=0.02),
            name="embedding",
        )

    def call(self, tokens, patch_grid=None):
        embedding = self.embedding
        if patch_grid is not None:
            shape = ops.shape(patch_grid)
            grid = (shape[1], shape[2])
            if tuple(validation.static_dim(size) for size in grid) != self.grid_size:
                embedding = self._resampled(grid)
        else:
            self._check_length(ops.shape(tokens))  # built for one count, called with another
        return tokens + ops.cast(embedding, tokens.dtype)

    def _resampled(self, grid):
        """The embedding on `grid`, interpolated in float32."""
        embedding = ops.cast(self.embedding, "float32")
        dim = embedding.shape[-1]
        patches = ops.reshape(embedding[0, self.num_prefix_tokens :], (*self.grid_size, dim))
        method, antialias = self.resample_method, self.resample_antialias
        rows = resampling.interpolation_matrix(self.grid_size[0], grid[0], method, antialias)
        cols = resampling.interpolation_matrix(self.grid_size[1], grid[1], method, antialias)
        patches = ops.einsum("uj,tjd->tud", cols, ops.einsum("ti,ijd->tjd", rows, patches))
        return ops.concatenate([embedding[:, : self.num_prefix_tokens], ops.reshape(patches, (1, -1, dim))], axis=1)

    def compute_output_shape(self, tokens_shape, patch_grid_shape=None):
        return tuple(tokens_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "grid_size": self.grid_size,
                "num_prefix_tokens": self.num_prefix_tokens,
                "resample_method": self.resample_method,
                "resample_antialias": self.resample_antialias,
            }
        )
        return config


@serialization.register
class PatchFeatureMap(keras.layers.Layer):
    """Lays the patch tokens out on the patch grid: the 4-D feature map.

    Drops the prefix (class) tokens and reshapes the rest to
    `(batch, rows, cols, hidden_dim)`, the output of `include_top=False`
    models, like every `keras.applications` backbone's feature map.

    Args:
        num_prefix_tokens: int, the tokens before the patches. Defaults to `1`.
        grid_size: optional `(rows, cols)`, the grid when the call gives no
            `patch_grid` (tokens on a grid fixed at build time).
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: tensor `(batch, num_prefix_tokens + rows * cols, hidden_dim)`.
        patch_grid: optional tensor `(batch, rows, cols, ...)`; only its
            shape is read. Without it, `grid_size` is the grid.

    Returns:
        A tensor of shape `(batch, rows, cols, hidden_dim)`.

    Example:

    >>> layer = PatchFeatureMap()
    >>> keras.ops.shape(layer(np.zeros((2, 7, 8)), patch_grid=np.zeros((2, 2, 3, 8))))
    (2, 2, 3, 8)
    """

    def __init__(self, num_prefix_tokens=1, grid_size=None, **kwargs):
        super().__init__(**kwargs)
        self.num_prefix_tokens = validation.non_negative_int("num_prefix_tokens", num_prefix_tokens)
        self.grid_size = None if grid_size is None else validation.pair("grid_size", grid_size)

    def _grid(self, patch_grid_shape):
        return self.grid_size if patch_grid_shape is None else (patch_grid_shape[1], patch_grid_shape[2])

    def call(self, tokens, patch_grid=None):
        rows, cols = self._grid(None if patch_grid is None else ops.shape(patch_grid))
        batch = ops.shape(tokens)[0]
        return ops.reshape(tokens[:, self.num_prefix_tokens :], (batch, rows, cols, tokens.shape[-1]))

    def compute_output_shape(self, tokens_shape, patch_grid_shape=None):
        return (tokens_shape[0], *self._grid(patch_grid_shape), tokens_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update({"num_prefix_tokens": self.num_prefix_tokens, "grid_size": self.grid_size})
        return config


@serialization.register
class DropPath(keras.layers.Layer):
    """Stochastic depth: drops the whole residual branch, per sample.

    During training each sample's input is zeroed with probability `rate` and
    the survivors are scaled by `1 / (1 - rate)`; at inference it is the
    identity (Huang et al., 2016).

    Args:
        rate: float in `[0, 1)`, the probability of dropping a sample's branch.
        seed: optional int, for reproducible masks.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor of shape `(batch, ...)`.
        training: bool, whether to drop.

    Example:

    >>> layer = DropPath(rate=0.5, seed=1)
    >>> x = np.ones((4, 3, 2), "float32")
    >>> bool(np.all(keras.ops.convert_to_numpy(layer(x, training=False)) == x))
    True
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = validation.rate("rate", rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed) if self.rate > 0 else None

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        mask_shape = (ops.shape(inputs)[0],) + (1,) * (len(inputs.shape) - 1)
        # 0 or 1 / (1 - rate) per sample. Drawn by `keras.random.dropout`: unseeded on torch it is torch's own
        # dropout, which torch.compile traces; any other Keras draw there (`uniform`) breaks the compiled graph
        # at each use, and every break costs a recompilation until dynamo gives up.
        mask = keras.random.dropout(ops.ones(mask_shape, inputs.dtype), self.rate, seed=self.seed_generator)
        return inputs * mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config


@serialization.register
class PatchDropout(keras.layers.Layer):
    """Keeps a random subset of the patch tokens in training (PatchDropout, Liu et al. 2022).

    In training, each image keeps `max(1, floor((1 - rate) * N))` of its `N`
    patch tokens, drawn uniformly without replacement, in their original
    order, after its `num_prefix_tokens` prefix (class) tokens, which are
    always kept. The position embedding is added before, so each kept token
    still carries its position; the transformer blocks then run on fewer
    tokens, which is what makes a training step cheaper. At inference it is
    the identity. The count follows timm's `PatchDropout`.

    Args:
        rate: float in `[0, 1)`, the fraction of patch tokens dropped.
        num_prefix_tokens: int, the tokens before the patches, never
            dropped. Defaults to `1`.
        seed: optional int, for reproducible draws.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: tensor of shape `(batch, num_prefix_tokens + N, hidden_dim)`.
        training: bool, whether to drop.

    Returns:
        In training, a tensor of shape `(batch, num_prefix_tokens +
        max(1, floor((1 - rate) * N)), hidden_dim)`; otherwise `tokens`.
        The declared (symbolic) shape is the inference one.

    Example:

    >>> layer = PatchDropout(rate=0.5, seed=1)
    >>> keras.ops.shape(layer(np.ones((2, 17, 8)), training=True))
    (2, 9, 8)
    >>> keras.ops.shape(layer(np.ones((2, 17, 8))))
    (2, 17, 8)
    """

    def __init__(self, rate, num_prefix_tokens=1, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = validation.rate("rate", rate)
        self.num_prefix_tokens = validation.non_negative_int("num_prefix_tokens", num_prefix_tokens)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(
                f"PatchDropout expects tokens (batch, num_tokens, hidden_dim). Received: input_shape={input_shape}"
            )

    def kept(self, num_patches):
        """How many of `num_patches` patch tokens a training call keeps (an int, or a tensor for a dynamic count)."""
        if isinstance(num_patches, int):
            # The epsilon keeps (1 - rate) * N from flooring below an exact integer (0.7 * 10 = 6.999...).
            return max(1, math.floor((1.0 - self.rate) * num_patches + 1e-6))
        count = ops.floor(ops.cast(num_patches, "float32") * (1.0 - self.rate) + 1e-6)
        return ops.cast(ops.maximum(count, 1.0), "int32")

    def call(self, tokens, training=False):
        if not training or self.rate == 0:
            return tokens
        prefix, patches = tokens[:, : self.num_prefix_tokens], tokens[:, self.num_prefix_tokens :]
        shape = ops.shape(patches)
        num_patches = validation.static_dim(shape[1])
        num_patches = shape[1] if num_patches is None else num_patches
        # A uniformly random subset per image: the first `kept` of a random permutation, put back in order.
        noise = self._uniform_noise(shape[0], num_patches)
        keep = ops.sort(ops.argsort(noise, axis=-1)[:, : self.kept(num_patches)], axis=-1)
        kept = ops.take_along_axis(patches, ops.expand_dims(keep, -1), axis=1)
        return ops.concatenate([prefix, kept], axis=1)

    def _uniform_noise(self, batch, num_patches):
        """Uniform draws in [0, 1) on a 2**-24 grid (float32's), one per patch token, from 24 fair bits each.

        The bits come from `keras.random.dropout`, for torch.compile (see `DropPath.call`).
        """
        # Dropout at rate 0.5 keeps a one as 2 (scaled by 1 / 0.5): bit k, 0 or 2, weighs 2**-(k + 2).
        bits = keras.random.dropout(ops.ones((batch, num_patches, 24), "float32"), 0.5, seed=self.seed_generator)
        weights = ops.convert_to_tensor([0.5 ** (k + 2) for k in range(24)], "float32")
        return ops.sum(bits * weights, axis=-1)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "num_prefix_tokens": self.num_prefix_tokens, "seed": self.seed})
        return config


@serialization.register
class MultiHeadSelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention with a fused projection.

    Queries, keys and values come from one `Dense(3 * hidden_dim)` (faster
    than three projections; the converters split and join the published
    separate kernels exactly). Attention runs through
    `keras.ops.dot_product_attention`, the fused (flash on GPU) path, unless
    the weights are asked for or attention dropout is active in training (on
    torch through `keras_compat.dot_product_attention`, the same kernel
    without Keras's copies of its inputs and output).

    Args:
        num_heads: int, the number of attention heads; must divide the hidden
            size.
        attention_dropout_rate: float, dropout on the attention weights.
            Defaults to `0.0`.
        seed: optional int for the attention dropout.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: tensor of shape `(batch, num_tokens, hidden_dim)`.
        training: bool, whether attention dropout is active.
        return_attention_scores: bool, also return the attention weights of
            shape `(batch, num_heads, num_tokens, num_tokens)`.

    Example:

    >>> layer = MultiHeadSelfAttention(num_heads=2)
    >>> out, weights = layer(np.ones((1, 5, 8)), return_attention_scores=True)
    >>> keras.ops.shape(out), keras.ops.shape(weights)
    ((1, 5, 8), (1, 2, 5, 5))
    """

    def __init__(self, num_heads, attention_dropout_rate=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = validation.positive_int("num_heads", num_heads)
        self.attention_dropout_rate = validation.rate("attention_dropout_rate", attention_dropout_rate)
        self.seed = seed
        self.attention_dropout = keras.layers.Dropout(
            self.attention_dropout_rate, seed=seed, dtype=self.dtype_policy, name="attention_dropout"
        )

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        if hidden_dim is None or hidden_dim % self.num_heads:
            raise ValueError(
                f"The hidden size must be divisible by num_heads={self.num_heads}. Received: input_shape={input_shape}"
            )
        self.head_dim = hidden_dim // self.num_heads
        # xavier_uniform is the kernel initialiser of flax's attention, which the
        # official implementation uses (Keras's values, drawn without temporaries on torch).
        self.qkv = keras.layers.Dense(
            3 * hidden_dim, kernel_initializer=initializers.GlorotUniform(), dtype=self.dtype_policy, name="qkv"
        )
        self.qkv.build(input_shape)
        self.output_projection = keras.layers.Dense(
            hidden_dim, kernel_initializer=initializers.GlorotUniform(), dtype=self.dtype_policy, name="output"
        )
        self.output_projection.build(input_shape)
        self.attention_dropout.build(None)

    def _heads_first(self, tokens):
        """Query, key and value as `(batch, heads, tokens, head_dim)`, with one transpose."""
        batch, length = ops.shape(tokens)[0], ops.shape(tokens)[1]
        qkv = ops.reshape(dense_over_tokens(self.qkv, tokens), (batch, length, 3, self.num_heads, self.head_dim))
        # One unstack, not three slices: its gradient is one stack, where each slice's is a zero-padded copy of
        # the whole `qkv`; exported, it becomes one split (OpenVINO runs strided slices with a reference kernel).
        return ops.unstack(ops.transpose(qkv, (2, 0, 3, 1, 4)), num=3, axis=0)

    def call(self, tokens, training=False, return_attention_scores=False):
        batch, length = ops.shape(tokens)[0], ops.shape(tokens)[1]
        dropout_active = bool(training) and self.attention_dropout_rate > 0
        # The fused op on torch and JAX; on TensorFlow it transposes around each product (slow in bfloat16 on a
        # CPU), where heads-first matmuls do not; JAX's does not compile in float16 on a CPU (see keras_compat).
        fused = (
            not (return_attention_scores or dropout_active)
            and keras.backend.backend() != "tensorflow"
            and keras_compat.fused_attention_compiles(self.compute_dtype)
        )
        if fused:
            qkv = ops.reshape(dense_over_tokens(self.qkv, tokens), (batch, length, 3, self.num_heads, self.head_dim))
            query, key, value = ops.unstack(qkv, num=3, axis=2)  # one unstack: see `_heads_first`
            attended = keras_compat.dot_product_attention(
                query, key, value, flash_attention=keras_compat.flash_attention_argument(training, length)
            )
            weights = None
        else:
            query, key, value = self._heads_first(tokens)
            scale = 1.0 / math.sqrt(self.head_dim)
            logits = ops.einsum("bhqd,bhkd->bhqk", query * ops.cast(scale, query.dtype), key)
            # Softmax in float32 keeps float16 from overflowing on long sequences.
            weights = ops.cast(ops.softmax(ops.cast(logits, "float32"), axis=-1), query.dtype)
            dropped = keras_compat.call_sublayer(self.attention_dropout, weights, training=training)
            attended = ops.einsum("bhqk,bhkd->bhqd", dropped, value)
            attended = ops.transpose(attended, (0, 2, 1, 3))
        # Explicit sizes, never -1: a reshape cannot infer -1 for an empty batch on JAX and torch.
        outputs = dense_over_tokens(
            self.output_projection, ops.reshape(attended, (batch, length, self.num_heads * self.head_dim))
        )
        return (outputs, weights) if return_attention_scores else outputs

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, tokens, training=False, return_attention_scores=False):
        outputs = keras.KerasTensor(tokens.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        length = tokens.shape[1]
        weights = keras.KerasTensor((tokens.shape[0], self.num_heads, length, length), dtype=self.compute_dtype)
        return outputs, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "attention_dropout_rate": self.attention_dropout_rate,
                "seed": self.seed,
            }
        )
        # The quantized Dense sublayers' policies, which Keras would not save.
        config["dtype"] = serialization.dtype_config(self)
        return config


@serialization.register
class MLPBlock(keras.layers.Layer):
    """The transformer's feed-forward block: Dense, GELU, dropout, Dense, dropout.

    Args:
        mlp_dim: int, the size of the hidden layer.
        dropout_rate: float, dropout after each Dense. Defaults to `0.0`.
        gelu_approximate: bool, use the tanh approximation of GELU, as the
            official JAX code does (`flax.linen.gelu`), instead of the exact
            erf form that timm, Hugging Face and keras-hub use. Defaults to
            `False`.
        seed: optional int for the dropout.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: tensor of shape `(batch, num_tokens, hidden_dim)`.
        training: bool, whether dropout is active.

    Example:

    >>> keras.ops.shape(MLPBlock(mlp_dim=32)(np.ones((2, 5, 8))))
    (2, 5, 8)
    """

    def __init__(self, mlp_dim, dropout_rate=0.0, gelu_approximate=False, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.mlp_dim = validation.positive_int("mlp_dim", mlp_dim)
        self.dropout_rate = validation.rate("dropout_rate", dropout_rate)
        if not isinstance(gelu_approximate, bool):
            raise ValueError(f"`gelu_approximate` must be a bool. Received: gelu_approximate={gelu_approximate!r}")
        self.gelu_approximate = gelu_approximate
        self.seed = seed
        self.dropout = keras.layers.Dropout(self.dropout_rate, seed=seed, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        # Official initialisation: xavier_uniform kernels (Keras's values, drawn without temporaries on torch),
        # biases normal(1e-6).
        bias_initializer = keras.initializers.RandomNormal(stddev=1e-6)
        self.fc1 = keras.layers.Dense(
            self.mlp_dim,
            kernel_initializer=initializers.GlorotUniform(),
            bias_initializer=bias_initializer,
            dtype=self.dtype_policy,
            name="fc1",
        )
        self.fc1.build(input_shape)
        self.fc2 = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=initializers.GlorotUniform(),
            bias_initializer=bias_initializer,
            dtype=self.dtype_policy,
            name="fc2",
        )
        self.fc2.build(tuple(input_shape[:-1]) + (self.mlp_dim,))
        self.dropout.build(None)

    def call(self, tokens, training=False):
        # Sublayers run through keras_compat.call_sublayer: Keras's per-call overhead is most of a small
        # model's eager time.
        run = keras_compat.call_sublayer
        hidden = ops.gelu(dense_over_tokens(self.fc1, tokens), approximate=self.gelu_approximate)
        hidden = run(self.dropout, hidden, training=training)
        return run(self.dropout, dense_over_tokens(self.fc2, hidden), training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mlp_dim": self.mlp_dim,
                "dropout_rate": self.dropout_rate,
                "gelu_approximate": self.gelu_approximate,
                "seed": self.seed,
            }
        )
        # The quantized Dense sublayers' policies, which Keras would not save.
        config["dtype"] = serialization.dtype_config(self)
        return config


@serialization.register
class TransformerBlock(keras.layers.Layer):
    """A pre-LayerNorm transformer encoder block.

    `x + DropPath(Dropout(Attention(LayerNorm(x))))`, then
    `x + DropPath(MLP(LayerNorm(x)))`, as in the paper (Eq. 2-3) and the
    official implementation; LayerNorm epsilon 1e-6.

    Args:
        num_heads: int, the number of attention heads.
        mlp_dim: int, the hidden size of the MLP block.
        dropout_rate: float, dropout after attention and in the MLP.
            Defaults to `0.0`.
        attention_dropout_rate: float, dropout on the attention weights.
            Defaults to `0.0`.
        drop_path_rate: float, stochastic-depth rate of both residual
            branches. Defaults to `0.0`.
        gelu_approximate: bool, tanh-approximate GELU (official JAX code)
            instead of exact GELU. Defaults to `False`.
        seed: optional int for dropout and stochastic depth.
        remat: bool, rematerialize the block in training calls: its
            activations are not kept for the backward pass but recomputed
            from its input (`keras.remat`: `jax.checkpoint`,
            `tf.recompute_grad`, `torch.utils.checkpoint`), one more forward
            pass of the block for less memory (timm's
            `set_grad_checkpointing`). Outputs and gradients, dropout and
            stochastic depth included, are those of the block without it.
            Defaults to `False`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: tensor of shape `(batch, num_tokens, hidden_dim)`.
        training: bool, whether dropout and stochastic depth are active.
        return_attention_scores: bool, also return the attention weights
            `(batch, num_heads, num_tokens, num_tokens)`.

    Example:

    >>> block = TransformerBlock(num_heads=2, mlp_dim=32)
    >>> keras.ops.shape(block(np.ones((2, 5, 8))))
    (2, 5, 8)
    """

    def __init__(
        self,
        num_heads,
        mlp_dim,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        gelu_approximate=False,
        seed=None,
        remat=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.remat = validation.boolean("remat", remat)
        self.num_heads = validation.positive_int("num_heads", num_heads)
        self.mlp_dim = validation.positive_int("mlp_dim", mlp_dim)
        self.dropout_rate = validation.rate("dropout_rate", dropout_rate)
        self.attention_dropout_rate = validation.rate("attention_dropout_rate", attention_dropout_rate)
        self.drop_path_rate = validation.rate("drop_path_rate", drop_path_rate)
        self.gelu_approximate = gelu_approximate
        self.seed = seed
        policy = self.dtype_policy
        self.norm1 = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, dtype=policy, name="norm1")
        self.attention = MultiHeadSelfAttention(
            num_heads, attention_dropout_rate=attention_dropout_rate, seed=seed, dtype=policy, name="attention"
        )
        self.attention_output_dropout = keras.layers.Dropout(
            self.dropout_rate, seed=seed, dtype=policy, name="attention_output_dropout"
        )
        self.norm2 = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, dtype=policy, name="norm2")
        self.mlp = MLPBlock(
            mlp_dim, dropout_rate=dropout_rate, gelu_approximate=gelu_approximate, seed=seed, dtype=policy, name="mlp"
        )
        self.drop_path = DropPath(self.drop_path_rate, seed=seed, dtype=policy, name="drop_path")

    def build(self, input_shape):
        for layer in (self.norm1, self.attention, self.norm2, self.mlp):
            layer.build(input_shape)
        self.attention_output_dropout.build(None)
        self.drop_path.build(input_shape)

    def call(self, tokens, training=False, return_attention_scores=False):
        # Only training calls are rematerialized: inference keeps no activations for a backward pass, and
        # stays a plain graph for export.
        if not (self.remat and training):
            return self._forward(tokens, training, return_attention_scores)
        # Dropout and stochastic depth draw from seed generators, which each draw advances: the recomputation
        # must start from the states the forward pass started from, or it draws other masks (wrong gradients on
        # TensorFlow and torch). So the remat function sets the states it starts from, and returns the advanced
        # ones instead of leaving them in the variables (no JAX tracer escapes it).
        generators = self._random_generators()
        starts = [ops.copy(generator.state.value) for generator in generators]

        def forward(inputs):
            for generator, start in zip(generators, starts):
                generator.state.assign(start)
            outputs = self._forward(inputs, training, return_attention_scores)
            return outputs, [ops.copy(generator.state.value) for generator in generators]

        # The flags are closed over, not passed: jax.checkpoint would trace them as arrays.
        outputs, ends = keras_compat.remat(forward)(tokens)
        for generator, end in zip(generators, ends):
            generator.state.assign(end)
        return outputs

    def _random_generators(self):
        """The seed generators of the dropout and stochastic-depth sublayers (those with a rate)."""
        found = (getattr(layer, "seed_generator", None) for layer in keras_compat.sublayers(self))
        return [generator for generator in found if isinstance(generator, keras.random.SeedGenerator)]

    def _forward(self, tokens, training, return_attention_scores):
        run = keras_compat.call_sublayer  # Keras's per-call overhead skipped (see MLPBlock.call)
        attended = run(
            self.attention,
            run(self.norm1, tokens),
            training=training,
            return_attention_scores=return_attention_scores,
        )
        if return_attention_scores:
            attended, weights = attended
        attended = run(self.attention_output_dropout, attended, training=training)
        tokens = tokens + run(self.drop_path, attended, training=training)
        mlp = run(self.mlp, run(self.norm2, tokens), training=training)
        tokens = tokens + run(self.drop_path, mlp, training=training)
        return (tokens, weights) if return_attention_scores else tokens

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, tokens, training=False, return_attention_scores=False):
        return self.attention.compute_output_spec(tokens, return_attention_scores=return_attention_scores)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "mlp_dim": self.mlp_dim,
                "dropout_rate": self.dropout_rate,
                "attention_dropout_rate": self.attention_dropout_rate,
                "drop_path_rate": self.drop_path_rate,
                "gelu_approximate": self.gelu_approximate,
                "seed": self.seed,
                "remat": self.remat,
            }
        )
        # The quantized Dense sublayers' policies, which Keras would not save.
        config["dtype"] = serialization.dtype_config(self)
        return config


@serialization.register
class TokenPooling(keras.layers.Layer):
    """Reduces the token sequence to one vector per image.

    Args:
        mode: `"token"` takes the class token (the first token); `"gap"`
            averages the patch tokens (all but the first `num_prefix_tokens`),
            as the official code's global-average-pooling classifier does;
            `"max"` takes their per-channel maximum (keras.applications'
            `pooling="max"`).
        num_prefix_tokens: int, tokens before the patches. Defaults to `1`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Example:

    >>> x = np.arange(12, dtype="float32").reshape(1, 3, 4)
    >>> keras.ops.convert_to_numpy(TokenPooling("gap")(x)).tolist()
    [[6.0, 7.0, 8.0, 9.0]]
    """

    MODES = ("token", "gap", "max")

    def __init__(self, mode="token", num_prefix_tokens=1, **kwargs):
        super().__init__(**kwargs)
        if mode not in self.MODES:
            raise ValueError(f"`mode` must be one of {self.MODES}. Received: mode={mode!r}")
        num_prefix_tokens = validation.non_negative_int("num_prefix_tokens", num_prefix_tokens)
        if mode == "token" and num_prefix_tokens < 1:
            raise ValueError(
                "`mode='token'` needs a class token (num_prefix_tokens >= 1). "
                f"Received: num_prefix_tokens={num_prefix_tokens!r}"
            )
        self.mode = mode
        self.num_prefix_tokens = num_prefix_tokens

    def call(self, tokens):
        if self.mode == "token":
            return tokens[:, 0]
        if self.mode == "max":
            return ops.max(tokens[:, self.num_prefix_tokens :], axis=1)
        return ops.mean(tokens[:, self.num_prefix_tokens :], axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update({"mode": self.mode, "num_prefix_tokens": self.num_prefix_tokens})
        return config
