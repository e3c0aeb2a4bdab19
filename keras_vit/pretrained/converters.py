"""The ViT checkpoint layouts as tables, and converting by them.

One table (`Part`) per model part and format: the official JAX `.npz` (with flax's `opt/target/` prefix,
big_vision's `params/` naming and scanned blocks), timm and Hugging Face `transformers` safetensors, and the
hybrids' ResNet backbone. `to_keras` reads a file in the layout that accounts for its names; `from_keras` writes
one. Our qkv kernel `(D, 3D)` is `[q | k | v]`, each in `(head, head_dim)` order; patch kernels are HWIO.

Example:

>>> import numpy as np
>>> tensors = {"embedding/kernel": np.zeros((8, 8, 3, 4)), "embedding/bias": np.zeros(4), "cls": np.zeros((1, 1, 4))}
>>> detect_layout(tensors).format
'official'
"""

import dataclasses
import itertools

from keras_vit.pretrained.errors import CheckpointError
from keras_vit.pretrained.mapping import (
    FLAT_PATCHES,
    FOLD_CLASS_POSITION,
    HWIO,
    IDENTITY,
    MASKED_BIAS,
    MERGE_HEADS_BIAS,
    MERGE_HEADS_IN,
    MERGE_HEADS_OUT,
    MIXED_FREQUENCIES,
    PATCH_POSITIONS,
    TORCH_CONV,
    TORCH_FLAT_PATCHES,
    TRANSPOSE,
    ZERO_CLASS_ROW,
    ZERO_KEY_BIAS,
    Layout,
    Part,
    fuse,
    grid_table,
    leading_axes,
    packed_in_proj,
    rows,
)
from keras_vit.utils import validation

BLOCKS = "encoder_block_{i}/"
_QKV = ("query", "key", "value")


def flax_norm(keras_name, key):
    """A flax LayerNorm's rows: its `scale` and `bias` are keras_vit's `gamma` and `beta`."""
    return (f"{keras_name}/gamma", f"{key}/scale"), (f"{keras_name}/beta", f"{key}/bias")


def flax_dense(keras_name, key, transform=IDENTITY):
    """A flax Dense's rows: its `kernel` (by `transform`) and `bias`."""
    return (f"{keras_name}/kernel", f"{key}/kernel", transform), (f"{keras_name}/bias", f"{key}/bias")


def torch_norm(keras_name, key):
    """A PyTorch LayerNorm's rows: its `weight` and `bias` are keras_vit's `gamma` and `beta`."""
    return (f"{keras_name}/gamma", f"{key}.weight"), (f"{keras_name}/beta", f"{key}.bias")


def torch_linear(keras_name, key, transform=TRANSPOSE):
    """A PyTorch Linear's rows: its `(out, in)` `weight` is keras_vit's kernel transposed (`transform`)."""
    return (f"{keras_name}/kernel", f"{key}.weight", transform), (f"{keras_name}/bias", f"{key}.bias")


# ---------------------------------------------------------------- official (flax) .npz

OFFICIAL_EMBEDDING = Part(
    "patch embedding", rows(*flax_dense("patch_embedding/projection", "embedding", HWIO), ("class_token/token", "cls"))
)
OFFICIAL_POSITIONS = Part(
    "position embedding", rows(("position_embedding/embedding", "Transformer/posembed_input/pos_embedding"))
)
BIG_VISION_POSITIONS = Part(
    "position embedding", rows(("position_embedding/embedding", "pos_embedding", ZERO_CLASS_ROW))
)


def official_blocks(norm1, attention, norm2, mlp):
    """The blocks' part, given the file's names of a block's submodules."""
    return Part(
        "transformer blocks",
        rows(
            *flax_norm("norm1", norm1),
            ("attention/qkv/kernel", [f"{attention}/{n}/kernel" for n in _QKV], fuse(MERGE_HEADS_IN, 1)),
            ("attention/qkv/bias", [f"{attention}/{n}/bias" for n in _QKV], fuse(MERGE_HEADS_BIAS, 0)),
            *flax_dense("attention/output", f"{attention}/out", MERGE_HEADS_OUT),
            *flax_norm("norm2", norm2),
            *flax_dense("mlp/fc1", f"{mlp}/Dense_0"),
            *flax_dense("mlp/fc2", f"{mlp}/Dense_1"),
        ),
        keras_root=BLOCKS,
        key_root="Transformer/encoderblock_{i}/",
    )


# vit_jax numbers a block's submodules in order, big_vision per type.
OFFICIAL_BLOCKS = official_blocks("LayerNorm_0", "MultiHeadDotProductAttention_1", "LayerNorm_2", "MlpBlock_3")
BIG_VISION_BLOCKS = official_blocks("LayerNorm_0", "MultiHeadDotProductAttention_0", "LayerNorm_1", "MlpBlock_0")
OFFICIAL_NORM = Part("encoder norm", rows(*flax_norm("encoder_norm", "Transformer/encoder_norm")))
OFFICIAL_PRE_LOGITS = Part("pre_logits", rows(*flax_dense("pre_logits", "pre_logits")), optional=True)
OFFICIAL_HEAD = Part("head", rows(*flax_dense("head", "head")), optional=True)

NO_CLASS_TOKEN = (
    "This official checkpoint has no class token (`cls`): it was trained with global average pooling and no "
    "class token, which keras_vit's ViT (always with a class token) cannot reproduce."
)


def _scanned(blocks, scanned):
    return dataclasses.replace(blocks, key_root="Transformer/encoderblock/", scan="i") if scanned else blocks


def official_layouts():
    """Every official layout variant; the plain vit_jax one (written on export) first."""
    layouts = []
    for prefix, big_vision, scanned, zero_class_row in itertools.product(
        ("", "opt/target/", "params/"), (False, True), (False, True), (False, True)
    ):
        blocks = _scanned(BIG_VISION_BLOCKS if big_vision else OFFICIAL_BLOCKS, scanned)
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
                ignore=("opt/state/",) if prefix == "opt/target/" else (),
                requires=(("cls", NO_CLASS_TOKEN),),
                writes=not (prefix or big_vision or scanned or zero_class_row),
            )
        )
    return layouts


# big_vision's SigLIP 2 NaFlex (`models/proj/image_text/naflex_vit.py`): a Dense on flattened patches, a
# `(rows, cols, D)` table, no class token, a MAP head (`MAPHead_0`); a two-tower file keeps it under `params/img/`.
FLAX_HEAD_ATTENTION = "MultiHeadDotProductAttention_0/"
FLAX_MAP_HEAD = Part(
    "attention pooling",
    rows(
        ("latent", "probe"),
        ("query/kernel", f"{FLAX_HEAD_ATTENTION}query/kernel", MERGE_HEADS_IN),
        ("query/bias", f"{FLAX_HEAD_ATTENTION}query/bias", MERGE_HEADS_BIAS),
        ("key_value/kernel", [f"{FLAX_HEAD_ATTENTION}{n}/kernel" for n in _QKV[1:]], fuse(MERGE_HEADS_IN, 1, 2)),
        ("key_value/bias", [f"{FLAX_HEAD_ATTENTION}{n}/bias" for n in _QKV[1:]], fuse(MERGE_HEADS_BIAS, 0, 2)),
        *flax_dense("output", f"{FLAX_HEAD_ATTENTION}out", MERGE_HEADS_OUT),
        *flax_norm("norm", "LayerNorm_0"),
        *flax_dense("mlp/fc1", "MlpBlock_0/Dense_0"),
        *flax_dense("mlp/fc2", "MlpBlock_0/Dense_1"),
    ),
    keras_root="pooling/",
    key_root="MAPHead_0/",
    optional=True,
)
NAFLEX_EMBEDDING = Part(
    "patch embedding",
    rows(
        *flax_dense("patch_embedding/projection", "embedding", FLAT_PATCHES),
        ("position_embedding/embedding", "pos_embedding", grid_table(0)),
    ),
)
BIG_VISION_NAFLEX = tuple(
    Layout(
        "official",
        "official .npz",
        f"big_vision NaFlex .npz ({'scanned' if scanned else 'per-block'}, prefix {prefix or '(none)'})",
        (NAFLEX_EMBEDDING, _scanned(BIG_VISION_BLOCKS, scanned), OFFICIAL_NORM, FLAX_MAP_HEAD, OFFICIAL_HEAD),
        prefix=prefix,
        ignore=("params/txt/", "params/t", "params/b") if prefix == "params/img/" else (),  # the text tower
    )
    for prefix, scanned in itertools.product(("", "params/", "params/img/"), (False, True))
)

# ---------------------------------------------------------------- timm

TIMM_EMBEDDING = Part(
    "patch embedding",
    rows(
        ("patch_embedding/projection/kernel", "patch_embed.proj.weight", TORCH_CONV),
        ("position_embedding/embedding", "pos_embed"),
    ),
)


def torch_blocks(key_root, norms, qkv, output, mlp, *more):
    """A PyTorch encoder's blocks, given the file's names of a block's submodules (`qkv`: one fused, or q, k, v)."""
    if isinstance(qkv, str):
        attention = [("attention/qkv/kernel", f"{qkv}.weight", TRANSPOSE)]  # timm's qkv bias is an option
    else:
        attention = [
            ("attention/qkv/kernel", [f"{name}.weight" for name in qkv], fuse(TRANSPOSE, 1)),
            ("attention/qkv/bias", [f"{name}.bias" for name in qkv], fuse(IDENTITY, 0)),
        ]
    return Part(
        "transformer blocks",
        rows(
            *torch_norm("norm1", norms[0]),
            *attention,
            *torch_linear("attention/output", output),
            *torch_norm("norm2", norms[1]),
            *torch_linear("mlp/fc1", mlp[0]),
            *torch_linear("mlp/fc2", mlp[1]),
            *more,
        ),
        keras_root=BLOCKS,
        key_root=key_root,
    )


MLP = ("mlp.fc1", "mlp.fc2")
TIMM_BLOCKS = torch_blocks("blocks.{i}.", ("norm1", "norm2"), "attn.qkv", "attn.proj", MLP)


def attention_pool(key_root, latent, projections, output, norm):
    """A MAP head (`pooling="map"`, `keras_vit.layers.AttentionPooling`), given the file's names of its parts."""
    return Part(
        "attention pooling",
        rows(
            ("latent", latent),
            *projections,
            *torch_linear("output", output),
            *torch_norm("norm", norm),
            *torch_linear("mlp/fc1", "mlp.fc1"),
            *torch_linear("mlp/fc2", "mlp.fc2"),
        ),
        keras_root="pooling/",
        key_root=key_root,
        optional=True,
    )


TIMM_PROJECTIONS = (*torch_linear("query", "q"), *torch_linear("key_value", "kv"))
TIMM_ATTENTION_POOL = attention_pool("attn_pool.", "latent", TIMM_PROJECTIONS, "proj", "norm")


def timm_optional(name, *specs, **where):
    """A part of timm's layout only some architectures have (the model's own weights decide whether it fits)."""
    return Part(name, rows(*specs), optional=True, **where)


# The architecture options (`VisionTransformer`'s class_token, num_register_tokens, pre_norm, patch_bias,
# final_norm, fc_norm, layer_scale_init, qkv_bias).
TIMM_OPTIONS = (
    timm_optional("patch bias", ("patch_embedding/projection/bias", "patch_embed.proj.bias")),
    timm_optional("class token", ("class_token/token", "cls_token")),
    timm_optional("distillation token", ("distillation_token/token", "dist_token")),
    timm_optional("register tokens", ("register_tokens/token", "reg_token")),
    timm_optional("pre-norm", *torch_norm("norm_pre", "norm_pre")),
    timm_optional("encoder norm", *torch_norm("encoder_norm", "norm")),
    timm_optional("fc norm", *torch_norm("fc_norm", "fc_norm")),
    timm_optional("qkv bias", ("attention/qkv/bias", "attn.qkv.bias"), keras_root=BLOCKS, key_root="blocks.{i}."),
    timm_optional(
        "layer scale",
        ("layer_scale1", "ls1.gamma"),
        ("layer_scale2", "ls2.gamma"),
        keras_root=BLOCKS,
        key_root="blocks.{i}.",
    ),
)


# AIMv2: RMSNorm everywhere (a scale only), one after the patch embedding too, no projection biases, and a SwiGLU
# whose gate (`fc1_g`) and value (`fc1_x`) are separate.
TIMM_AIMV2_BLOCKS = Part(
    "transformer blocks",
    rows(
        ("norm1/scale", "norm1.weight"),
        ("attention/qkv/kernel", "attn.qkv.weight", TRANSPOSE),
        ("attention/output/kernel", "attn.proj.weight", TRANSPOSE),
        ("norm2/scale", "norm2.weight"),
        ("mlp/fc1/kernel", ["mlp.fc1_g.weight", "mlp.fc1_x.weight"], fuse(TRANSPOSE, 1, count=2)),
        ("mlp/fc2/kernel", "mlp.fc2.weight", TRANSPOSE),
    ),
    keras_root=BLOCKS,
    key_root="blocks.{i}.",
)
TIMM_AIMV2_NORMS = (
    timm_optional("patch norm", ("patch_norm/scale", "patch_embed.norm.weight")),
    timm_optional("encoder norm", ("encoder_norm/scale", "norm.weight")),
)


def torch_dense(name, key, prefixed=True):
    """An optional PyTorch `Linear` `key` as the keras_vit Dense `name`."""
    return Part(name, rows(*torch_linear(name, key)), optional=True, prefixed=prefixed)


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
    (
        TIMM_EMBEDDING,
        TIMM_BLOCKS,
        *TIMM_OPTIONS,
        TIMM_ATTENTION_POOL,
        torch_dense("pre_logits", "pre_logits.fc"),
        torch_dense("head", "head"),
        torch_dense("head_dist", "head_dist"),
    ),
    refuses=(("pre_logits/", NO_TIMM_PRE_LOGITS),),
    writes=True,
    gated_mlp=None,  # timm's SwiGLUPacked keeps the names `mlp.fc1` (`[gate; value]` rows) and `mlp.fc2`
)
TIMM_AIMV2 = Layout(
    "timm",
    "timm",
    "timm safetensors (AIMv2)",
    (TIMM_EMBEDDING, TIMM_AIMV2_BLOCKS, TIMM_OPTIONS[0], *TIMM_AIMV2_NORMS, torch_dense("head", "head")),
    writes=True,
    write_when="encoder_block_0/norm1/scale",
    gated_mlp=True,
)


def block_option(name, *specs):
    """A part of each timm block only some architectures have."""
    return timm_optional(name, *specs, keras_root=BLOCKS, key_root="blocks.{i}.")


def swiglu_rows(gate, value):
    """A SwiGLU's separate gate and value projections as keras_vit's packed `fc1` (`[gate | value]`)."""
    return (
        ("mlp/fc1/kernel", [f"{gate}.weight", f"{value}.weight"], fuse(TRANSPOSE, 1, count=2)),
        ("mlp/fc1/bias", [f"{gate}.bias", f"{value}.bias"], fuse(IDENTITY, 0, count=2)),
    )


NORM = Part("encoder norm", rows(*torch_norm("encoder_norm", "norm")))
# timm's `Eva` (DINOv3, EVA-02, PE, RoPE-ViT, sbb): its rotary embedding is computed, so the model name says it.
EVA_BLOCKS = Part(
    "transformer blocks",
    rows(*torch_norm("norm1", "norm1"), *torch_linear("attention/output", "attn.proj"), *torch_norm("norm2", "norm2"))
    + rows(*torch_linear("mlp/fc2", "mlp.fc2")),
    keras_root=BLOCKS,
    key_root="blocks.{i}.",
)
EVA_OPTIONS = (
    block_option("fused qkv", ("attention/qkv/kernel", "attn.qkv.weight", TRANSPOSE)),
    block_option("qkv bias", ("attention/qkv/bias", "attn.qkv.bias")),
    block_option("query and value biases", ("attention/qkv/bias", ["attn.q_bias", "attn.v_bias"], ZERO_KEY_BIAS)),
    block_option(
        "q, k, v projections",
        ("attention/qkv/kernel", [f"attn.{n}_proj.weight" for n in "qkv"], fuse(TRANSPOSE, 1)),
        ("attention/qkv/bias", ["attn.q_proj.bias", "attn.v_proj.bias"], ZERO_KEY_BIAS),
    ),
    block_option("attention norm", *torch_norm("attention/norm", "attn.norm")),
    block_option("MLP", *torch_linear("mlp/fc1", "mlp.fc1")),
    block_option("SwiGLU", *swiglu_rows("mlp.fc1_g", "mlp.fc1_x")),
    block_option("MLP norm", *torch_norm("mlp/norm", "mlp.norm")),
    block_option("layer scale", ("layer_scale1", "gamma_1"), ("layer_scale2", "gamma_2")),
)
TIMM_EVA = Layout(
    "timm",
    "timm",
    "timm safetensors (Eva: DINOv3, EVA-02, PE, RoPE-ViT)",
    (
        Part("patch embedding", TIMM_EMBEDDING.rows[:1]),
        timm_optional("position embedding", ("position_embedding/embedding", "pos_embed")),
        *TIMM_OPTIONS[:7],
        EVA_BLOCKS,
        *EVA_OPTIONS,
        timm_optional("learned RoPE frequencies", ("rotary_embedding/freqs", "rope.freqs", MIXED_FREQUENCIES)),
        torch_dense("head", "head"),
    ),
    rope="name",
)
# timm's `NaFlexVit` (`models/naflexvit.py`): a Linear on flattened patches and a `(1, rows, cols, D)` table under
# `embeds.`; its model name says its activation and table resize (`build.TIMM_NAME_RULES`).
TIMM_NAFLEX = Layout(
    "timm",
    "timm",
    "timm safetensors (NaFlexVit)",
    (
        Part(
            "patch embedding",
            rows(
                ("patch_embedding/projection/kernel", "embeds.proj.weight", TORCH_FLAT_PATCHES),
                ("patch_embedding/projection/bias", "embeds.proj.bias"),
            ),
        ),
        timm_optional("position embedding", ("position_embedding/embedding", "embeds.pos_embed", grid_table(1))),
        timm_optional("class token", ("class_token/token", "embeds.cls_token")),
        timm_optional("register tokens", ("register_tokens/token", "embeds.reg_token")),
        TIMM_BLOCKS,
        *TIMM_OPTIONS[4:],
        TIMM_ATTENTION_POOL,
        torch_dense("head", "head"),
    ),
)
# facebookresearch/dinov3's own files (`.pth` saved as safetensors): RoPE periods stored (checked, not loaded), a
# mask on the key third of the qkv bias, storage tokens (registers), SwiGLU as w1 (gate), w2 (value), w3.
ROPE_PERIODS = "rotary_embedding/periods"
DINOV3 = Layout(
    "dinov3",
    "DINOv3",
    "DINOv3 safetensors (facebookresearch/dinov3)",
    (
        Part("RoPE periods", rows((ROPE_PERIODS, "rope_embed.periods"))),
        Part(
            "patch embedding",
            TIMM_EMBEDDING.rows[:1]
            + rows(("patch_embedding/projection/bias", "patch_embed.proj.bias"), ("class_token/token", "cls_token")),
        ),
        timm_optional("storage tokens", ("register_tokens/token", "storage_tokens")),
        Part(
            "transformer blocks",
            EVA_BLOCKS.rows[:6] + rows(("attention/qkv/kernel", "attn.qkv.weight", TRANSPOSE)),
            keras_root=BLOCKS,
            key_root="blocks.{i}.",
        ),
        block_option("qkv bias", ("attention/qkv/bias", ["attn.qkv.bias", "attn.qkv.bias_mask"], MASKED_BIAS)),
        block_option("layer scale", ("layer_scale1", "ls1.gamma"), ("layer_scale2", "ls2.gamma")),
        block_option("MLP", *torch_linear("mlp/fc1", "mlp.fc1"), *torch_linear("mlp/fc2", "mlp.fc2")),
        block_option("SwiGLU", *swiglu_rows("mlp.w1", "mlp.w2"), *torch_linear("mlp/fc2", "mlp.w3")),
        NORM,
    ),
    ignore=("mask_token", "local_cls_norm."),  # pre-training only
    rope="name",
)

# ---------------------------------------------------------------- Hugging Face transformers


def hf_layout(model_class, parts, write_when, config, prefix="", gated_mlp=False):
    """The layout of a transformers `model_class` (with `prefix`: inside a whole CLIPModel's or SiglipModel's file)."""
    extras = ("text_model.", "text_projection.", "visual_projection.", "logit_scale", "logit_bias") if prefix else ()
    return Layout(
        "hf",
        "Hugging Face transformers",
        f"Hugging Face transformers safetensors ({prefix}{model_class})",
        parts,
        prefix=prefix,
        ignore=tuple(prefix + name for name in ("embeddings.mask_token", "embeddings.position_ids")) + extras,
        writes=not prefix,
        write_when=write_when,
        gated_mlp=gated_mlp,
        config=dict(config, architectures=[model_class]),
    )


HF_EMBEDDING = Part(
    "patch embedding",
    rows(
        *torch_linear("patch_embedding/projection", "embeddings.patch_embeddings.projection", TORCH_CONV),
        ("class_token/token", "embeddings.cls_token"),
        ("position_embedding/embedding", "embeddings.position_embeddings"),
    ),
)

VIT_ATTENTION = ([f"attention.attention.{n}" for n in _QKV], "attention.output.dense")
VIT_MLP = ("intermediate.dense", "output.dense")
HF_BLOCKS = torch_blocks("encoder.layer.{i}.", ("layernorm_before", "layernorm_after"), *VIT_ATTENTION, VIT_MLP)
HF_NORM = Part("encoder norm", rows(*torch_norm("encoder_norm", "layernorm")))
# ViTModel's pooler (Dense + tanh on the class token) is the original pre_logits;
# ViTForImageClassification keeps its backbone under `vit.` but not its classifier.
HF_PARTS = (
    HF_EMBEDDING,
    HF_BLOCKS,
    HF_NORM,
    torch_dense("pre_logits", "pooler.dense"),
    torch_dense("head", "classifier", prefixed=False),
)
VIT = dict(model_type="vit", hidden_act="gelu", layer_norm_eps=1e-12)
NO_HF_POOLER_WITH_HEAD = (
    "transformers' ViTForImageClassification has no pre_logits (pooler) before its classifier, so a model with "
    "both cannot be exported to the 'hf' layout. Export with include_top=False (ViTModel with pooler) or use the "
    "'official' layout."
)
HF_CLASSIFIER = dataclasses.replace(
    hf_layout("ViTForImageClassification", HF_PARTS, "head/kernel", VIT),
    prefix="vit.",
    ignore=("vit.embeddings.mask_token",),  # masked-image modelling only
    refuses=(("pre_logits/", NO_HF_POOLER_WITH_HEAD),),
)


HF_MODEL = hf_layout("ViTModel", HF_PARTS, "", VIT)
# DINOv2 giant's `Dinov2SwiGLUFFN`: `weights_in` holds the gate's rows, then the value's (as timm's packed `fc1`).
SWIGLU_MLP = ("mlp.weights_in", "mlp.weights_out")
LAYER_SCALE = (("layer_scale1", "layer_scale1.lambda1"), ("layer_scale2", "layer_scale2.lambda1"))
# The registers first: they recognise the layout.
HF_REGISTERS_EMBEDDING = Part(
    "patch embedding",
    rows(
        ("register_tokens/token", "embeddings.register_tokens"),
        ("class_token/token", ["embeddings.cls_token", "embeddings.position_embeddings"], FOLD_CLASS_POSITION),
        ("position_embedding/embedding", "embeddings.position_embeddings", PATCH_POSITIONS),
    )
    + HF_EMBEDDING.rows[:2],
)
# SigLIP's and CLIP's vision towers: one encoder, their embeddings and tops differ.
CLIP_PATCHES = ("patch_embedding/projection/kernel", "embeddings.patch_embedding.weight", TORCH_CONV)
CLIP_POSITIONS = ("position_embedding/embedding", "embeddings.position_embedding.weight", leading_axes(1))
CLIP_ATTENTION = ([f"self_attn.{n}_proj" for n in "qkv"], "self_attn.out_proj")
CLIP_BLOCKS = torch_blocks("encoder.layers.{i}.", ("layer_norm1", "layer_norm2"), *CLIP_ATTENTION, MLP)
CLIP_NORM = Part("encoder norm", rows(*torch_norm("encoder_norm", "post_layernorm")))
# `nn.MultiheadAttention` packs the query, key and value projections into `in_proj`.
IN_PROJECTIONS = (
    ("query/kernel", "attention.in_proj_weight", packed_in_proj(TRANSPOSE, query=True)),
    ("query/bias", "attention.in_proj_bias", packed_in_proj(IDENTITY, query=True)),
    ("key_value/kernel", "attention.in_proj_weight", packed_in_proj(TRANSPOSE, query=False)),
    ("key_value/bias", "attention.in_proj_bias", packed_in_proj(IDENTITY, query=False)),
)
SIGLIP_HEAD = attention_pool("head.", "probe", IN_PROJECTIONS, "attention.out_proj", "layernorm")
SIGLIP_EMBEDDING = rows(CLIP_PATCHES, ("patch_embedding/projection/bias", "embeddings.patch_embedding.bias"))
CLIP_EMBEDDING = rows(
    CLIP_PATCHES,
    ("class_token/token", "embeddings.class_embedding", leading_axes(2)),
    *torch_norm("norm_pre", "pre_layrnorm"),
)
SIGLIP_PARTS = (Part("patch embedding", SIGLIP_EMBEDDING + rows(CLIP_POSITIONS)), CLIP_BLOCKS, CLIP_NORM, SIGLIP_HEAD)
CLIP_PARTS = (Part("patch embedding", CLIP_EMBEDDING + rows(CLIP_POSITIONS)), CLIP_BLOCKS, CLIP_NORM)
DINOV2 = dict(model_type="dinov2", hidden_act="gelu", layer_norm_eps=1e-6)
SIGLIP = dict(model_type="siglip_vision_model", hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6)
# Siglip2VisionModel (NaFlex): SigLIP's names, a Linear on flattened patches and a 16 x 16 table (`num_patches`).
SIGLIP2 = dict(SIGLIP, model_type="siglip2_vision_model", patch_size=16, num_channels=3, num_patches=256)
SIGLIP2_PATCHES = ("patch_embedding/projection/kernel", "embeddings.patch_embedding.weight", TORCH_FLAT_PATCHES)
SIGLIP2_PARTS = (Part("patch embedding", rows(SIGLIP2_PATCHES) + SIGLIP_PARTS[0].rows[1:]), *SIGLIP_PARTS[1:])
CLIP = dict(model_type="clip_vision_model", hidden_act="quick_gelu", layer_norm_eps=1e-5)
REGISTERS = dict(DINOV2, model_type="dinov2_with_registers")
# DeiT is ViT's layout with a distillation token (first: it recognises the layout) and, with a teacher, two heads.
DEIT_PARTS = (Part("patch embedding", rows(("distillation_token/token", "embeddings.distillation_token"))), HF_BLOCKS)
DEIT_PARTS += (HF_NORM, HF_EMBEDDING)
DEIT_HEADS = (torch_dense("head", "cls_classifier", prefixed=False),)
DEIT_HEADS += (torch_dense("head_dist", "distillation_classifier", prefixed=False),)
DEIT = dict(model_type="deit", hidden_act="gelu", layer_norm_eps=1e-12)
DEIT_TEACHER = hf_layout("DeiTForImageClassificationWithTeacher", DEIT_PARTS + DEIT_HEADS, "head_dist/kernel", DEIT)
HF_FAMILY = (
    dataclasses.replace(DEIT_TEACHER, prefix="deit.", ignore=()),
    # transformers' DeiTModel pooler is not DeiT's (a fresh tanh Dense on the class token): left aside.
    dataclasses.replace(
        hf_layout("DeiTModel", DEIT_PARTS, "distillation_token/token", DEIT),
        ignore=("embeddings.mask_token", "pooler."),
    ),
)
# DINOv3ViTModel: RoPE from its config's `rope_theta`, registers, layer scale, no key bias; MLP or SwiGLU.
DINOV3_EMBEDDING = Part(
    "patch embedding",
    rows(
        ("patch_embedding/projection/kernel", "embeddings.patch_embeddings.weight", TORCH_CONV),
        ("patch_embedding/projection/bias", "embeddings.patch_embeddings.bias"),
        ("class_token/token", "embeddings.cls_token"),
    ),
)
DINOV3_HF = dict(model_type="dinov3_vit", hidden_act="gelu", layer_norm_eps=1e-5, rope_theta=100.0)
for mlp_rows, gated in (
    (torch_linear("mlp/fc1", "mlp.up_proj"), False),
    (swiglu_rows("mlp.gate_proj", "mlp.up_proj"), True),
):
    blocks = Part(
        "transformer blocks",
        rows(
            *torch_norm("norm1", "norm1"),
            ("attention/qkv/kernel", [f"attention.{n}_proj.weight" for n in "qkv"], fuse(TRANSPOSE, 1)),
            *torch_linear("attention/output", "attention.o_proj"),
            *torch_norm("norm2", "norm2"),
            *mlp_rows,
            *torch_linear("mlp/fc2", "mlp.down_proj"),
            *LAYER_SCALE,
        ),
        keras_root=BLOCKS,
        key_root="layer.{i}.",
    )
    biases = ("attention/qkv/bias", ["attention.q_proj.bias", "attention.v_proj.bias"], ZERO_KEY_BIAS)
    parts = (
        DINOV3_EMBEDDING,
        timm_optional("register tokens", ("register_tokens/token", "embeddings.register_tokens")),
    )
    parts += (blocks, timm_optional("query and value biases", biases, keras_root=BLOCKS, key_root="layer.{i}."))
    dinov3 = hf_layout("DINOv3ViTModel", (*parts, NORM), "", DINOV3_HF, gated_mlp=gated)
    # Before DINOv2's: a model without a position table writes this layout.
    HF_FAMILY += (dataclasses.replace(dinov3, write_unless="position_embedding/embedding", rope="config"),)
for mlp, gated in ((MLP, False), (SWIGLU_MLP, True)):
    parts = (torch_blocks("encoder.layer.{i}.", ("norm1", "norm2"), *VIT_ATTENTION, mlp, *LAYER_SCALE), HF_NORM)
    registers = (HF_REGISTERS_EMBEDDING, *parts)
    HF_FAMILY += (
        hf_layout("Dinov2WithRegistersModel", registers, "register_tokens/token", REGISTERS, gated_mlp=gated),
        hf_layout("Dinov2Model", (HF_EMBEDDING, *parts), "encoder_block_0/layer_scale1", DINOV2, gated_mlp=gated),
    )
for prefix in ("", "vision_model."):
    HF_FAMILY += (
        hf_layout("SiglipVisionModel", SIGLIP_PARTS, "pooling/latent", SIGLIP, prefix),
        hf_layout("CLIPVisionModel", CLIP_PARTS, "norm_pre/gamma", CLIP, prefix),
        # Read only: keras_vit writes a SigLIP as SiglipVisionModel.
        dataclasses.replace(hf_layout("Siglip2VisionModel", SIGLIP2_PARTS, "", SIGLIP2, prefix), writes=False),
    )

# ---------------------------------------------------------------- hybrids: the ResNet backbone
# keras_vit (`keras_vit.layers.resnet`): `patch_embedding/backbone/conv_root`, `gn_root`,
# `block{s}_unit{u}/{conv,gn}{1,2,3}` and `{conv,gn}_proj`, stages and units counted from 1 as in the
# official files; timm (`vision_transformer_hybrid.py`) counts `stages.{s}.blocks.{u}` from 0.

BACKBONE = "patch_embedding/backbone/"
UNITS = BACKBONE + "block{s}_unit{u}/"
# Present in every hybrid and only in hybrids.
ROOT_KERNEL = BACKBONE + "conv_root/kernel"


def conv_norm_rows(keras_conv, keras_norm, conv, norm, torch):
    """A convolution kernel and its GroupNorm, the file's `conv` and `norm` named as PyTorch (`torch`) or flax does."""
    if torch:
        return rows((f"{keras_conv}/kernel", f"{conv}.weight", TORCH_CONV), *torch_norm(keras_norm, norm))
    return rows((f"{keras_conv}/kernel", f"{conv}/kernel"), *flax_norm(keras_norm, norm))


def backbone_parts(root, unit, projection, key_root, torch, offsets=None):
    """The root, the units' three conv/norm pairs and the projection shortcuts of one layout.

    `root` and `projection` are the file's (conv, norm) names, `unit(r)` those of a unit's conv/norm `r`.
    """
    units = ()
    for r in (1, 2, 3):
        units += conv_norm_rows(f"conv{r}", f"gn{r}", *unit(r), torch)
    where = dict(keras_root=UNITS, key_root=key_root, offsets=dict(offsets or {}))
    return (
        Part("ResNet root", conv_norm_rows(BACKBONE + "conv_root", BACKBONE + "gn_root", *root, torch)),
        Part("ResNet units", units, **where),
        # Only the units that change channels or stride have one.
        Part("ResNet projections", conv_norm_rows("conv_proj", "gn_proj", *projection, torch), **where),
    )


OFFICIAL_BACKBONE = backbone_parts(
    ("conv_root", "gn_root"),
    lambda r: (f"conv{r}", f"gn{r}"),
    ("conv_proj", "gn_proj"),
    "block{s}/unit{u}/",
    torch=False,
)
TIMM_BACKBONE = backbone_parts(
    ("patch_embed.backbone.stem.conv", "patch_embed.backbone.stem.norm"),
    lambda r: (f"conv{r}", f"norm{r}"),
    ("downsample.conv", "downsample.norm"),
    "patch_embed.backbone.stages.{s}.blocks.{u}.",
    torch=True,
    offsets={"s": -1, "u": -1},
)
# timm builds R+Ti/16's backbone as the bare root: no `stem.` level.
TIMM_ROOT = ("patch_embed.backbone.conv", "patch_embed.backbone.norm")
TIMM_ROOT_ONLY = Part(
    "ResNet root", conv_norm_rows(BACKBONE + "conv_root", BACKBONE + "gn_root", *TIMM_ROOT, torch=True)
)


def _hybrid(layout, parts, what, write_when):
    return layout.with_parts(*parts, description=f"{layout.description} + {what}", write_when=write_when)


# The plain layouts first: a plain file ties with the hybrid ones (which only add the backbone) and keeps its
# plain layout; a hybrid file's backbone tensors make its hybrid layout score higher.
LAYOUTS = (
    tuple(official_layouts())
    + BIG_VISION_NAFLEX
    + (TIMM, TIMM_AIMV2, TIMM_EVA, TIMM_NAFLEX, DINOV3, *HF_FAMILY, HF_CLASSIFIER, HF_MODEL)
    + tuple(_hybrid(layout, OFFICIAL_BACKBONE, "ResNet backbone", ROOT_KERNEL) for layout in official_layouts())
    + (
        _hybrid(TIMM, TIMM_BACKBONE, "ResNet stages", BACKBONE + "block1_unit1/conv1/kernel"),
        _hybrid(TIMM, (TIMM_ROOT_ONLY,), "ResNet root only", ROOT_KERNEL),
    )
)
# The formats keras_vit writes (DINOv3's own layout is read only).
FORMATS = tuple(dict.fromkeys(layout.format for layout in LAYOUTS if layout.writes))


def detect_layout(tensors, layouts=LAYOUTS):
    """The layout among `layouts` that accounts for most of the file's names.

    Raises:
        CheckpointError: no layout's patch-embedding tensor is present.
    """
    best = max(layouts, key=lambda layout: layout.score(tensors))  # the first of equals
    if not best.score(tensors):
        labels = ", ".join(dict.fromkeys(layout.label for layout in layouts))
        raise CheckpointError(
            f"This is not a ViT checkpoint in a layout keras_vit reads ({labels}): none of their "
            f"patch-embedding tensors is present. First names: {sorted(tensors)[:8]}."
        )
    return best


def to_keras(tensors, format=None, layouts=LAYOUTS):
    """Converts a checkpoint dict to keras_vit names.

    Args:
        tensors: `{name: array}` as read from the file.
        format: `"official"`, `"timm"`, `"hf"` or None to detect it.
        layouts: the layouts to choose from.

    Returns:
        `(weights, description)`: the converted dict and the layout's description.
    """
    layout = detect_layout(tensors, layouts)
    if format is not None and format != layout.format:
        raise CheckpointError(
            f"Expected a {format} checkpoint but the tensor names are those of the {layout.format} layout."
        )
    return layout.read(tensors), layout.description


def gated_mlp(weights):
    """Whether keras_vit `weights` hold gated MLPs (`mlp_activation="swiglu"`): `fc1` twice as wide as `fc2`'s input.

    A plain MLP's `fc1` is exactly as wide, so the shapes alone tell (timm names both kinds alike).
    """
    fc1, fc2 = (weights.get(f"{BLOCKS.format(i=0)}mlp/fc{n}/kernel") for n in (1, 2))
    return fc1 is not None and fc2 is not None and fc1.shape[-1] == 2 * fc2.shape[0]


def writing_layout(weights, format, layouts=LAYOUTS):
    """The layout among `layouts` that `from_keras` writes these keras_vit weights in."""
    validation.one_of("format", format, dict.fromkeys(layout.format for layout in layouts))
    gated = gated_mlp(weights)
    candidates = [layout for layout in layouts if layout.format == format and layout.writes]
    candidates = [layout for layout in candidates if layout.gated_mlp in (None, gated)]
    # A layout written only for some weights (a head, a ResNet backbone) wins over an unconditional one.
    candidates.sort(key=lambda layout: not (layout.write_when or layout.write_unless))
    for layout in candidates:
        if (not layout.write_when or layout.write_when in weights) and layout.write_unless not in weights:
            return layout
    raise ValueError(f"No {format} layout holds these weights' gated (SwiGLU) MLP: export to 'timm'.")


def from_keras(weights, format, num_heads=None, layouts=LAYOUTS):
    """Converts keras_vit weights to `format` (`"official"` needs `num_heads`)."""
    return writing_layout(weights, format, layouts).write(weights, {"num_heads": num_heads})
