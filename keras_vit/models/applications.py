"""The public constructors: one function per published ViT variant.

Each function (`ViTB16`, ...) has the `keras.applications` signature, so a
`ViTB16` replaces a `keras.applications.ConvNeXtTiny` without editing the
call, plus the ViT options. Each returns a `keras_vit.VisionTransformer`
with the row of `keras_vit.models.variants.VARIANTS`, which loads pretrained
weights through `keras_vit.pretrained` when `weights` is not None.

The docstrings are assembled (`keras_vit.utils.docstrings`): every argument
is described once, in `VisionTransformer`'s docstring (`weights` here), and each
constructor's text is `_VARIANT_DOCSTRING` filled from its row of the table.
"""

import inspect
import textwrap

from keras_vit import pretrained
from keras_vit.layers import resnet
from keras_vit.models.variants import VARIANTS
from keras_vit.models.vit import VisionTransformer
from keras_vit.pretrained import registry
from keras_vit.utils import docstrings

# Parameters at 224 px with the 1000-class head, for the docstrings (tests/test_models.py builds
# every variant and pins the same counts).
PARAMETER_COUNTS = {
    "Ti/16": 5_717_416,
    "S/16": 22_050_664,
    "S/32": 22_878_952,
    "B/8": 86_576_872,
    "B/16": 86_567_656,
    "B/32": 88_224_232,
    "L/16": 304_326_632,
    "L/32": 306_535_400,
    "H/14": 632_045_800,
    "R+Ti/16": 6_337_704,
    "R26+S/32": 36_431_912,
    "R26+B/32": 101_383_976,
    "R50+B/16": 98_659_112,
    "R50+L/32": 328_994_856,
}

# Each argument's text, written once: `VisionTransformer`'s `Args:` plus the `weights` of the constructors here.
_ARGS = docstrings.args_entries(VisionTransformer)
_LOCAL_WEIGHTS = (
    "a local `.npz` or `.safetensors` checkpoint or `save_pretrained` folder; "
    'or `"hf://org/repo[/file.safetensors][@revision]"`'
)

_VARIANT_DOCSTRING = """
Builds ViT-{variant}: {hidden_dim} hidden, {num_layers} layers, {num_heads} heads, MLP {mlp_dim}.

{tokens}

{parameters:,} parameters at 224 px with the 1000-class head. The
`keras.applications` signature (`{constructor}` takes the place of
`keras.applications.ConvNeXtTiny` in the same call) plus the ViT options;
`keras_vit.VisionTransformer` builds any other size.

{args}

Returns:
    A `keras_vit.VisionTransformer`.
"""


def _wrap(text):
    """An `Args:` entry or paragraph wrapped as the written ones are."""
    return textwrap.fill(text, width=72, subsequent_indent="    " if text.startswith("weights:") else "")


def _tokens(variant):
    """What one token of `variant` covers: a patch of pixels, or of a hybrid's ResNet feature map."""
    row = VARIANTS[variant]
    patch = row["patch_size"]
    if row.get("resnet_stages") is None:
        return f"{patch}x{patch} patches, one token each (images of any size are padded to whole patches)."
    stages = row["resnet_stages"]
    stride = resnet.output_stride(stages)
    # ResNet-N: N = 3 layers per bottleneck unit, plus the root convolution and the (absent) classifier.
    backbone = f"a ResNet-{2 + 3 * sum(stages)} with {stages} units per stage" if stages else "the ResNet root alone"
    side = patch * stride
    return (
        f"A hybrid: {backbone} (stride {stride}), then {patch}x{patch} patches of its feature map: one token "
        f'per {side}x{side} pixels (the ResNet pads "same": ceil(side / {side}) tokens per side).'
    )


def _weights_entry(variant):
    """The `weights` entry of `variant`'s constructor: its published tags, from the registry."""
    tags = pretrained.available_tags(variant)
    lister = f'`keras_vit.pretrained.available_tags("{variant}")`'
    checkpoints = ", ".join(f'`"{tag}"`' for tag in tags if tag != registry.IMAGENET_ALIAS)
    if not checkpoints:
        published = f'no tag nor `"imagenet"`: no ViT-{variant} checkpoint was published ({lister} is empty)'
    elif registry.IMAGENET_ALIAS in tags:
        published = (
            f'a checkpoint tag of ViT-{variant}, one of {checkpoints} ({lister}); `"imagenet"`, the best '
            "ImageNet-1k classifier at the published resolution nearest `input_shape`"
        )
    else:
        published = (
            f"a checkpoint tag of ViT-{variant}, one of {checkpoints} ({lister}; no ImageNet-1k classifier "
            'was published, so no `"imagenet"`)'
        )
    return _wrap(f"weights: `None` (random initialisation, the default); {published}; {_LOCAL_WEIGHTS}.")


# The named constructors by function name, in table order; filled by
# `register_constructor`.
CONSTRUCTORS = {}


def register_constructor(variant):
    """Registers a named constructor of `variant` (a `VARIANTS` key) and writes its docstring.

    The decorated function keeps its body; it gains the `.variant`
    attribute, read by `constructor_for`, the CLIs and the docs tables, and
    its docstring, `_VARIANT_DOCSTRING` filled from the variant's row.

    Args:
        variant: str, the key of the constructor's row in `VARIANTS`.

    Returns:
        The decorator. It raises `TypeError` for a function whose parameters
        or defaults differ from `CONSTRUCTOR_DEFAULTS` (`name`'s aside).
    """
    if variant not in VARIANTS:
        raise ValueError(f"`variant` must be a key of VARIANTS. Received: variant={variant!r}")

    def register(function):
        signature = {key: value.default for key, value in inspect.signature(function).parameters.items()}
        if list(signature) != list(CONSTRUCTOR_DEFAULTS) or signature | {"name": None} != CONSTRUCTOR_DEFAULTS:
            raise TypeError(f"{function.__name__}'s parameters must be CONSTRUCTOR_DEFAULTS. Received: {signature}")
        function.variant = variant
        row = VARIANTS[variant]
        function.__doc__ = docstrings.render(
            _VARIANT_DOCSTRING,
            function,
            _ARGS | {"weights": _weights_entry(variant)},
            variant=variant,
            constructor=function.__name__,
            tokens=_wrap(_tokens(variant)),
            parameters=PARAMETER_COUNTS[variant],
            **{key: row[key] for key in ("hidden_dim", "num_layers", "num_heads", "mlp_dim")},
        )
        CONSTRUCTORS[function.__name__] = function
        return function

    return register


def _build_variant(variant, **options):
    """The one body of every named constructor: `options` are its arguments."""
    return VisionTransformer(**VARIANTS[variant], **options)


# fmt: off
# The parameters of every named constructor, in order, with their defaults: the keras.applications signature,
# then the ViT options; `name`'s default is each constructor's own ("vit_b16", ...). `register_constructor`
# checks each signature against it; each is written out so that IDEs and `help()` show it.
CONSTRUCTOR_DEFAULTS = dict(
    include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None, pooling=None,
    classes=1000, classifier_activation="softmax", name=None, return_sequence=False, representation_size=None,
    dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0, gelu_approximate=False, remat=False,
    patch_dropout_rate=0.0,
)


@register_constructor("Ti/16")
def ViTTi16(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
            pooling=None, classes=1000, classifier_activation="softmax", name="vit_ti16", return_sequence=False,
            representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
            gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("Ti/16", **locals())


@register_constructor("S/16")
def ViTS16(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
           pooling=None, classes=1000, classifier_activation="softmax", name="vit_s16", return_sequence=False,
           representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
           gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("S/16", **locals())


@register_constructor("S/32")
def ViTS32(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
           pooling=None, classes=1000, classifier_activation="softmax", name="vit_s32", return_sequence=False,
           representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
           gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("S/32", **locals())


@register_constructor("B/8")
def ViTB8(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
          pooling=None, classes=1000, classifier_activation="softmax", name="vit_b8", return_sequence=False,
          representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
          gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("B/8", **locals())


@register_constructor("B/16")
def ViTB16(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
           pooling=None, classes=1000, classifier_activation="softmax", name="vit_b16", return_sequence=False,
           representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
           gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("B/16", **locals())


@register_constructor("B/32")
def ViTB32(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
           pooling=None, classes=1000, classifier_activation="softmax", name="vit_b32", return_sequence=False,
           representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
           gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("B/32", **locals())


@register_constructor("L/16")
def ViTL16(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
           pooling=None, classes=1000, classifier_activation="softmax", name="vit_l16", return_sequence=False,
           representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
           gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("L/16", **locals())


@register_constructor("L/32")
def ViTL32(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
           pooling=None, classes=1000, classifier_activation="softmax", name="vit_l32", return_sequence=False,
           representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
           gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("L/32", **locals())


@register_constructor("H/14")
def ViTH14(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
           pooling=None, classes=1000, classifier_activation="softmax", name="vit_h14", return_sequence=False,
           representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
           gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("H/14", **locals())


@register_constructor("R+Ti/16")
def ViTRTi16(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
             pooling=None, classes=1000, classifier_activation="softmax", name="vit_r_ti16", return_sequence=False,
             representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
             gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("R+Ti/16", **locals())


@register_constructor("R26+S/32")
def ViTR26S32(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
              pooling=None, classes=1000, classifier_activation="softmax", name="vit_r26_s32", return_sequence=False,
              representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
              gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("R26+S/32", **locals())


@register_constructor("R26+B/32")
def ViTR26B32(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
              pooling=None, classes=1000, classifier_activation="softmax", name="vit_r26_b32", return_sequence=False,
              representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
              gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("R26+B/32", **locals())


@register_constructor("R50+B/16")
def ViTR50B16(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
              pooling=None, classes=1000, classifier_activation="softmax", name="vit_r50_b16", return_sequence=False,
              representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
              gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("R50+B/16", **locals())


@register_constructor("R50+L/32")
def ViTR50L32(include_top=True, include_preprocessing=True, weights=None, input_tensor=None, input_shape=None,
              pooling=None, classes=1000, classifier_activation="softmax", name="vit_r50_l32", return_sequence=False,
              representation_size=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.0,
              gelu_approximate=False, remat=False, patch_dropout_rate=0.0):
    return _build_variant("R50+L/32", **locals())


# fmt: on


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
