"""The Vision Transformer family as functional Keras models.

One table of variants, one builder (`VisionTransformer`) and thin named
constructors (`ViTB16`, ...) with the `keras.applications` signature, so a
`ViTB16` can replace a `keras.applications.ConvNeXtTiny` without editing the
call.
"""

import keras

from keras_vit import layers as vit_layers
from keras_vit import validation

# Sizes from Dosovitskiy et al. 2021, Table 1 (B, L, H) and Steiner et al.
# 2021, "How to train your ViT?" (Ti, S): hidden size, depth, heads, MLP size.
_SIZES = {
    "Ti": dict(hidden_dim=192, num_layers=12, num_heads=3, mlp_dim=768),
    "S": dict(hidden_dim=384, num_layers=12, num_heads=6, mlp_dim=1536),
    "B": dict(hidden_dim=768, num_layers=12, num_heads=12, mlp_dim=3072),
    "L": dict(hidden_dim=1024, num_layers=24, num_heads=16, mlp_dim=4096),
    "H": dict(hidden_dim=1280, num_layers=32, num_heads=16, mlp_dim=5120),
}

# The published size/patch combinations; the key is the paper's notation.
VARIANTS = {
    f"{size}/{patch}": dict(_SIZES[size], patch_size=patch)
    for size, patch in (
        ("Ti", 16),
        ("S", 16),
        ("S", 32),
        ("B", 8),
        ("B", 16),
        ("B", 32),
        ("L", 16),
        ("L", 32),
        ("H", 14),
    )
}

POOLING_MODES = ("token", "gap")
# keras.applications users say "avg"; it means the same as "gap" here.
_POOLING_ALIASES = {"avg": "gap"}
DEFAULT_INPUT_SHAPE = (224, 224, 3)


def resolve_input_shape(input_shape, input_tensor, patch_size):
    """`(input_shape, patch grid)` from a constructor's `input_shape` / `input_tensor` (checked)."""
    if input_tensor is not None:
        shape = tuple(input_tensor.shape[1:])
        if input_shape is not None and tuple(input_shape) != shape:
            raise ValueError(
                f"`input_shape` {tuple(input_shape)} does not match the shape of "
                f"`input_tensor` {shape}. Pass one or make them agree."
            )
        input_shape = shape
    input_shape = DEFAULT_INPUT_SHAPE if input_shape is None else tuple(input_shape)
    if len(input_shape) != 3 or any(dim is None for dim in input_shape):
        raise ValueError(
            "`input_shape` must be a fully known (height, width, channels) tuple: the "
            "position embedding is sized for one patch grid. To use another resolution, "
            "build the model at that size (pretrained weights are resampled). "
            f"Received: input_shape={input_shape}"
        )
    return input_shape, validation.patch_grid(input_shape[:2], patch_size)


def _resolve_pooling(pooling, include_top):
    pooling = _POOLING_ALIASES.get(pooling, pooling)
    if pooling is None:
        # The published classifiers read the class token.
        return "token" if include_top else None
    if pooling not in POOLING_MODES:
        raise ValueError(
            f"`pooling` must be one of {POOLING_MODES} (or 'avg', an alias of 'gap'), or "
            f"None for the token sequence (include_top=False only). Received: pooling={pooling!r}"
        )
    return pooling


def VisionTransformer(
    patch_size,
    hidden_dim,
    num_layers,
    num_heads,
    mlp_dim,
    include_top=True,
    weights=None,
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
):
    """Builds a Vision Transformer of any size as a functional `keras.Model`.

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
        weights: `None` (random initialisation). Pretrained weights are loaded
            through the named constructors such as `ViTB16`.
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

    Returns:
        A `keras.Model`.

    Example:

    >>> model = VisionTransformer(
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
    pooling = _resolve_pooling(pooling, include_top)
    if not include_top and representation_size is not None and pooling is None:
        raise ValueError(
            "`representation_size` (pre_logits) applies to pooled features: pass "
            "`pooling='token'` or `'gap'` with include_top=False."
        )
    if weights is not None:
        raise ValueError(
            "`VisionTransformer` builds randomly initialised models: use a named "
            "constructor such as `keras_vit.ViTB16(weights=...)` for pretrained weights, "
            f"or pass weights=None. Received: weights={weights!r}"
        )
    input_shape, grid_size = resolve_input_shape(input_shape, input_tensor, patch_size)

    if input_tensor is None:
        inputs = keras.Input(shape=input_shape, name="images")
    elif not keras.backend.is_keras_tensor(input_tensor):
        inputs = keras.Input(tensor=input_tensor, shape=input_shape, name="images")
    else:
        inputs = input_tensor

    x = vit_layers.PatchEmbedding(hidden_dim, patch_size, name="patch_embedding")(inputs)
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


def _build_variant(variant, weights, **kwargs):
    if weights is None:
        return VisionTransformer(**VARIANTS[variant], **kwargs)
    # Imported here: the pretrained machinery (registry, converters, download)
    # is only needed when weights are asked for.
    from keras_vit.pretrained import build_pretrained

    return build_pretrained(variant, weights, **kwargs)


_CONSTRUCTOR_DOC = """Builds ViT-{variant}: {hidden_dim} hidden, {num_layers} layers, {num_heads} heads,
    MLP {mlp_dim}, {patch_size}x{patch_size} patches.

    The `keras.applications` signature plus the ViT options; see
    `keras_vit.VisionTransformer` for every argument.

    Args:
        include_top: bool, whether to add the classification head.
        weights: `None` for random initialisation.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)`, divisible by the patch
            size. Defaults to `(224, 224, 3)`.
        pooling: `"token"`, `"gap"` (alias `"avg"`) or `None`.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name. Defaults to `"{default_name}"`.
        representation_size: optional size of the `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model` taking images scaled with
        `keras_vit.preprocess_input`.
"""


def _make_constructor(variant):
    size, patch = variant.split("/")
    function_name = f"ViT{size}{patch}"
    default_name = f"vit_{size.lower()}{patch}"

    def constructor(
        include_top=True,
        weights=None,
        input_tensor=None,
        input_shape=None,
        pooling=None,
        classes=1000,
        classifier_activation="softmax",
        name=default_name,
        representation_size=None,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        gelu_approximate=False,
    ):
        return _build_variant(
            variant,
            weights,
            include_top=include_top,
            input_tensor=input_tensor,
            input_shape=input_shape,
            pooling=pooling,
            classes=classes,
            classifier_activation=classifier_activation,
            name=name,
            representation_size=representation_size,
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
            drop_path_rate=drop_path_rate,
            gelu_approximate=gelu_approximate,
        )

    constructor.__name__ = constructor.__qualname__ = function_name
    constructor.variant = variant  # its VARIANTS key, for tables and tools
    constructor.__doc__ = _CONSTRUCTOR_DOC.format(variant=variant, default_name=default_name, **VARIANTS[variant])
    return function_name, constructor


# ViTTi16, ViTS16, ..., ViTH14: one generated constructor per VARIANTS entry.
CONSTRUCTORS = dict(_make_constructor(variant) for variant in VARIANTS)
globals().update(CONSTRUCTORS)


def constructor_for(name):
    """The constructor a user names: `"ViTB16"` or its variant key `"B/16"`,
    in any case (the spelling of the CLIs' `--model` / `MODEL` arguments).

    Args:
        name: str.

    Returns:
        The constructor function; its `.variant` is the `VARIANTS` key.
    """
    names = {function_name.lower(): constructor for function_name, constructor in CONSTRUCTORS.items()}
    names.update({constructor.variant.lower(): constructor for constructor in CONSTRUCTORS.values()})
    if not isinstance(name, str) or name.lower() not in names:
        raise ValueError(
            f"Unknown model {name!r}: choose a constructor ({', '.join(CONSTRUCTORS)}) "
            f"or a variant ({', '.join(VARIANTS)})."
        )
    return names[name.lower()]
