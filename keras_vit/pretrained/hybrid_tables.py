"""The hybrid ViT's ResNet weight names in the official `.npz` and timm layouts.

A hybrid checkpoint is a ViT checkpoint (the tables of `tables`, whose
`embedding` is the projection of the ResNet feature map) plus the ResNet
backbone. These parts add the backbone to each ViT layout; `HYBRID_LAYOUTS`
are the composed layouts, read and written like the plain ones.

keras_vit names (`keras_vit.layers.resnet`): `patch_embedding/backbone/conv_root`,
`gn_root`, and `block{s}_unit{u}/{conv1,gn1,conv2,gn2,conv3,gn3,conv_proj,gn_proj}`
with 1-based stage and unit numbers, as in the official files:

- official (vit_jax `models_resnet.py`): `conv_root/kernel` (HWIO),
  `gn_root/{scale,bias}`, `block{s}/unit{u}/conv{1,2,3}/kernel`,
  `gn{1,2,3}/{scale,bias}`, `conv_proj/kernel`, `gn_proj/{scale,bias}`;
- timm (`vision_transformer_hybrid.py`): `patch_embed.backbone.stem.conv.weight`
  (`(out, in, h, w)`), `stem.norm.{weight,bias}`,
  `stages.{s-1}.blocks.{u-1}.{conv,norm}{1,2,3}`, `downsample.{conv,norm}`;
  the root-only backbone of R+Ti/16 is `patch_embed.backbone.{conv,norm}`.

Example:

>>> [layout.description for layout in HYBRID_LAYOUTS if layout.writes]
['official .npz (vit_jax naming, per-block, prefix (none)) + ResNet backbone', \
'timm safetensors + ResNet stages', 'timm safetensors + ResNet root only']
"""

from keras_vit.pretrained import tables
from keras_vit.pretrained.mapping import IDENTITY, TORCH_CONV, Part, rows

BACKBONE = "patch_embedding/backbone/"
UNITS = BACKBONE + "block{s}_unit{u}/"
# Present in every hybrid and only in hybrids: selects the hybrid layouts for writing.
ROOT_KERNEL = BACKBONE + "conv_root/kernel"
FIRST_UNIT_KERNEL = BACKBONE + "block1_unit1/conv1/kernel"


def conv_norm_rows(keras_conv, keras_norm, keys, conv_transform):
    """A convolution kernel and its GroupNorm: `keys` are the file's (kernel, scale, bias)."""
    kernel, scale, bias = keys
    return rows(
        (f"{keras_conv}/kernel", kernel, conv_transform),
        (f"{keras_norm}/gamma", scale, IDENTITY),
        (f"{keras_norm}/beta", bias, IDENTITY),
    )


def backbone_parts(root_keys, unit_keys, projection_keys, key_root, conv_transform, offsets=None):
    """The root, the units' three conv/norm pairs and the projection shortcuts of one layout.

    Args:
        root_keys: the file's (kernel, scale, bias) of the root.
        unit_keys: function `r -> (kernel, scale, bias)` for conv/gn `r` of a unit.
        projection_keys: the (kernel, scale, bias) of a projection shortcut.
        key_root: the file's prefix of a unit, with `{s}` and `{u}`.
        conv_transform: file kernel -> HWIO.
        offsets: the file's numbering minus keras_vit's (`{"s": -1, "u": -1}` for 0-based files).

    Returns:
        A tuple of `Part`s.
    """
    units = ()
    for r in (1, 2, 3):
        units += conv_norm_rows(f"conv{r}", f"gn{r}", unit_keys(r), conv_transform)
    unit_part = dict(keras_root=UNITS, key_root=key_root, offsets=dict(offsets or {}))
    return (
        Part("ResNet root", conv_norm_rows(BACKBONE + "conv_root", BACKBONE + "gn_root", root_keys, conv_transform)),
        Part("ResNet units", units, **unit_part),
        # Only the units that change channels or stride have one; their indices come from the names present.
        Part(
            "ResNet projection shortcuts",
            conv_norm_rows("conv_proj", "gn_proj", projection_keys, conv_transform),
            **unit_part,
        ),
    )


OFFICIAL_BACKBONE = backbone_parts(
    ("conv_root/kernel", "gn_root/scale", "gn_root/bias"),
    lambda r: (f"conv{r}/kernel", f"gn{r}/scale", f"gn{r}/bias"),
    ("conv_proj/kernel", "gn_proj/scale", "gn_proj/bias"),
    key_root="block{s}/unit{u}/",
    conv_transform=IDENTITY,
)

_TIMM_BACKBONE = "patch_embed.backbone."
TIMM_BACKBONE = backbone_parts(
    tuple(f"{_TIMM_BACKBONE}stem.{name}" for name in ("conv.weight", "norm.weight", "norm.bias")),
    lambda r: (f"conv{r}.weight", f"norm{r}.weight", f"norm{r}.bias"),
    ("downsample.conv.weight", "downsample.norm.weight", "downsample.norm.bias"),
    key_root=_TIMM_BACKBONE + "stages.{s}.blocks.{u}.",
    conv_transform=TORCH_CONV,
    offsets={"s": -1, "u": -1},
)
# timm builds R+Ti/16's backbone as the bare root (`create_resnetv2_stem`): no `stem.` level.
TIMM_ROOT_ONLY = (
    Part(
        "ResNet root",
        conv_norm_rows(
            BACKBONE + "conv_root",
            BACKBONE + "gn_root",
            tuple(f"{_TIMM_BACKBONE}{name}" for name in ("conv.weight", "norm.weight", "norm.bias")),
            TORCH_CONV,
        ),
    ),
)


def _with_backbone(layout, parts, what, write_when):
    return layout.with_parts(*parts, description=f"{layout.description} + {what}", write_when=write_when)


# Read after the plain layouts (a plain file ties and keeps its plain layout; a hybrid file's backbone
# tensors make its hybrid layout score higher). Written whenever the weights have a ResNet root.
HYBRID_LAYOUTS = tuple(
    _with_backbone(layout, OFFICIAL_BACKBONE, "ResNet backbone", ROOT_KERNEL) for layout in tables.official_layouts()
) + (
    _with_backbone(tables.TIMM, TIMM_BACKBONE, "ResNet stages", FIRST_UNIT_KERNEL),
    _with_backbone(tables.TIMM, TIMM_ROOT_ONLY, "ResNet root only", ROOT_KERNEL),
)
