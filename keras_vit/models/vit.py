"""The Vision Transformer architecture as a functional Keras model.

`build_model` assembles the layers of `keras_vit.layers` (pixel scaling,
patch embedding, class token, position embedding, transformer blocks, final
norm) and the pooling, `pre_logits` and head, or the feature map, on top. It knows nothing about pretrained
weights: the public constructors (`keras_vit.models.applications`) and the weights
loader (`keras_vit.pretrained`) both build through it.
"""

import keras

from keras_vit import layers as vit_layers
from keras_vit.layers import resnet
from keras_vit.models import architecture, preprocessing


def build_model(
    patch_size,
    hidden_dim,
    num_layers,
    num_heads,
    mlp_dim,
    include_top=True,
    include_preprocessing=True,
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
    resample_method="official",
    resample_antialias=False,
    embedding_grid=None,
    name="vision_transformer",
    resnet_stages=None,
    resnet_width=64,
    remat=False,
    patch_dropout_rate=0.0,
):
    """Builds a randomly initialised Vision Transformer as a functional `keras.Model`.

    The architecture only; `keras_vit.VisionTransformer` (the public builder)
    adds `weights=`.

    Raw pixels in [0, 255] are scaled to [-1, 1] (`include_preprocessing`),
    cut into patches (sides padded up to a multiple of the patch), embedded,
    prefixed with a class token, given position embeddings (resampled at call
    time to the images' patch grid) and passed through `num_layers`
    pre-LayerNorm transformer blocks and a final LayerNorm. On top sit the
    pooling, the optional `pre_logits` layer and the head, or, without a
    head and pooling, the feature map (or the token sequence).

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
        resample_method: how the position embedding follows images of
            another size, one of `keras_vit.layers.resampling.RESAMPLING_METHODS`.
            Defaults to `"official"`.
        resample_antialias: bool, antialias when shrinking (half-pixel
            methods). Defaults to `False`.
        embedding_grid: optional `(rows, cols)` the position embedding is
            stored at when `input_shape` leaves the size open. Defaults to
            the grid of a 224 x 224 image.
        name: the model's name.
        resnet_stages: None for a plain ViT; for a hybrid (paper section
            3.1), the units per stage of its ResNet (`()` for the root only,
            `(3, 4, 9)` for the paper's R50+B/16): the patches are then
            `patch_size` patches of the ResNet's feature map
            (`keras_vit.layers.resnet.HybridPatchEmbedding`), each covering
            `patch_size * output_stride(resnet_stages)` pixels.
        resnet_width: int, the hybrid ResNet's root width (a multiple of 32).
            Defaults to `64`, the published hybrids'.
        remat: bool, rematerialize every transformer block: its activations
            are recomputed in the backward pass instead of kept, which saves
            training memory for one more forward pass of the blocks (timm's
            `set_grad_checkpointing`). Outputs and gradients are unchanged;
            the setting is saved in each block's config. Defaults to `False`.
        patch_dropout_rate: float in `[0, 1)`, PatchDropout (Liu et al.
            2022) in training: each image keeps a random
            `max(1, floor((1 - rate) * N))` of its `N` patch tokens after the
            position embedding (the class token always), so the blocks run
            on fewer tokens; inference is unchanged. With `0` (the default)
            the model has no such layer. Not with the feature-map output,
            which needs every patch.

    Returns:
        A `keras.Model`.

    Example:

    >>> model = build_model(
    ...     patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64,
    ...     input_shape=(32, 32, 3), classes=10)
    >>> keras.ops.shape(model(np.zeros((1, 32, 32, 3))))
    (1, 10)
    >>> features = build_model(
    ...     patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64,
    ...     include_top=False)
    >>> keras.ops.shape(features(np.zeros((1, 50, 30, 3))))
    (1, 7, 4, 32)
    """
    # Every argument but the name describes the architecture: the record checks them and applies the grid rule.
    arguments = dict(locals())
    arch = architecture.Architecture.from_arguments(**{key: arguments[key] for key in arguments if key != "name"})
    return build(arch, input_tensor=input_tensor, name=name)


def build(arch, input_tensor=None, name="vision_transformer"):
    """Builds the randomly initialised model an `Architecture` record describes.

    Args:
        arch: a `keras_vit.models.Architecture`.
        input_tensor: optional Keras tensor to use as the image input (of the
            record's input shape).
        name: the model's name.

    Returns:
        A functional `keras.Model`; `Architecture.from_model` of it is `arch`.
    """
    data_format = keras.config.image_data_format()
    input_shape = arch.input_shape(data_format)
    if input_tensor is None:
        inputs = keras.Input(shape=input_shape, name="images")
    elif not keras.backend.is_keras_tensor(input_tensor):
        inputs = keras.Input(tensor=input_tensor, shape=input_shape, name="images")
    else:
        inputs = input_tensor
    x = inputs
    if arch.include_preprocessing:
        # [0, 255] -> [-1, 1], the scaling every published ViT checkpoint was trained with.
        # Not "rescaling": Keras names a user's first `Rescaling` so, and an `input_tensor` may come from one.
        x = vit_layers.PixelScaling(preprocessing.SCALE, offset=preprocessing.OFFSET, name="pixel_scaling")(x)
    if data_format == "channels_first":
        x = keras.layers.Permute((2, 3, 1), name="channels_last")(x)
    patch_grid = _embedding(arch)(x)
    x = _encoder(arch, patch_grid)
    if arch.pooling is not None:
        x = vit_layers.TokenPooling(arch.pooling, name="pooling")(x)
        if arch.representation_size is not None:
            x = keras.layers.Dense(arch.representation_size, activation="tanh", name="pre_logits")(x)
    elif not arch.return_sequence:
        x = vit_layers.PatchFeatureMap(grid_size=arch.grid_size, name="feature_map")(x, patch_grid=patch_grid)
        if data_format == "channels_first":
            x = keras.layers.Permute((3, 1, 2), name="channels_first")(x)
    if arch.include_top:
        # Zero-initialised head (paper, "Fine-tuning and higher resolution"),
        # kept in float32 so mixed-precision logits and softmax stay exact.
        x = keras.layers.Dense(arch.classes, kernel_initializer="zeros", dtype="float32", name="head")(x)
        if arch.classifier_activation is not None:
            x = keras.layers.Activation(arch.classifier_activation, dtype="float32", name="predictions")(x)
    model_inputs = keras.utils.get_source_inputs(input_tensor) if input_tensor is not None else inputs
    return keras.Model(model_inputs, x, name=name)


def _embedding(arch):
    if arch.resnet_stages is None:
        return vit_layers.PatchEmbedding(arch.hidden_dim, arch.patch_size, name="patch_embedding")
    return resnet.HybridPatchEmbedding(
        arch.hidden_dim, arch.patch_size, arch.resnet_stages, width=arch.resnet_width, name="patch_embedding"
    )


def _encoder(arch, patch_grid):
    """Patch tokens, class token, position embedding, the blocks and the final norm."""
    x = vit_layers.PatchTokens(name="patch_tokens")(patch_grid)
    x = vit_layers.ClassToken(name="class_token")(x)
    x = vit_layers.PositionEmbedding(
        arch.grid_size,
        resample_method=arch.resample_method,
        resample_antialias=arch.resample_antialias,
        name="position_embedding",
    )(x, patch_grid=patch_grid)
    x = keras.layers.Dropout(arch.dropout_rate, name="embedding_dropout")(x)
    if arch.patch_dropout_rate:
        # After the position embedding and its dropout, as timm does; no layer at all when off, so the
        # models (and saved configs) without it are unchanged.
        x = vit_layers.PatchDropout(arch.patch_dropout_rate, name="patch_dropout")(x)
    for index in range(arch.num_layers):
        # Stochastic depth rises linearly with depth (Huang et al. 2016; timm).
        block_drop_path = arch.drop_path_rate * index / max(arch.num_layers - 1, 1)
        x = vit_layers.TransformerBlock(
            arch.num_heads,
            arch.mlp_dim,
            dropout_rate=arch.dropout_rate,
            attention_dropout_rate=arch.attention_dropout_rate,
            drop_path_rate=block_drop_path,
            gelu_approximate=arch.gelu_approximate,
            remat=arch.remat,
            name=f"encoder_block_{index}",
        )(x)
    return keras.layers.LayerNormalization(epsilon=vit_layers.LAYER_NORM_EPSILON, name="encoder_norm")(x)
