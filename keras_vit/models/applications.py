"""The public constructors, one per published variant, with the `keras.applications` signature: a `ViTB16` takes
the place of a `keras.applications.ConvNeXtTiny` in the same call and returns a `keras_vit.VisionTransformer` with its
row of `VARIANTS`. One factory writes them all, one docstring template filled per variant (as Keras's ConvNeXt)."""

import os
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
    include_preprocessing: bool, whether the model scales raw [0, 255] pixels itself: to [-1, 1], or with
        the pixel mean and std of a family's checkpoint. Defaults to `True`.
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


def _weights_entry(variant):
    families = {info.tag: info.family for info in pretrained.checkpoints(variant) if info.family != "ViT"}
    tags = [tag for tag in pretrained.available_tags(variant) if tag != "imagenet"]
    paper = ", ".join(f'`"{tag}"`' for tag in tags if tag not in families)
    family = ", ".join(f'`"{tag}"` ({families[tag]})' for tag in tags if tag in families)
    listed = "; ".join(
        part
        for part in (paper and f"the paper's {paper}", family and f"{family}, each with its family's architecture")
        if part
    )
    imagenet = ""
    if "imagenet" in pretrained.available_tags(variant):
        imagenet = '; `"imagenet"`, the best ImageNet-1k classifier at the published resolution nearest `input_shape`'
    text = (
        f"weights: `None` (random initialisation, the default); a checkpoint tag of ViT-{variant} "
        f'(`keras_vit.pretrained.available_tags("{variant}")`: {listed or "none published"}){imagenet}; a local '
        '`.npz` or `.safetensors` checkpoint or `save_pretrained` folder; or `"hf://org/repo[/file.safetensors][@revision]"`.'
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


def _constructor(variant):
    """The `keras.applications`-style constructor of `variant`, named after it."""
    default_name = "vit_" + variant.lower().replace("+/", "plus/").replace("/", "").replace("+", "_").replace("-", "_")

    def constructor(
        include_top=True,
        include_preprocessing=True,
        weights=None,
        input_tensor=None,
        input_shape=None,
        pooling=None,
        classes=1000,
        classifier_activation="softmax",
        name=default_name,
        **kwargs,
    ):
        return VisionTransformer(
            **VARIANTS[variant],
            include_top=include_top,
            include_preprocessing=include_preprocessing,
            weights=weights,
            input_tensor=input_tensor,
            input_shape=input_shape,
            pooling=pooling,
            classes=classes,
            classifier_activation=classifier_activation,
            name=name,
            **kwargs,
        )

    constructor.__name__ = constructor.__qualname__ = constructor_name(variant)
    constructor.variant = variant
    row = VARIANTS[variant]
    summary = (
        f"{_tokens(variant)}; {flops.parameter_count(row):,} parameters at 224 px with the 1000-class head. Any "
        "other size: `keras_vit.VisionTransformer`."
    )
    constructor.__doc__ = BASE_DOCSTRING.format(
        variant=variant,
        summary=textwrap.fill(summary, width=108),
        weights=_weights_entry(variant),
        default_name=default_name,
        **{key: row[key] for key in ("hidden_dim", "num_layers", "num_heads", "mlp_dim")},
    )
    return constructor


CONSTRUCTORS = {constructor_name(variant): _constructor(variant) for variant in VARIANTS}
ViTTi16 = CONSTRUCTORS["ViTTi16"]
ViTS16 = CONSTRUCTORS["ViTS16"]
ViTS32 = CONSTRUCTORS["ViTS32"]
ViTB8 = CONSTRUCTORS["ViTB8"]
ViTB16 = CONSTRUCTORS["ViTB16"]
ViTB32 = CONSTRUCTORS["ViTB32"]
ViTL16 = CONSTRUCTORS["ViTL16"]
ViTL32 = CONSTRUCTORS["ViTL32"]
ViTH14 = CONSTRUCTORS["ViTH14"]
ViTS14 = CONSTRUCTORS["ViTS14"]
ViTB14 = CONSTRUCTORS["ViTB14"]
ViTL14 = CONSTRUCTORS["ViTL14"]
ViTSo400m14 = CONSTRUCTORS["ViTSo400m14"]
ViTSo400m16 = CONSTRUCTORS["ViTSo400m16"]
ViTg14 = CONSTRUCTORS["ViTg14"]
ViTSPlus16 = CONSTRUCTORS["ViTSPlus16"]
ViTEVA02Ti14 = CONSTRUCTORS["ViTEVA02Ti14"]
ViTEVA02S14 = CONSTRUCTORS["ViTEVA02S14"]
ViTEVA02B14 = CONSTRUCTORS["ViTEVA02B14"]
ViTEVA02L14 = CONSTRUCTORS["ViTEVA02L14"]
ViTRTi16 = CONSTRUCTORS["ViTRTi16"]
ViTR26S32 = CONSTRUCTORS["ViTR26S32"]
ViTR26B32 = CONSTRUCTORS["ViTR26B32"]
ViTR50B16 = CONSTRUCTORS["ViTR50B16"]
ViTR50L32 = CONSTRUCTORS["ViTR50L32"]
CHECKPOINT_SUFFIXES = (".safetensors", ".npz")


def constructor_for(name):
    """The constructor a user names (the CLIs' `--model`): a function name or variant, in any case, or a checkpoint
    (a `.safetensors` or `.npz` file, a `save_pretrained` folder, `"hf://org/repo"`) built as it holds it
    (`keras_vit.pretrained.build_from_checkpoint`; its constructor takes no `weights`).

    >>> constructor_for("b/16").__name__
    'ViTB16'
    """
    if isinstance(name, str) and (
        name.startswith("hf://") or name.endswith(CHECKPOINT_SUFFIXES) or os.path.isdir(name)
    ):
        return _checkpoint_constructor(name)
    names = {}
    for function_name, constructor in CONSTRUCTORS.items():
        names[function_name.lower()] = names[constructor.variant.lower()] = constructor
    if not isinstance(name, str) or name.lower() not in names:
        raise ValueError(
            f"Unknown model {name!r}: choose a constructor ({', '.join(CONSTRUCTORS)}), a variant "
            f"({', '.join(VARIANTS)}) or a checkpoint (a .safetensors or .npz file, a folder, hf://org/repo)."
        )
    return names[name.lower()]


def _checkpoint_constructor(source):
    def constructor(weights=None, **kwargs):
        if weights is not None:
            raise ValueError(
                f"--weights applies to constructor names; the checkpoint {source!r} holds its own weights. "
                f"Received: weights={weights!r}"
            )
        return pretrained.build_from_checkpoint(source, **kwargs)

    constructor.variant = None
    return constructor
