"""The Vision Transformer architecture as a functional Keras model.

`build_model` assembles the layers of `keras_vit.layers` (patch embedding,
class token, position embedding, transformer blocks, final norm) and the
pooling, `pre_logits` and head on top. It knows nothing about pretrained
weights: the public constructors (`keras_vit.applications`) and the weights
loader (`keras_vit.pretrained`) both build through it.
"""

import keras

from keras_vit import layers as vit_layers
from keras_vit import resnet, validation, variants


def token_size(patch_size, resnet_stages=None):
    """Image pixels per token side: the patch size, times the ResNet's stride for a hybrid.

    Args:
        patch_size: int or `(height, width)`.
        resnet_stages: None (plain ViT) or a hybrid's ResNet stage layout.

    Returns:
        `(height, width)`.

    >>> token_size(16), token_size(1, (3, 4, 9)), token_size(8, ())
    ((16, 16), (16, 16), (32, 32))
    """
    patch = validation.pair("patch_size", patch_size)
    # Each hybrid token covers a patch of the ResNet's feature map.
    stride = 1 if resnet_stages is None else resnet.output_stride(resnet_stages)
    return (patch[0] * stride, patch[1] * stride)


def build_model(
    patch_size,
    hidden_dim,
    num_layers,
    num_heads,
    mlp_dim,
    include_top=True,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
    name="vision_transformer",
    resnet_stages=None,
    resnet_width=64,
):
    """Builds a randomly initialised Vision Transformer as a functional `keras.Model`.

    The architecture only; `keras_vit.VisionTransformer` (the public builder)
    adds `weights=`.

    Images (channels last) are cut into patches, embedded, prefixed with a
    class token, given position embeddings and passed through `num_layers`
    pre-LayerNorm transformer blocks and a final LayerNorm. The backbone's
    output is the token sequence `(batch, 1 + num_patches, hidden_dim)`; on
    top sit the pooling, the optional `pre_logits` layer and the head.

    Args:
        patch_size: int or `(height, width)`, the patch size.
        hidden_dim: int, the token size.
        num_layers: int, the number of transformer blocks.
        num_heads: int, the attention heads per block.
        mlp_dim: int, the hidden size of each MLP block.
        include_top: bool, whether to add the classification head.
            Defaults to `True`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)`, fully known; height and
            width divisible by the patch size. Defaults to `(224, 224, 3)`.
        pooling: `"token"` (class token), `"gap"` (mean of the patch tokens
            after the final norm; `"avg"` is accepted as an alias) or `None`.
            With `include_top=False` and `None`, the model returns the token
            sequence; with `include_top=True`, `None` means `"token"`.
        classes: int, the number of classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation (`"softmax"`, `None`
            for logits, ...). Defaults to `"softmax"`.
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
        name: the model's name.
        resnet_stages: None for a plain ViT; for a hybrid (paper section
            3.1), the units per stage of its ResNet (`()` for the root only,
            `(3, 4, 9)` for the paper's R50+B/16): the patches are then
            `patch_size` patches of the ResNet's feature map
            (`keras_vit.resnet.HybridPatchEmbedding`), each covering
            `patch_size * output_stride(resnet_stages)` pixels.
        resnet_width: int, the hybrid ResNet's root width (a multiple of 32).
            Defaults to `64`, the published hybrids'.

    Returns:
        A `keras.Model`.

    Example:

    >>> model = build_model(
    ...     patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64,
    ...     input_shape=(32, 32, 3), classes=10)
    >>> keras.ops.shape(model(np.zeros((1, 32, 32, 3))))
    (1, 10)
    """
    for arg_name, value in (("num_layers", num_layers), ("classes", classes)):
        validation.positive_int(arg_name, value)
    if representation_size is not None:
        validation.positive_int("representation_size", representation_size)
    validation.rate("drop_path_rate", drop_path_rate)
    pooling = variants.resolve_pooling(pooling, include_top)
    if not include_top and representation_size is not None and pooling is None:
        raise ValueError(
            "`representation_size` (pre_logits) applies to pooled features: pass "
            "`pooling='token'` or `'gap'` with include_top=False."
        )
    input_shape, grid_size = variants.resolve_input_shape(
        input_shape, input_tensor, token_size(patch_size, resnet_stages)
    )

    if input_tensor is None:
        inputs = keras.Input(shape=input_shape, name="images")
    elif not keras.backend.is_keras_tensor(input_tensor):
        inputs = keras.Input(tensor=input_tensor, shape=input_shape, name="images")
    else:
        inputs = input_tensor

    if resnet_stages is None:
        x = vit_layers.PatchEmbedding(hidden_dim, patch_size, name="patch_embedding")(inputs)
    else:
        x = resnet.HybridPatchEmbedding(
            hidden_dim, patch_size, resnet_stages, width=resnet_width, name="patch_embedding"
        )(inputs)
    x = vit_layers.ClassToken(name="class_token")(x)
    x = vit_layers.PositionEmbedding(grid_size, name="position_embedding")(x)
    x = keras.layers.Dropout(dropout_rate, name="embedding_dropout")(x)
    for index in range(num_layers):
        # Stochastic depth rises linearly with depth (Huang et al. 2016; timm).
        block_drop_path = drop_path_rate * index / max(num_layers - 1, 1)
        x = vit_layers.TransformerBlock(
            num_heads,
            mlp_dim,
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
            drop_path_rate=block_drop_path,
            gelu_approximate=gelu_approximate,
            name=f"encoder_block_{index}",
        )(x)
    x = keras.layers.LayerNormalization(epsilon=vit_layers.LAYER_NORM_EPSILON, name="encoder_norm")(x)

    if pooling is not None:
        x = vit_layers.TokenPooling(pooling, name="pooling")(x)
        if representation_size is not None:
            x = keras.layers.Dense(representation_size, activation="tanh", name="pre_logits")(x)
    if include_top:
        # Zero-initialised head (paper, "Fine-tuning and higher resolution"),
        # kept in float32 so mixed-precision logits and softmax stay exact.
        x = keras.layers.Dense(classes, kernel_initializer="zeros", dtype="float32", name="head")(x)
        if classifier_activation is not None:
            x = keras.layers.Activation(classifier_activation, dtype="float32", name="predictions")(x)

    model_inputs = keras.utils.get_source_inputs(input_tensor) if input_tensor is not None else inputs
    return keras.Model(model_inputs, x, name=name)
