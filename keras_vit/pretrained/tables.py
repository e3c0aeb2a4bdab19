"""The ViT's weight names in the official `.npz`, timm and Hugging Face layouts.

One table per model part and format; `LAYOUTS` composes them into every
layout keras_vit reads (and the ones it writes). See `mapping` for how a
table is read.

The correspondences: our qkv kernel `(D, 3D)` is `[q | k | v]` with each
part in `(head, head_dim)` order, i.e. the official `query/kernel (D, H, Dh)`
reshaped to `(D, H*Dh)`, or timm's `qkv.weight (3D, D)` transposed; the
attention output kernel `(D, D)` is the official `out/kernel (H, Dh, D)`
reshaped; the patch kernel is HWIO (official as is, PyTorch `(D, C, p, p)`
transposed by `(2, 3, 1, 0)`).

Official layout variants: a leading `opt/target/` (flax optimizer
checkpoints; `opt/state/` is ignored), big_vision's `params/` prefix and
per-type block numbering (`LayerNorm_0/1`, `MultiHeadDotProductAttention_0`,
`MlpBlock_0`) and top-level `pos_embedding` without the class-token row,
scanned blocks (`Transformer/encoderblock/...` with a leading layer axis),
with or without `pre_logits` and `head`.

Example:

>>> [layout.description for layout in LAYOUTS if layout.writes]
['official .npz (vit_jax naming, per-block, prefix (none))', 'timm safetensors', \
'Hugging Face transformers safetensors (ViTForImageClassification)', \
'Hugging Face transformers safetensors (ViTModel)']
"""

import dataclasses
import itertools

from keras_vit.pretrained.mapping import (
    IDENTITY,
    MERGE_HEADS_BIAS,
    MERGE_HEADS_IN,
    MERGE_HEADS_OUT,
    TORCH_CONV,
    TRANSPOSE,
    ZERO_CLASS_ROW,
    Layout,
    Part,
    fuse,
    rows,
)

BLOCKS = "encoder_block_{i}/"

# --------------------------------------------------------------------------- official (flax) .npz

OFFICIAL_EMBEDDING = Part(
    "patch embedding",
    rows(
        ("patch_embedding/projection/kernel", "embedding/kernel"),
        ("patch_embedding/projection/bias", "embedding/bias"),
        ("class_token/token", "cls"),
    ),
)
OFFICIAL_POSITIONS = Part(
    "position embedding", rows(("position_embedding/embedding", "Transformer/posembed_input/pos_embedding"))
)
BIG_VISION_POSITIONS = Part(
    "position embedding", rows(("position_embedding/embedding", "pos_embedding", ZERO_CLASS_ROW))
)
_ATTENTION = "MultiHeadDotProductAttention_1/"
# vit_jax numbers a block's submodules in order (LayerNorm_0, MHA_1, LayerNorm_2, MlpBlock_3).
OFFICIAL_BLOCKS = Part(
    "transformer blocks",
    rows(
        ("norm1/gamma", "LayerNorm_0/scale"),
        ("norm1/beta", "LayerNorm_0/bias"),
        (
            "attention/qkv/kernel",
            [f"{_ATTENTION}{n}/kernel" for n in ("query", "key", "value")],
            fuse(MERGE_HEADS_IN, 1),
        ),
        ("attention/qkv/bias", [f"{_ATTENTION}{n}/bias" for n in ("query", "key", "value")], fuse(MERGE_HEADS_BIAS, 0)),
        ("attention/output/kernel", f"{_ATTENTION}out/kernel", MERGE_HEADS_OUT),
        ("attention/output/bias", f"{_ATTENTION}out/bias"),
        ("norm2/gamma", "LayerNorm_2/scale"),
        ("norm2/beta", "LayerNorm_2/bias"),
        ("mlp/fc1/kernel", "MlpBlock_3/Dense_0/kernel"),
        ("mlp/fc1/bias", "MlpBlock_3/Dense_0/bias"),
        ("mlp/fc2/kernel", "MlpBlock_3/Dense_1/kernel"),
        ("mlp/fc2/bias", "MlpBlock_3/Dense_1/bias"),
    ),
    keras_root=BLOCKS,
    key_root="Transformer/encoderblock_{i}/",
)
# big_vision numbers them per type.
BIG_VISION_NAMES = {
    "MultiHeadDotProductAttention_1": "MultiHeadDotProductAttention_0",
    "LayerNorm_2": "LayerNorm_1",
    "MlpBlock_3": "MlpBlock_0",
}
OFFICIAL_NORM = Part(
    "encoder norm",
    rows(
        ("encoder_norm/gamma", "Transformer/encoder_norm/scale"), ("encoder_norm/beta", "Transformer/encoder_norm/bias")
    ),
)
OFFICIAL_PRE_LOGITS = Part(
    "pre_logits",
    rows(("pre_logits/kernel", "pre_logits/kernel"), ("pre_logits/bias", "pre_logits/bias")),
    optional=True,
)
OFFICIAL_HEAD = Part("head", rows(("head/kernel", "head/kernel"), ("head/bias", "head/bias")), optional=True)

NO_CLASS_TOKEN = (
    "This official checkpoint has no class token (`cls`): it was trained with global average pooling and no "
    "class token, which keras_vit's ViT (always with a class token) cannot reproduce."
)


def official_layouts():
    """Every official layout variant; the plain vit_jax one (written on export) first."""
    layouts = []
    for prefix, big_vision, scanned, zero_class_row in itertools.product(
        ("", "opt/target/", "params/"), (False, True), (False, True), (False, True)
    ):
        blocks = OFFICIAL_BLOCKS.renamed(BIG_VISION_NAMES) if big_vision else OFFICIAL_BLOCKS
        if scanned:
            blocks = dataclasses.replace(blocks, key_root="Transformer/encoderblock/", scan="i")
        positions = BIG_VISION_POSITIONS if zero_class_row else OFFICIAL_POSITIONS
        description = (
            f"official .npz ({'big_vision' if big_vision else 'vit_jax'} naming, "
            f"{'scanned' if scanned else 'per-block'}, prefix {prefix or '(none)'}"
            f"{', no class-token position' if zero_class_row else ''})"
        )
        layouts.append(
            Layout(
                "official",
                "official .npz",
                description,
                (OFFICIAL_EMBEDDING, positions, blocks, OFFICIAL_NORM, OFFICIAL_PRE_LOGITS, OFFICIAL_HEAD),
                prefix=prefix,
                # Flax optimizer checkpoints keep the optimizer's state next to the target.
                ignore=("opt/state/",) if prefix == "opt/target/" else (),
                requires=(("cls", NO_CLASS_TOKEN),),
                writes=not (prefix or big_vision or scanned or zero_class_row),
            )
        )
    return layouts


# --------------------------------------------------------------------------- timm

TIMM_EMBEDDING = Part(
    "patch embedding",
    rows(
        ("patch_embedding/projection/kernel", "patch_embed.proj.weight", TORCH_CONV),
        ("patch_embedding/projection/bias", "patch_embed.proj.bias"),
        ("class_token/token", "cls_token"),
        ("position_embedding/embedding", "pos_embed"),
    ),
)
TIMM_BLOCKS = Part(
    "transformer blocks",
    rows(
        ("norm1/gamma", "norm1.weight"),
        ("norm1/beta", "norm1.bias"),
        # timm's fused qkv has the same [q | k | v] x (head, head_dim) order as ours.
        ("attention/qkv/kernel", "attn.qkv.weight", TRANSPOSE),
        ("attention/qkv/bias", "attn.qkv.bias"),
        ("attention/output/kernel", "attn.proj.weight", TRANSPOSE),
        ("attention/output/bias", "attn.proj.bias"),
        ("norm2/gamma", "norm2.weight"),
        ("norm2/beta", "norm2.bias"),
        ("mlp/fc1/kernel", "mlp.fc1.weight", TRANSPOSE),
        ("mlp/fc1/bias", "mlp.fc1.bias"),
        ("mlp/fc2/kernel", "mlp.fc2.weight", TRANSPOSE),
        ("mlp/fc2/bias", "mlp.fc2.bias"),
    ),
    keras_root=BLOCKS,
    key_root="blocks.{i}.",
)
TIMM_NORM = Part("encoder norm", rows(("encoder_norm/gamma", "norm.weight"), ("encoder_norm/beta", "norm.bias")))


def torch_dense(name, key, optional=True, prefixed=True):
    """A PyTorch `Linear` `key` as the keras_vit Dense `name` (a part of its own)."""
    return Part(
        name,
        rows((f"{name}/kernel", f"{key}.weight", TRANSPOSE), (f"{name}/bias", f"{key}.bias", IDENTITY)),
        optional=optional,
        prefixed=prefixed,
    )


NO_TIMM_PRE_LOGITS = (
    "timm's VisionTransformer has no pre_logits (representation) layer since timm 0.6, so this model cannot be "
    "expressed in its layout. Export to 'hf' (its pooler is pre_logits, without a head) or 'official', or build "
    "the model without representation_size."
)
TIMM = Layout(
    "timm",
    "timm",
    "timm safetensors",
    # timm before 0.6 kept the representation layer as `pre_logits.fc`.
    (TIMM_EMBEDDING, TIMM_BLOCKS, TIMM_NORM, torch_dense("pre_logits", "pre_logits.fc"), torch_dense("head", "head")),
    refuses=(("pre_logits/", NO_TIMM_PRE_LOGITS),),
    writes=True,
)

# --------------------------------------------------------------------------- Hugging Face transformers

HF_EMBEDDING = Part(
    "patch embedding",
    rows(
        ("patch_embedding/projection/kernel", "embeddings.patch_embeddings.projection.weight", TORCH_CONV),
        ("patch_embedding/projection/bias", "embeddings.patch_embeddings.projection.bias"),
        ("class_token/token", "embeddings.cls_token"),
        ("position_embedding/embedding", "embeddings.position_embeddings"),
    ),
)
_QKV = ("query", "key", "value")
HF_BLOCKS = Part(
    "transformer blocks",
    rows(
        ("norm1/gamma", "layernorm_before.weight"),
        ("norm1/beta", "layernorm_before.bias"),
        ("attention/qkv/kernel", [f"attention.attention.{n}.weight" for n in _QKV], fuse(TRANSPOSE, 1)),
        ("attention/qkv/bias", [f"attention.attention.{n}.bias" for n in _QKV], fuse(IDENTITY, 0)),
        ("attention/output/kernel", "attention.output.dense.weight", TRANSPOSE),
        ("attention/output/bias", "attention.output.dense.bias"),
        ("norm2/gamma", "layernorm_after.weight"),
        ("norm2/beta", "layernorm_after.bias"),
        ("mlp/fc1/kernel", "intermediate.dense.weight", TRANSPOSE),
        ("mlp/fc1/bias", "intermediate.dense.bias"),
        ("mlp/fc2/kernel", "output.dense.weight", TRANSPOSE),
        ("mlp/fc2/bias", "output.dense.bias"),
    ),
    keras_root=BLOCKS,
    key_root="encoder.layer.{i}.",
)
HF_NORM = Part(
    "encoder norm", rows(("encoder_norm/gamma", "layernorm.weight"), ("encoder_norm/beta", "layernorm.bias"))
)
# ViTModel's pooler (Dense + tanh on the class token) is the original pre_logits;
# ViTForImageClassification keeps its backbone under `vit.` but not its classifier.
HF_PARTS = (
    HF_EMBEDDING,
    HF_BLOCKS,
    HF_NORM,
    torch_dense("pre_logits", "pooler.dense"),
    torch_dense("head", "classifier", prefixed=False),
)
NO_HF_POOLER_WITH_HEAD = (
    "transformers' ViTForImageClassification has no pre_logits (pooler) before its classifier, so a model with "
    "both cannot be exported to the 'hf' layout. Export with include_top=False (ViTModel with pooler) or use the "
    "'official' layout."
)
HF_CLASSIFIER = Layout(
    "hf",
    "Hugging Face transformers",
    "Hugging Face transformers safetensors (ViTForImageClassification)",
    HF_PARTS,
    prefix="vit.",
    # Masked-image-modelling only; no role in inference.
    ignore=("vit.embeddings.mask_token",),
    refuses=(("pre_logits/", NO_HF_POOLER_WITH_HEAD),),
    writes=True,
    write_when="head/kernel",
)
HF_MODEL = Layout(
    "hf",
    "Hugging Face transformers",
    "Hugging Face transformers safetensors (ViTModel)",
    HF_PARTS,
    ignore=("embeddings.mask_token",),
    writes=True,
)

# Every layout keras_vit reads, in the order ties are broken.
LAYOUTS = tuple(official_layouts()) + (TIMM, HF_CLASSIFIER, HF_MODEL)
