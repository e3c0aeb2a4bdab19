"""`build_from_checkpoint`: the `VisionTransformer` a checkpoint holds, read from its tensors and config.

The tensors tell most of the architecture (`loader.architecture_of_weights`); what they cannot tell (the MLP
activation, the LayerNorm epsilon, the heads of a fused projection) comes from the timm model name, by the
patterns below, taken from timm's model definitions.
"""

import fnmatch
import math
import os

import keras

from keras_vit.models import variants
from keras_vit.models.vit import VisionTransformer
from keras_vit.pretrained import converters, io, loader, sources
from keras_vit.pretrained.errors import CheckpointError

NAFLEX_SIGLIP = "naflexvit_*_siglip"
# timm model-name patterns and what their definitions fix that the tensors do not show; the first match of each
# key wins.
TIMM_NAME_RULES = (
    ("*_quickgelu_*", dict(mlp_activation="quick_gelu")),
    ("vit_base_patch32_siglip_*", dict(mlp_activation="gelu_tanh")),
    ("vit_large_patch16_siglip_512", dict(mlp_activation="gelu_tanh")),
    ("vit_large_patch16_siglip_gap_512", dict(mlp_activation="gelu_tanh")),
    ("vit_so400m_patch16_siglip_*", dict(mlp_activation="gelu_tanh")),
    ("vit_giantopt_patch16_siglip_*", dict(mlp_activation="gelu_tanh")),
    ("*_clip_*", dict(layer_norm_epsilon=1e-5)),
    ("aimv2_*", dict(layer_norm_epsilon=1e-5, head_dim=128)),
    ("test_vit*", dict(head_dim=32)),
    # timm resizes FlexiViT's position table (and patch kernel) bilinearly without antialias.
    ("flexivit_*", dict(resample_method="bilinear", resample_antialias=False)),
    # SigLIP 2 NaFlex (`pos_embed_interp_mode="bilinear"`, antialiased as timm's default is).
    (NAFLEX_SIGLIP, dict(mlp_activation="gelu_tanh", resample_method="bilinear", resample_antialias=True)),
)
# Hidden sizes whose heads are not 64 wide: SigLIP so400m (72) and ViT-H (80).
WIDE_HEADS = {1152: 16, 1280: 16}
# Architectures keras_vit does not build, by the tensors that show them or, where none do, by name.
UNSUPPORTED_TENSORS = (
    (".attn.q_norm.", "query-key normalisation"),
    (".attn.norm.", "a norm inside the attention (BEiT-3)"),
    (".lambda_q1", "differential attention (timm's DiffAttention)"),
    (".in_proj.", "parallel attention and MLP blocks (timm's ParallelScalingBlock)"),
)
UNSUPPORTED_NAMES = (
    ("*_rpn_*", "post-norm residual blocks (timm's ResPostBlock)"),
    ("test_vit3", "attention pooling over the prefix tokens (timm's pool_include_prefix)"),
)
# transformers' `hidden_act` names of the activations keras_vit builds.
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh", "quick_gelu": "quick_gelu"}
TIMM_POOLING = {"token": "token", "avg": "gap", "max": "max", "map": "map", "": None}


def build_from_checkpoint(source, architecture=None, **constructor_keywords):
    """The `keras_vit.VisionTransformer` a checkpoint holds, with its weights (all or nothing).

    The architecture is read from the tensors (class and register tokens, position embedding with or without the
    prefix tokens, pre-norm, biases, layer scale, final or pooled norm, MAP head, sizes, patch and grid) and from the
    `config.json` next to the file: timm's (model name, `pretrained_cfg` with the pixel mean and std) or
    transformers' (DINOv2, SigLIP, CLIP, DeiT, ViT: else the class's defaults; the pixel mean and std from the image
    processor's `preprocessor_config.json`). Built at the checkpoint's image size, it outputs what the checkpoint's
    own model does (logits: `classifier_activation=None`; an official `.npz` gets the JAX code's tanh GELU).

    RoPE ViTs: timm's `Eva` family (DINOv3, EVA-02, PE spatial and lang, Naver RoPE-ViT axial and mixed, sbb) gets
    its rotary embedding, epsilon and head width from the timm model name (`loader.TIMM_EVA_RULES`); transformers'
    `DINOv3ViTModel` from its config; DINOv3's own files (facebookresearch/dinov3) from `architecture` (a timm DINOv3
    name). Without a position table the model takes any image size. A file whose tensors only timm's `Eva` has
    is refused until something names its model; PE's tensors are a CLIP-style ViT's, so a PE file without its
    `config.json` (or `architecture`) loads as that plain ViT, without its RoPE: keep the two together.

    Args:
        source: a `.safetensors` or `.npz` file, a `save_pretrained` folder, `"hf://org/repo[/file][@revision]"`,
            or, with `architecture` a variant, a checkpoint tag (see `available_tags`).
        architecture: None; a timm model name (e.g. `"vit_base_patch16_clip_quickgelu_224"`) for what the tensors
            cannot tell where no `config.json` names it; or a keras_vit variant (`"B/16"`), which builds
            `VisionTransformer(**VARIANTS[architecture], weights=source)`.
        **constructor_keywords: other arguments of `keras_vit.VisionTransformer`, over those read.

    Returns:
        The `VisionTransformer` with the checkpoint's weights.

    Raises:
        ValueError: `source` names no file, folder or Hub repository (a tag needs a variant).
        DownloadError: the file cannot be fetched.
        CheckpointError: an unreadable file, an architecture keras_vit does not build, or a mismatch.

    Example:

    >>> model = build_from_checkpoint("timm_dinov2/model.safetensors")  # doctest: +SKIP
    """
    if architecture in variants.VARIANTS:
        return VisionTransformer(**variants.VARIANTS[architecture], weights=source, **constructor_keywords)
    text = os.fspath(source) if isinstance(source, (str, os.PathLike)) else ""
    if not (text.startswith(sources.HUB_SCHEME) or "://" in text or os.path.exists(text)):
        raise ValueError(
            f"`source` must be a checkpoint file, a folder or 'hf://org/repo'; a checkpoint tag needs "
            f"architecture=<variant>, e.g. architecture='B/16'. Received: source={source!r}"
        )
    path, _ = sources.fetch(sources.resolve_source(None, text))
    timm_config = _timm_config(path)
    name = architecture or timm_config.get("architecture") or ""
    for pattern, what in UNSUPPORTED_NAMES:
        if fnmatch.fnmatchcase(name, pattern):
            raise CheckpointError(f"{text} ({name}) has {what}, which keras_vit does not build. Nothing was loaded.")
    try:
        checkpoint = loader.load_checkpoint(path)
        if checkpoint.format == "timm" and "linear_patches" in checkpoint.shape_facts:
            _check_timm_naflex(text, name)
        rope, _ = loader.file_rope(checkpoint, name)
        rope = constructor_keywords.get("rope", None if rope is ... else rope)
        loader.check_rope(checkpoint, rope, name)
    except CheckpointError as error:
        for marker, what in UNSUPPORTED_TENSORS:
            found = [key for key in error.unexpected if marker in key]
            if found:
                raise CheckpointError(
                    f"{text} has {what} ({found[0]}), which keras_vit does not build. Nothing was loaded."
                ) from None
        raise
    heads = constructor_keywords.get("num_heads")
    read = {**_arguments(checkpoint, name, timm_config, heads), **_normalisation(path, timm_config), "rope": rope}
    del checkpoint  # the constructor reads the file again; one copy of the tensors at a time
    return VisionTransformer(**{**read, **constructor_keywords}, weights=path)


def _check_timm_naflex(text, name):
    """Refuses a timm `NaFlexVit` file unless its name is a SigLIP 2 one: only the name says its activation and
    position-table resize."""
    if not fnmatch.fnmatchcase(name, NAFLEX_SIGLIP):
        raise CheckpointError(
            f"{text} is timm's NaFlexVit {name or '(no config.json names it)'}: keras_vit reads its SigLIP 2 models "
            f"({NAFLEX_SIGLIP}), whose activation and position resize the name says; pass "
            "architecture=<timm model name>. Nothing was loaded."
        )


def _timm_config(path):
    """The `config.json` timm writes next to its weights (model name, `pretrained_cfg`), or `{}`."""
    config = io.json_beside(path, "config.json")
    return config if "architecture" in config else {}


def _named(name):
    """What timm's definition of the model `name` fixes that the tensors do not show."""
    found = {}
    # An Eva model's own facts first: `eva02_*_clip_*` is no OpenAI CLIP.
    for pattern, values in loader.TIMM_EVA_RULES + TIMM_NAME_RULES:
        if fnmatch.fnmatchcase(name, pattern):
            found = {**values, **found}
    return found


def _num_heads(checkpoint, hidden_dim, named, timm_config):
    """The heads the file declares, else timm's `model_args`, else timm's rule (64-wide heads but the wide sizes)."""
    declared = checkpoint.declared_heads() or (timm_config.get("model_args") or {}).get("num_heads")
    if declared:
        return declared
    head_dim = named.get("head_dim", 64)
    heads = WIDE_HEADS.get(hidden_dim) if "head_dim" not in named else None
    if heads is None and hidden_dim % head_dim:
        raise CheckpointError(
            f"{checkpoint.path} fuses its attention heads and nothing says how many (hidden size {hidden_dim}): "
            "pass num_heads or architecture=<timm model name>."
        )
    return heads or hidden_dim // head_dim


def _embedding_layout(checkpoint, declared_grid):
    """`(no_embed_class, grid)`: whether the position embedding leaves out the prefix tokens, and its patch grid.

    The declared grid where it fits the rows, else the reading whose patch rows make a square (prefix covered first);
    `(False, None)` without a position table.
    """
    checkpoint.no_embed_class = False
    if "position_embedding/embedding" not in checkpoint.weights:
        return False, None
    prefix = checkpoint.position_prefix
    rows = int(checkpoint.weights["position_embedding/embedding"].shape[1])
    for declared in (True, False) if declared_grid else (False,):
        for no_embed_class in (False, True) if prefix else (False,):
            patches = rows if no_embed_class else rows - prefix
            side = math.isqrt(max(patches, 0))
            grid = declared_grid if declared else (side, side)
            if patches > 0 and grid[0] * grid[1] == patches:
                checkpoint.no_embed_class = no_embed_class
                return no_embed_class, grid
    raise CheckpointError(
        f"{checkpoint.path}: the position embedding's {rows} rows fit no square patch grid with {prefix} prefix "
        "tokens or without them: pass input_shape."
    )


def _declared_grid(checkpoint, timm_config):
    grid = checkpoint.declared_grid()
    input_size = (timm_config.get("pretrained_cfg") or {}).get("input_size")
    if grid is None and isinstance(input_size, (list, tuple)) and len(input_size) == 3:
        pixels = loader.pixels_per_token_of_weights(checkpoint.weights)
        grid = (int(input_size[1]) // pixels[0], int(input_size[2]) // pixels[1])
    return grid


def _pooling(found, weights, timm_config):
    """timm's `global_pool` when the config says it, else what the tensors imply (its default rule)."""
    if timm_config.get("global_pool") in TIMM_POOLING:
        return TIMM_POOLING[timm_config["global_pool"]]
    if "pooling/latent" in weights:
        return "map"
    return "gap" if found["fc_norm"] or not found["class_token"] else "token"


def _transformers_named(checkpoint):
    """What a transformers `config.json` (else the model class's defaults) says that the tensors do not."""
    config = checkpoint.transformers_config()
    if not config:
        return {}
    if converters.gated_mlp(checkpoint.weights):
        return dict(layer_norm_epsilon=config["layer_norm_eps"])  # a SwiGLU: its activation is silu
    if config["hidden_act"] not in HF_ACTIVATIONS:
        raise CheckpointError(f"{checkpoint.path}: keras_vit does not build the activation {config['hidden_act']!r}.")
    return dict(mlp_activation=HF_ACTIVATIONS[config["hidden_act"]], layer_norm_epsilon=config["layer_norm_eps"])


def _recorded(checkpoint):
    """The activation and epsilon keras_vit records in the metadata of the files it writes, or `{}`."""
    recorded = {}
    if "keras_vit.mlp_activation" in checkpoint.metadata:
        recorded["mlp_activation"] = checkpoint.metadata["keras_vit.mlp_activation"]
    if "keras_vit.layer_norm_epsilon" in checkpoint.metadata:
        try:
            recorded["layer_norm_epsilon"] = float(checkpoint.metadata["keras_vit.layer_norm_epsilon"])
        except ValueError:
            raise CheckpointError(f"{checkpoint.path}: its keras_vit.layer_norm_epsilon is not a number.") from None
    return recorded


def options_beyond_tensors(checkpoint, name=""):
    """The MLP activation and LayerNorm epsilon of a `loader.Checkpoint`, which its tensors do not show.

    By the timm model `name` (else its `config.json`'s), else keras_vit's record in the file, else its transformers
    `config.json` (or its class's defaults), else the layout's: GELU (the official JAX code's tanh GELU), 1e-6.
    """
    name = name or _timm_config(checkpoint.path).get("architecture") or _unnamed_aimv2(checkpoint)
    recorded = _recorded(checkpoint)
    if not name and not recorded and checkpoint.format == "timm":
        loader.logger.info(
            f"{checkpoint.path} does not name its timm model: GELU and LayerNorm epsilon 1e-6 assumed; pass "
            "architecture=<timm model name> for CLIP (epsilon 1e-5), QuickGELU or tanh-GELU models."
        )
    named = {**_transformers_named(checkpoint), **recorded, **_named(name)}
    if converters.gated_mlp(checkpoint.weights):
        # A SwiGLU (DINOv2 giant's, AIMv2's).
        named["mlp_activation"] = "swiglu"
    official = checkpoint.format == "official"
    return dict(
        mlp_activation=named.get("mlp_activation", "gelu_tanh" if official else "gelu"),
        layer_norm_epsilon=named.get("layer_norm_epsilon", 1e-6),
    )


def _unnamed_aimv2(checkpoint):
    """`"aimv2_"` for a file with RMSNorm blocks: among timm's ViTs only AIMv2 has them, so its name's facts hold."""
    return "aimv2_" if "encoder_block_0/norm1/scale" in checkpoint.weights else ""


def _arguments(checkpoint, name, timm_config, num_heads=None):
    """The `VisionTransformer` arguments of the checkpoint, read from its tensors, config and model name."""
    name = name or _unnamed_aimv2(checkpoint)
    hidden_dim = int(checkpoint.weights["patch_embedding/projection/kernel"].shape[-1])
    heads = num_heads or _num_heads(checkpoint, hidden_dim, _named(name), timm_config)
    no_embed_class, grid = _embedding_layout(checkpoint, _declared_grid(checkpoint, timm_config))
    found = checkpoint.architecture(heads, grid)
    pixels = loader.pixels_per_token_of_weights(checkpoint.weights)
    # Without a position table (RoPE only) nothing ties the model to a size.
    height, width = (None, None) if grid is None else (grid[0] * pixels[0], grid[1] * pixels[1])
    channels = found.pop("input_shape")[-1]
    first_channels = keras.config.image_data_format() == "channels_first"
    if converters.gated_mlp(checkpoint.weights):
        # A SwiGLU's fc2 reads the gated width.
        found["mlp_dim"] = int(checkpoint.weights["encoder_block_0/mlp/fc2/kernel"].shape[0])
    arguments = dict(
        found,
        input_shape=(channels, height, width) if first_channels else (height, width, channels),
        pooling=_pooling(found, checkpoint.weights, timm_config),
        no_embed_class=no_embed_class,
        classifier_activation=None,
        **options_beyond_tensors(checkpoint, name),
    )
    if checkpoint.format == "timm":
        # timm's `resample_abs_pos_embed`, for images of another size.
        arguments.update(resample_method="bicubic", resample_antialias=True)
    elif checkpoint.format == "hf":
        # transformers' `interpolate_pos_encoding` (antialiased for DINOv2 with registers), for other sizes.
        antialias = checkpoint.transformers_config()["model_type"] == "dinov2_with_registers"
        arguments.update(resample_method="bicubic", resample_antialias=antialias)
    if "linear_patches" in checkpoint.shape_facts:
        # NaFlex (transformers' Siglip2, big_vision's; timm's by name): the table resized bilinearly, antialiased.
        arguments.update(resample_method="bilinear", resample_antialias=True)
    named = _named(name)
    keys = ("pooling_heads", "pooling_include_prefix", "resample_method", "resample_antialias")
    arguments.update({key: named[key] for key in keys if key in named})
    arguments.pop("embedding_grid")
    return arguments


def _normalisation(path, timm_config):
    """The pixel mean and std of timm's `pretrained_cfg`, else of transformers' `preprocessor_config.json`, as
    `VisionTransformer` arguments, or `{}`."""
    pretrained_cfg = timm_config.get("pretrained_cfg") or {}
    mean, std = pretrained_cfg.get("mean"), pretrained_cfg.get("std")
    if mean is None or std is None:
        processor = io.json_beside(path, "preprocessor_config.json")
        mean, std = processor.get("image_mean"), processor.get("image_std")
    if mean is None or std is None:
        return {}
    # A float for every channel, or one per channel.
    return dict(
        pixel_mean=tuple(mean) if isinstance(mean, list) else mean,
        pixel_std=tuple(std) if isinstance(std, list) else std,
    )
