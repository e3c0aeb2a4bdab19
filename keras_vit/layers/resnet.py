"""The ResNet feature extractor of the hybrid Vision Transformers, as Keras 3 layers.

The paper's hybrids (section 3.1) feed the transformer with the feature map of
a BiT-style ResNet v2 instead of raw image patches. That ResNet, as the official
`vit_jax/models_vit.py` + `models_resnet.py` and timm's
`vision_transformer_hybrid.py` + `resnetv2.py` build it:

- every convolution is weight-standardised (the kernel is normalised to zero
  mean, unit variance over its `(height, width, in)` axes for each output
  channel before use), has no bias and pads TensorFlow-style `"same"`;
- every convolution is followed by `GroupNormalization(32)`;
- a root ("stem"): 7x7 convolution with stride 2, GroupNorm, ReLU, 3x3 max
  pooling with stride 2 ("same" padding) - output stride 4, `width` channels;
- then stages of bottleneck units that are *not* pre-activation (conv ->
  norm -> ReLU, the last norm before the residual sum, ReLU after it). Stage
  `i` (0-based) has bottleneck width `width * 2**i`, output `4 * width * 2**i`
  channels, stride 1 for the first stage and 2 for the others (on the 3x3
  convolution and the projection shortcut of its first unit).

The published layouts (`stage_depths`): R+Ti/16 has only the root (`()`),
R26 `(2, 2, 2, 2)` (output stride 32), the paper's R50 for B/16 `(3, 4, 9)`
(three stages, output stride 16), R50 for L/32 `(3, 4, 6, 3)`.

Numerics follow timm (the maintained port the published numbers come from):
standardisation `(w - mean) / sqrt(var + 1e-8)` and GroupNorm epsilon 1e-5.
The official JAX code divides by `std + 1e-5` and uses GroupNorm epsilon 1e-6;
both differences are far below the numerical noise of a trained model, and
both epsilons are constructor arguments.

Weights are named after the official checkpoint: `conv_root`, `gn_root`,
`block{s}_unit{u}/{conv1,gn1,conv2,gn2,conv3,gn3,conv_proj,gn_proj}`, and the
kernels are HWIO like the official `.../kernel` tensors.
"""

import keras
from keras import ops

from keras_vit.layers import transformer as vit_layers
from keras_vit.utils import serialization, validation

# timm builds the hybrids' convolutions with StdConv2dSame(eps=1e-8).
STANDARDIZATION_EPSILON = 1e-8
# timm's GroupNormAct default (flax's GroupNorm, in the official code, uses 1e-6).
GROUP_NORM_EPSILON = 1e-5
GROUP_NORM_GROUPS = 32
# The root's 7x7 convolution (stride 2) and 3x3 max pooling (stride 2).
ROOT_STRIDE = 4


def output_stride(stage_depths):
    """The backbone's total downsampling factor for a stage layout.

    The root divides by 4 and every stage after the first by 2 more.

    Args:
        stage_depths: sequence of ints, the units per stage (may be empty).

    Returns:
        int.

    Example:

    >>> output_stride(()), output_stride((3, 4, 9)), output_stride((2, 2, 2, 2))
    (4, 16, 32)
    """
    return ROOT_STRIDE * 2 ** max(len(stage_depths) - 1, 0)


def _stage_depths(value):
    if not isinstance(value, (tuple, list)):
        raise ValueError(
            "`stage_depths` must be a sequence of positive integers (units per stage, e.g. (3, 4, 9)), "
            f"or () for the root only. Received: stage_depths={value!r}"
        )
    return tuple(validation.positive_int("stage_depths", depth) for depth in value)


def _group_norm(name, dtype_policy, epsilon, gamma_initializer="ones"):
    return keras.layers.GroupNormalization(
        groups=GROUP_NORM_GROUPS,
        epsilon=epsilon,
        gamma_initializer=gamma_initializer,
        dtype=dtype_policy,
        name=name,
    )


def _check_groups(name, channels):
    if channels % GROUP_NORM_GROUPS:
        raise ValueError(
            f"`{name}` must be a multiple of {GROUP_NORM_GROUPS} (the GroupNorm groups). Received: {name}={channels}"
        )


@serialization.register
class StandardizedConv2D(keras.layers.Layer):
    """A 2-D convolution with weight standardisation and TF-style "same" padding.

    Before each use the kernel is standardised per output channel over its
    `(height, width, in)` axes: `(w - mean) / sqrt(var + epsilon)` (Qiao et
    al., 2019; BiT). The stored kernel stays unstandardised, HWIO like the
    official checkpoints; the standardisation runs in float32 under mixed
    precision. There is no bias (a GroupNorm always follows).

    Args:
        filters: int, the output channels.
        kernel_size: int or `(height, width)`.
        strides: int or `(height, width)`. Defaults to `1`.
        epsilon: float > 0 added to the variance. Defaults to `1e-8`
            (timm's hybrid ResNet).
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor of shape `(batch, height, width, channels)`.

    Returns:
        A tensor of shape `(batch, ceil(height / sh), ceil(width / sw), filters)`.

    Example:

    >>> layer = StandardizedConv2D(filters=8, kernel_size=3, strides=2)
    >>> keras.ops.shape(layer(np.zeros((2, 9, 8, 3))))
    (2, 5, 4, 8)
    """

    def __init__(self, filters, kernel_size, strides=1, epsilon=STANDARDIZATION_EPSILON, **kwargs):
        super().__init__(**kwargs)
        self.filters = validation.positive_int("filters", filters)
        self.kernel_size = validation.pair("kernel_size", kernel_size)
        self.strides = validation.pair("strides", strides)
        self.epsilon = validation.finite_float("epsilon", epsilon, minimum=0, include_minimum=False)

    def build(self, input_shape):
        if len(input_shape) != 4 or input_shape[-1] is None:
            raise ValueError(
                "StandardizedConv2D expects inputs of shape (batch, height, width, channels) with known "
                f"channels. Received: input_shape={input_shape}"
            )
        # lecun_normal is flax's Conv default, which the official code trains with.
        # autocast=False: the standardisation must see the float32 kernel.
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
        empty = vit_layers.empty_batch_output(inputs, self.compute_output_shape, inputs.dtype)
        if empty is not None:
            return empty
        kernel = ops.cast(self.standardized_kernel(), inputs.dtype)
        return ops.conv(inputs, kernel, strides=self.strides, padding="same", data_format="channels_last")

    def compute_output_shape(self, input_shape):
        spatial = [None if size is None else -(-size // stride) for size, stride in zip(input_shape[1:3], self.strides)]
        return (input_shape[0], *spatial, self.filters)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "kernel_size": self.kernel_size,
                "strides": self.strides,
                "epsilon": self.epsilon,
            }
        )
        return config


@serialization.register
class BottleneckUnit(keras.layers.Layer):
    """A ResNet bottleneck unit without pre-activation (the hybrids' ResNet v2 unit).

    `1x1 conv -> GN -> ReLU -> 3x3 conv (strided) -> GN -> ReLU -> 1x1 conv ->
    GN`, added to the shortcut, then ReLU. The shortcut is a strided 1x1
    convolution + GN (`conv_proj` / `gn_proj`) when the unit changes the
    channels or the resolution, else the identity. All convolutions are
    `StandardizedConv2D`. The last GroupNorm's scale starts at zero, as in the
    official code, so a fresh unit begins as its shortcut.

    Args:
        filters: int, the bottleneck width (a multiple of 32); the unit
            outputs `4 * filters` channels.
        strides: int or `(height, width)`, the stride of the 3x3 convolution
            and of the projection. Defaults to `1`.
        standardization_epsilon: float, see `StandardizedConv2D`. Defaults to
            `1e-8`.
        norm_epsilon: float, the GroupNorm epsilon. Defaults to `1e-5`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor of shape `(batch, height, width, channels)`.

    Returns:
        A tensor of shape `(batch, ceil(height / s), ceil(width / s), 4 * filters)`.

    Example:

    >>> unit = BottleneckUnit(filters=32, strides=2)
    >>> keras.ops.shape(unit(np.zeros((1, 8, 8, 64))))
    (1, 4, 4, 128)
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
        self.filters = validation.positive_int("filters", filters)
        _check_groups("filters", filters)
        self.strides = validation.pair("strides", strides)
        self.standardization_epsilon = validation.finite_float(
            "standardization_epsilon", standardization_epsilon, minimum=0, include_minimum=False
        )
        self.norm_epsilon = validation.finite_float("norm_epsilon", norm_epsilon, minimum=0, include_minimum=False)
        policy = self.dtype_policy
        kernel_sizes = {"conv1": 1, "conv2": 3, "conv3": 1}
        widths = {"conv1": filters, "conv2": filters, "conv3": 4 * filters}
        self.convs = [
            StandardizedConv2D(
                widths[name],
                kernel_sizes[name],
                strides=self.strides if name == "conv2" else 1,
                epsilon=self.standardization_epsilon,
                dtype=policy,
                name=name,
            )
            for name in ("conv1", "conv2", "conv3")
        ]
        self.norms = [
            _group_norm(f"gn{i}", policy, self.norm_epsilon, "zeros" if i == 3 else "ones") for i in (1, 2, 3)
        ]
        self.projection = None
        self.projection_norm = None

    def needs_projection(self, input_channels):
        """Whether the shortcut needs `conv_proj` (the official rule)."""
        return input_channels != 4 * self.filters or self.strides != (1, 1)

    def build(self, input_shape):
        if len(input_shape) != 4 or input_shape[-1] is None:
            raise ValueError(
                "BottleneckUnit expects inputs of shape (batch, height, width, channels) with known "
                f"channels. Received: input_shape={input_shape}"
            )
        if self.needs_projection(input_shape[-1]):
            self.projection = StandardizedConv2D(
                4 * self.filters,
                1,
                strides=self.strides,
                epsilon=self.standardization_epsilon,
                dtype=self.dtype_policy,
                name="conv_proj",
            )
            self.projection.build(input_shape)
            self.projection_norm = _group_norm("gn_proj", self.dtype_policy, self.norm_epsilon)
            self.projection_norm.build(self.projection.compute_output_shape(input_shape))
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
        spatial = [None if size is None else -(-size // stride) for size, stride in zip(input_shape[1:3], self.strides)]
        return (input_shape[0], *spatial, 4 * self.filters)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "strides": self.strides,
                "standardization_epsilon": self.standardization_epsilon,
                "norm_epsilon": self.norm_epsilon,
            }
        )
        return config


@serialization.register
class ResNetBackbone(keras.layers.Layer):
    """The hybrids' ResNet v2 feature extractor: the root and the bottleneck stages.

    Root: `conv_root` (7x7, stride 2, `width` channels) -> `gn_root` -> ReLU ->
    3x3 max pooling with stride 2 ("same" padding). Then `len(stage_depths)`
    stages of `BottleneckUnit`s named `block{s}_unit{u}` (1-based, as in the
    official checkpoints); stage `i` has width `width * 2**i` and stride 2 on
    its first unit except for the first stage.

    Args:
        stage_depths: sequence of ints, the units per stage: `()` (root only,
            R+Ti/16), `(2, 2, 2, 2)` (R26), `(3, 4, 9)` (the paper's R50 for
            B/16), `(3, 4, 6, 3)` (R50 for L/32).
        width: int, the root's channels and the first stage's bottleneck
            width (64 times BiT's width factor), a multiple of 32.
            Defaults to `64`.
        standardization_epsilon: float, see `StandardizedConv2D`. Defaults to
            `1e-8`.
        norm_epsilon: float, the GroupNorm epsilon. Defaults to `1e-5`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        images: tensor of shape `(batch, height, width, channels)`.

    Returns:
        The feature map `(batch, ceil(height / r), ceil(width / r), c)` with
        `r = output_stride(stage_depths)` and `c` = `width` for the root only,
        else `4 * width * 2**(len(stage_depths) - 1)`.

    Example:

    >>> backbone = ResNetBackbone(stage_depths=(1, 1), width=32)
    >>> keras.ops.shape(backbone(np.zeros((1, 32, 32, 3))))
    (1, 4, 4, 256)
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
        self.stage_depths = _stage_depths(stage_depths)
        self.width = validation.positive_int("width", width)
        _check_groups("width", width)
        self.standardization_epsilon = validation.finite_float(
            "standardization_epsilon", standardization_epsilon, minimum=0, include_minimum=False
        )
        self.norm_epsilon = validation.finite_float("norm_epsilon", norm_epsilon, minimum=0, include_minimum=False)
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
    def output_stride(self):
        """The total downsampling factor (4, 8, 16 or 32 for 1-4 stages)."""
        return output_stride(self.stage_depths)

    @property
    def output_channels(self):
        """The channels of the feature map."""
        if not self.stage_depths:
            return self.width
        return 4 * self.width * 2 ** (len(self.stage_depths) - 1)

    def _layers_in_order(self):
        return [self.root_conv, self.root_norm, self.root_pool, *self.units]

    def build(self, input_shape):
        if len(input_shape) != 4 or input_shape[-1] is None:
            raise ValueError(
                "ResNetBackbone expects images of shape (batch, height, width, channels) with known "
                f"channels. Received: input_shape={input_shape}"
            )
        shape = tuple(input_shape)
        for layer in self._layers_in_order():
            layer.build(shape)
            shape = layer.compute_output_shape(shape)

    def call(self, images):
        x = ops.relu(self.root_norm(self.root_conv(images)))
        x = self.root_pool(x)
        for unit in self.units:
            x = unit(x)
        return x

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        for layer in self._layers_in_order():
            shape = layer.compute_output_shape(shape)
        return tuple(shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "stage_depths": self.stage_depths,
                "width": self.width,
                "standardization_epsilon": self.standardization_epsilon,
                "norm_epsilon": self.norm_epsilon,
            }
        )
        return config


@serialization.register
class HybridPatchEmbedding(keras.layers.Layer):
    """The hybrid's "patch" embedding: ResNet features, then patches of the feature map.

    Images go through a `ResNetBackbone`; its feature map is cut into
    `patch_size` patches (1x1 for every published hybrid except R+Ti/16, which
    takes 8x8 patches of the root's output) and projected linearly to
    `hidden_dim` by one `Conv2D(hidden_dim, patch_size, strides=patch_size)`,
    the official `embedding` convolution (HWIO kernel, with bias). The output
    is the same patch grid `PatchEmbedding` gives, so the class token,
    position embedding (resampled at call time to the grid), blocks and heads
    of the plain ViT follow unchanged.

    Images may have any size. Every strided layer of the ResNet pads
    TensorFlow-style ("same"), so a side of `n` pixels leaves
    `ceil(n / output_stride)` feature rows (`ceil(ceil(n / a) / b) ==
    ceil(n / (a * b))`); a feature map that the patch does not tile is padded
    with zeros at the bottom / right, as `PatchEmbedding` pads images (timm's
    `dynamic_img_pad`). The token grid is therefore `ceil(n / r)` with `r =
    output_stride(stage_depths) * patch_size` (16 or 32 for the published
    hybrids), exactly `n / r` when `r` divides `n`.

    Args:
        hidden_dim: int, the token size.
        patch_size: int or `(height, width)`, the patch size on the feature map.
        stage_depths: sequence of ints, see `ResNetBackbone`.
        width: int, see `ResNetBackbone`. Defaults to `64`.
        standardization_epsilon: float, see `StandardizedConv2D`. Defaults to
            `1e-8`.
        norm_epsilon: float, the GroupNorm epsilon. Defaults to `1e-5`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        images: tensor of shape `(batch, height, width, channels)`.

    Returns:
        The patch grid, a tensor of shape `(batch, ceil(height / r),
        ceil(width / r), hidden_dim)` with `r` the total reduction.

    Example:

    >>> layer = HybridPatchEmbedding(hidden_dim=16, patch_size=2, stage_depths=(), width=32)
    >>> keras.ops.shape(layer(np.zeros((2, 32, 16, 3))))
    (2, 4, 2, 16)
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
        self.projection = vit_layers.patch_projection(hidden_dim, self.patch_size, self.dtype_policy)

    @staticmethod
    def pixels_per_token_for(patch_size, stage_depths):
        """`(height, width)`: image pixels per token side of a hybrid embedding with this patch and ResNet.

        Each token covers a patch of the ResNet's feature map, so the patch size times the ResNet's
        output stride.

        >>> HybridPatchEmbedding.pixels_per_token_for(1, (3, 4, 9)), HybridPatchEmbedding.pixels_per_token_for(8, ())
        ((16, 16), (32, 32))
        """
        patch = validation.pair("patch_size", patch_size)
        stride = output_stride(stage_depths)
        return (stride * patch[0], stride * patch[1])

    @property
    def pixels_per_token(self):
        """`(height, width)`: image pixels per token side (timm's `feat_ratio`), the total reduction."""
        return self.pixels_per_token_for(self.patch_size, self.backbone.stage_depths)

    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                "HybridPatchEmbedding expects images of shape (batch, height, width, channels). "
                f"Received: input_shape={input_shape}"
            )
        self.backbone.build(input_shape)
        # Only the channels matter to the projection's kernel; the padding happens in `call`.
        self.projection.build(self.backbone.compute_output_shape(input_shape))

    def call(self, images):
        features = self.backbone(images)
        return vit_layers.project_patches(self.projection, features, self.patch_size)

    def compute_output_shape(self, input_shape):
        features_shape = self.backbone.compute_output_shape(input_shape)
        grid = vit_layers.patch_grid(features_shape[1:3], self.patch_size)
        return (input_shape[0], *grid, self.hidden_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "patch_size": self.patch_size,
                "stage_depths": self.backbone.stage_depths,
                "width": self.backbone.width,
                "standardization_epsilon": self.backbone.standardization_epsilon,
                "norm_epsilon": self.backbone.norm_epsilon,
            }
        )
        return config


def pixels_per_token(patch_size, stage_depths=None):
    """`(height, width)`: image pixels per token side of a plain ViT's patch embedding (`stage_depths` None) or
    a hybrid's (`HybridPatchEmbedding` with these ResNet stages)."""
    if stage_depths is None:
        return vit_layers.PatchEmbedding.pixels_per_token_for(patch_size)
    return HybridPatchEmbedding.pixels_per_token_for(patch_size, stage_depths)
