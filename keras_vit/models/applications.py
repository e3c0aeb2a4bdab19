"""The public constructors: one function per published ViT variant.

Each function (`ViTB16`, ...) has the `keras.applications` signature, so a
`ViTB16` replaces a `keras.applications.ConvNeXtTiny` without editing the
call, plus the ViT options. They all build through one private helper:
the architecture from `keras_vit.models.build_model` with the row of
`keras_vit.variants.VARIANTS`, and pretrained weights through
`keras_vit.pretrained` when `weights` is not None.

`VisionTransformer` is the same for any size (`patch_size`, `hidden_dim`,
...), with `weights=` a local file or `hf://` handle of that architecture.
"""

from keras_vit import models, pretrained
from keras_vit.models.variants import VARIANTS


def VisionTransformer(
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
    name="vision_transformer",
):
    """Builds a Vision Transformer of any size, optionally with weights.

    The architecture is `keras_vit.models.build_model`: patches, class
    token, position embedding, `num_layers` pre-LayerNorm blocks, final
    LayerNorm, then the pooling, optional `pre_logits` and head.

    Args:
        patch_size: int or `(height, width)`, the patch size.
        hidden_dim: int, the token size.
        num_layers: int, the number of transformer blocks.
        num_heads: int, the attention heads per block.
        mlp_dim: int, the hidden size of each MLP block.
        include_top: bool, whether to add the classification head.
            Defaults to `True`.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them to [-1, 1] itself. Defaults to `True`.
        weights: `None` (random initialisation), the path of a local
            `.npz` / `.safetensors` checkpoint or `save_pretrained` folder,
            or `"hf://org/repo[/file.safetensors][@revision]"`, of this same
            architecture (its position embedding is resampled to the grid of
            `input_shape`). Checkpoint tags and `"imagenet"` name published
            variants: use their constructors (`ViTB16(weights="imagenet")`).
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size: the
            position embedding is resampled at call time) and need not be
            multiples of the patch (images are padded). Defaults to
            `(224, 224, 3)` with a head and `(None, None, 3)` without.
        pooling: `"token"` (class token), `"gap"` (mean of the patch tokens
            after the final norm; `"avg"` is accepted as an alias), `"max"`
            or `None`. With `include_top=True`, `None` means `"token"`; with
            `include_top=False`, `None` returns the feature map.
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
    architecture = dict(
        patch_size=patch_size, hidden_dim=hidden_dim, num_layers=num_layers, num_heads=num_heads, mlp_dim=mlp_dim
    )
    options = dict(
        include_top=include_top,
        include_preprocessing=include_preprocessing,
        input_tensor=input_tensor,
        input_shape=input_shape,
        pooling=pooling,
        classes=classes,
        classifier_activation=classifier_activation,
        return_sequence=return_sequence,
        representation_size=representation_size,
        dropout_rate=dropout_rate,
        attention_dropout_rate=attention_dropout_rate,
        drop_path_rate=drop_path_rate,
        gelu_approximate=gelu_approximate,
        name=name,
    )
    if weights is None:
        return models.build_model(**architecture, **options)
    return pretrained.build_with_weights(architecture, weights, **options)


# The named constructors by function name, in table order; filled by
# `register_constructor`.
CONSTRUCTORS = {}


def register_constructor(variant):
    """Registers a named constructor of `variant` (a `VARIANTS` key).

    The decorated function is returned unchanged apart from its `.variant`
    attribute, read by `constructor_for`, the CLIs and the docs tables.

    Args:
        variant: str, the key of the constructor's row in `VARIANTS`.

    Returns:
        The decorator.
    """
    if variant not in VARIANTS:
        raise ValueError(f"`variant` must be a key of VARIANTS. Received: variant={variant!r}")

    def register(function):
        function.variant = variant
        CONSTRUCTORS[function.__name__] = function
        return function

    return register


def _build_variant(variant, weights=None, **options):
    """The one body of every named constructor: `options` are its arguments."""
    if weights is None:
        return models.build_model(**VARIANTS[variant], **options)
    return pretrained.build_pretrained(variant, weights, **options)


@register_constructor("Ti/16")
def ViTTi16(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_ti16",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds ViT-Ti/16: 192 hidden, 12 layers, 3 heads, MLP 768, 16x16 patches.

    5,717,416 parameters at 224 px with the 1000-class head. The
    `keras.applications` signature plus the ViT options; see
    `keras_vit.VisionTransformer` for what each option does.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag of ViT-Ti/16 (`keras_vit.pretrained.available_tags("Ti/16")`
            lists them); `"imagenet"` (the best ImageNet-1k classifier at the
            published resolution nearest `input_shape`); a local `.npz` or
            `.safetensors` file or `save_pretrained` folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size) and
            need not be multiples of the patch. Defaults to `(224, 224, 3)`
            with a head, `(None, None, 3)` without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, or `None`:
            the class token with a head, else the feature map.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("Ti/16", **locals())


@register_constructor("S/16")
def ViTS16(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_s16",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds ViT-S/16: 384 hidden, 12 layers, 6 heads, MLP 1536, 16x16 patches.

    22,050,664 parameters at 224 px with the 1000-class head. The
    `keras.applications` signature plus the ViT options; see
    `keras_vit.VisionTransformer` for what each option does.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag of ViT-S/16 (`keras_vit.pretrained.available_tags("S/16")`
            lists them); `"imagenet"` (the best ImageNet-1k classifier at the
            published resolution nearest `input_shape`); a local `.npz` or
            `.safetensors` file or `save_pretrained` folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size) and
            need not be multiples of the patch. Defaults to `(224, 224, 3)`
            with a head, `(None, None, 3)` without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, or `None`:
            the class token with a head, else the feature map.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("S/16", **locals())


@register_constructor("S/32")
def ViTS32(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_s32",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds ViT-S/32: 384 hidden, 12 layers, 6 heads, MLP 1536, 32x32 patches.

    22,878,952 parameters at 224 px with the 1000-class head. The
    `keras.applications` signature plus the ViT options; see
    `keras_vit.VisionTransformer` for what each option does.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag of ViT-S/32 (`keras_vit.pretrained.available_tags("S/32")`
            lists them); `"imagenet"` (the best ImageNet-1k classifier at the
            published resolution nearest `input_shape`); a local `.npz` or
            `.safetensors` file or `save_pretrained` folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size) and
            need not be multiples of the patch. Defaults to `(224, 224, 3)`
            with a head, `(None, None, 3)` without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, or `None`:
            the class token with a head, else the feature map.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("S/32", **locals())


@register_constructor("B/8")
def ViTB8(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_b8",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds ViT-B/8: 768 hidden, 12 layers, 12 heads, MLP 3072, 8x8 patches.

    86,576,872 parameters at 224 px with the 1000-class head. The
    `keras.applications` signature plus the ViT options; see
    `keras_vit.VisionTransformer` for what each option does.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag of ViT-B/8 (`keras_vit.pretrained.available_tags("B/8")`
            lists them); `"imagenet"` (the best ImageNet-1k classifier at the
            published resolution nearest `input_shape`); a local `.npz` or
            `.safetensors` file or `save_pretrained` folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size) and
            need not be multiples of the patch. Defaults to `(224, 224, 3)`
            with a head, `(None, None, 3)` without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, or `None`:
            the class token with a head, else the feature map.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("B/8", **locals())


@register_constructor("B/16")
def ViTB16(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_b16",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds ViT-B/16: 768 hidden, 12 layers, 12 heads, MLP 3072, 16x16 patches.

    86,567,656 parameters at 224 px with the 1000-class head. The
    `keras.applications` signature plus the ViT options; see
    `keras_vit.VisionTransformer` for what each option does.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag of ViT-B/16 (`keras_vit.pretrained.available_tags("B/16")`
            lists them); `"imagenet"` (the best ImageNet-1k classifier at the
            published resolution nearest `input_shape`); a local `.npz` or
            `.safetensors` file or `save_pretrained` folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size) and
            need not be multiples of the patch. Defaults to `(224, 224, 3)`
            with a head, `(None, None, 3)` without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, or `None`:
            the class token with a head, else the feature map.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("B/16", **locals())


@register_constructor("B/32")
def ViTB32(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_b32",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds ViT-B/32: 768 hidden, 12 layers, 12 heads, MLP 3072, 32x32 patches.

    88,224,232 parameters at 224 px with the 1000-class head. The
    `keras.applications` signature plus the ViT options; see
    `keras_vit.VisionTransformer` for what each option does.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag of ViT-B/32 (`keras_vit.pretrained.available_tags("B/32")`
            lists them); `"imagenet"` (the best ImageNet-1k classifier at the
            published resolution nearest `input_shape`); a local `.npz` or
            `.safetensors` file or `save_pretrained` folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size) and
            need not be multiples of the patch. Defaults to `(224, 224, 3)`
            with a head, `(None, None, 3)` without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, or `None`:
            the class token with a head, else the feature map.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("B/32", **locals())


@register_constructor("L/16")
def ViTL16(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_l16",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds ViT-L/16: 1024 hidden, 24 layers, 16 heads, MLP 4096, 16x16 patches.

    304,326,632 parameters at 224 px with the 1000-class head. The
    `keras.applications` signature plus the ViT options; see
    `keras_vit.VisionTransformer` for what each option does.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag of ViT-L/16 (`keras_vit.pretrained.available_tags("L/16")`
            lists them); `"imagenet"` (the best ImageNet-1k classifier at the
            published resolution nearest `input_shape`); a local `.npz` or
            `.safetensors` file or `save_pretrained` folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size) and
            need not be multiples of the patch. Defaults to `(224, 224, 3)`
            with a head, `(None, None, 3)` without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, or `None`:
            the class token with a head, else the feature map.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("L/16", **locals())


@register_constructor("L/32")
def ViTL32(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_l32",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds ViT-L/32: 1024 hidden, 24 layers, 16 heads, MLP 4096, 32x32 patches.

    306,535,400 parameters at 224 px with the 1000-class head. The
    `keras.applications` signature plus the ViT options; see
    `keras_vit.VisionTransformer` for what each option does.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag of ViT-L/32 (`keras_vit.pretrained.available_tags("L/32")`
            lists them); `"imagenet"` (the best ImageNet-1k classifier at the
            published resolution nearest `input_shape`); a local `.npz` or
            `.safetensors` file or `save_pretrained` folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size) and
            need not be multiples of the patch. Defaults to `(224, 224, 3)`
            with a head, `(None, None, 3)` without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, or `None`:
            the class token with a head, else the feature map.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("L/32", **locals())


@register_constructor("H/14")
def ViTH14(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_h14",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds ViT-H/14: 1280 hidden, 32 layers, 16 heads, MLP 5120, 14x14 patches.

    632,045,800 parameters at 224 px with the 1000-class head. The
    `keras.applications` signature plus the ViT options; see
    `keras_vit.VisionTransformer` for what each option does.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag of ViT-H/14 (`keras_vit.pretrained.available_tags("H/14")`
            lists them); `"imagenet"` (the best ImageNet-1k classifier at the
            published resolution nearest `input_shape`); a local `.npz` or
            `.safetensors` file or `save_pretrained` folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size) and
            need not be multiples of the patch. Defaults to `(224, 224, 3)`
            with a head, `(None, None, 3)` without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, or `None`:
            the class token with a head, else the feature map.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("H/14", **locals())


@register_constructor("R+Ti/16")
def ViTRTi16(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_r_ti16",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds the hybrid R+Ti/16: a ResNet, then ViT-Ti (192 hidden, 12 layers).

    The ResNet: the ResNet root (stride 4) and 8x8 patches of its output.

    6,337,704 parameters at 224 px with the 1000-class head (timm's
    `vit_tiny_r_s16_p8_224` has the same). One token per 32x32 pixels;
    images of any size (the ResNet pads "same": ceil(side / 32) tokens per side). The `keras.applications` signature
    plus the ViT options; see `keras_vit.VisionTransformer` for each option.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag (`keras_vit.pretrained.available_tags(variant)`; R26+B/32 was
            never published) or `"imagenet"`; a local `.npz` (official hybrid
            layout) or `.safetensors` (timm's) file or `save_pretrained`
            folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size).
            Defaults to `(224, 224, 3)` with a head, `(None, None, 3)`
            without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"` or `None`.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("R+Ti/16", **locals())


@register_constructor("R26+S/32")
def ViTR26S32(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_r26_s32",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds the hybrid R26+S/32: a ResNet, then ViT-S (384 hidden, 12 layers).

    The ResNet: a ResNet-26 (2, 2, 2, 2) to stride 32 and 1x1 patches.

    36,431,912 parameters at 224 px with the 1000-class head (timm's
    `vit_small_r26_s32_224` has the same). One token per 32x32 pixels;
    images of any size (the ResNet pads "same": ceil(side / 32) tokens per side). The `keras.applications` signature
    plus the ViT options; see `keras_vit.VisionTransformer` for each option.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag (`keras_vit.pretrained.available_tags(variant)`; R26+B/32 was
            never published) or `"imagenet"`; a local `.npz` (official hybrid
            layout) or `.safetensors` (timm's) file or `save_pretrained`
            folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size).
            Defaults to `(224, 224, 3)` with a head, `(None, None, 3)`
            without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"` or `None`.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("R26+S/32", **locals())


@register_constructor("R26+B/32")
def ViTR26B32(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_r26_b32",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds the hybrid R26+B/32: a ResNet, then ViT-B (768 hidden, 12 layers).

    The ResNet: a ResNet-26 (2, 2, 2, 2) to stride 32 and 1x1 patches.

    101,383,976 parameters at 224 px with the 1000-class head (timm's
    `vit_base_r26_s32_224` has the same). One token per 32x32 pixels;
    images of any size (the ResNet pads "same": ceil(side / 32) tokens per side). The `keras.applications` signature
    plus the ViT options; see `keras_vit.VisionTransformer` for each option.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag (`keras_vit.pretrained.available_tags(variant)`; R26+B/32 was
            never published) or `"imagenet"`; a local `.npz` (official hybrid
            layout) or `.safetensors` (timm's) file or `save_pretrained`
            folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size).
            Defaults to `(224, 224, 3)` with a head, `(None, None, 3)`
            without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"` or `None`.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("R26+B/32", **locals())


@register_constructor("R50+B/16")
def ViTR50B16(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_r50_b16",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds the hybrid R50+B/16: a ResNet, then ViT-B (768 hidden, 12 layers).

    The ResNet: the paper's ResNet-50 with (3, 4, 9) units to stride 16 and 1x1 patches.

    98,659,112 parameters at 224 px with the 1000-class head (timm's
    `vit_base_r50_s16_224` with `num_classes=1000`; its default has no head). One token per 16x16 pixels;
    images of any size (the ResNet pads "same": ceil(side / 16) tokens per side). The `keras.applications` signature
    plus the ViT options; see `keras_vit.VisionTransformer` for each option.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag (`keras_vit.pretrained.available_tags(variant)`; R26+B/32 was
            never published) or `"imagenet"`; a local `.npz` (official hybrid
            layout) or `.safetensors` (timm's) file or `save_pretrained`
            folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size).
            Defaults to `(224, 224, 3)` with a head, `(None, None, 3)`
            without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"` or `None`.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("R50+B/16", **locals())


@register_constructor("R50+L/32")
def ViTR50L32(
    include_top=True,
    include_preprocessing=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vit_r50_l32",
    return_sequence=False,
    representation_size=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    gelu_approximate=False,
):
    """Builds the hybrid R50+L/32: a ResNet, then ViT-L (1024 hidden, 24 layers).

    The ResNet: a ResNet-50 (3, 4, 6, 3) to stride 32 and 1x1 patches.

    328,994,856 parameters at 224 px with the 1000-class head (timm's
    `vit_large_r50_s32_224` has the same). One token per 32x32 pixels;
    images of any size (the ResNet pads "same": ceil(side / 32) tokens per side). The `keras.applications` signature
    plus the ViT options; see `keras_vit.VisionTransformer` for each option.

    Args:
        include_top: bool, whether to add the classification head.
        include_preprocessing: bool, whether the model takes raw pixels in
            [0, 255] and scales them itself (the default); `False` for pixels
            already scaled to [-1, 1] with
            `keras_vit.preprocessing.scale_pixels`.
        weights: `None` (random initialisation, the default); a checkpoint
            tag (`keras_vit.pretrained.available_tags(variant)`; R26+B/32 was
            never published) or `"imagenet"`; a local `.npz` (official hybrid
            layout) or `.safetensors` (timm's) file or `save_pretrained`
            folder; or
            `"hf://org/repo[/file.safetensors][@revision]"`.
        input_tensor: optional Keras tensor to use as the image input.
        input_shape: `(height, width, channels)` (channels first under that
            image data format); height and width may be None (any size).
            Defaults to `(224, 224, 3)` with a head, `(None, None, 3)`
            without.
        pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"` or `None`.
        classes: int, classes of the head. Defaults to `1000`.
        classifier_activation: the head's activation; `None` for logits.
        name: the model's name.
        return_sequence: bool, without head and pooling return the token
            sequence `(batch, 1 + rows * cols, hidden)` instead of the
            feature map `(batch, rows, cols, hidden)`.
        representation_size: optional size of a `pre_logits` layer.
        dropout_rate: float, dropout rate.
        attention_dropout_rate: float, attention-weight dropout rate.
        drop_path_rate: float, stochastic-depth rate.
        gelu_approximate: bool, tanh-approximate GELU.

    Returns:
        A `keras.Model`.
    """
    return _build_variant("R50+L/32", **locals())


def constructor_for(name):
    """The constructor a user names: `"ViTB16"` or its variant key `"B/16"`,
    in any case (the spelling of the CLIs' `--model` / `MODEL` arguments).

    Args:
        name: str.

    Returns:
        The constructor function; its `.variant` is the `VARIANTS` key.

    Example:

    >>> constructor_for("b/16").__name__
    'ViTB16'
    """
    names = {function_name.lower(): constructor for function_name, constructor in CONSTRUCTORS.items()}
    names.update({constructor.variant.lower(): constructor for constructor in CONSTRUCTORS.values()})
    if not isinstance(name, str) or name.lower() not in names:
        raise ValueError(
            f"Unknown model {name!r}: choose a constructor ({', '.join(CONSTRUCTORS)}) "
            f"or a variant ({', '.join(VARIANTS)})."
        )
    return names[name.lower()]
