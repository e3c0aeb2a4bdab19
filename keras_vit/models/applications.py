"""The public constructors, one per published variant, with the `keras.applications` signature.

A `ViTB16` takes the place of a `keras.applications.ConvNeXtTiny` in the same call; each returns a
`keras_vit.VisionTransformer` with its row of `VARIANTS`. One docstring template is filled per variant, as
`keras/src/applications/convnext.py` does.
"""

import textwrap

from keras_vit import pretrained
from keras_vit.layers import resnet
from keras_vit.models import flops
from keras_vit.models.variants import VARIANTS, constructor_name
from keras_vit.models.vit import VisionTransformer

BASE_DOCSTRING = """Builds ViT-{variant}: {hidden_dim} hidden, {num_layers} layers, {num_heads} heads, MLP {mlp_dim}.

{summary}

Args:
    include_top: bool, whether to add the classification head. Defaults to `True`.
    include_preprocessing: bool, whether the model scales raw [0, 255] pixels to [-1, 1] itself.
        Defaults to `True`.
{weights}
    input_tensor: optional Keras tensor to use as the image input.
    input_shape: `(height, width, channels)`; height and width may be None (any size). Defaults to
        `(224, 224, 3)` with a head and `(None, None, 3)` without.
    pooling: `"token"`, `"gap"` (alias `"avg"`), `"max"`, or None: the class token with a head, the
        feature map without.
    classes: int, the classes of the head. Defaults to `1000`.
    classifier_activation: the head's activation; None for logits. Defaults to `"softmax"`.
    name: the model's name. Defaults to `"{default_name}"`.
    **kwargs: any other argument of `keras_vit.VisionTransformer` (`return_sequence`,
        `representation_size`, `dropout_rate`, `attention_dropout_rate`, `drop_path_rate`,
        `mlp_activation`, `remat`, `patch_dropout_rate`, ...).

Returns:
    A `keras_vit.VisionTransformer`.
"""


def _build_variant(variant, arguments):
    """The one body of every constructor: `arguments` are its `locals()`."""
    kwargs = arguments.pop("kwargs")
    return VisionTransformer(**VARIANTS[variant], **arguments, **kwargs)


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
    **kwargs,
):
    return _build_variant("Ti/16", locals())


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
    **kwargs,
):
    return _build_variant("S/16", locals())


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
    **kwargs,
):
    return _build_variant("S/32", locals())


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
    **kwargs,
):
    return _build_variant("B/8", locals())


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
    **kwargs,
):
    return _build_variant("B/16", locals())


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
    **kwargs,
):
    return _build_variant("B/32", locals())


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
    **kwargs,
):
    return _build_variant("L/16", locals())


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
    **kwargs,
):
    return _build_variant("L/32", locals())


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
    **kwargs,
):
    return _build_variant("H/14", locals())


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
    **kwargs,
):
    return _build_variant("R+Ti/16", locals())


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
    **kwargs,
):
    return _build_variant("R26+S/32", locals())


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
    **kwargs,
):
    return _build_variant("R26+B/32", locals())


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
    **kwargs,
):
    return _build_variant("R50+B/16", locals())


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
    **kwargs,
):
    return _build_variant("R50+L/32", locals())


CONSTRUCTORS = {
    function.__name__: function
    for function in (
        ViTTi16,
        ViTS16,
        ViTS32,
        ViTB8,
        ViTB16,
        ViTB32,
        ViTL16,
        ViTL32,
        ViTH14,
        ViTRTi16,
        ViTR26S32,
        ViTR26B32,
        ViTR50B16,
        ViTR50L32,
    )
}


def _weights_entry(variant):
    tags = pretrained.available_tags(variant)
    checkpoints = ", ".join(f'`"{tag}"`' for tag in tags if tag != "imagenet")
    lister = f'`keras_vit.pretrained.available_tags("{variant}")`'
    if not checkpoints:
        published = f"no ViT-{variant} checkpoint was published ({lister} is empty)"
    elif "imagenet" in tags:
        published = (
            f'a checkpoint tag of ViT-{variant}: {checkpoints} ({lister}); `"imagenet"`, the best ImageNet-1k '
            "classifier at the published resolution nearest `input_shape`"
        )
    else:
        published = (
            f"a checkpoint tag of ViT-{variant}: {checkpoints} ({lister}; no ImageNet-1k classifier was published, "
            'so no `"imagenet"`)'
        )
    text = (
        f"weights: `None` (random initialisation, the default); {published}; a local `.npz` or `.safetensors` "
        'checkpoint or `save_pretrained` folder; or `"hf://org/repo[/file.safetensors][@revision]"`.'
    )
    return textwrap.fill(text, width=104, initial_indent="    ", subsequent_indent="        ")


def _tokens(variant):
    row = VARIANTS[variant]
    patch, stages = row["patch_size"], row.get("resnet_stages")
    if stages is None:
        return f"{patch}x{patch} patches, one token each"
    side = resnet.pixels_per_token(patch, stages)[0]
    return (
        f"A hybrid: {patch}x{patch} patches of a ResNet's feature map ({stages} units per stage), "
        f"{side}x{side} px per token"
    )


for _variant in VARIANTS:
    _function = CONSTRUCTORS[constructor_name(_variant)]
    _function.variant = _variant
    _function.__doc__ = BASE_DOCSTRING.format(
        variant=_variant,
        summary=textwrap.fill(
            f"{_tokens(_variant)}; {flops.parameter_count(VARIANTS[_variant]):,} parameters at 224 px with the "
            "1000-class head. Any other size: `keras_vit.VisionTransformer`.",
            width=108,
        ),
        weights=_weights_entry(_variant),
        default_name=_function.__defaults__[-1],
        **{key: VARIANTS[_variant][key] for key in ("hidden_dim", "num_layers", "num_heads", "mlp_dim")},
    )


def constructor_for(name):
    """The constructor a user names, by function name or variant, in any case (the CLIs' `--model`).

    >>> constructor_for("b/16").__name__
    'ViTB16'
    """
    names = {}
    for function_name, constructor in CONSTRUCTORS.items():
        names[function_name.lower()] = names[constructor.variant.lower()] = constructor
    if not isinstance(name, str) or name.lower() not in names:
        raise ValueError(
            f"Unknown model {name!r}: choose a constructor ({', '.join(CONSTRUCTORS)}) or a variant "
            f"({', '.join(VARIANTS)})."
        )
    return names[name.lower()]
