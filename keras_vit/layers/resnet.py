"""The BiT-style ResNet v2 of the paper's hybrid ViTs (section 3.1): weight-standardised convolutions, each
followed by `GroupNormalization(32)`, with timm's epsilons and the official checkpoint's names, kernels HWIO."""

import keras
from keras import ops

from keras_vit.layers import transformer
from keras_vit.utils import serialization, validation

STANDARDIZATION_EPSILON = 1e-8
GROUP_NORM_EPSILON = 1e-5
GROUP_NORM_GROUPS = 32


def output_stride(stage_depths):
    """The backbone's total downsampling: 4 for the root, times 2 for every stage after the first.

    >>> output_stride(()), output_stride((3, 4, 9)), output_stride((2, 2, 2, 2))
    (4, 16, 32)
    """
    return 4 * 2 ** max(len(stage_depths) - 1, 0)


def pixels_per_token(patch_size, stage_depths=None):
    """`(height, width)` image pixels per token side of a plain (`stage_depths` None) or hybrid patch embedding."""
    patch = validation.pair("patch_size", patch_size)
    stride = 1 if stage_depths is None else output_stride(stage_depths)
    return (stride * patch[0], stride * patch[1])


def _group_norm(name, dtype_policy, epsilon, gamma_initializer="ones"):
    return keras.layers.GroupNormalization(
        groups=GROUP_NORM_GROUPS, epsilon=epsilon, gamma_initializer=gamma_initializer, dtype=dtype_policy, name=name
    )


@serialization.register
class StandardizedConv2D(keras.layers.Layer):
    """A bias-free "same"-padded 2-D convolution whose float32 HWIO kernel is standardised per output channel,
    `(w - mean) / sqrt(var + epsilon)`, before each use (Qiao et al., 2019).

    Args:
        filters: int, the output channels.
        kernel_size: int or `(height, width)`.
        strides: int or `(height, width)`. Defaults to `1`.
        epsilon: float > 0 added to the variance. Defaults to `1e-8`.
        **kwargs: base layer arguments such as `name` and `dtype`.
    """

    def __init__(self, filters, kernel_size, strides=1, epsilon=STANDARDIZATION_EPSILON, **kwargs):
        super().__init__(**kwargs)
        self.filters = validation.positive_int("filters", filters)
        self.kernel_size = validation.pair("kernel_size", kernel_size)
        self.strides = validation.pair("strides", strides)
        self.epsilon = epsilon

    def build(self, input_shape):
        # lecun_normal is flax's Conv default; autocast=False: the standardisation sees the float32 kernel.
        self.kernel = self.add_weight(
            shape=(*self.kernel_size, input_shape[-1], self.filters),
            initializer="lecun_normal",
            autocast=False,
            name="kernel",
        )

    def standardized_kernel(self):
        """The kernel as the convolution uses it (float32, HWIO)."""
        kernel = ops.cast(self.kernel, "float32")
        mean, variance = ops.moments(kernel, axes=(0, 1, 2), keepdims=True)
        return (kernel - mean) * ops.rsqrt(variance + self.epsilon)

    def call(self, inputs):
        empty = transformer.empty_batch_output(inputs, self.compute_output_shape, inputs.dtype)
        if empty is not None:
            return empty
        kernel = ops.cast(self.standardized_kernel(), inputs.dtype)
        return ops.conv(inputs, kernel, strides=self.strides, padding="same", data_format="channels_last")

    def compute_output_shape(self, input_shape):
        # "Same" padding: ceil(size / stride) per side, the grid of whole patches of that size.
        return (input_shape[0], *transformer.patch_grid(input_shape[1:3], self.strides), self.filters)

    def get_config(self):
        return {**super().get_config(), **serialization.arguments(self)}


@serialization.register
class BottleneckUnit(keras.layers.Layer):
    """The hybrids' bottleneck unit: `1x1 conv, GN, ReLU, strided 3x3 conv, GN, ReLU, 1x1 conv, GN` plus the
    shortcut (a strided 1x1 conv + GN where the shape changes), then ReLU; a fresh unit is its shortcut.

    Args:
        filters: int, the bottleneck width (a multiple of 32); the unit outputs `4 * filters` channels.
        strides: int or `(height, width)`, of the 3x3 convolution and the projection. Defaults to `1`.
        standardization_epsilon: float, see `StandardizedConv2D`. Defaults to `1e-8`.
        norm_epsilon: float, the GroupNorm epsilon. Defaults to `1e-5`.
        **kwargs: base layer arguments such as `name` and `dtype`.
    """

    def __init__(
        self,
        filters,
        strides=1,
        standardization_epsilon=STANDARDIZATION_EPSILON,
        norm_epsilon=GROUP_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.filters = filters
        self.strides = validation.pair("strides", strides)
        self.standardization_epsilon = standardization_epsilon
        self.norm_epsilon = norm_epsilon
        self.convs = [
            self._conv(filters, 1, 1, "conv1"),
            self._conv(filters, 3, self.strides, "conv2"),
            self._conv(4 * filters, 1, 1, "conv3"),
        ]
        self.norms = [
            _group_norm(f"gn{i}", self.dtype_policy, self.norm_epsilon, "zeros" if i == 3 else "ones")
            for i in (1, 2, 3)
        ]
        self.projection = None
        self.projection_norm = None

    def _conv(self, filters, kernel_size, strides, name):
        return StandardizedConv2D(
            filters, kernel_size, strides, epsilon=self.standardization_epsilon, dtype=self.dtype_policy, name=name
        )

    def build(self, input_shape):
        if input_shape[-1] != 4 * self.filters or self.strides != (1, 1):
            self.projection = self._conv(4 * self.filters, 1, self.strides, "conv_proj")
            self.projection.build(input_shape)
            self.projection_norm = _group_norm("gn_proj", self.dtype_policy, self.norm_epsilon)
            self.projection_norm.build(self.compute_output_shape(input_shape))
        shape = input_shape
        for conv, norm in zip(self.convs, self.norms):
            conv.build(shape)
            shape = conv.compute_output_shape(shape)
            norm.build(shape)

    def call(self, inputs):
        shortcut = inputs
        if self.projection is not None:
            shortcut = self.projection_norm(self.projection(inputs))
        x = inputs
        for index, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            x = norm(conv(x))
            if index < 2:
                x = ops.relu(x)
        return ops.relu(x + shortcut)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], *transformer.patch_grid(input_shape[1:3], self.strides), 4 * self.filters)

    def get_config(self):
        return {**super().get_config(), **serialization.arguments(self)}


@serialization.register
class ResNetBackbone(keras.layers.Layer):
    """The hybrids' ResNet v2: the root, then stages of `BottleneckUnit`s named `block{s}_unit{u}` (1-based);
    the feature map is downsampled by `output_stride(stage_depths)`.

    Args:
        stage_depths: sequence of ints, the units per stage, e.g. `()` (root only) or `(3, 4, 9)`.
        width: int, the root's channels and the first stage's bottleneck width, a multiple of 32.
            Defaults to `64`.
        standardization_epsilon: float, see `StandardizedConv2D`. Defaults to `1e-8`.
        norm_epsilon: float, the GroupNorm epsilon. Defaults to `1e-5`.
        **kwargs: base layer arguments such as `name` and `dtype`.
    """

    def __init__(
        self,
        stage_depths,
        width=64,
        standardization_epsilon=STANDARDIZATION_EPSILON,
        norm_epsilon=GROUP_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.stage_depths = tuple(validation.positive_int("stage_depths", depth) for depth in stage_depths)
        if validation.positive_int("width", width) % GROUP_NORM_GROUPS:
            raise ValueError(f"`width` must be a multiple of {GROUP_NORM_GROUPS}. Received: width={width}")
        self.width = width
        self.standardization_epsilon = standardization_epsilon
        self.norm_epsilon = norm_epsilon
        policy = self.dtype_policy
        self.root_conv = StandardizedConv2D(
            width, 7, strides=2, epsilon=self.standardization_epsilon, dtype=policy, name="conv_root"
        )
        self.root_norm = _group_norm("gn_root", policy, self.norm_epsilon)
        # channels_last whatever the global image data format: the model permutes channels-first images first.
        self.root_pool = keras.layers.MaxPooling2D(
            3, strides=2, padding="same", data_format="channels_last", dtype=policy, name="pool_root"
        )
        self.units = [
            BottleneckUnit(
                width * 2**stage,
                strides=2 if stage > 0 and unit == 0 else 1,
                standardization_epsilon=self.standardization_epsilon,
                norm_epsilon=self.norm_epsilon,
                dtype=policy,
                name=f"block{stage + 1}_unit{unit + 1}",
            )
            for stage, depth in enumerate(self.stage_depths)
            for unit in range(depth)
        ]

    @property
    def output_channels(self):
        """The channels of the feature map."""
        return self.units[-1].filters * 4 if self.units else self.width

    def build(self, input_shape):
        shape = tuple(input_shape)
        for layer in [self.root_conv, self.root_norm, self.root_pool, *self.units]:
            layer.build(shape)
            shape = layer.compute_output_shape(shape)

    def call(self, images):
        x = self.root_pool(ops.relu(self.root_norm(self.root_conv(images))))
        for unit in self.units:
            x = unit(x)
        return x

    def compute_output_shape(self, input_shape):
        grid = transformer.patch_grid(input_shape[1:3], output_stride(self.stage_depths))
        return (input_shape[0], *grid, self.output_channels)

    def get_config(self):
        return {**super().get_config(), **serialization.arguments(self)}


@serialization.register
class HybridPatchEmbedding(keras.layers.Layer):
    """A `ResNetBackbone`, then a linear projection of patches of its feature map: `ceil(n / r)` tokens per side
    of `n` pixels with `r = output_stride(stage_depths) * patch_size`, as `PatchEmbedding` gives.

    Args:
        hidden_dim: int, the token size.
        patch_size: int or `(height, width)`, the patch size on the feature map.
        stage_depths: sequence of ints, see `ResNetBackbone`.
        width: int, see `ResNetBackbone`. Defaults to `64`.
        standardization_epsilon: float, see `StandardizedConv2D`. Defaults to `1e-8`.
        norm_epsilon: float, the GroupNorm epsilon. Defaults to `1e-5`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Example:

    >>> layer = HybridPatchEmbedding(hidden_dim=16, patch_size=2, stage_depths=(), width=32)
    >>> keras.ops.shape(layer(np.zeros((2, 33, 20, 3))))
    (2, 5, 3, 16)
    """

    def __init__(
        self,
        hidden_dim,
        patch_size,
        stage_depths,
        width=64,
        standardization_epsilon=STANDARDIZATION_EPSILON,
        norm_epsilon=GROUP_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_dim = validation.positive_int("hidden_dim", hidden_dim)
        self.patch_size = validation.pair("patch_size", patch_size)
        self.backbone = ResNetBackbone(
            stage_depths,
            width=width,
            standardization_epsilon=standardization_epsilon,
            norm_epsilon=norm_epsilon,
            dtype=self.dtype_policy,
            name="backbone",
        )
        self.projection = transformer.patch_projection(hidden_dim, self.patch_size, self.dtype_policy)

    def build(self, input_shape):
        self.backbone.build(input_shape)
        # Only the channels matter to the projection's kernel; the padding happens in `call`.
        self.projection.build(self.backbone.compute_output_shape(input_shape))

    def call(self, images):
        return transformer.project_patches(self.projection, self.backbone(images), self.patch_size)

    def compute_output_shape(self, input_shape):
        features_shape = self.backbone.compute_output_shape(input_shape)
        return (input_shape[0], *transformer.patch_grid(features_shape[1:3], self.patch_size), self.hidden_dim)

    def get_config(self):
        config = {"hidden_dim": self.hidden_dim, "patch_size": self.patch_size}
        # The ResNet's arguments are the backbone's.
        return {**super().get_config(), **config, **serialization.arguments(self.backbone)}
