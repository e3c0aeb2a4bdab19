"""`VisionTransformer`: the one model class of every ViT and hybrid.

A functional `keras.Model` built in `__init__` whose config is its constructor arguments (keras-hub's backbones do
the same), with timm's `forward_intermediates`. The tokens are assembled in `_embed`, pooled in `_top`.
"""

import inspect

import keras
from keras import ops

from keras_vit import layers as vit_layers
from keras_vit.layers import resnet, transformer
from keras_vit.models import lora, preprocessing, variants
from keras_vit.utils import keras_compat, validation

POOLING_MODES = ("token", "gap", "max", "map")
# The locals of `VisionTransformer.__init__` that are not its config.
NOT_CONFIG = ("self", "__class__", "weights", "input_tensor", "dtype", "name", "kwargs")


@keras.saving.register_keras_serializable(package="keras_vit")
class VisionTransformer(keras.Model):
    """A Vision Transformer (Dosovitskiy et al. 2021) of any size, plain or hybrid, optionally with weights.

    Raw pixels are scaled, cut into patches (padded to whole patches), embedded, prefixed with a class token,
    given position embeddings (resampled to the images' patch grid) and passed through pre-norm transformer
    blocks and a final LayerNorm; then the pooling and head, or the feature map. `get_config()` is the
    constructor's arguments (`input_tensor` and `weights` aside), each also an attribute.

    Args:
        patch_size: int or `(height, width)`.
        hidden_dim: int, the token size.
        num_layers: int, the number of transformer blocks.
        num_heads: int, the attention heads per block.
        mlp_dim: int, the hidden size of each MLP block.
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model scales raw [0, 255] pixels itself.
        pixel_mean: float or per-channel `(r, g, b)` in [0, 1], the mean the built-in scaling subtracts.
        pixel_std: float or per-channel `(r, g, b)`, the standard deviation it divides by (0.5 and 0.5: [-1, 1]).
        weights: `None` (random), a local `.npz`, `.safetensors` or `save_pretrained` folder, or
            `"hf://org/repo[/file.safetensors][@revision]"`; with a published variant's sizes, a checkpoint tag
            (a family's tag brings its architecture: the registry row's `options`).
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` in the image data format; sides may be None (any size).
            Defaults to `(224, 224, 3)` with a head, else `(None, None, 3)`.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, `"map"` (`AttentionPooling`) or None (`"token"`
            with a head, the features without).
        classes: int, the classes of the head.
        classifier_activation: the head's activation; None for logits.
        return_sequence: bool, without head and pooling return the tokens instead of the feature map.
        representation_size: optional int, the size of a `pre_logits` tanh `Dense` after the pooling.
        dropout_rate: float, dropout on the embeddings, after attention and in the MLP blocks.
        attention_dropout_rate: float, dropout on the attention weights.
        drop_path_rate: float, the stochastic-depth rate of the last block, rising linearly from 0 at the first.
        mlp_activation: `"gelu"`, `"gelu_tanh"`, `"quick_gelu"` or `"swiglu"` (`fc1` gives 2 x mlp_dim, gated by silu).
        remat: bool, recompute each block's activations in the backward pass.
        patch_dropout_rate: float in [0, 1), the patch tokens `PatchDropout` drops in training.
        resample_method: `"official"`, `"bilinear"` or `"bicubic"`, how the position embedding is resampled.
        resample_antialias: bool, antialias when shrinking (half-pixel methods).
        embedding_grid: optional `(rows, cols)` of the position embedding of an open input size (default: 224 px).
        resnet_stages: None for a plain ViT; for a hybrid, the units per stage of its ResNet (`(3, 4, 9)`).
        resnet_width: int, the hybrid ResNet's root width (a multiple of 32).
        lora_rank: optional int, build with LoRA adapters of this rank (see `enable_lora`).
        lora_alpha: optional float, the adapters' scale is `lora_alpha / lora_rank`. Defaults to `lora_rank`.
        lora_targets: the projections with adapters: `"attention"`, `"mlp"` or both.
        class_token: bool, whether the tokens start with a class token.
        distillation_token: bool, DeiT's distillation token after the class token; with `pooling="token"` the
            features are the two tokens' mean and the logits the mean of `head` and `head_dist` on them.
        num_register_tokens: int, learned register tokens (Darcet et al. 2024) after the class token.
        no_embed_class: bool, the position embedding covers the patch tokens only (timm's `no_embed_class`).
        pre_norm: bool, a LayerNorm (`norm_pre`) before the first block, as CLIP has.
        patch_bias: bool, whether the patch projection has a bias.
        layer_norm_epsilon: float, the epsilon of every LayerNorm.
        final_norm: bool, whether a LayerNorm follows the last block.
        fc_norm: bool, the final LayerNorm comes after the pooling instead (timm's `fc_norm`).
        layer_scale_init: optional float, LayerScale in every block, starting at this value.
        qkv_bias: bool, whether the attention's query-key-value projection has a bias.
        proj_bias: bool, whether the attention's output projection and the MLP have biases.
        normalization: `"layer"` (LayerNorm) or `"rms"` (RMSNorm, AIMv2), every norm's kind (the MAP head's aside).
        patch_norm: bool, a norm (`patch_norm`) on the patch tokens, before the position embedding (AIMv2).
        position_embedding: bool, whether a learned position embedding is added to the tokens.
        rope: optional dict, the arguments of a `keras_vit.layers.RotaryEmbedding` (its `rope_type`,
            `temperature`, `grid_offset`, `grid_indexing`, `rotate_half`, `ref_grid`): every block's queries and
            keys are rotated by the patches' coordinates in the grid of each call (DINOv3, EVA-02, PE, RoPE-ViT).
        pooling_heads: optional int, the MAP head's attention heads (default: `num_heads`; PE core: 8).
        pooling_include_prefix: bool, the MAP head attends to the prefix tokens too (PE core; timm's
            `pool_include_prefix`).
        attention_norm: bool, a LayerNorm on the attended values before the output projection (EVA-CLIP).
        mlp_norm: bool, a LayerNorm in the MLP before `fc2` (EVA-02's sub-LN).
        max_num_patches: optional int N, build a NaFlex model (SigLIP 2's native aspect ratio): its input is a dict
            of `"patches"` `(batch, N, ph * pw * channels)` (raw pixels, each patch flattened in (row, col,
            channel) order, each image's patches first, row-major), `"spatial_shapes"` int32 `(batch, 2)` (each
            image's patch grid `(rows, cols)`) and `"mask"` bool `(batch, N)` (True for the `rows * cols` valid
            patches). The position table and RoPE follow each image's grid; attention and pooling skip the
            padding. The weights are the image model's. Not with a hybrid, `patch_dropout_rate`, a feature map
            output, `rope_type="mixed"` or `input_tensor`.
        dtype: optional dtype policy of every layer (the head stays float32).
        name: the model's name.

    Example:

    >>> backbone = VisionTransformer(
    ...     patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64, include_top=False, pooling="gap")
    >>> keras.ops.shape(backbone(np.zeros((2, 40, 24, 3))))
    (2, 32)
    >>> VisionTransformer.from_config(backbone.get_config()).count_params() == backbone.count_params()
    True
    """

    def __init__(
        self,
        patch_size,
        hidden_dim,
        num_layers,
        num_heads,
        mlp_dim,
        include_top=True,
        include_preprocessing=True,
        pixel_mean=0.5,
        pixel_std=0.5,
        weights=None,
        input_tensor=None,
        input_shape=None,
        pooling=None,
        classes=1000,
        classifier_activation="softmax",
        return_sequence=False,
        representation_size=None,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        mlp_activation="gelu",
        remat=False,
        patch_dropout_rate=0.0,
        resample_method="official",
        resample_antialias=False,
        embedding_grid=None,
        resnet_stages=None,
        resnet_width=64,
        lora_rank=None,
        lora_alpha=None,
        lora_targets=("attention",),
        class_token=True,
        distillation_token=False,
        num_register_tokens=0,
        no_embed_class=False,
        pre_norm=False,
        patch_bias=True,
        layer_norm_epsilon=1e-6,
        final_norm=True,
        fc_norm=False,
        layer_scale_init=None,
        qkv_bias=True,
        proj_bias=True,
        normalization="layer",
        patch_norm=False,
        position_embedding=True,
        rope=None,
        pooling_heads=None,
        pooling_include_prefix=False,
        attention_norm=False,
        mlp_norm=False,
        max_num_patches=None,
        dtype=None,
        name="vision_transformer",
        **kwargs,
    ):
        # The config is the constructor's arguments, checked, but the weights, input tensor, dtype and name.
        arguments = {key: value for key, value in locals().items() if key not in NOT_CONFIG}
        arguments["input_shape"] = _input_shape(input_shape, input_tensor, include_top is True)
        config, checkpoint = _config_and_checkpoint(arguments, weights)
        model_inputs, images = _model_inputs(config, input_tensor)
        layers = _layers(config, dtype)
        x, patch_grid = _embed(layers, images)
        positions = _positions(layers, patch_grid)
        for index in range(config["num_layers"]):
            x = layers[f"encoder_block_{index}"](x, **_block_positions(positions, index))
        if "encoder_norm" in layers:
            x = layers["encoder_norm"](x)
        super().__init__(
            inputs=model_inputs, outputs=_top(config, x, patch_grid, dtype), dtype=dtype, name=name, **kwargs
        )
        if dtype is not None:
            # A functional model leaves its own policy at the global one: `get_config` saves this one.
            self.dtype_policy = dtype
        # Layers that computed an `input_tensor` run before the ViT's own, which `forward_intermediates` cannot run.
        self._layers_before_the_vit = model_inputs is not images
        self._arguments = config
        # The graph is laid out in the image data format of this moment (also when a saved model reloads).
        self.channels_first = keras.config.image_data_format() == "channels_first"
        for key, value in config.items():
            if key != "input_shape":  # `keras.Model.input_shape` already answers it, batch included
                setattr(self, key, value)
        if checkpoint is not None:
            checkpoint.load_into(self)
        if lora_rank is not None:
            lora.enable_lora(self, lora_rank, config["lora_targets"], lora_alpha)

    @property
    def image_shape(self):
        """`(height, width, channels)` of the images the model takes, channels last; sizes may be None."""
        data_format = "channels_first" if self.channels_first else "channels_last"
        return variants.channels_last(self._arguments["input_shape"], data_format)

    @property
    def default_image_size(self):
        """`(height, width)`: the input size, or where that is open, the size whose grid is the embedding's."""
        height, width, _ = self.image_shape
        if None not in (height, width):
            return (height, width)
        return tuple(grid * pixels for grid, pixels in zip(self.embedding_grid, self.pixels_per_token))

    @property
    def num_prefix_tokens(self):
        """The tokens before the patch tokens: the class and distillation tokens (if any), then the registers."""
        return _num_prefix_tokens(self._arguments)

    @property
    def architecture(self):
        """The constructor's arguments that make this network: `get_config()` less name, trainable and dtype.

        Read without Keras's serializer, which imports TensorFlow (where installed, any backend) for the dtype policy.
        """
        return dict(self._arguments)

    @property
    def pixels_per_token(self):
        """`(height, width)`: image pixels per token side (the patch, times a hybrid ResNet's stride)."""
        return resnet.pixels_per_token(self.patch_size, self.resnet_stages)

    def get_config(self):
        # The policy is saved as a functional model saves each layer's, so that a model reloads with its precision
        # and a quantized one with its quantized layers.
        policy_map = keras.dtype_policies.DTypePolicyMap
        dtype = self.dtype_policy
        default = dtype.default_policy if isinstance(dtype, policy_map) else dtype
        quantized = policy_map(default_policy=default)
        for layer in keras_compat.sublayers(self):
            if layer.quantization_mode is not None:
                policy = layer.dtype_policy
                quantized[layer.path] = policy[layer.path] if isinstance(policy, policy_map) else policy
        dtype = keras.dtype_policies.serialize(quantized if len(quantized) else default)
        return {"name": self.name, "trainable": self.trainable, "dtype": dtype, **self._arguments}

    def enable_lora(self, rank, targets=("attention",), alpha=None):
        """Adds Keras's LoRA adapters (Hu et al. 2021) and freezes every weight but theirs and the head's.

        The config records them: a saved model reloads with them, folded into the kernels, and fresh adapters.

        Args:
            rank: int, the adapters' rank.
            targets: `"attention"` (the query-key-value and output projections), `"mlp"`, or both.
            alpha: optional float; the adapters' output is scaled by `alpha / rank`. Defaults to `rank`.

        Example:

        >>> model = VisionTransformer(patch_size=8, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32,
        ...     input_shape=(16, 16, 3), classes=5)
        >>> model.enable_lora(4)
        >>> sorted({v.path.split("/")[-1] for v in model.trainable_weights})
        ['bias', 'kernel', 'lora_kernel_a', 'lora_kernel_b']
        """
        if self._arguments["lora_rank"] is not None:
            raise ValueError(f"Model {self.name!r} already has LoRA adapters (rank {self._arguments['lora_rank']}).")
        targets = lora.check_targets(targets)
        lora.enable_lora(self, rank, targets, alpha)
        for key, value in (("lora_rank", rank), ("lora_alpha", alpha), ("lora_targets", targets)):
            self._arguments[key] = value
            setattr(self, key, value)

    def merge_lora(self):
        """A copy of this model without LoRA adapters, each folded into its kernel: a plain model to export."""
        if self._arguments["lora_rank"] is None:
            raise ValueError(f"Model {self.name!r} has no LoRA adapters to merge: call `enable_lora` first.")
        config = dict(self.get_config(), lora_rank=None, lora_alpha=None)
        plain = VisionTransformer.from_config(config)
        lora.merge_into(self, plain)
        return plain

    def forward_intermediates(
        self,
        images,
        indices=None,
        return_prefix_tokens=False,
        norm=False,
        stop_early=False,
        output_fmt="NHWC",
        intermediates_only=False,
        return_attention=False,
    ):
        """The outputs of the chosen transformer blocks, run in inference mode (timm's method and contract).

        Args:
            images: a batch the model takes, of any size it accepts (a NaFlex model's: its dict).
            indices: None for every block, an int `n` for the last `n` blocks, or a sequence of block indices
                (negative ones count from the end).
            return_prefix_tokens: bool, with `"NHWC"` or `"NCHW"` each intermediate is the pair `(feature map,
                prefix tokens (batch, num_prefix_tokens, hidden_dim))`.
            norm: bool, apply the final norm to each intermediate.
            stop_early: bool, run no block after the last chosen one (the final features are then its normed
                output).
            output_fmt: `"NHWC"` (keras_vit's default, channels last) or `"NCHW"`, the patch tokens on their grid;
                `"NLC"`, the tokens `(batch, num_prefix_tokens + rows * cols, hidden_dim)`, prefix tokens first.
            intermediates_only: bool, return the intermediates alone.
            return_attention: bool (keras_vit's), also return each chosen block's attention weights
                `(batch, num_heads, tokens, tokens)`, as a last element.

        Returns:
            `(final_features, intermediates)`: the normed tokens after the last block run (the model's features,
            timm's `forward_features`) and one output per chosen block, in block order; or the list alone with
            `intermediates_only`; with `return_attention`, the attention weights' list appended.

        Example:

        >>> model = VisionTransformer(patch_size=8, hidden_dim=16, num_layers=3, num_heads=2, mlp_dim=32,
        ...     input_shape=(32, 24, 3), classes=5)
        >>> final, maps = model.forward_intermediates(np.zeros((2, 32, 24, 3)), indices=2)
        >>> keras.ops.shape(final), [keras.ops.shape(x) for x in maps]
        ((2, 13, 16), [(2, 4, 3, 16), (2, 4, 3, 16)])
        """
        if self._layers_before_the_vit:
            raise ValueError(
                f"Model {self.name!r} applies layers before the ViT (its `input_tensor`'s), which "
                "`forward_intermediates` does not run: apply them to the images first and pass the ViT built "
                "without `input_tensor`."
            )
        chosen = block_indices(indices, self.num_layers)
        validation.one_of("output_fmt", output_fmt, ("NHWC", "NCHW", "NLC"))
        if self._arguments["max_num_patches"] is not None and output_fmt != "NLC":
            raise ValueError("A NaFlex model's images have grids of their own: pass output_fmt='NLC' (padding kept).")
        layers = {layer.name: layer for layer in self.layers}
        final_norm = layers.get("encoder_norm")
        tokens, patch_grid = _embed(layers, images, training=False)
        positions = _positions(layers, patch_grid)
        feature_map = vit_layers.PatchFeatureMap(self.num_prefix_tokens)
        outputs, attention = [], []
        for index in range(max(chosen) + 1 if stop_early else self.num_layers):
            block = layers[f"encoder_block_{index}"]
            options = dict(training=False, **_block_positions(positions, index))
            if return_attention:
                tokens, weights = block(tokens, return_attention_scores=True, **options)
            else:
                tokens = block(tokens, **options)
            if index not in chosen:
                continue
            output = final_norm(tokens) if norm and final_norm is not None else tokens
            if output_fmt != "NLC":
                spatial = feature_map(output, patch_grid=patch_grid)
                if output_fmt == "NCHW":
                    spatial = keras.ops.transpose(spatial, (0, 3, 1, 2))
                output = (spatial, output[:, : self.num_prefix_tokens]) if return_prefix_tokens else spatial
            outputs.append(output)
            if return_attention:
                attention.append(weights)
        result = [outputs] if intermediates_only else [tokens if final_norm is None else final_norm(tokens), outputs]
        if return_attention:
            result.append(attention)
        return result[0] if len(result) == 1 else tuple(result)


def find_layer(model, layer_class):
    """The outermost layer of `layer_class` in `model` (the model itself included), or None."""
    pending = [model]
    while pending:
        layer = pending.pop(0)
        if isinstance(layer, layer_class):
            return layer
        pending.extend(getattr(layer, "layers", ()))
    return None


def find_vit(model):
    """The `VisionTransformer` in `model`: the model itself, or the outermost one nested in it."""
    vit = find_layer(model, VisionTransformer)
    if vit is None:
        raise ValueError(
            f"Model {getattr(model, 'name', model)!r} holds no keras_vit Vision Transformer (a "
            "`keras_vit.VisionTransformer`, nested or not). Pass a model built with keras_vit."
        )
    return vit


def block_indices(indices, num_layers):
    if indices is None:
        return list(range(num_layers))
    if validation.is_int(indices):
        chosen = range(num_layers - indices, num_layers) if 1 <= indices <= num_layers else []
    else:
        chosen = list(indices)
    if not chosen or not all(validation.is_int(index) and -num_layers <= index < num_layers for index in chosen):
        raise ValueError(
            f"`indices` must be None, a number of last blocks in [1, {num_layers}] or block indices in "
            f"[-{num_layers}, {num_layers - 1}]. Received: indices={indices!r}"
        )
    return sorted({int(index) % num_layers for index in chosen})


def _input_shape(input_shape, input_tensor, include_top):
    """The image shape (batch excluded) in the current data format, checked; sides may be None (any size)."""
    data_format = keras.config.image_data_format()
    if input_tensor is not None:
        shape = tuple(input_tensor.shape[1:])
        if input_shape is not None and tuple(input_shape) != shape:
            raise ValueError(
                f"`input_shape` {tuple(input_shape)} does not match the shape of `input_tensor` {shape}. Pass "
                "one or make them agree."
            )
        input_shape = shape
    if input_shape is None:
        size = variants.DEFAULT_INPUT_SHAPE[:2] if include_top else (None, None)
        input_shape = (3, *size) if data_format == "channels_first" else (*size, 3)
    valid = isinstance(input_shape, (tuple, list)) and len(input_shape) == 3
    if valid:
        height, width, channels = variants.channels_last(tuple(input_shape), data_format)
        valid = channels is not None and all(
            size is None or (validation.static_dim(size) == size and size >= 1) for size in (height, width, channels)
        )
    if not valid:
        raise ValueError(
            "`input_shape` must be (height, width, channels) ((channels, height, width) under channels_first) "
            f"with channels >= 1 and each side >= 1 or None. Received: input_shape={input_shape!r}"
        )
    # Python ints (a shape from a NumPy array holds NumPy's), so that the config stays plain JSON.
    return tuple(None if size is None else int(size) for size in input_shape)


def _checked_config(config):
    """The constructor's arguments, checked and normalised (the pooling alias resolved, the grid rule applied)."""
    config["patch_size"] = validation.pair("patch_size", config["patch_size"])
    for key in ("hidden_dim", "num_layers", "num_heads", "mlp_dim", "resnet_width"):
        config[key] = validation.positive_int(key, config[key])
    if config["include_top"] is True:
        # Keras's applications ignore `classes` without a head.
        config["classes"] = validation.positive_int("classes", config["classes"])
    for key in ("representation_size", "lora_rank"):
        if config[key] is not None:
            config[key] = validation.positive_int(key, config[key])
    for key in ("dropout_rate", "attention_dropout_rate", "drop_path_rate", "patch_dropout_rate"):
        config[key] = validation.rate(key, config[key])
    for key in ("include_top", "include_preprocessing", "return_sequence"):
        validation.boolean(key, config[key])
    validation.one_of("mlp_activation", config["mlp_activation"], vit_layers.MLP_ACTIVATIONS)
    validation.one_of("normalization", config["normalization"], transformer.NORMALIZATIONS)
    config["num_register_tokens"] = validation.non_negative_int("num_register_tokens", config["num_register_tokens"])
    config["layer_norm_epsilon"] = float(config["layer_norm_epsilon"])
    if config["layer_scale_init"] is not None:
        config["layer_scale_init"] = float(config["layer_scale_init"])
    if config["resnet_stages"] is not None:
        config["resnet_stages"] = tuple(config["resnet_stages"])
    config["lora_targets"] = lora.check_targets(config["lora_targets"])
    pooling = {"avg": "gap"}.get(config["pooling"], config["pooling"])
    if pooling is None and config["include_top"]:
        pooling = "token"  # the published classifiers read the class token
    if pooling not in (None, *POOLING_MODES):
        raise ValueError(
            f"`pooling` must be one of {POOLING_MODES}, 'avg' (an alias of 'gap') or None. Received: "
            f"pooling={config['pooling']!r}"
        )
    config["pooling"] = pooling
    if pooling == "token" and not config["class_token"]:
        raise ValueError("`pooling='token'` reads the class token: pass class_token=True or another pooling.")
    if config["distillation_token"] and (
        config["fc_norm"] or config["representation_size"] or not config["class_token"]
    ):
        raise ValueError("`distillation_token=True` (DeiT) needs class_token=True, no fc_norm, no representation_size.")
    if config["fc_norm"] and (pooling is None or not config["final_norm"]):
        raise ValueError(
            f"`fc_norm=True` moves the final norm after the pooling: it needs a pooling and final_norm=True. "
            f"Received: pooling={pooling!r}, final_norm={config['final_norm']}"
        )
    if not config["patch_bias"] and config["resnet_stages"] is not None:
        raise ValueError("`patch_bias=False` is for plain ViTs: a hybrid's patch projection keeps its bias.")
    if config["patch_dropout_rate"] and pooling is None and not config["return_sequence"]:
        raise ValueError(
            "`patch_dropout_rate` drops patch tokens, so the feature map cannot be laid out: pass a pooling, "
            f"return_sequence=True or patch_dropout_rate=0. Received: patch_dropout_rate={config['patch_dropout_rate']}"
        )
    if config["representation_size"] is not None and pooling is None:
        raise ValueError("`representation_size` (pre_logits) needs pooled features: pass a `pooling`.")
    if config["return_sequence"] and (config["include_top"] or pooling is not None):
        raise ValueError(
            "`return_sequence=True` needs include_top=False and pooling=None. Received: "
            f"include_top={config['include_top']}, pooling={pooling!r}"
        )
    if config["rope"] is not None:
        if not isinstance(config["rope"], dict):
            raise ValueError(
                f"`rope` must be None or a dict of RotaryEmbedding arguments. Received: rope={config['rope']!r}"
            )
        config["rope"] = dict(config["rope"])
        if config["patch_dropout_rate"]:
            raise ValueError(
                "`patch_dropout_rate` with `rope` is not supported: the dropped tokens' rotations would shift."
            )
    for key in ("position_embedding", "attention_norm", "mlp_norm", "pooling_include_prefix"):
        validation.boolean(key, config[key])
    if config["pooling_heads"] is not None or config["pooling_include_prefix"]:
        if pooling != "map":
            raise ValueError(
                f"`pooling_heads` and `pooling_include_prefix` are the MAP head's. Received: pooling={pooling!r}"
            )
        if config["pooling_heads"] is not None:
            config["pooling_heads"] = validation.positive_int("pooling_heads", config["pooling_heads"])
    if config["max_num_patches"] is not None:
        config["max_num_patches"] = validation.positive_int("max_num_patches", config["max_num_patches"])
        _check_naflex(config)
    config["embedding_grid"] = _embedding_grid(config)
    return config


def _check_naflex(config):
    """Refuses, in one line each, what a NaFlex model (`max_num_patches`) cannot have."""
    refused = (
        (config["resnet_stages"] is not None, "a hybrid's ResNet (resnet_stages): it convolves whole images"),
        (config["patch_dropout_rate"], "patch_dropout_rate: the dropped tokens would leave the padding mask"),
        (
            config["pooling"] is None and not config["return_sequence"],
            "a feature map (pooling=None): its images have grids of their own; pass a pooling or return_sequence",
        ),
        (
            (config["rope"] or {}).get("rope_type") == "mixed",
            "rope_type='mixed': its per-block tables hold one grid for the whole batch",
        ),
    )
    for present, what in refused:
        if present:
            raise ValueError(f"A NaFlex model (max_num_patches={config['max_num_patches']}) cannot have {what}.")


def _embedding_grid(config):
    """The position embedding's grid: a fixed input size's, else `embedding_grid`, else a 224 x 224 image's."""
    height, width, _ = variants.channels_last(config["input_shape"], keras.config.image_data_format())
    pixels = resnet.pixels_per_token(config["patch_size"], config["resnet_stages"])
    # A hybrid's "same"-padded ResNet gives the same ceil(size / token) grid as a plain ViT's padded patches.
    grid = vit_layers.patch_grid((height, width), pixels)
    if None not in grid:
        return grid
    if config["embedding_grid"] is not None:
        return validation.pair("embedding_grid", config["embedding_grid"])
    return vit_layers.patch_grid(variants.DEFAULT_INPUT_SHAPE[:2], pixels)


def _config_and_checkpoint(arguments, weights):
    """`(config, checkpoint)`: the checked arguments (with the architecture of the registry checkpoint a tag `weights`
    names), and the checkpoint `weights` names, or None."""
    if weights is None:
        return _checked_config(arguments), None
    # The weights machinery sits above the models.
    from keras_vit.pretrained import loader

    if isinstance(weights, str):
        arguments = loader.with_checkpoint_options(arguments, weights, inspect.signature(VisionTransformer).parameters)
    config = _checked_config(arguments)
    return loader.prepare(config, weights, variant=variants.variant_of(config))


def _model_inputs(config, input_tensor):
    """`(model_inputs, images)`: the model's inputs, and the tensor (a NaFlex dict) the ViT's own layers start from."""
    input_shape, length = config["input_shape"], config["max_num_patches"]
    if length is not None:
        if input_tensor is not None:
            raise ValueError("A NaFlex model (`max_num_patches`) takes its dict input: it has no `input_tensor`.")
        channels = variants.channels_last(input_shape, keras.config.image_data_format())[2]
        features = config["patch_size"][0] * config["patch_size"][1] * channels
        inputs = {
            "patches": keras.Input((length, features), name="patches"),
            "spatial_shapes": keras.Input((2,), dtype="int32", name="spatial_shapes"),
            "mask": keras.Input((length,), dtype="bool", name="mask"),
        }
        return inputs, inputs
    if input_tensor is None:
        images = keras.Input(shape=input_shape, name="images")
        return images, images
    images = input_tensor
    if not keras.backend.is_keras_tensor(input_tensor):
        images = keras.Input(tensor=input_tensor, shape=input_shape, name="images")
    sources = keras.utils.get_source_inputs(input_tensor)
    return (sources[0] if len(sources) == 1 else sources), images


def _layers(config, dtype):
    """The layers up to the final norm, by name (the names the weight converters and saved weights use)."""
    layers = {}
    if config["include_preprocessing"]:
        # Not "rescaling": Keras names a user's first `Rescaling` so, and an `input_tensor` may come from one.
        scale, offset = preprocessing.scale_and_offset(config["pixel_mean"], config["pixel_std"])
        layers["pixel_scaling"] = vit_layers.PixelScaling(scale, offset=offset, dtype=dtype, name="pixel_scaling")
    if keras.config.image_data_format() == "channels_first":
        layers["channels_last"] = keras.layers.Permute((2, 3, 1), dtype=dtype, name="channels_last")
    if config["resnet_stages"] is None:
        layers["patch_embedding"] = vit_layers.PatchEmbedding(
            config["hidden_dim"],
            config["patch_size"],
            use_bias=config["patch_bias"],
            dtype=dtype,
            name="patch_embedding",
        )
    else:
        layers["patch_embedding"] = resnet.HybridPatchEmbedding(
            config["hidden_dim"],
            config["patch_size"],
            config["resnet_stages"],
            width=config["resnet_width"],
            dtype=dtype,
            name="patch_embedding",
        )
    layers["patch_tokens"] = vit_layers.PatchTokens(dtype=dtype, name="patch_tokens")
    epsilon, normalization = config["layer_norm_epsilon"], config["normalization"]
    if config["patch_norm"]:
        layers["patch_norm"] = transformer.normalization_layer(normalization, epsilon, dtype, "patch_norm")
    if config["class_token"]:
        layers["class_token"] = vit_layers.ClassToken(dtype=dtype, name="class_token")
    if config["num_register_tokens"]:
        layers["register_tokens"] = vit_layers.ClassToken(
            config["num_register_tokens"],
            initializer=keras.initializers.RandomNormal(stddev=1e-6),  # timm's: distinct registers from the start
            dtype=dtype,
            name="register_tokens",
        )
    if config["distillation_token"]:
        layers["distillation_token"] = vit_layers.ClassToken(
            initializer=keras.initializers.TruncatedNormal(stddev=0.02), dtype=dtype, name="distillation_token"
        )
    num_prefix_tokens = _num_prefix_tokens(config)
    layers.update(_position_layers(config, num_prefix_tokens, dtype))
    layers["embedding_dropout"] = keras.layers.Dropout(config["dropout_rate"], dtype=dtype, name="embedding_dropout")
    if config["patch_dropout_rate"]:
        layers["patch_dropout"] = vit_layers.PatchDropout(
            config["patch_dropout_rate"], num_prefix_tokens=num_prefix_tokens, dtype=dtype, name="patch_dropout"
        )
    if config["pre_norm"]:
        layers["norm_pre"] = transformer.normalization_layer(normalization, epsilon, dtype, "norm_pre")
    num_layers = config["num_layers"]
    for index in range(num_layers):
        layers[f"encoder_block_{index}"] = vit_layers.TransformerBlock(
            config["num_heads"],
            config["mlp_dim"],
            dropout_rate=config["dropout_rate"],
            attention_dropout_rate=config["attention_dropout_rate"],
            # Stochastic depth rises linearly with depth (Huang et al. 2016; timm).
            drop_path_rate=config["drop_path_rate"] * index / max(num_layers - 1, 1),
            activation=config["mlp_activation"],
            remat=config["remat"],
            layer_norm_epsilon=epsilon,
            layer_scale_init=config["layer_scale_init"],
            qkv_bias=config["qkv_bias"],
            proj_bias=config["proj_bias"],
            normalization=normalization,
            attention_norm=config["attention_norm"],
            mlp_norm=config["mlp_norm"],
            dtype=dtype,
            name=f"encoder_block_{index}",
        )
    if config["final_norm"] and not config["fc_norm"]:
        layers["encoder_norm"] = transformer.normalization_layer(normalization, epsilon, dtype, "encoder_norm")
    return layers


def _position_layers(config, num_prefix_tokens, dtype):
    """The position scheme's layers: a learned table (`position_embedding`), a `rotary_embedding`, both or none."""
    positions = {}
    if config["position_embedding"]:
        positions["position_embedding"] = vit_layers.PositionEmbedding(
            config["embedding_grid"],
            num_prefix_tokens=0 if config["no_embed_class"] else num_prefix_tokens,
            resample_method=config["resample_method"],
            resample_antialias=config["resample_antialias"],
            dtype=dtype,
            name="position_embedding",
        )
    if config["rope"] is not None:
        mixed = config["rope"].get("rope_type") == "mixed"
        positions["rotary_embedding"] = vit_layers.RotaryEmbedding(
            config["hidden_dim"] // config["num_heads"],
            config["num_heads"],
            num_prefix_tokens=num_prefix_tokens,
            **dict(config["rope"], depth=config["num_layers"] if mixed else None),
            dtype=dtype,
            name="rotary_embedding",
        )
    return positions


def _num_prefix_tokens(config):
    return int(config["class_token"]) + int(config["distillation_token"]) + config["num_register_tokens"]


def _embed(layers, images, training=None):
    """Pixels to the first block's tokens, and the patch grid (of a NaFlex batch: its dict, with the `padding_mask`
    of every token added): for the model's graph and `forward_intermediates`."""
    naflex = isinstance(images, dict)
    if naflex:
        patch_grid = dict(images)
        x = layers["patch_embedding"](_scaled_patches(layers, images["patches"]))
        grid = {"spatial_shapes": images["spatial_shapes"]}
    else:
        x = images
        for name in ("pixel_scaling", "channels_last"):
            if name in layers:
                x = layers[name](x)
        patch_grid = layers["patch_embedding"](x)
        x = layers["patch_tokens"](patch_grid)
        grid = {"patch_grid": patch_grid}
    if "patch_norm" in layers:
        x = layers["patch_norm"](x)
    positions = layers.get("position_embedding")
    if positions is not None and not positions.num_prefix_tokens:
        # timm's `no_embed_class`: the prefix tokens join after the position embedding.
        x = positions(x, **grid)
    # Prepended last to first: [class token, distillation token, registers, patches].
    prefix = 0
    for name in ("register_tokens", "distillation_token", "class_token"):
        if name in layers:
            x = layers[name](x)
            prefix += layers[name].num_tokens
    if positions is not None and positions.num_prefix_tokens:
        x = positions(x, **grid)
    if naflex:
        # The prefix tokens are always valid.
        mask = ops.cast(images["mask"], "bool")
        patch_grid["padding_mask"] = ops.concatenate([ops.ones_like(mask[:, :1])] * prefix + [mask], axis=1)
    # No `training` in the model's graph: Keras 3.16 keeps an explicit `training=None` there as inference.
    mode = {} if training is None else {"training": training}
    x = layers["embedding_dropout"](x, **mode)
    if "patch_dropout" in layers:
        # After the position embedding and its dropout, as timm does.
        x = layers["patch_dropout"](x, **mode)
    if "norm_pre" in layers:
        x = layers["norm_pre"](x)
    return x, patch_grid


def _scaled_patches(layers, patches):
    """A NaFlex batch's patches, scaled per channel as images are (each patch's pixels reshaped out, channels last)."""
    if "pixel_scaling" not in layers:
        return patches
    length, features = patches.shape[1], patches.shape[2]
    pixels = layers["patch_embedding"].patch_size[0] * layers["patch_embedding"].patch_size[1]
    x = ops.reshape(patches, (-1, length, pixels, features // pixels))
    if "channels_last" in layers:
        # Under channels_first the scaling's per-channel vector broadcasts over axis 1.
        x = layers["channels_last"](layers["pixel_scaling"](ops.transpose(x, (0, 3, 1, 2))))
    else:
        x = layers["pixel_scaling"](x)
    return ops.reshape(x, (-1, length, features))


def _positions(layers, patch_grid):
    """What the position scheme hands every block: `(rotation, padding_mask)`, a `RotaryEmbedding`'s rotation of the
    patch grid (of each image's own in a NaFlex batch) or None, and a NaFlex batch's padding mask or None."""
    rotary = layers.get("rotary_embedding")
    if not isinstance(patch_grid, dict):
        return (None if rotary is None else rotary(patch_grid)), None
    rotation = None if rotary is None else rotary(patch_grid["mask"], spatial_shapes=patch_grid["spatial_shapes"])
    return rotation, patch_grid["padding_mask"]


def _block_positions(positions, index):
    """The keyword arguments that give block `index` its positions (learned per-block RoPE: its own row) and the
    padding mask."""
    rotation, padding_mask = positions
    options = {} if padding_mask is None else {"padding_mask": padding_mask}
    if rotation is not None:
        cos, sin = rotation
        # Per block: a learned table's first axis (a NaFlex batch's is per image).
        if padding_mask is None and cos.shape[0] not in (1, None):
            cos, sin = cos[index : index + 1, ...], sin[index : index + 1, ...]
        options["positions"] = (cos, sin)
    return options


def _top(config, x, patch_grid, dtype):
    """What sits on the normed tokens `x`: the pooling, `pre_logits` and head, or the feature map."""
    num_prefix_tokens = _num_prefix_tokens(config)
    distilled = config["distillation_token"] and config["pooling"] == "token"
    tokens = x
    masks = {"padding_mask": patch_grid["padding_mask"]} if isinstance(patch_grid, dict) else {}
    if config["pooling"] == "map":
        x = vit_layers.AttentionPooling(
            config["pooling_heads"] or config["num_heads"],
            config["mlp_dim"],
            0 if config["pooling_include_prefix"] else num_prefix_tokens,
            activation=config["mlp_activation"],
            epsilon=config["layer_norm_epsilon"],
            dtype=dtype,
            name="pooling",
        )(x, **masks)
    elif distilled:
        # timm's `pre_logits` of DeiT: the mean of the class and distillation tokens.
        x = keras.layers.Average(dtype=dtype, name="pooling")([tokens[:, 0], tokens[:, 1]])
    elif config["pooling"] is not None:
        x = vit_layers.TokenPooling(config["pooling"], num_prefix_tokens, dtype=dtype, name="pooling")(x, **masks)
    if config["pooling"] is not None:
        if config["fc_norm"]:
            epsilon, normalization = config["layer_norm_epsilon"], config["normalization"]
            x = transformer.normalization_layer(normalization, epsilon, dtype, "fc_norm")(x)
        if config["representation_size"] is not None:
            x = keras.layers.Dense(config["representation_size"], activation="tanh", dtype=dtype, name="pre_logits")(x)
    elif not config["return_sequence"]:
        feature_map = vit_layers.PatchFeatureMap(
            num_prefix_tokens, grid_size=config["embedding_grid"], dtype=dtype, name="feature_map"
        )
        x = feature_map(x, patch_grid=patch_grid)
        if keras.config.image_data_format() == "channels_first":
            x = keras.layers.Permute((3, 1, 2), dtype=dtype, name="channels_first")(x)
    if config["include_top"]:
        # Zero-initialised (paper, "Fine-tuning and higher resolution") and float32 under mixed precision, unless
        # the model was quantized with it.
        head_dtype = dtype
        if isinstance(head_dtype, dict):
            head_dtype = keras.dtype_policies.deserialize(head_dtype)
        quantized = isinstance(head_dtype, keras.dtype_policies.DTypePolicyMap)
        if not quantized or head_dtype["head"].quantization_mode is None:
            head_dtype = "float32"
        head = keras.layers.Dense(config["classes"], kernel_initializer="zeros", dtype=head_dtype, name="head")
        if distilled:
            # DeiT at inference: the class token's and the distillation token's heads averaged.
            head_dist = keras.layers.Dense(
                config["classes"], kernel_initializer="zeros", dtype=head_dtype, name="head_dist"
            )
            logits = [head(tokens[:, 0]), head_dist(tokens[:, 1])]
            x = keras.layers.Average(dtype="float32", name="distilled_logits")(logits)
        else:
            x = head(x)
        if config["classifier_activation"] is not None:
            x = keras.layers.Activation(config["classifier_activation"], dtype="float32", name="predictions")(x)
    return x
