"""The Vision Transformer's layers, in `keras.ops` only.

Weight layouts follow the published checkpoints: the patch-embedding kernel is HWIO like the official
`embedding/kernel`, and the attention projection is one fused `(D, 3D)` kernel whose columns are
`[query | key | value]`, each in `(head, head_dim)` order, like timm's `attn.qkv` (transposed).
"""

import math

import keras
from keras import ops

from keras_vit.layers import resampling
from keras_vit.layers.rotary import apply_rotary
from keras_vit.utils import keras_compat, serialization, validation
from keras_vit.utils.patches import patch_grid  # keras-free, for the `keras-vit variants` table

# The official implementation and every published checkpoint use 1e-6 (Keras's default is 1e-3).
LAYER_NORM_EPSILON = 1e-6
# The MLP activations: exact GELU (timm, keras-hub), tanh GELU (the official JAX code), QuickGELU (OpenAI CLIP) and
# SwiGLU (DINOv2 giant, AIMv2: `fc1` gives `[gate | value]`, `silu(gate) * value` goes to `fc2`).
MLP_ACTIVATIONS = ("gelu", "gelu_tanh", "quick_gelu", "swiglu")
# LayerNorm, or RMSNorm (AIMv2: a scale, no centring or bias).
NORMALIZATIONS = ("layer", "rms")


def normalization_layer(normalization, epsilon, dtype, name):
    """A `LayerNormalization`, or with `normalization="rms"` an `RMSNormalization`."""
    if normalization == "rms":
        return keras.layers.RMSNormalization(epsilon=epsilon, dtype=dtype, name=name)
    return keras.layers.LayerNormalization(epsilon=epsilon, dtype=dtype, name=name)


def patch_projection(hidden_dim, patch_size, dtype, use_bias=True):
    """The linear projection of non-overlapping patches: an unbuilt strided `Conv2D` named `projection`."""
    # lecun_normal is the flax default the official code trains with.
    return keras.layers.Conv2D(
        hidden_dim,
        kernel_size=patch_size,
        strides=patch_size,
        padding="valid",
        data_format="channels_last",
        use_bias=use_bias,
        kernel_initializer="lecun_normal",
        dtype=dtype,
        name="projection",
    )


def pad_to_patches(images, patch_size):
    """Zero-pads channels-last `images` at the bottom / right up to whole patches (timm's `dynamic_img_pad`)."""
    shape = ops.shape(images)
    padding = [(-shape[axis]) % patch for axis, patch in ((1, patch_size[0]), (2, patch_size[1]))]
    if all(validation.static_dim(pad) == 0 for pad in padding):
        return images
    return ops.pad(images, [[0, 0], [0, padding[0]], [0, padding[1]], [0, 0]])


def empty_batch_output(inputs, compute_output_shape, dtype):
    """Zeros of a convolution's output shape for an eager empty batch, else `None` (TensorFlow's oneDNN convolutions
    hand an empty batch back with the input's shape)."""
    shape = ops.shape(inputs)
    # A plain int only: turning a traced size into one (a torch.compile SymInt) would specialize the graph on it.
    if not (isinstance(shape[0], int) and shape[0] == 0):
        return None
    return ops.zeros(compute_output_shape(shape), dtype=dtype)


def project_patches(projection, images, patch_size):
    """Pads `images` to whole patches and applies the patch `projection` (an empty batch included)."""
    images = pad_to_patches(images, patch_size)
    empty = empty_batch_output(images, projection.compute_output_shape, projection.compute_dtype)
    return projection(images) if empty is None else empty


def dense_over_tokens(dense, tokens):
    """`dense(tokens)` for `tokens` of shape `(..., features)`, computed as one 2-D matrix product (on a 3-D input,
    XLA's CPU compiler differentiates a Dense through transposed copies that grow with depth)."""
    if isinstance(tokens, keras.KerasTensor) or keras.backend.backend() == "torch":
        return dense(tokens)
    shape = ops.shape(tokens)
    rows = 1
    for size in shape[:-1]:
        rows = rows * size  # explicit sizes, never -1: a reshape cannot infer -1 for an empty batch
    outputs = dense(ops.reshape(tokens, (rows, shape[-1])))
    return ops.reshape(outputs, (*shape[:-1], ops.shape(outputs)[-1]))


def masked_logits(logits, mask=None):
    """Attention `logits` in float32, those of the keys `mask` (broadcast to them) excludes set to a large finite
    negative: an image of padding alone still gives finite outputs."""
    logits = ops.cast(logits, "float32")
    return logits if mask is None else ops.where(mask, logits, -1e9)


def xavier_dense(units, input_shape, dtype, name, use_bias=True, bias_initializer="zeros"):
    """A built `Dense` with xavier-uniform kernels, flax's initialiser that the official code trains with."""
    dense = keras.layers.Dense(
        units,
        use_bias=use_bias,
        kernel_initializer="glorot_uniform",
        bias_initializer=bias_initializer,
        dtype=dtype,
        name=name,
    )
    dense.build(input_shape)
    return dense


@serialization.register
class PatchEmbedding(keras.layers.Layer):
    """Projects each patch of channels-last images linearly, padding the bottom / right to whole patches; or
    embeds flattened patches `(batch, N, ph * pw * channels)` (a NaFlex batch's, each patch in (row, col, channel)
    order) with the same kernel, as one matrix product.

    Args:
        hidden_dim: int, the size of each patch's embedding.
        patch_size: int or `(height, width)`.
        use_bias: bool, whether the projection has a bias. Defaults to `True`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Example:

    >>> layer = PatchEmbedding(hidden_dim=8, patch_size=4)
    >>> keras.ops.shape(layer(np.zeros((2, 16, 10, 3))))
    (2, 4, 3, 8)
    """

    def __init__(self, hidden_dim, patch_size, use_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = validation.positive_int("hidden_dim", hidden_dim)
        self.patch_size = validation.pair("patch_size", patch_size)
        self.use_bias = use_bias
        self.projection = patch_projection(hidden_dim, self.patch_size, self.dtype_policy, use_bias)

    def build(self, input_shape):
        # Only the channels matter to the kernel; `call` pads the images to whole patches.
        channels = input_shape[-1]
        if len(input_shape) == 3:
            pixels = self.patch_size[0] * self.patch_size[1]
            if channels is None or channels % pixels:
                raise ValueError(
                    f"Flattened patches must have patch_size[0] * patch_size[1] * channels features "
                    f"(patch_size={self.patch_size}). Received: input_shape={tuple(input_shape)}"
                )
            channels //= pixels
        self.projection.build((None, None, None, channels))

    def call(self, images):
        if len(images.shape) != 3:
            return project_patches(self.projection, images, self.patch_size)
        # The HWIO kernel flattened in (row, col, channel) order: one checkpoint embeds images and flat patches.
        kernel = ops.reshape(ops.cast(self.projection.kernel, self.compute_dtype), (-1, self.hidden_dim))
        tokens = ops.matmul(images, kernel)
        return tokens + ops.cast(self.projection.bias, tokens.dtype) if self.use_bias else tokens

    def compute_output_shape(self, input_shape):
        if len(input_shape) == 3:
            return (*input_shape[:2], self.hidden_dim)
        return (input_shape[0], *patch_grid(input_shape[1:3], self.patch_size), self.hidden_dim)

    def get_config(self):
        return {**super().get_config(), **serialization.arguments(self)}


@serialization.register
class PatchTokens(keras.layers.Layer):
    """Flattens a patch grid `(batch, rows, cols, dim)` into tokens `(batch, rows * cols, dim)`, row by row (unlike
    `keras.layers.Reshape((-1, dim))`, also an empty batch on every backend)."""

    def call(self, patch_grid):
        batch, rows, cols = (ops.shape(patch_grid)[axis] for axis in range(3))
        return ops.reshape(patch_grid, (batch, rows * cols, patch_grid.shape[-1]))

    def compute_output_shape(self, input_shape):
        rows, cols = input_shape[1:3]
        length = None if rows is None or cols is None else rows * cols
        return (input_shape[0], length, input_shape[3])


@serialization.register
class ClassToken(keras.layers.Layer):
    """Prepends learned tokens (a class token, or register tokens) to tokens `(batch, length, dim)`.

    Args:
        num_tokens: int, the tokens prepended. Defaults to `1`.
        initializer: their initializer. Defaults to `"zeros"`.
        **kwargs: base layer arguments such as `name` and `dtype`.
    """

    def __init__(self, num_tokens=1, initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.num_tokens = validation.positive_int("num_tokens", num_tokens)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        shape = (1, self.num_tokens, input_shape[-1])
        self.token = self.add_weight(shape=shape, initializer=self.initializer, name="token")

    def call(self, tokens):
        token = ops.cast(self.token, tokens.dtype)
        token = ops.broadcast_to(token, (ops.shape(tokens)[0], self.num_tokens, ops.shape(tokens)[-1]))
        return ops.concatenate([token, tokens], axis=1)

    def compute_output_shape(self, input_shape):
        length = None if input_shape[1] is None else input_shape[1] + self.num_tokens
        return (input_shape[0], length, input_shape[2])

    def get_config(self):
        initializer = keras.initializers.serialize(self.initializer)
        return {**super().get_config(), "num_tokens": self.num_tokens, "initializer": initializer}


@serialization.register
class PositionEmbedding(keras.layers.Layer):
    """Adds a learned position embedding `(1, num_prefix_tokens + grid_h * grid_w, dim)`, its patch rows
    resampled at call time to the tokens' patch grid.

    Args:
        grid_size: int or `(grid_h, grid_w)`, the grid the embedding is stored for.
        num_prefix_tokens: int, the tokens before the patches. Defaults to `1`.
        resample_method: one of `resampling.RESAMPLING_METHODS`. Defaults to `"official"`.
        resample_antialias: bool, antialias when shrinking (half-pixel methods only). Defaults to `False`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: tensor `(batch, num_prefix_tokens + rows * cols, dim)`.
        patch_grid: optional tensor `(batch, rows, cols, ...)` (only its shape is read). Without it, `tokens`
            must be on the stored grid.
        spatial_shapes: optional int tensor `(batch, 2)`, each image's `(rows, cols)` in a NaFlex batch: `tokens`
            is then `(batch, num_prefix_tokens + N, dim)` with each image's patches first, row-major, and the table
            is resampled per image to its own grid.

    Example:

    >>> layer = PositionEmbedding(grid_size=(2, 3))
    >>> keras.ops.shape(layer(np.zeros((4, 13, 8)), patch_grid=np.zeros((4, 3, 4, 8))))
    (4, 13, 8)
    """

    def __init__(self, grid_size, num_prefix_tokens=1, resample_method="official", resample_antialias=False, **kwargs):
        super().__init__(**kwargs)
        self.grid_size = validation.pair("grid_size", grid_size)
        self.num_prefix_tokens = validation.non_negative_int("num_prefix_tokens", num_prefix_tokens)
        self.resample_method = validation.one_of("resample_method", resample_method, resampling.RESAMPLING_METHODS)
        if resample_antialias and resample_method == "official":
            raise ValueError(
                "`resample_antialias=True` needs the 'bilinear' or 'bicubic' resample_method. "
                f"Received: resample_method={resample_method!r}"
            )
        self.resample_antialias = resample_antialias
        self.sequence_length = self.num_prefix_tokens + self.grid_size[0] * self.grid_size[1]

    def build(self, tokens_shape, patch_grid_shape=None):
        # Normal(0.02) is the official initialiser.
        self.embedding = self.add_weight(
            shape=(1, self.sequence_length, tokens_shape[-1]),
            initializer=keras.initializers.RandomNormal(stddev=0.02),
            name="embedding",
        )

    def call(self, tokens, patch_grid=None, spatial_shapes=None):
        if spatial_shapes is not None:
            return tokens + ops.cast(self._resampled_per_image(tokens, spatial_shapes), tokens.dtype)
        embedding = self.embedding
        count = validation.static_dim(ops.shape(tokens)[1])
        if patch_grid is None and count is not None and count != self.sequence_length:
            raise ValueError(
                f"PositionEmbedding for a {self.grid_size[0]}x{self.grid_size[1]} grid expects "
                f"{self.sequence_length} tokens; pass `patch_grid` for another grid. "
                f"Received: input_shape={tuple(ops.shape(tokens))}"
            )
        if patch_grid is not None:
            grid = ops.shape(patch_grid)[1:3]
            if tuple(validation.static_dim(size) for size in grid) != self.grid_size:
                embedding = self._resampled(grid)
        return tokens + ops.cast(embedding, tokens.dtype)

    def _resampled(self, grid):
        embedding = ops.cast(self.embedding, "float32")
        dim = embedding.shape[-1]
        patches = ops.reshape(embedding[0, self.num_prefix_tokens :], (*self.grid_size, dim))
        method, antialias = self.resample_method, self.resample_antialias
        rows = resampling.interpolation_matrix(self.grid_size[0], grid[0], method, antialias)
        cols = resampling.interpolation_matrix(self.grid_size[1], grid[1], method, antialias)
        patches = ops.einsum("uj,tjd->tud", cols, ops.einsum("ti,ijd->tjd", rows, patches))
        return ops.concatenate([embedding[:, : self.num_prefix_tokens], ops.reshape(patches, (1, -1, dim))], axis=1)

    def _resampled_per_image(self, tokens, spatial_shapes):
        """The embedding `(batch, tokens, dim)` of a NaFlex batch: each patch row interpolated from the table at
        its place in its own image's grid (padding tokens get a valid place: their values are masked anyway)."""
        embedding = ops.cast(self.embedding, "float32")
        prefix, dim = self.num_prefix_tokens, embedding.shape[-1]
        batch, length = ops.shape(tokens)[0], ops.shape(tokens)[1]
        rows, cols, row, col = resampling.token_places(spatial_shapes, length - prefix)
        method, antialias = self.resample_method, self.resample_antialias
        row_weights = resampling.interpolation_matrix(self.grid_size[0], rows, method, antialias, positions=row)
        col_weights = resampling.interpolation_matrix(self.grid_size[1], cols, method, antialias, positions=col)
        # (batch, N, gh, gw) flattened: each token's weights over the table's rows, then one matrix product.
        weights = ops.reshape(
            row_weights[..., :, None] * col_weights[..., None, :],
            (batch, length - prefix, self.grid_size[0] * self.grid_size[1]),
        )
        patches = ops.matmul(weights, embedding[0, prefix:])
        prefix_rows = ops.broadcast_to(embedding[:, :prefix], (batch, prefix, dim))
        return ops.concatenate([prefix_rows, patches], axis=1)

    def compute_output_shape(self, tokens_shape, patch_grid_shape=None):
        return tuple(tokens_shape)

    def get_config(self):
        return {**super().get_config(), **serialization.arguments(self)}


@serialization.register
class PatchFeatureMap(keras.layers.Layer):
    """Drops the prefix tokens and lays the patch tokens out as the feature map `(batch, rows, cols, dim)`.

    Args:
        num_prefix_tokens: int, the tokens before the patches. Defaults to `1`.
        grid_size: optional `(rows, cols)`, the grid when the call gives no `patch_grid`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: tensor `(batch, num_prefix_tokens + rows * cols, dim)`.
        patch_grid: optional tensor `(batch, rows, cols, ...)`; only its shape is read.
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
        return {**super().get_config(), **serialization.arguments(self)}


@serialization.register
class DropPath(keras.layers.Layer):
    """Stochastic depth: in training, zeroes each sample with probability `rate`, scales the rest by `1 / (1 - rate)`.

    Args:
        rate: float in `[0, 1)`.
        seed: optional int.
        **kwargs: base layer arguments such as `name` and `dtype`.
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
        # `keras.random.dropout`: unseeded on torch it is torch's own dropout, which torch.compile traces.
        mask = keras.random.dropout(ops.ones(mask_shape, inputs.dtype), self.rate, seed=self.seed_generator)
        return inputs * mask

    def compute_output_spec(self, inputs, training=False):
        # In the compute dtype `__call__` casts the inputs to: traced on float32 inputs under a mixed policy, the
        # spec was float32.
        spec = super().compute_output_spec(inputs, training=training)
        return keras.KerasTensor(spec.shape, dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), **serialization.arguments(self)}


@serialization.register
class PatchDropout(keras.layers.Layer):
    """In training, each image keeps its prefix tokens and a random `max(1, floor((1 - rate) * N))` of its `N`
    patch tokens, in order (Liu et al. 2022; timm's count); else the identity.

    Args:
        rate: float in `[0, 1)`, the fraction of patch tokens dropped.
        num_prefix_tokens: int, the tokens before the patches, never dropped. Defaults to `1`.
        seed: optional int.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Example:

    >>> layer = PatchDropout(rate=0.5, seed=1)
    >>> keras.ops.shape(layer(np.ones((2, 17, 8)), training=True))
    (2, 9, 8)
    """

    def __init__(self, rate, num_prefix_tokens=1, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = validation.rate("rate", rate)
        self.num_prefix_tokens = validation.non_negative_int("num_prefix_tokens", num_prefix_tokens)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def kept(self, num_patches):
        """How many of `num_patches` patch tokens a training call keeps (an int, or a tensor)."""
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
        # The first `kept` of a random permutation per image, put back in order.
        keep = ops.sort(ops.argsort(self._uniform_noise(shape[0], num_patches), axis=-1)[:, : self.kept(num_patches)])
        kept = ops.take_along_axis(patches, ops.expand_dims(keep, -1), axis=1)
        return ops.concatenate([prefix, kept], axis=1)

    def _uniform_noise(self, batch, num_patches):
        """Uniform draws in [0, 1) from 24 fair bits each, drawn by `keras.random.dropout` (see `DropPath`)."""
        # Dropout at rate 0.5 keeps a one as 2: bit k, 0 or 2, weighs 2**-(k + 2).
        bits = keras.random.dropout(ops.ones((batch, num_patches, 24), "float32"), 0.5, seed=self.seed_generator)
        weights = ops.convert_to_tensor([0.5 ** (k + 2) for k in range(24)], "float32")
        return ops.sum(bits * weights, axis=-1)

    def compute_output_spec(self, tokens, training=False):
        # As `DropPath`'s, traced for the training call's token count.
        spec = super().compute_output_spec(tokens, training=training)
        return keras.KerasTensor(spec.shape, dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), **serialization.arguments(self)}


@serialization.register
class MultiHeadSelfAttention(keras.layers.Layer):
    """Multi-head self-attention with one fused `Dense(3 * hidden_dim)` query-key-value projection.

    `keras.ops.dot_product_attention` runs unless the weights are asked for or attention dropout is active.

    Args:
        num_heads: int, must divide the hidden size.
        attention_dropout_rate: float, dropout on the attention weights. Defaults to `0.0`.
        qkv_bias: bool, whether the query-key-value projection has a bias. Defaults to `True`.
        proj_bias: bool, whether the output projection has a bias. Defaults to `True`.
        seed: optional int for the attention dropout.
        **kwargs: base layer arguments such as `name` and `dtype`.

        inner_norm: bool, a LayerNorm on the attended values before the output projection (EVA's
            `scale_attn_inner`). Defaults to `False`.
        layer_norm_epsilon: float, that norm's epsilon. Defaults to `1e-6`.

    Call arguments:
        positions: optional `(cos, sin)` of a `RotaryEmbedding`: the queries and keys are rotated by them
            (`apply_rotary`) before either attention path runs.
        return_attention_scores: bool, also return the weights `(batch, num_heads, num_tokens, num_tokens)`.
        padding_mask: optional bool tensor `(batch, num_tokens)`, False for the padding tokens no token attends to.

    Example:

    >>> out, weights = MultiHeadSelfAttention(num_heads=2)(np.ones((1, 5, 8)), return_attention_scores=True)
    >>> keras.ops.shape(out), keras.ops.shape(weights)
    ((1, 5, 8), (1, 2, 5, 5))
    """

    def __init__(
        self,
        num_heads,
        attention_dropout_rate=0.0,
        qkv_bias=True,
        seed=None,
        proj_bias=True,
        inner_norm=False,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = validation.positive_int("num_heads", num_heads)
        self.qkv_bias = qkv_bias
        self.proj_bias = proj_bias
        self.inner_norm = validation.boolean("inner_norm", inner_norm)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.norm = None
        if inner_norm:
            self.norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="norm"
            )
        self.attention_dropout_rate = validation.rate("attention_dropout_rate", attention_dropout_rate)
        self.seed = seed
        self.attention_dropout = keras.layers.Dropout(
            self.attention_dropout_rate, seed=seed, dtype=self.dtype_policy, name="attention_dropout"
        )

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        if hidden_dim % self.num_heads:
            raise ValueError(
                f"The hidden size must be divisible by num_heads={self.num_heads}. Received: input_shape={input_shape}"
            )
        self.head_dim = hidden_dim // self.num_heads
        policy = self.dtype_policy
        self.qkv = xavier_dense(3 * hidden_dim, input_shape, policy, "qkv", use_bias=self.qkv_bias)
        self.output_projection = xavier_dense(hidden_dim, input_shape, policy, "output", use_bias=self.proj_bias)
        self.attention_dropout.build(None)
        if self.norm is not None:
            self.norm.build(input_shape)

    def call(self, tokens, positions=None, training=False, return_attention_scores=False, padding_mask=None):
        batch, length = ops.shape(tokens)[0], ops.shape(tokens)[1]
        qkv = ops.reshape(dense_over_tokens(self.qkv, tokens), (batch, length, 3, self.num_heads, self.head_dim))
        # One unstack, not three slices: its gradient is one stack, and exported it is one split.
        query, key, value = ops.unstack(qkv, num=3, axis=2)
        if positions is not None:
            query, key = (apply_rotary(tensor, *positions) for tensor in (query, key))
        dropout_active = bool(training) and self.attention_dropout_rate > 0
        fused = (
            not (return_attention_scores or dropout_active)
            and keras.backend.backend() != "tensorflow"
            and keras_compat.fused_attention_compiles(self.compute_dtype)
        )
        weights = None
        mask = None if padding_mask is None else ops.cast(padding_mask, "bool")[:, None, None, :]
        if fused:
            attended = keras_compat.dot_product_attention(query, key, value, training=training, mask=mask)
        else:
            query, key, value = (ops.transpose(tensor, (0, 2, 1, 3)) for tensor in (query, key, value))
            logits = ops.einsum("bhqd,bhkd->bhqk", query * ops.cast(1.0 / math.sqrt(self.head_dim), query.dtype), key)
            # Softmax in float32 keeps float16 from overflowing on long sequences.
            weights = ops.cast(ops.softmax(masked_logits(logits, mask), axis=-1), query.dtype)
            dropped = self.attention_dropout(weights, training=training)
            attended = ops.transpose(ops.einsum("bhqk,bhkd->bhqd", dropped, value), (0, 2, 1, 3))
        attended = ops.reshape(attended, (batch, length, self.num_heads * self.head_dim))
        if self.norm is not None:
            attended = self.norm(attended)
        outputs = dense_over_tokens(self.output_projection, attended)
        return (outputs, weights) if return_attention_scores else outputs

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(
        self, tokens, positions=None, training=False, return_attention_scores=False, padding_mask=None
    ):
        outputs = keras.KerasTensor(tokens.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        length = tokens.shape[1]
        weights = keras.KerasTensor((tokens.shape[0], self.num_heads, length, length), dtype=self.compute_dtype)
        return outputs, weights

    def get_config(self):
        # The quantized Dense sublayers' policies, which Keras would not save.
        return {**super().get_config(), **serialization.arguments(self), "dtype": serialization.dtype_config(self)}


@serialization.register
class MLPBlock(keras.layers.Layer):
    """The transformer's feed-forward block: Dense, activation, dropout, Dense, dropout.

    Args:
        mlp_dim: int, the size of the hidden layer (with `"swiglu"`, of the gated product: `fc1` gives twice it).
        dropout_rate: float, dropout after each Dense. Defaults to `0.0`.
        activation: one of `MLP_ACTIVATIONS`. Defaults to `"gelu"`.
        seed: optional int for the dropout.
        use_bias: bool, whether both Dense have biases. Defaults to `True`.
        inner_norm: bool, a LayerNorm on the hidden layer before `fc2` (EVA-02's sub-LN, timm's `scale_mlp`).
            Defaults to `False`.
        layer_norm_epsilon: float, that norm's epsilon. Defaults to `1e-6`.
        **kwargs: base layer arguments such as `name` and `dtype`.
    """

    def __init__(
        self,
        mlp_dim,
        dropout_rate=0.0,
        activation="gelu",
        seed=None,
        use_bias=True,
        inner_norm=False,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.mlp_dim = validation.positive_int("mlp_dim", mlp_dim)
        self.dropout_rate = validation.rate("dropout_rate", dropout_rate)
        self.activation = validation.one_of("activation", activation, MLP_ACTIVATIONS)
        self.seed = seed
        self.use_bias = use_bias
        self.inner_norm = validation.boolean("inner_norm", inner_norm)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = keras.layers.Dropout(self.dropout_rate, seed=seed, dtype=self.dtype_policy, name="dropout")
        self.norm = None
        if inner_norm:
            self.norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="norm"
            )

    def build(self, input_shape):
        # The official initialisation: normal(1e-6) biases.
        biases = keras.initializers.RandomNormal(stddev=1e-6)
        policy = self.dtype_policy
        width = 2 * self.mlp_dim if self.activation == "swiglu" else self.mlp_dim
        where = dict(use_bias=self.use_bias, bias_initializer=biases)
        self.fc1 = xavier_dense(width, input_shape, policy, "fc1", **where)
        self.fc2 = xavier_dense(input_shape[-1], (*input_shape[:-1], self.mlp_dim), policy, "fc2", **where)
        self.dropout.build(None)
        if self.norm is not None:
            self.norm.build((*input_shape[:-1], self.mlp_dim))

    def call(self, tokens, training=False):
        hidden = dense_over_tokens(self.fc1, tokens)
        if self.activation == "quick_gelu":
            hidden = hidden * ops.sigmoid(ops.cast(1.702, hidden.dtype) * hidden)
        elif self.activation == "swiglu":
            gate, value = ops.split(hidden, 2, axis=-1)
            hidden = ops.silu(gate) * value
        else:
            hidden = ops.gelu(hidden, approximate=self.activation == "gelu_tanh")
        hidden = self.dropout(hidden, training=training)
        if self.norm is not None:
            hidden = self.norm(hidden)
        return self.dropout(dense_over_tokens(self.fc2, hidden), training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        # The quantized Dense sublayers' policies, which Keras would not save.
        return {**super().get_config(), **serialization.arguments(self), "dtype": serialization.dtype_config(self)}


@serialization.register
class TransformerBlock(keras.layers.Layer):
    """A pre-LayerNorm transformer encoder block (the paper's Eq. 2-3): `x + DropPath(Dropout(Attention(LN(x))))`,
    then `x + DropPath(MLP(LN(x)))`.

    Args:
        num_heads: int, the number of attention heads.
        mlp_dim: int, the hidden size of the MLP block.
        dropout_rate: float, dropout after attention and in the MLP. Defaults to `0.0`.
        attention_dropout_rate: float, dropout on the attention weights. Defaults to `0.0`.
        drop_path_rate: float, stochastic-depth rate of both residual branches. Defaults to `0.0`.
        activation: the MLP's, one of `MLP_ACTIVATIONS`. Defaults to `"gelu"`.
        layer_norm_epsilon: float, the LayerNorms' epsilon. Defaults to `1e-6`.
        layer_scale_init: optional float, LayerScale (timm's `ls1`, `ls2`) starting at this value.
        qkv_bias: bool, whether the query-key-value projection has a bias. Defaults to `True`.
        proj_bias: bool, whether the attention's output projection and the MLP have biases. Defaults to `True`.
        normalization: one of `NORMALIZATIONS`, the two norms' kind. Defaults to `"layer"`.
        attention_norm: bool, the attention's inner LayerNorm (`MultiHeadSelfAttention(inner_norm=True)`).
        mlp_norm: bool, the MLP's LayerNorm before `fc2` (`MLPBlock(inner_norm=True)`).
        seed: optional int for dropout and stochastic depth.
        remat: bool, recompute the activations in the backward pass (`keras.remat`). Defaults to `False`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        positions: optional, the position scheme's input to the attention (a `RotaryEmbedding`'s output).
        return_attention_scores: bool, also return the attention weights.
        padding_mask: optional bool tensor `(batch, num_tokens)`, False for padding tokens (the attention's).

    Example:

    >>> keras.ops.shape(TransformerBlock(num_heads=2, mlp_dim=32)(np.ones((2, 5, 8))))
    (2, 5, 8)
    """

    def __init__(
        self,
        num_heads,
        mlp_dim,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        activation="gelu",
        seed=None,
        remat=False,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        layer_scale_init=None,
        qkv_bias=True,
        proj_bias=True,
        normalization="layer",
        attention_norm=False,
        mlp_norm=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.attention_norm = attention_norm
        self.mlp_norm = mlp_norm
        self.layer_norm_epsilon = layer_norm_epsilon
        self.layer_scale_init = layer_scale_init
        self.qkv_bias = qkv_bias
        self.proj_bias = proj_bias
        self.normalization = validation.one_of("normalization", normalization, NORMALIZATIONS)
        self.remat = validation.boolean("remat", remat)
        self.num_heads = num_heads
        self.mlp_dim = mlp_dim
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.drop_path_rate = drop_path_rate
        self.activation = activation
        self.seed = seed
        policy = self.dtype_policy
        # The sublayers check their arguments.
        self.norm1 = normalization_layer(normalization, layer_norm_epsilon, policy, "norm1")
        self.attention = MultiHeadSelfAttention(
            num_heads,
            attention_dropout_rate,
            qkv_bias,
            seed,
            proj_bias,
            inner_norm=attention_norm,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=policy,
            name="attention",
        )
        self.attention_output_dropout = keras.layers.Dropout(
            dropout_rate, seed=seed, dtype=policy, name="attention_output_dropout"
        )
        self.norm2 = normalization_layer(normalization, layer_norm_epsilon, policy, "norm2")
        self.mlp = MLPBlock(
            mlp_dim,
            dropout_rate,
            activation,
            seed,
            use_bias=proj_bias,
            inner_norm=mlp_norm,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=policy,
            name="mlp",
        )
        self.drop_path = DropPath(drop_path_rate, seed=seed, dtype=policy, name="drop_path")

    def build(self, input_shape):
        for layer in (self.norm1, self.attention, self.norm2, self.mlp):
            layer.build(input_shape)
        self.attention_output_dropout.build(None)
        self.drop_path.build(input_shape)
        self.layer_scales = []
        if self.layer_scale_init is not None:
            initializer = keras.initializers.Constant(self.layer_scale_init)
            for name in ("layer_scale1", "layer_scale2"):
                self.layer_scales.append(self.add_weight(shape=input_shape[-1:], initializer=initializer, name=name))

    def call(self, tokens, positions=None, training=False, return_attention_scores=False, padding_mask=None):
        # Inference keeps no activations for a backward pass and stays a plain graph for export.
        if not (self.remat and training):
            return self._forward(tokens, positions, training, return_attention_scores, padding_mask)
        # The recomputation must draw the forward pass's dropout masks: the remat function starts the seed
        # generators from the states the forward pass started from, and returns the advanced ones (no JAX tracer
        # escapes it).
        generators = [
            layer.seed_generator
            for layer in keras_compat.sublayers(self)
            if isinstance(getattr(layer, "seed_generator", None), keras.random.SeedGenerator)
        ]
        starts = [ops.copy(generator.state.value) for generator in generators]

        rotation = tuple(positions or ())

        def forward(inputs, *tensors):
            for generator, start in zip(generators, starts):
                generator.state.assign(start)
            mask = tensors[len(rotation)] if padding_mask is not None else None
            outputs = self._forward(inputs, tensors[: len(rotation)] or None, training, return_attention_scores, mask)
            return outputs, [ops.copy(generator.state.value) for generator in generators]

        # The flags are closed over, not passed: jax.checkpoint would trace them as arrays. The positions' and the
        # mask's tensors are passed (TensorFlow's recompute_grad takes tensors only, so no None, and no bool).
        mask = () if padding_mask is None else (ops.cast(padding_mask, "int32"),)
        outputs, ends = keras_compat.remat(forward)(tokens, *rotation, *mask)
        for generator, end in zip(generators, ends):
            generator.state.assign(end)
        return outputs

    def _forward(self, tokens, positions, training, return_attention_scores, padding_mask=None):
        attended = self.attention(
            self.norm1(tokens),
            positions=positions,
            training=training,
            return_attention_scores=return_attention_scores,
            padding_mask=padding_mask,
        )
        if return_attention_scores:
            attended, weights = attended
        attended = self.attention_output_dropout(attended, training=training)
        if self.layer_scales:
            attended = attended * ops.cast(self.layer_scales[0], attended.dtype)
        tokens = tokens + self.drop_path(attended, training=training)
        mlp = self.mlp(self.norm2(tokens), training=training)
        if self.layer_scales:
            mlp = mlp * ops.cast(self.layer_scales[1], mlp.dtype)
        tokens = tokens + self.drop_path(mlp, training=training)
        return (tokens, weights) if return_attention_scores else tokens

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(
        self, tokens, positions=None, training=False, return_attention_scores=False, padding_mask=None
    ):
        return self.attention.compute_output_spec(tokens, return_attention_scores=return_attention_scores)

    def get_config(self):
        # The quantized Dense sublayers' policies, which Keras would not save.
        return {**super().get_config(), **serialization.arguments(self), "dtype": serialization.dtype_config(self)}


@serialization.register
class TokenPooling(keras.layers.Layer):
    """Reduces tokens `(batch, num_tokens, dim)` to one vector per image.

    Args:
        mode: `"token"` takes the class token (the first); `"gap"` averages the patch tokens (all but the first
            `num_prefix_tokens`); `"max"` takes their per-channel maximum.
        num_prefix_tokens: int, tokens before the patches. Defaults to `1`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: tensor `(batch, num_tokens, dim)`.
        padding_mask: optional bool tensor `(batch, num_tokens)`: `"gap"` and `"max"` read the tokens it marks True.

    Example:

    >>> x = np.arange(12, dtype="float32").reshape(1, 3, 4)
    >>> keras.ops.convert_to_numpy(TokenPooling("gap")(x)).tolist()
    [[6.0, 7.0, 8.0, 9.0]]
    """

    def __init__(self, mode="token", num_prefix_tokens=1, **kwargs):
        super().__init__(**kwargs)
        self.mode = validation.one_of("mode", mode, ("token", "gap", "max"))
        self.num_prefix_tokens = validation.non_negative_int("num_prefix_tokens", num_prefix_tokens)
        if mode == "token" and num_prefix_tokens < 1:
            raise ValueError(f"`mode='token'` needs a class token. Received: num_prefix_tokens={num_prefix_tokens}")

    def call(self, tokens, padding_mask=None):
        if self.mode == "token":
            return tokens[:, 0]
        patches = tokens[:, self.num_prefix_tokens :]
        if padding_mask is None:
            return ops.max(patches, axis=1) if self.mode == "max" else ops.mean(patches, axis=1)
        valid = ops.cast(padding_mask, "bool")[:, self.num_prefix_tokens :, None]
        if self.mode == "max":
            # Padding as the smallest token value: finite in any dtype, and never above a valid token's.
            return ops.max(ops.where(valid, patches, ops.min(patches, axis=1, keepdims=True)), axis=1)
        count = ops.maximum(ops.sum(ops.cast(valid, patches.dtype), axis=1), 1)
        return ops.sum(ops.where(valid, patches, 0), axis=1) / count

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])

    def get_config(self):
        return {**super().get_config(), **serialization.arguments(self)}
