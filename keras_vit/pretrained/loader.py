"""Building a model with pretrained weights, all-or-nothing.

`weights=` is resolved before any download (an unknown tag fails at once), the file is fetched, read and converted,
the top is decided and logged, and a value for every variable is prepared and checked before any is assigned: a
problem raises one error listing everything wrong, and no model escapes.

A checkpoint loads only into the architecture it was trained with, but for its grid (the position embedding is
resampled) and, for FlexiViT alone, its patch size: a registry `flexivit_*` tag, or a file whose `config.json` names
timm's `flexivit_*`, loads into a plain ViT of any patch size it was trained at (`registry.FLEXIVIT_PATCH_SIZES`),
its patch kernel resized by the pseudo-inverse (`resample_patch_kernel`, with the model's `resample_method` and
`resample_antialias`). Another patch size, or another checkpoint at another patch size, is refused.
"""

import collections
import dataclasses
import fnmatch
import inspect
import logging
import math
import os
import re

import keras
import numpy as np

from keras_vit.layers import RotaryEmbedding, resnet
from keras_vit.layers.resampling import RESAMPLING_METHODS, resample_patch_kernel, resample_position_embedding
from keras_vit.layers.transformer import patch_grid
from keras_vit.models import variants
from keras_vit.pretrained import converters, io, registry, sources
from keras_vit.pretrained.converters import ROOT_KERNEL
from keras_vit.pretrained.errors import CheckpointError, mismatch_error, summarise
from keras_vit.utils import validation

logger = logging.getLogger("keras_vit.pretrained")
PATCH_KERNEL = "patch_embedding/projection/kernel"


@dataclasses.dataclass
class Checkpoint:
    """A checkpoint converted to keras_vit names.

    Attributes:
        weights: `{keras_vit variable path: np.ndarray}`.
        format, layout: `"official"`, `"timm"` or `"hf"`, and the description of the layout found.
        metadata: safetensors metadata and a neighbouring `config.json` (under `"config"`).
        path: the file it was read from.
        shape_facts: what the file's shapes say that the converted weights no longer show (`{"num_heads": 12}`).
        no_embed_class: whether the position embedding covers the patches only (the model's `no_embed_class`).
        defaults: the `config.json` defaults of the layout's transformers model class, `{}` for other layouts.
        rope: what says the layout's rotary position embedding (`mapping.Layout.rope`).
        rope_evidence: the tensors a plain timm ViT does not have (of a layout whose model name says its RoPE).
        rope_periods: DINOv3's stored RoPE periods, checked against the model's, or None.
    """

    weights: dict
    format: str
    layout: str
    metadata: dict
    path: str
    shape_facts: dict = dataclasses.field(default_factory=dict)
    no_embed_class: bool = False
    defaults: dict = dataclasses.field(default_factory=dict)
    rope: str = ""
    rope_evidence: tuple = ()
    rope_periods: np.ndarray = None

    @property
    def position_prefix(self):
        """The position embedding's rows before the patches': one per class, distillation or register token."""
        if self.no_embed_class:
            return 0
        registers = self.weights.get("register_tokens/token")
        tokens = sum(name in self.weights for name in ("class_token/token", "distillation_token/token"))
        return tokens + (0 if registers is None else int(registers.shape[1]))

    def transformers_config(self):
        """The file's transformers `config.json` (a CLIP's or SigLIP's `vision_config`) over its class's defaults."""
        config = self.metadata.get("config")
        config = config.get("vision_config", config) if isinstance(config, dict) and self.defaults else {}
        model_type = self.defaults.get("model_type")
        if config.get("model_type", model_type) != model_type:
            raise CheckpointError(f"{self.path}: config.json is a {config['model_type']!r} model's, not {self.layout}.")
        return {**self.defaults, **config}

    def declared_heads(self):
        """The attention heads the file declares (per-head shapes, or a transformers `config.json`), or None."""
        if "num_heads" in self.shape_facts:
            return self.shape_facts["num_heads"]
        config = self.transformers_config()
        if "num_attention_heads" in config:
            return self._positive_pair("config.json num_attention_heads", config["num_attention_heads"])[0]
        if self.rope_periods is not None:
            # DINOv3 stores a quarter head's periods.
            return int(self.weights["patch_embedding/projection/kernel"].shape[-1]) // (4 * len(self.rope_periods))
        return None

    def num_heads(self, num_heads=None):
        """`num_heads` if given (checked against the file's), else the file's, else the variant table's.

        Raises:
            CheckpointError: `num_heads` contradicts the file, or nothing says the heads.
        """
        declared = self.declared_heads()
        if num_heads is not None:
            if declared is not None and declared != num_heads:
                raise CheckpointError(
                    f"{self.path} has {declared} attention heads per block, not num_heads={num_heads}."
                )
            return num_heads
        if declared is not None:
            return declared
        hidden_dim = int(self.weights["patch_embedding/projection/kernel"].shape[-1])
        heads = variants.num_heads_for(hidden_dim)
        if heads is None:
            raise CheckpointError(
                f"{self.path} ({self.layout}) fuses its attention heads and its hidden size {hidden_dim} is not a "
                "published ViT size, so nothing says its number of heads: pass num_heads."
            )
        logger.info(
            f"{self.path} ({self.layout}) does not say its attention heads: taking {heads} from the variant table "
            f"for hidden size {hidden_dim}; pass num_heads if it differs."
        )
        return heads

    def architecture(self, num_heads=None, grid_size=None):
        """The `VisionTransformer` arguments of this checkpoint, read from its tensors' shapes.

        Args:
            num_heads: the attention heads, see `num_heads`.
            grid_size: the position embedding's grid; None takes it from the file.
        """
        heads = self.num_heads(num_heads)
        grid = checkpoint_grid(self) if grid_size is None else grid_size
        try:
            return architecture_of_weights(self.weights, heads, grid, self.position_prefix)
        except (KeyError, IndexError, ValueError) as error:
            raise CheckpointError(f"{self.path} ({self.layout}) is not a ViT keras_vit builds: {error}") from error

    def describe(self):
        """A one-line summary of the architecture for messages."""
        declared = self.declared_heads()
        try:
            # Fused attention fits any head count that divides the width: 1 reads the shapes.
            architecture = self.architecture(declared or 1)
        except CheckpointError:
            return "unrecognised shapes"
        patch, grid = architecture["patch_size"], architecture["embedding_grid"]
        parts = [
            f"hidden {architecture['hidden_dim']}",
            f"{architecture['num_layers']} blocks",
            f"{declared} heads" if declared else "heads not stored",
            f"patch {patch[0]}x{patch[1]}",
            f"grid {grid[0]}x{grid[1]}" if grid else "no position table",
        ]
        if architecture["resnet_stages"] is not None:
            parts.append(f"ResNet stages {architecture['resnet_stages']}")
        parts.append(f"{architecture['classes']}-class head" if architecture["include_top"] else "no head")
        if architecture["representation_size"]:
            parts.append(f"pre_logits {architecture['representation_size']}")
        return ", ".join(parts)

    def _positive_pair(self, field, value):
        """`value` as a pair of positive ints (an int means a square), else a `CheckpointError`."""
        try:
            return validation.pair(field, value)
        except ValueError:
            raise CheckpointError(
                f"{self.path}: {field} must be a positive int or two, not {value!r}. The file is damaged or was "
                "not written by a checkpoint tool."
            ) from None

    def declared_grid(self):
        """The patch grid the file declares (a table kept as a grid, keras_vit's `grid_size`, or a `config.json`),
        or None."""
        if "position_grid" in self.shape_facts:
            return self.shape_facts["position_grid"]
        grid = self.metadata.get("keras_vit.grid_size")
        if grid:
            numbers = [int(part) if part.strip().isdigit() else part for part in grid.split(",")]
            return self._positive_pair("metadata['keras_vit.grid_size']", numbers)
        config = self.transformers_config()
        if "image_size" in config:
            size = self._positive_pair("config.json image_size", config["image_size"])
            patch = pixels_per_token_of_weights(self.weights)
            patch = self._positive_pair("config.json patch_size", config.get("patch_size", patch[0]))
            return (size[0] // patch[0], size[1] // patch[1])
        if "num_patches" in config:
            side = math.isqrt(int(config["num_patches"]))  # transformers' Siglip2: a square table
            return (side, side)
        return None


def architecture_of_weights(weights, num_heads, grid_size=None, position_prefix=1):
    """The `VisionTransformer` arguments (input size open) of keras_vit-named weights, from their shapes.

    Args:
        weights: `{keras_vit variable path: array}`.
        num_heads: the attention heads (a fused `qkv` kernel does not show them).
        grid_size: `(rows, cols)` of the position embedding; None takes a square grid.
        position_prefix: the position embedding's rows before the patches'.
    """
    patch_kernel = weights["patch_embedding/projection/kernel"]
    table = weights.get("position_embedding/embedding")
    positions = None if table is None else int(table.shape[1]) - position_prefix
    if grid_size is None and table is not None:
        side = math.isqrt(positions)
        if side * side != positions:
            raise ValueError(
                f"The position embedding has {positions} patch rows, which is not a square grid: pass grid_size."
            )
        grid_size = (side, side)
    grid_size = None if grid_size is None else validation.pair("grid_size", grid_size)
    if table is not None and grid_size[0] * grid_size[1] != positions:
        raise ValueError(
            f"The position embedding has {positions} patch rows, but grid_size {grid_size} has "
            f"{grid_size[0] * grid_size[1]}."
        )
    stages = embedding_stages(weights)
    head = weights.get("head/kernel")
    pre_logits = weights.get("pre_logits/kernel")
    registers = weights.get("register_tokens/token")
    first_kernel = weights[ROOT_KERNEL] if stages is not None else patch_kernel
    norms = {name.rsplit("/", 1)[0] for name in weights if name.endswith(("/gamma", "/scale"))}  # LayerNorm, RMSNorm
    return dict(
        patch_size=tuple(int(size) for size in patch_kernel.shape[:2]),
        hidden_dim=int(patch_kernel.shape[-1]),
        num_layers=num_blocks(weights),
        num_heads=validation.positive_int("num_heads", num_heads),
        mlp_dim=int(weights["encoder_block_0/mlp/fc1/kernel"].shape[-1]),
        embedding_grid=grid_size,
        input_shape=(None, None, int(first_kernel.shape[2])),
        resnet_stages=stages,
        resnet_width=int(weights[ROOT_KERNEL].shape[-1]) if stages is not None else 64,
        include_top=head is not None,
        classes=None if head is None else int(head.shape[-1]),
        representation_size=None if pre_logits is None else int(pre_logits.shape[-1]),
        class_token="class_token/token" in weights,
        distillation_token="distillation_token/token" in weights,
        num_register_tokens=0 if registers is None else int(registers.shape[1]),
        pre_norm="norm_pre" in norms,
        patch_norm="patch_norm" in norms,
        normalization="rms" if "encoder_block_0/norm1/scale" in weights else "layer",
        proj_bias="encoder_block_0/attention/output/bias" in weights,
        patch_bias="patch_embedding/projection/bias" in weights,
        qkv_bias="encoder_block_0/attention/qkv/bias" in weights,
        # The initial value only starts training: loading replaces it.
        layer_scale_init=1e-5 if "encoder_block_0/layer_scale1" in weights else None,
        final_norm="encoder_norm" in norms or "fc_norm" in norms,
        fc_norm="fc_norm" in norms,
        position_embedding=table is not None,
        attention_norm="encoder_block_0/attention/norm" in norms,
        mlp_norm="encoder_block_0/mlp/norm" in norms,
    )


def num_blocks(weights):
    """The number of transformer blocks in keras_vit-named `weights` (numbered 0..N-1)."""
    indices = {int(match.group(1)) for name in weights if (match := re.match(r"encoder_block_(\d+)/", name))}
    if indices != set(range(len(indices))):
        raise ValueError(f"The transformer blocks are not numbered 0..N-1: found {sorted(indices)}.")
    return len(indices)


def embedding_stages(weights):
    """A hybrid's ResNet units per stage in keras_vit-named `weights` (`()` for the root only), None if plain."""
    if ROOT_KERNEL not in weights:
        return None
    pattern = re.compile(r"patch_embedding/backbone/block(\d+)_unit\d+/conv1/kernel")
    units = collections.Counter(int(match.group(1)) for name in weights if (match := pattern.fullmatch(name)))
    return tuple(units[stage] for stage in sorted(units))


def pixels_per_token_of_weights(weights):
    """Image pixels per token side of keras_vit-named `weights`."""
    patch = tuple(int(size) for size in weights["patch_embedding/projection/kernel"].shape[:2])
    return resnet.pixels_per_token(patch, embedding_stages(weights))


# What a timm `Eva` model name fixes that the tensors do not show (the first match of each key wins): its rotary
# position embedding (`VisionTransformer`'s `rope`; None: none), LayerNorm epsilon and head width, or why keras_vit
# does not build it. From timm's `models/eva.py`.
DINOV3_ROPE = dict(rope_type="dinov3", temperature=100.0, rotate_half=True)
PE_ROPE = dict(rope_type="cat", temperature=10000.0, grid_offset=1.0, grid_indexing="xy", ref_grid=(32, 32))
DINOV3_FACTS = dict(rope=DINOV3_ROPE, layer_norm_epsilon=1e-5, head_dim=64)
TIMM_EVA_RULES = (
    ("*_sapiens2", dict(refuse="query-key normalisation, grouped key-value heads and RMSNorm (Sapiens2)")),
    ("vit_pe_core_*", dict(pooling_heads=8, pooling_include_prefix=True)),
    # PE core's RoPE reference grid is its pretraining grid (the others': 32 x 32).
    ("vit_pe_core_*_384", dict(rope=dict(PE_ROPE, ref_grid=(24, 24)))),
    ("vit_pe_core_large_*", dict(rope=dict(PE_ROPE, ref_grid=(24, 24)))),
    ("vit_pe_core_base_*", dict(rope=dict(PE_ROPE, ref_grid=(14, 14)))),
    ("vit_pe_*_gigantic_*", dict(rope=dict(PE_ROPE, grid_offset=0.0), head_dim=96)),
    ("vit_pe_*", dict(rope=PE_ROPE, layer_norm_epsilon=1e-5)),
    ("vit_7b_*_dinov3*", dict(head_dim=128)),
    ("*_dinov3", DINOV3_FACTS),
    ("*_dinov3_*", DINOV3_FACTS),
    ("*_lingbot", DINOV3_FACTS),
    # EVA-02's CLIP towers keep timm's epsilon (not OpenAI CLIP's 1e-5, which `*_clip_*` names otherwise get).
    ("eva02_*", dict(rope=dict(rope_type="cat", temperature=10000.0, ref_grid=(16, 16)), layer_norm_epsilon=1e-6)),
    ("eva_giant_*", dict(rope=None)),
    ("*_rope_mixed_*", dict(rope=dict(rope_type="mixed", temperature=10.0, grid_indexing="xy"))),
    ("vit_*_patch16_rope_*224", dict(rope=dict(rope_type="cat", temperature=100.0, grid_indexing="xy"))),
    ("vit_*_rope_reg*_gap_256", dict(rope=dict(rope_type="cat", temperature=10000.0, ref_grid=(16, 16)))),
)
ROPE_DEFAULTS = {
    key: parameter.default
    for key, parameter in inspect.signature(RotaryEmbedding).parameters.items()
    if key in ("rope_type", "temperature", "grid_offset", "grid_indexing", "rotate_half", "ref_grid")
}


def eva_facts(name):
    """What timm's definition of the `Eva` model `name` fixes (`TIMM_EVA_RULES`), or None for another name."""
    found = None
    for pattern, values in TIMM_EVA_RULES:
        if fnmatch.fnmatchcase(name or "", pattern):
            found = {**values, **(found or {})}
    return found


def rope_key(rope):
    """`rope` with every `RotaryEmbedding` default filled in, to compare two."""
    if rope is None:
        return None
    rope = {**ROPE_DEFAULTS, **rope}
    ref_grid = rope["ref_grid"]
    return dict(rope, ref_grid=None if ref_grid is None else validation.pair("ref_grid", ref_grid))


def file_rope(checkpoint, name=None):
    """`(rope, what)`: the rotary position embedding the checkpoint's model has (None: none; `...`: the file does
    not say), by the timm model `name` (else its `config.json`'s), its transformers config or its layout."""
    name = name or io.json_beside(checkpoint.path, "config.json").get("architecture")
    facts = eva_facts(name) or {}
    if "refuse" in facts:
        raise CheckpointError(
            f"{checkpoint.path} is timm's {name}, with {facts['refuse']}, which keras_vit does not build. Nothing "
            "was loaded."
        )
    if "rope" in facts:
        return facts["rope"], f"timm's {name}"
    if checkpoint.rope == "config":
        theta = float(checkpoint.transformers_config()["rope_theta"])
        return dict(DINOV3_ROPE, temperature=theta), checkpoint.layout
    return (... if checkpoint.rope else None), checkpoint.layout


def check_rope(checkpoint, rope, name=None):
    """Raises `CheckpointError` unless `rope` (a model's `rope` argument) is the checkpoint's rotary embedding.

    A file whose tensors only timm's `Eva` has, and whose model nothing names, loads only into a model given its
    `rope`; one whose tensors pass for a plain ViT's (PE's) loads as a plain ViT unless its name says otherwise.
    """
    name = name or io.json_beside(checkpoint.path, "config.json").get("architecture")
    expected, what = file_rope(checkpoint, name)
    if expected is ... and rope is None:
        evidence = checkpoint.rope_evidence
        named = f"its model {name} is no timm Eva model keras_vit knows" if name else "nothing names its timm model"
        # For a model named otherwise (BEiT-3) they are tensors its architecture does not have.
        raise CheckpointError(
            f"{checkpoint.path} holds {what} tensors ({', '.join(evidence[:3])}) but {named}, so its rotary "
            "position embedding is unknown: pass architecture=<timm model name> to build_from_checkpoint (or rope= "
            "to the model). Nothing was loaded.",
            unexpected=evidence if name else (),
        )
    if expected is not ... and rope_key(expected) != rope_key(rope):
        raise CheckpointError(
            f"{checkpoint.path} is {what}, a ViT with rope={expected}, but the model has rope={rope}: it would "
            "compute other outputs. Build it with build_from_checkpoint. Nothing was loaded."
        )
    periods = checkpoint.rope_periods
    if periods is not None and rope is not None:
        temperature, quarter = float(rope.get("temperature", ROPE_DEFAULTS["temperature"])), len(periods)
        expected_periods = temperature ** (np.arange(quarter) / quarter)
        if rope.get("rope_type") != "dinov3" or not np.allclose(periods, expected_periods, rtol=1e-2):
            raise CheckpointError(
                f"{checkpoint.path}: its stored RoPE periods {np.round(periods[:3], 3).tolist()}... are not "
                f"those of rope={rope}. Nothing was loaded."
            )


def load_checkpoint(path, format=None):
    """Reads and converts a checkpoint file (`.npz`, `.safetensors` or a `save_pretrained` folder).

    Args:
        path: the file or folder.
        format: the expected layout, or None to detect it from the names.

    Returns:
        A `Checkpoint`.
    """
    tensors, metadata = io.read_checkpoint(path)
    try:
        layout = converters.detect_layout(tensors)
        weights, description = converters.to_keras(tensors, format, layouts=(layout,))
    except CheckpointError as error:
        raise CheckpointError(f"{path}: {error}", error.missing, error.unexpected, error.mismatched) from None
    non_finite = sorted(
        name
        for name, value in weights.items()
        if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all()
    )
    if non_finite:
        raise CheckpointError(
            f"{path} holds NaN or infinite values in {len(non_finite)} tensor(s): {summarise(non_finite)}. A model "
            "loaded from it would only output NaN; the training run that wrote it diverged or the file is damaged."
        )
    facts = layout.shape_facts(tensors)
    periods = weights.pop(converters.ROPE_PERIODS, None)
    evidence = tuple(sorted(set(tensors) - converters.TIMM.used(tensors))) if layout.rope == "name" else ()
    # An empty tensor (transformers' `register_tokens` without registers) holds nothing to load.
    weights = {name: value for name, value in weights.items() if value.size}
    checkpoint = Checkpoint(
        weights,
        layout.format,
        description,
        metadata,
        str(path),
        facts,
        False,
        layout.config,
        layout.rope,
        evidence,
        periods,
    )
    config = checkpoint.transformers_config() if facts.get("linear_patches") else {}
    if config:
        # A flat patch kernel reads as square RGB patches: the config must say so.
        declared = (*checkpoint._positive_pair("config.json patch_size", config["patch_size"]), config["num_channels"])
        if weights[PATCH_KERNEL].shape[:3] != declared:
            inputs = int(np.prod(weights[PATCH_KERNEL].shape[:3]))
            raise CheckpointError(
                f"{path}: config.json says patches of {declared[0]}x{declared[1]} pixels of {declared[2]} channels, "
                f"but its patch embedding takes {inputs} inputs (keras_vit reads square RGB patches). Nothing loaded."
            )
    return checkpoint


def checkpoint_grid(checkpoint, info=None, target_grid=None):
    """The checkpoint's patch grid: the registry's, the file's, the model's if the rows fit it, else a square; the
    model's (or None) when it has no position table."""
    if "position_embedding/embedding" not in checkpoint.weights:
        return target_grid
    patches = int(checkpoint.weights["position_embedding/embedding"].shape[1]) - checkpoint.position_prefix
    pixels = pixels_per_token_of_weights(checkpoint.weights)  # a hybrid's tokens cover patch x ResNet stride
    grid = patch_grid((info.resolution, info.resolution), pixels) if info is not None else None
    grid = grid or checkpoint.declared_grid()
    if grid is None and target_grid is not None and target_grid[0] * target_grid[1] == patches:
        grid = tuple(target_grid)
    if grid is None:
        side = math.isqrt(patches)
        if side * side != patches:
            raise CheckpointError(
                f"The checkpoint's position embedding has {patches} patch rows, which is not a square "
                "grid, and the file does not say its grid. Save it with keras_vit's exporter (which "
                "records the grid) or next to a config.json with image_size and patch_size."
            )
        grid = (side, side)
    if grid[0] * grid[1] != patches:
        raise CheckpointError(
            f"The checkpoint's position embedding has {patches} patch rows, but its declared grid "
            f"{grid[0]}x{grid[1]} has {grid[0] * grid[1]}."
        )
    return grid


def _plan_top(found, requested, source_name):
    """`(plan, representation_size)`: what of the top to load and the model's `pre_logits` size, logged."""
    classes, representation_size = requested["classes"], requested["representation_size"]
    keep_head = requested["include_top"] and found["include_top"] and classes == found["classes"]
    plan = {"keep_head": keep_head, "keep_pre_logits": False, "fresh_pre_logits": False}
    size = found["representation_size"]
    if size and representation_size is None and keep_head:
        # The pretrained head was trained on pre_logits: dropping it would feed the head features it never saw.
        representation_size, plan["keep_pre_logits"] = size, True
        logger.warning(f"Keeping the pre_logits layer ({size}) of {source_name} because its pretrained head uses it.")
    elif size and representation_size is None:
        logger.warning(
            f"Dropping the pre_logits layer ({size}) of {source_name}, as the paper does for fine-tuning; pass "
            f"representation_size={size} to keep it."
        )
    elif size:
        plan["keep_pre_logits"] = True  # a size mismatch is reported with the other shapes
    elif representation_size is not None:
        plan["fresh_pre_logits"] = True
        logger.warning(f"{source_name} has no pre_logits layer: the requested pre_logits keeps its random init.")
    if requested["include_top"] and not keep_head:
        if found["include_top"]:
            why = f"classes={classes} differs from the {found['classes']} classes of {source_name}"
        else:
            why = f"{source_name} has no classification head"
        logger.warning(f"{why}: the model gets a new zero-initialised {classes}-class head (train it before use).")
    return plan, representation_size


def _values_for(model, loading):
    """`{variable path: value}` for every variable of `model`, or one `CheckpointError` listing every problem."""
    checkpoint, plan, config = loading.checkpoint, loading.plan, loading.config
    source_grid, target_grid = loading.source_grid, config["embedding_grid"]
    dropped = () if plan["keep_head"] else ("head/", "head_dist/")
    dropped += () if plan["keep_pre_logits"] else ("pre_logits/",)
    remaining = {name: value for name, value in checkpoint.weights.items() if not name.startswith(dropped)}
    values, missing, mismatched = {}, [], []
    for variable in model.weights:
        path, shape = variable.path, tuple(variable.shape)
        if path.startswith(("head/", "head_dist/")) and not plan["keep_head"]:
            values[path] = np.zeros(shape, "float32")  # the paper's zero-initialised new head
            continue
        if path.startswith("pre_logits/") and plan["fresh_pre_logits"]:
            values[path] = keras.ops.convert_to_numpy(variable)  # its own random initialisation
            continue
        if path not in remaining:
            missing.append(path)
            continue
        value = remaining.pop(path)
        if path == PATCH_KERNEL and loading.resize_kernel and value.shape[:2] != shape[:2]:
            method, antialias = config["resample_method"], config["resample_antialias"]
            logger.info(f"Resized the patch kernel from {value.shape[:2]} to {shape[:2]} (FlexiViT, {method}).")
            value = resample_patch_kernel(value, shape[:2], method, antialias)
        resample = path == "position_embedding/embedding" and source_grid != target_grid
        prefix = checkpoint.position_prefix
        if resample and value.ndim == 3 and value.shape[1] == prefix + source_grid[0] * source_grid[1]:
            method, antialias = config["resample_method"], config["resample_antialias"]
            value = resample_position_embedding(value, source_grid, target_grid, prefix, method, antialias)
            logger.info(f"Resampled the position embedding from {source_grid} to {target_grid} ({method}).")
        if tuple(value.shape) != shape:
            mismatched.append((path, tuple(value.shape), shape))
            continue
        values[path] = value
    unexpected = sorted(remaining)
    if missing or unexpected or mismatched:
        model_name = f"ViT-{loading.variant}" if loading.variant else f"the model {model.name!r}"
        patch = any(name == PATCH_KERNEL and got[:2] != want[:2] for name, got, want in mismatched)
        raise mismatch_error(
            f"{checkpoint.path} ({checkpoint.layout}; {checkpoint.describe()}) does not fit {model_name}. "
            "Is it the checkpoint of another variant? No weights were loaded.",
            missing=missing,
            unexpected=unexpected,
            mismatched=mismatched,
            hint="Only a FlexiViT checkpoint loads at another patch size." if patch else "",
        )
    return values


@dataclasses.dataclass
class _Loading:
    """A checkpoint read and planned for a model: `load_into` assigns it once the model is built."""

    checkpoint: Checkpoint
    plan: dict
    source_grid: tuple
    config: dict
    variant: str
    resize_kernel: bool = False

    def load_into(self, model):
        values = _values_for(model, self)
        # Heads do not change a fused tensor's shape: a file that declares its heads is held to the model's.
        self.checkpoint.num_heads(self.config["num_heads"])
        for variable in model.weights:
            dtype = keras.backend.standardize_dtype(variable.dtype)
            variable.assign(np.asarray(values[variable.path], dtype=dtype))


def with_checkpoint_options(arguments, weights, defaults):
    """The constructor's `arguments` with the architecture options of the registry checkpoint the tag `weights` names.

    The row's `options` replace the constructor's `defaults` (`inspect.Parameter`s); another value is refused.
    """
    patch_size = validation.pair("patch_size", arguments["patch_size"])
    variant = _registry_variant(dict(arguments, patch_size=patch_size), weights)
    if variant is None or weights not in registry.available_tags(variant):
        return arguments
    height, width, _ = variants.channels_last(arguments["input_shape"], keras.config.image_data_format())
    image_size = (height or variants.DEFAULT_INPUT_SHAPE[0], width or variants.DEFAULT_INPUT_SHAPE[1])
    info = registry.resolve(variant, weights, image_size)
    own_patch = validation.pair("patch_size", variants.VARIANTS[variant]["patch_size"])
    _patch_resize(patch_size, own_patch, arguments["resnet_stages"], info.patch_sizes, info.name)
    options = info.options
    for key, value in options.items():
        if arguments[key] not in (value, defaults[key].default):
            raise ValueError(
                f"weights={weights!r} is a checkpoint with {key}={value!r}; leave {key} out. Received: "
                f"{key}={arguments[key]!r}"
            )
    return dict(arguments, **options)


def _registry_variant(config, weights):
    """The variant whose registry checkpoint the tag `weights` names for a model of `config` (checked arguments):
    the model's, or for a checkpoint trained at several patch sizes (FlexiViT) the one of the model's sizes at the
    checkpoint's own patch size; else the model's variant (or None)."""
    variant = variants.variant_of(config)
    if variant is not None and weights in registry.available_tags(variant):
        return variant
    for info in registry.checkpoints():
        if info.tag == weights and info.patch_sizes:
            own_patch = validation.pair("patch_size", variants.VARIANTS[info.variant]["patch_size"])
            if variants.variant_of(dict(config, patch_size=own_patch)) == info.variant:
                return info.variant
    return variant


def _patch_resize(patch_size, own_patch, resnet_stages, trained, what):
    """Whether the checkpoint's patch kernel is resized to the model's `patch_size`: only a plain ViT's, only to a
    patch size it was trained at (`trained`, FlexiViT's; else it is refused with the other shapes)."""
    if patch_size == own_patch or not trained or resnet_stages is not None:
        return False
    if patch_size not in [(size, size) for size in trained]:
        raise CheckpointError(
            f"{what} is a FlexiViT checkpoint trained at patch sizes {', '.join(map(str, trained))}, not "
            f"patch_size={patch_size}. Nothing was loaded."
        )
    return True


def prepare(config, weights, variant=None):
    """Reads the checkpoint `weights` names for a model of `config` (checked arguments), before it is built.

    Returns:
        `(config, loading)`: the arguments to build the model with, and what `loading.load_into(model)` assigns to it.
    """
    validation.one_of("resample_method", config["resample_method"], RESAMPLING_METHODS)
    names_a_file = isinstance(weights, (str, os.PathLike)) and (
        os.fspath(weights).startswith(sources.HUB_SCHEME) or os.path.exists(weights)
    )
    if not names_a_file:
        variant = _registry_variant(config, weights)
    if variant is None and not names_a_file:
        raise ValueError(
            "A model of a custom size takes `weights` as a local checkpoint file (.npz, .safetensors), a "
            "`save_pretrained` folder or 'hf://org/repo' of the same architecture; checkpoint tags and "
            "'imagenet' name published variants: use their constructors, e.g. "
            f"keras_vit.ViTB16(weights='imagenet'). Received: weights={weights!r}"
        )
    height, width, _ = variants.channels_last(config["input_shape"], keras.config.image_data_format())
    # An open input size keeps the checkpoint's own grid and resamples at call time to each image's.
    open_size = None in (height, width)
    image_size = tuple(size or default for size, default in zip((height, width), variants.DEFAULT_INPUT_SHAPE))
    source = sources.resolve_source(variant, weights, image_size=image_size)
    path, expected_format = sources.fetch(source)
    checkpoint = load_checkpoint(path, format=expected_format)
    check_rope(checkpoint, config["rope"])
    resize = (config["resample_method"], config["resample_antialias"])
    if "linear_patches" in checkpoint.shape_facts and resize != ("bilinear", True):
        # NaFlex resizes its table to every image's grid as part of the model.
        raise CheckpointError(
            f"{source.describe()} is a NaFlex checkpoint, whose position table is resized bilinearly with antialias: "
            f"pass resample_method='bilinear', resample_antialias=True (or use build_from_checkpoint). Received: "
            f"resample_method={resize[0]!r}, resample_antialias={resize[1]}. Nothing was loaded."
        )
    name = io.json_beside(path, "config.json").get("architecture") or ""
    own_patch = tuple(int(side) for side in checkpoint.weights[PATCH_KERNEL].shape[:2])
    trained = registry.FLEXIVIT_PATCH_SIZES if fnmatch.fnmatchcase(name, "flexivit_*") else ()
    trained = source.info.patch_sizes if source.kind == "registry" else trained
    resize_kernel = _patch_resize(config["patch_size"], own_patch, config["resnet_stages"], trained, source.describe())
    checkpoint.no_embed_class = config["no_embed_class"]
    source_grid = checkpoint_grid(checkpoint, source.info, None if open_size else config["embedding_grid"])
    if checkpoint.format == "official" and config["mlp_activation"] != "gelu_tanh":
        logger.info(
            f"{source.describe()} comes from the official JAX code, which uses tanh-approximate GELU; pass "
            "mlp_activation='gelu_tanh' to match its outputs exactly (logits differ by ~1e-3)."
        )
    found = checkpoint.architecture(checkpoint.declared_heads() or config["num_heads"], source_grid)
    plan, representation_size = _plan_top(found, config, source.describe())
    config = dict(config, representation_size=representation_size)
    if open_size and source_grid is not None:
        config["embedding_grid"] = source_grid
    return config, _Loading(checkpoint, plan, source_grid, config, variant, resize_kernel)
