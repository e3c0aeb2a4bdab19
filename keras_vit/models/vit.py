"""The Vision Transformer: `VisionTransformer`, a functional `keras.Model` that keeps its arguments as its config.

As keras-hub's backbones do, `__init__` builds the graph from `keras.Input` through the layers of
`keras_vit.layers` (pixel scaling, patch embedding, class token, position embedding, transformer blocks, final
norm, then the pooling, `pre_logits` and head, or the feature map) and `get_config` returns the constructor
arguments, so `from_config` (and `keras.saving.load_model`) rebuilds the same model and every other part of the
library reads the architecture from the model's attributes. `forward_intermediates` returns what the blocks
produce, as timm's method of the same name does.
"""

import keras

from keras_vit import layers as vit_layers
from keras_vit.layers import resnet
from keras_vit.models import preprocessing, variants
from keras_vit.utils import keras_compat, validation

OUTPUT_FORMATS = ("NHWC", "NLC")


@keras.saving.register_keras_serializable(package="keras_vit")
class VisionTransformer(keras.Model):
    """A Vision Transformer of any size, optionally with weights.

    Raw pixels in [0, 255] are scaled to [-1, 1] (`include_preprocessing`),
    cut into patches (sides padded up to a multiple of the patch), embedded,
    prefixed with a class token, given position embeddings (resampled at call
    time to the images' patch grid) and passed through `num_layers`
    pre-LayerNorm transformer blocks and a final LayerNorm. On top sit the
    pooling, the optional `pre_logits` layer and the head, or, without a
    head and pooling, the feature map (or the token sequence). The named
    constructors (`keras_vit.ViTB16`, ...) build the published sizes.

    `get_config()` is the constructor's arguments (`input_tensor` and
    `weights` aside), each also kept as an attribute of the model.

    Args:
        patch_size: int or `(height, width)`, the patch size.
        hidden_dim: int, the token size.
        num_layers: int, the number of transformer blocks.
        num_heads: int, the attention heads per block.
        mlp_dim: int, the hidden size of each MLP block.
        include_top: bool, whether to add the classification head.
            Defaults to `True`.
        include_preprocessing: bool, whether the model scales raw pixels in
            [0, 255] to [-1, 1] itself (a `PixelScaling` layer, which is a
            `keras.layers.Rescaling`). With `False` it
            takes pixels already scaled by
            `keras_vit.models.preprocessing.scale_pixels`. Defaults to `True`.
        weights: `None` (random initialisation, the default); a local
            `.npz` or `.safetensors` checkpoint or `save_pretrained` folder;
            or `"hf://org/repo[/file.safetensors][@revision]"`: a checkpoint
            of this same architecture (its position embedding is resampled
            to the grid of `input_shape`). Checkpoint tags and `"imagenet"`
            name published variants (`ViTB16(weights="imagenet")`).
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under
            `keras.config.image_data_format() == "channels_first"`); height
            and width may be None (any size) and need not be multiples of the
            patch. Defaults to `(224, 224, 3)` with a head and
            `(None, None, 3)` without.
        pooling: `"token"` (class token), `"gap"` (mean of the patch tokens
            after the final norm; `"avg"` is accepted as an alias), `"max"`
            (their maximum) or `None`. With `include_top=True`, `None` means
            `"token"`; with `include_top=False`, `None` returns the features.
        classes: int, the number of classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation (`"softmax"`, `None`
            for logits, ...). Defaults to `"softmax"`.
        return_sequence: bool, with `include_top=False` and `pooling=None`,
            return the token sequence `(batch, 1 + rows * cols, hidden_dim)`
            (class token first) instead of the feature map
            `(batch, rows, cols, hidden_dim)`. Defaults to `False`.
        representation_size: optional int; adds the `pre_logits`
            `Dense(representation_size, activation="tanh")` of the original
            ImageNet-21k checkpoints after the pooling.
        dropout_rate: float, dropout on the embeddings, after attention and
            in the MLP blocks. Defaults to `0.0`.
        attention_dropout_rate: float, dropout on attention weights.
            Defaults to `0.0`.
        drop_path_rate: float, the stochastic-depth rate of the last block;
            it rises linearly from 0 at the first. Defaults to `0.0`.
        gelu_approximate: bool, tanh-approximate GELU as in the official JAX
            code, instead of exact GELU. Defaults to `False`.
        remat: bool, rematerialize every transformer block: its activations
            are recomputed in the backward pass instead of kept, which saves
            training memory for one more forward pass of the blocks (timm's
            `set_grad_checkpointing`). Outputs and gradients are unchanged.
            Defaults to `False`.
        patch_dropout_rate: float in `[0, 1)`, PatchDropout (Liu et al.
            2022) in training: each image keeps a random
            `max(1, floor((1 - rate) * N))` of its `N` patch tokens after the
            position embedding (the class token always), so the blocks run
            on fewer tokens; inference is unchanged. With `0` (the default)
            the model has no such layer. Not with the feature-map output,
            which needs every patch.
        resample_method: how the position embedding follows images of
            another size (and a checkpoint's grid is moved to the model's),
            one of `keras_vit.layers.resampling.RESAMPLING_METHODS`. Defaults to
            `"official"`.
        resample_antialias: bool, antialias when shrinking (half-pixel
            methods). Defaults to `False`.
        embedding_grid: optional `(rows, cols)` the position embedding is
            stored at when `input_shape` leaves the size open. Defaults to
            the grid of a 224 x 224 image.
        resnet_stages: None for a plain ViT; for a hybrid (paper section
            3.1), the units per stage of its ResNet (`()` for the root only,
            `(3, 4, 9)` for the paper's R50+B/16): the patches are then
            `patch_size` patches of the ResNet's feature map
            (`keras_vit.layers.resnet.HybridPatchEmbedding`), each covering
            `patch_size * output_stride(resnet_stages)` pixels.
        resnet_width: int, the hybrid ResNet's root width (a multiple of 32).
            Defaults to `64`, the published hybrids'.
        dtype: optional dtype policy of every layer (the head stays
            float32); defaults to Keras's global policy.
        name: the model's name.

    Example:

    A backbone for images of any size, pooled to one vector per image:

    >>> backbone = VisionTransformer(
    ...     patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64,
    ...     include_top=False, pooling="gap")
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
        gelu_approximate=False,
        remat=False,
        patch_dropout_rate=0.0,
        resample_method="official",
        resample_antialias=False,
        embedding_grid=None,
        resnet_stages=None,
        resnet_width=64,
        dtype=None,
        name="vision_transformer",
        **kwargs,
    ):
        config = _checked_config(
            patch_size=patch_size,
            hidden_dim=hidden_dim,
            num_layers=num_layers,
            num_heads=num_heads,
            mlp_dim=mlp_dim,
            include_top=include_top,
            include_preprocessing=include_preprocessing,
            input_shape=variants.resolve_input_shape(
                input_shape, input_tensor, include_top is True, keras.config.image_data_format()
            ),
            pooling=pooling,
            classes=classes,
            classifier_activation=classifier_activation,
            return_sequence=return_sequence,
            representation_size=representation_size,
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
            drop_path_rate=drop_path_rate,
            gelu_approximate=gelu_approximate,
            remat=remat,
            patch_dropout_rate=patch_dropout_rate,
            resample_method=resample_method,
            resample_antialias=resample_antialias,
            embedding_grid=embedding_grid,
            resnet_stages=resnet_stages,
            resnet_width=resnet_width,
        )
        checkpoint = None
        if weights is not None:
            # The weights machinery sits above the models: imported only when weights are asked for.
            from keras_vit.pretrained import loader

            config, checkpoint = loader.prepare(config, weights, variant=variants.variant_of(config))
        # The graph is laid out in the global image data format of this moment (also when a saved model reloads).
        channels_first = keras.config.image_data_format() == "channels_first"
        inputs, images, outputs = _graph(config, input_tensor, dtype)
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, name=name, **kwargs)
        # An `input_tensor` computed by other layers puts them before the ViT's own: `forward_intermediates`
        # cannot run them (they are no part of the config either).
        self._layers_before_the_vit = all(images is not tensor for tensor in self.inputs)
        self._arguments = config
        self.channels_first = channels_first
        for key, value in config.items():
            if key != "input_shape":  # `keras.Model.input_shape` already answers it, batch included
                setattr(self, key, value)
        if checkpoint is not None:
            checkpoint.load_into(self)

    @property
    def image_shape(self):
        """`(height, width, channels)` of the images the model takes, channels last; sizes may be None."""
        data_format = "channels_first" if self.channels_first else "channels_last"
        return variants.channels_last(self._arguments["input_shape"], data_format)

    @property
    def default_image_size(self):
        """`(height, width)` to feed the model: its input size, or where that is open, the size of the images
        whose patch grid is the position embedding's."""
        height, width, _ = self.image_shape
        if None not in (height, width):
            return (height, width)
        pixels = self.pixels_per_token
        return (self.embedding_grid[0] * pixels[0], self.embedding_grid[1] * pixels[1])

    @property
    def pixels_per_token(self):
        """`(height, width)`: image pixels per token side (the patch, times a hybrid ResNet's stride)."""
        return resnet.pixels_per_token(self.patch_size, self.resnet_stages)

    def get_config(self):
        # The policy is saved, as a functional model saves each layer's: a model reloads with the precision it
        # had, and a quantized one with its quantized layers (keras-hub's backbones save a `DTypePolicyMap` too).
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

    def forward_intermediates(self, images, indices=None, output_fmt="NHWC", norm=False, return_attention=False):
        """The outputs of the chosen transformer blocks, as timm's method of the same name returns them.

        The model's own layers run eagerly in inference mode; the model's call itself is unchanged (it keeps
        the fused attention path, which has no attention weights to return).

        Args:
            images: a batch the model takes (raw [0, 255] pixels when it
                includes preprocessing), of any size it accepts.
            indices: None for every block; an int `n` for the last `n`
                blocks; or a sequence of block indices (negative ones count
                from the end). Defaults to None.
            output_fmt: `"NHWC"`: the patch tokens laid out on the patch
                grid, `(batch, rows, cols, hidden_dim)`; `"NLC"`: the token
                sequence `(batch, 1 + rows * cols, hidden_dim)`, class token
                first. Defaults to `"NHWC"`.
            norm: bool, apply the final `encoder_norm` to each output.
                Defaults to `False`.
            return_attention: bool, also return each chosen block's
                attention weights `(batch, num_heads, tokens, tokens)`.
                Defaults to `False`.

        Returns:
            A list with one tensor per chosen block, in block order; with
            `return_attention`, the tuple `(outputs, attention_weights)`.

        Example:

        >>> model = VisionTransformer(patch_size=8, hidden_dim=16, num_layers=3, num_heads=2, mlp_dim=32,
        ...     input_shape=(32, 24, 3), classes=5)
        >>> [keras.ops.shape(x) for x in model.forward_intermediates(np.zeros((2, 32, 24, 3)), indices=2)]
        [(2, 4, 3, 16), (2, 4, 3, 16)]
        """
        if self._layers_before_the_vit:
            raise ValueError(
                f"Model {self.name!r} applies the layers that computed its `input_tensor` before the ViT, which "
                "`forward_intermediates` does not run: apply them to the images first and pass the ViT built "
                "without `input_tensor` (`VisionTransformer.from_config(model.get_config())` with the weights)."
            )
        chosen = block_indices(indices, self.num_layers)
        output_fmt = validation.one_of("output_fmt", output_fmt, OUTPUT_FORMATS)
        layers = {layer.name: layer for layer in self.layers}
        tokens, patch_grid = _embed(layers, images, training=False)
        feature_map = vit_layers.PatchFeatureMap()
        outputs, attention = [], []
        for index in range(max(chosen) + 1):
            block = layers[f"encoder_block_{index}"]
            if return_attention:
                tokens, weights = block(tokens, training=False, return_attention_scores=True)
            else:
                tokens = block(tokens, training=False)
            if index not in chosen:
                continue
            output = layers["encoder_norm"](tokens) if norm else tokens
            if output_fmt == "NHWC":
                output = feature_map(output, patch_grid=patch_grid)
            outputs.append(output)
            if return_attention:
                attention.append(weights)
        return (outputs, attention) if return_attention else outputs


def block_indices(indices, num_layers):
    """The sorted block indices `indices` chooses (see `VisionTransformer.forward_intermediates`)."""
    if indices is None:
        return list(range(num_layers))
    if validation.is_int(indices):
        if not 1 <= indices <= num_layers:
            raise ValueError(
                f"An int `indices` is the number of last blocks, in [1, {num_layers}]. Received: indices={indices!r}"
            )
        return list(range(num_layers - int(indices), num_layers))
    chosen = list(indices)
    if not chosen or not all(validation.is_int(index) and -num_layers <= index < num_layers for index in chosen):
        raise ValueError(
            f"`indices` must be None, an int, or block indices in [-{num_layers}, {num_layers - 1}] for this "
            f"{num_layers}-block model. Received: indices={indices!r}"
        )
    return sorted({int(index) % num_layers for index in chosen})


def find_vit(model):
    """The `VisionTransformer` in `model`: the model itself, or one nested in it at any depth (outermost first).

    Raises:
        ValueError: `model` holds no `VisionTransformer`.
    """
    pending = [model]
    while pending:
        layer = pending.pop(0)
        if isinstance(layer, VisionTransformer):
            return layer
        pending.extend(getattr(layer, "layers", ()))
    raise ValueError(
        f"Model {getattr(model, 'name', model)!r} holds no keras_vit Vision Transformer (a "
        "`keras_vit.VisionTransformer`, nested or not). Pass a model built with keras_vit."
    )


def grid_size(config):
    """The patch grid the position embedding of a checked `config` is stored at: that of a fixed input size
    (padding included), else `embedding_grid`, else that of a 224 x 224 image."""
    height, width, _ = variants.channels_last(config["input_shape"], keras.config.image_data_format())
    pixels = resnet.pixels_per_token(config["patch_size"], config["resnet_stages"])
    # A hybrid's "same"-padded ResNet and padded patches give the same ceil(size / token) grid as a plain ViT.
    grid = vit_layers.patch_grid((height, width), pixels)
    if None not in grid:
        return grid
    return validation.pair("embedding_grid", config["embedding_grid"] or variants.default_grid(pixels))


def _checked_config(**config):
    """The constructor's arguments, checked and normalised (the pooling alias resolved, the grid rule applied)."""
    config["patch_size"] = validation.pair("patch_size", config["patch_size"])
    for key in ("hidden_dim", "num_layers", "num_heads", "mlp_dim", "resnet_width"):
        config[key] = validation.positive_int(key, config[key])
    if config["include_top"] is True:
        # Keras's applications ignore `classes` without a head; with one it must be a count.
        config["classes"] = validation.positive_int("classes", config["classes"])
    if config["representation_size"] is not None:
        config["representation_size"] = validation.positive_int("representation_size", config["representation_size"])
    for key in ("dropout_rate", "attention_dropout_rate", "drop_path_rate", "patch_dropout_rate"):
        config[key] = validation.rate(key, config[key])
    for key in ("include_top", "include_preprocessing", "return_sequence", "remat"):
        validation.boolean(key, config[key])
    if config["resnet_stages"] is not None:
        config["resnet_stages"] = tuple(config["resnet_stages"])
    config["pooling"] = variants.resolve_pooling(config["pooling"], config["include_top"])
    _check_outputs(config)
    config["embedding_grid"] = grid_size(config)
    return config


def _check_outputs(config):
    pooling, return_sequence = config["pooling"], config["return_sequence"]
    if config["patch_dropout_rate"] and pooling is None and not return_sequence:
        raise ValueError(
            "`patch_dropout_rate` drops patch tokens in training, so the feature map (include_top=False, "
            "pooling=None) could not be laid out: pass a pooling, return_sequence=True or patch_dropout_rate=0. "
            f"Received: patch_dropout_rate={config['patch_dropout_rate']}"
        )
    if not config["include_top"] and config["representation_size"] is not None and pooling is None:
        raise ValueError(
            "`representation_size` (pre_logits) applies to pooled features: pass "
            "`pooling='token'`, `'gap'` or `'max'` with include_top=False."
        )
    if return_sequence and (config["include_top"] or pooling is not None):
        raise ValueError(
            "`return_sequence=True` returns the token sequence of a model without head and pooling: pass "
            f"include_top=False and pooling=None. Received: include_top={config['include_top']}, "
            f"pooling={pooling!r}"
        )


def _layers(config, dtype):
    """The layers up to the final norm, by name (the names the weight converters and saved weights use)."""
    layers = {}
    if config["include_preprocessing"]:
        # [0, 255] -> [-1, 1], the scaling every published ViT checkpoint was trained with.
        # Not "rescaling": Keras names a user's first `Rescaling` so, and an `input_tensor` may come from one.
        layers["pixel_scaling"] = vit_layers.PixelScaling(
            preprocessing.SCALE, offset=preprocessing.OFFSET, dtype=dtype, name="pixel_scaling"
        )
    if keras.config.image_data_format() == "channels_first":
        layers["channels_last"] = keras.layers.Permute((2, 3, 1), dtype=dtype, name="channels_last")
    if config["resnet_stages"] is None:
        embedding = vit_layers.PatchEmbedding(
            config["hidden_dim"], config["patch_size"], dtype=dtype, name="patch_embedding"
        )
    else:
        embedding = resnet.HybridPatchEmbedding(
            config["hidden_dim"],
            config["patch_size"],
            config["resnet_stages"],
            width=config["resnet_width"],
            dtype=dtype,
            name="patch_embedding",
        )
    layers["patch_embedding"] = embedding
    layers["patch_tokens"] = vit_layers.PatchTokens(dtype=dtype, name="patch_tokens")
    layers["class_token"] = vit_layers.ClassToken(dtype=dtype, name="class_token")
    layers["position_embedding"] = vit_layers.PositionEmbedding(
        config["embedding_grid"],
        resample_method=config["resample_method"],
        resample_antialias=config["resample_antialias"],
        dtype=dtype,
        name="position_embedding",
    )
    layers["embedding_dropout"] = keras.layers.Dropout(config["dropout_rate"], dtype=dtype, name="embedding_dropout")
    if config["patch_dropout_rate"]:
        # After the position embedding and its dropout, as timm does; no layer at all when off.
        layers["patch_dropout"] = vit_layers.PatchDropout(
            config["patch_dropout_rate"], dtype=dtype, name="patch_dropout"
        )
    num_layers = config["num_layers"]
    for index in range(num_layers):
        layers[f"encoder_block_{index}"] = vit_layers.TransformerBlock(
            config["num_heads"],
            config["mlp_dim"],
            dropout_rate=config["dropout_rate"],
            attention_dropout_rate=config["attention_dropout_rate"],
            # Stochastic depth rises linearly with depth (Huang et al. 2016; timm).
            drop_path_rate=config["drop_path_rate"] * index / max(num_layers - 1, 1),
            gelu_approximate=config["gelu_approximate"],
            remat=config["remat"],
            dtype=dtype,
            name=f"encoder_block_{index}",
        )
    layers["encoder_norm"] = keras.layers.LayerNormalization(
        epsilon=vit_layers.LAYER_NORM_EPSILON, dtype=dtype, name="encoder_norm"
    )
    return layers


def _embed(layers, images, training=None):
    """Pixels to the first block's tokens, and the patch grid: the one embedding pass, which the model's graph
    and `forward_intermediates` share."""
    x = images
    for name in ("pixel_scaling", "channels_last"):
        if name in layers:
            x = layers[name](x)
    # The patch grid (batch, rows, cols, hidden), plain or hybrid: it also tells the position embedding (and
    # the feature map) which grid the images have.
    patch_grid = layers["patch_embedding"](x)
    x = layers["patch_tokens"](patch_grid)
    x = layers["class_token"](x)
    x = layers["position_embedding"](x, patch_grid=patch_grid)
    x = layers["embedding_dropout"](x, training=training)
    if "patch_dropout" in layers:
        x = layers["patch_dropout"](x, training=training)
    return x, patch_grid


def _head_dtype(dtype):
    """float32, or the head's quantized policy in a quantized model's `DTypePolicyMap`."""
    if isinstance(dtype, dict):
        dtype = keras.dtype_policies.deserialize(dtype)
    if isinstance(dtype, keras.dtype_policies.DTypePolicyMap) and dtype["head"].quantization_mode is not None:
        return dtype
    return "float32"


def _graph(config, input_tensor, dtype):
    """`(inputs, images, outputs)` of the model's functional graph (`images`: the tensor the ViT starts from)."""
    channels_first = keras.config.image_data_format() == "channels_first"
    if input_tensor is None:
        inputs = keras.Input(shape=config["input_shape"], name="images")
    elif not keras.backend.is_keras_tensor(input_tensor):
        inputs = keras.Input(tensor=input_tensor, shape=config["input_shape"], name="images")
    else:
        inputs = input_tensor
    layers = _layers(config, dtype)
    x, patch_grid = _embed(layers, inputs)
    for index in range(config["num_layers"]):
        x = layers[f"encoder_block_{index}"](x)
    x = layers["encoder_norm"](x)
    if config["pooling"] is not None:
        x = vit_layers.TokenPooling(config["pooling"], dtype=dtype, name="pooling")(x)
        if config["representation_size"] is not None:
            x = keras.layers.Dense(config["representation_size"], activation="tanh", dtype=dtype, name="pre_logits")(x)
    elif not config["return_sequence"]:
        x = vit_layers.PatchFeatureMap(grid_size=config["embedding_grid"], dtype=dtype, name="feature_map")(
            x, patch_grid=patch_grid
        )
        if channels_first:
            x = keras.layers.Permute((3, 1, 2), dtype=dtype, name="channels_first")(x)
    if config["include_top"]:
        # Zero-initialised head (paper, "Fine-tuning and higher resolution"),
        # kept in float32 so mixed-precision logits and softmax stay exact.
        x = keras.layers.Dense(config["classes"], kernel_initializer="zeros", dtype=_head_dtype(dtype), name="head")(x)
        if config["classifier_activation"] is not None:
            x = keras.layers.Activation(config["classifier_activation"], dtype="float32", name="predictions")(x)
    model_inputs = inputs
    if input_tensor is not None:
        sources = keras.utils.get_source_inputs(input_tensor)
        model_inputs = sources[0] if len(sources) == 1 else sources
    return model_inputs, inputs, x
