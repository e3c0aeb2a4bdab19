"""Building a model with pretrained weights, all-or-nothing.

The order matters and is the point of this module:

1. `weights=` is resolved (tag, alias, file, Hub handle) before any download,
   so an unknown tag fails at once and lists the valid ones.
2. The file is fetched and read into NumPy (no pickle) and converted to
   keras_vit's weight names with strict accounting.
3. Every decision about the top is made and logged: a new zero-initialised
   head when `classes` differs from the checkpoint's (the paper's
   fine-tuning recipe), `pre_logits` kept or dropped.
4. A fresh model is built, and a value for *every* variable is prepared and
   checked (position embedding resampled to the model's grid, shapes equal).
   Only then are the values assigned. Any problem raises one error listing
   everything missing, unexpected or mis-shaped, and no model is returned,
   so a partially loaded model never escapes.
"""

import dataclasses
import logging
import math
import os
import re

import keras
import numpy as np

from keras_vit.layers import resnet
from keras_vit.layers.resampling import RESAMPLING_METHODS, resample_position_embedding
from keras_vit.layers.transformer import patch_grid
from keras_vit.models import variants
from keras_vit.pretrained import converters, errors, io, sources
from keras_vit.pretrained.errors import CheckpointError, mismatch_error
from keras_vit.utils import validation

logger = logging.getLogger("keras_vit.pretrained")


@dataclasses.dataclass
class Checkpoint:
    """A checkpoint converted to keras_vit names.

    Attributes:
        weights: `{keras_vit variable path: np.ndarray}`.
        format: `"official"`, `"timm"` or `"hf"`.
        layout: human-readable description of the layout found.
        metadata: safetensors metadata and a neighbouring `config.json`.
        path: the file it was read from.
        shape_facts: what the file's own tensor shapes say that the converted
            weights no longer show (`{"num_heads": 12}` from flax's per-head
            attention kernels; empty for fused layouts).
    """

    weights: dict
    format: str
    layout: str
    metadata: dict
    path: str
    shape_facts: dict = dataclasses.field(default_factory=dict)

    def declared_heads(self):
        """The attention heads the file declares: its per-head tensor shapes, else a transformers
        `config.json`'s `num_attention_heads`; None when it says nothing (fused `qkv` tensors)."""
        if "num_heads" in self.shape_facts:
            return self.shape_facts["num_heads"]
        config = self.metadata.get("config") or {}
        if isinstance(config, dict) and config.get("model_type") == "vit" and "num_attention_heads" in config:
            return _positive_pair(self, "config.json num_attention_heads", config["num_attention_heads"])[0]
        return None

    def num_heads(self, num_heads=None):
        """The attention heads: `num_heads` if given (checked against the file's), else the file's
        (`declared_heads`), else the variant table's for the hidden size, which is logged.

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
            "%s (%s) does not say its attention heads (fused tensors): taking %d from the variant table for hidden "
            "size %d; pass num_heads if it differs.",
            self.path,
            self.layout,
            heads,
            hidden_dim,
        )
        return heads

    def architecture(self, num_heads=None, grid_size=None):
        """The `VisionTransformer` arguments of this checkpoint, read from its tensors' shapes (see
        `architecture_of_weights`).

        Args:
            num_heads: the attention heads, see `num_heads`.
            grid_size: the position embedding's grid; None takes it from the
                file (`checkpoint_grid`).

        Raises:
            CheckpointError: the tensors are not a ViT's, or do not fit the heads or grid.
        """
        heads = self.num_heads(num_heads)
        grid = checkpoint_grid(self) if grid_size is None else grid_size
        try:
            return architecture_of_weights(self.weights, heads, grid)
        except (KeyError, IndexError, ValueError) as error:
            raise CheckpointError(f"{self.path} ({self.layout}) is not a ViT keras_vit builds: {error}") from error

    def describe(self):
        """A summary of the architecture for messages ("unrecognised shapes" when it has none)."""
        declared = self.declared_heads()
        try:
            # Fused attention tensors fit any head count that divides the width: 1 reads the shapes, and the
            # summary says the heads are not stored rather than echoing the model's count as the file's.
            architecture = self.architecture(declared or 1)
        except CheckpointError:
            return "unrecognised shapes"
        return describe(architecture if declared else dict(architecture, num_heads=None))


def describe(architecture):
    """A one-line summary of `VisionTransformer` arguments for logs and messages."""
    patch, grid = architecture["patch_size"], architecture["embedding_grid"]
    parts = [
        f"hidden {architecture['hidden_dim']}",
        f"{architecture['num_layers']} blocks",
        f"{architecture['num_heads']} heads" if architecture["num_heads"] else "heads not stored",
        f"patch {patch[0]}x{patch[1]}",
        f"grid {grid[0]}x{grid[1]}",
    ]
    if architecture["resnet_stages"] is not None:
        parts.append(f"ResNet stages {architecture['resnet_stages']}")
    parts.append(f"{architecture['classes']}-class head" if architecture["include_top"] else "no head")
    if architecture["representation_size"]:
        parts.append(f"pre_logits {architecture['representation_size']}")
    return ", ".join(parts)


# The variable path of a hybrid's first convolution: its presence marks a hybrid's weights.
ROOT_KERNEL = "patch_embedding/backbone/conv_root/kernel"


def architecture_of_weights(weights, num_heads, grid_size=None):
    """The `VisionTransformer` arguments of keras_vit-named checkpoint weights, read from their shapes.

    Sizes come from the tensors' shapes: hidden size and patch from the
    patch kernel, the MLP size from the first block's `fc1` kernel, the
    blocks and a hybrid's ResNet units from which blocks and units have
    weights, classes and `pre_logits` from the head's. The attention heads
    cannot be read from a fused `qkv` kernel, so the caller passes them.

    Args:
        weights: `{keras_vit variable path: array}`, e.g. a converted checkpoint.
        num_heads: int, the attention heads.
        grid_size: `(rows, cols)` of the position embedding; None takes a
            square grid from its number of rows.

    Returns:
        A dict of `VisionTransformer` arguments (`embedding_grid` the grid;
        the input size left open).

    Raises:
        ValueError: the weights are not a ViT's, or `grid_size` does not
            match the position embedding's rows.
    """
    patch_kernel = weights["patch_embedding/projection/kernel"]
    positions = int(weights["position_embedding/embedding"].shape[1]) - 1
    grid_size = _square_grid(positions) if grid_size is None else validation.pair("grid_size", grid_size)
    if grid_size[0] * grid_size[1] != positions:
        raise ValueError(
            f"The position embedding has {positions} patch rows, but grid_size {grid_size} has "
            f"{grid_size[0] * grid_size[1]}."
        )
    stages = embedding_stages(weights)
    head = weights.get("head/kernel")
    pre_logits = weights.get("pre_logits/kernel")
    channels = int((weights[ROOT_KERNEL] if stages is not None else patch_kernel).shape[2])
    return dict(
        patch_size=tuple(int(size) for size in patch_kernel.shape[:2]),
        hidden_dim=int(patch_kernel.shape[-1]),
        num_layers=num_blocks(weights),
        num_heads=validation.positive_int("num_heads", num_heads),
        mlp_dim=int(weights["encoder_block_0/mlp/fc1/kernel"].shape[-1]),
        embedding_grid=grid_size,
        input_shape=(None, None, channels),
        resnet_stages=stages,
        resnet_width=int(weights[ROOT_KERNEL].shape[-1]) if stages is not None else 64,
        include_top=head is not None,
        classes=None if head is None else int(head.shape[-1]),
        representation_size=None if pre_logits is None else int(pre_logits.shape[-1]),
    )


def _square_grid(positions):
    side = math.isqrt(positions)
    if side * side != positions:
        raise ValueError(
            f"The position embedding has {positions} patch rows, which is not a square grid: pass grid_size."
        )
    return (side, side)


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
    units = {}
    for name in weights:
        if match := re.match(r"patch_embedding/backbone/block(\d+)_unit(\d+)/conv1/kernel$", name):
            units.setdefault(int(match.group(1)), set()).add(int(match.group(2)))
    return tuple(len(units[stage]) for stage in sorted(units))


def pixels_per_token_of_weights(weights):
    """Image pixels per token side of keras_vit-named `weights`."""
    patch = tuple(int(size) for size in weights["patch_embedding/projection/kernel"].shape[:2])
    return resnet.pixels_per_token(patch, embedding_stages(weights))


def load_checkpoint(path, format=None):
    """Reads and converts a checkpoint file.

    Args:
        path: `.npz`, `.safetensors`, or a `save_pretrained` directory.
        format: expected layout, or None to detect it from the names.

    Returns:
        A `Checkpoint`.

    Raises:
        CheckpointError: an unreadable or malformed file (naming the
            field).
        CheckpointError: the tensors are not a ViT layout keras_vit
            reads; found from the declared names and shapes, before any
            tensor is read or decompressed.
        CheckpointError: NaN or infinite values, naming the tensors.
    """
    tensors, metadata = io.read_checkpoint(path, lazy=True)
    detected_layout = converters.detect_layout(tensors)
    # The tensors are `io.DeclaredTensor`s: the layout accounts for every declared name before it reads any
    # value, so a small .npz declaring a huge member under a name no layout has is refused, never inflated.
    weights, layout = converters.to_keras(tensors, format)
    weights = {name: np.asarray(value) for name, value in weights.items()}
    non_finite = sorted(
        name
        for name, value in weights.items()
        if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all()
    )
    if non_finite:
        raise errors.non_finite(path, non_finite)
    shape_facts = detected_layout.shape_facts(tensors)
    return Checkpoint(weights, detected_layout.format, layout, metadata, str(path), shape_facts)


def _positive_pair(checkpoint, field, value):
    """`value` as a pair of positive ints (an int means a square), else a `CheckpointError`."""
    pair = [value, value] if isinstance(value, int) else value
    if (
        not isinstance(pair, (list, tuple))
        or len(pair) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in pair)
    ):
        raise errors.malformed(checkpoint.path, field, f"must be a positive int or two, not {value!r}")
    return tuple(pair)


def _grid_from_metadata(checkpoint, patch_size):
    grid = checkpoint.metadata.get("keras_vit.grid_size")
    if grid:
        parts = grid.split(",")
        if not all(part.strip().isdigit() for part in parts):
            raise errors.malformed(
                checkpoint.path, "metadata['keras_vit.grid_size']", f"must be 'ROWS,COLUMNS', not {grid!r}"
            )
        return _positive_pair(checkpoint, "metadata['keras_vit.grid_size']", [int(part) for part in parts])
    config = checkpoint.metadata.get("config") or {}
    if isinstance(config, dict) and config.get("model_type") == "vit" and "image_size" in config:
        size = _positive_pair(checkpoint, "config.json image_size", config["image_size"])
        patch = _positive_pair(checkpoint, "config.json patch_size", config.get("patch_size", patch_size[0]))
        return (size[0] // patch[0], size[1] // patch[1])
    return None


def checkpoint_grid(checkpoint, info=None, target_grid=None):
    """The patch grid of the checkpoint's position embedding.

    From (in order) the registry's resolution, the file's metadata
    (`keras_vit.grid_size`, or `image_size` in a transformers `config.json`),
    the model's own grid when the row count matches it (nothing to resample),
    else the embedding is taken to be square.
    """
    patches = int(checkpoint.weights["position_embedding/embedding"].shape[1]) - 1
    # A hybrid's tokens cover patch x ResNet stride pixels.
    pixels = pixels_per_token_of_weights(checkpoint.weights)
    grid = None
    if info is not None:
        grid = patch_grid((info.resolution, info.resolution), pixels)
    grid = grid or _grid_from_metadata(checkpoint, pixels)
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
    """Decides head and pre_logits, logs every decision.

    Args:
        found: the checkpoint's `VisionTransformer` arguments (`Checkpoint.architecture`).
        requested: the checked arguments of the model asked for.
        source_name: the checkpoint, for the messages.

    Returns:
        `(plan, representation_size)`: what to load, and the `pre_logits`
        size the model gets (the checkpoint's when its head needs it).
    """
    classes, representation_size = requested["classes"], requested["representation_size"]
    keep_head = requested["include_top"] and found["include_top"] and classes == found["classes"]
    plan = {"keep_head": keep_head, "keep_pre_logits": False, "fresh_pre_logits": False}
    if found["representation_size"]:
        if representation_size is None and keep_head:
            # The pretrained head was trained on pre_logits: dropping it would
            # feed the head features it never saw.
            representation_size = found["representation_size"]
            plan["keep_pre_logits"] = True
            logger.warning(
                "Keeping the pre_logits layer (%d) of %s because its pretrained %d-class head uses it.",
                found["representation_size"],
                source_name,
                found["classes"],
            )
        elif representation_size is None:
            logger.warning(
                "Dropping the pre_logits layer (%d) of %s, as the paper does for fine-tuning; pass "
                "representation_size=%d to keep it.",
                found["representation_size"],
                source_name,
                found["representation_size"],
            )
        else:
            plan["keep_pre_logits"] = True  # A size mismatch is reported with the other shapes.
    elif representation_size is not None:
        plan["fresh_pre_logits"] = True
        logger.warning(
            "%s has no pre_logits layer: the requested pre_logits (%d) keeps its random initialisation.",
            source_name,
            representation_size,
        )
    if requested["include_top"] and not keep_head:
        _log_new_head(found, classes, source_name)
    return plan, representation_size


def _log_new_head(found, classes, source_name):
    if not found["include_top"]:
        logger.warning(
            "%s has no classification head: the model gets a new zero-initialised %d-class head (train it before use).",
            source_name,
            classes,
        )
    else:
        logger.warning(
            "classes=%s differs from the %d classes of %s: the model gets a new zero-initialised "
            "%s-class head instead of the pretrained one (the paper's fine-tuning recipe).",
            classes,
            found["classes"],
            source_name,
            classes,
        )


def _describe_model(model, variant):
    return f"ViT-{variant}" if variant else f"the model {model.name!r}"


def assemble(model, checkpoint, plan, source_grid, target_grid, method="official", antialias=False, variant=None):
    """Prepares `{variable path: value}` for every variable of `model`.

    Raises:
        CheckpointError: listing all missing, unexpected and
            mis-shaped tensors at once.
    """
    remaining = dict(checkpoint.weights)
    if not plan["keep_head"]:
        remaining.pop("head/kernel", None)
        remaining.pop("head/bias", None)
    if not plan["keep_pre_logits"]:
        remaining.pop("pre_logits/kernel", None)
        remaining.pop("pre_logits/bias", None)
    values, missing, mismatched = {}, [], []
    for variable in model.weights:
        path, shape = variable.path, tuple(variable.shape)
        if path.startswith("head/") and not plan["keep_head"]:
            values[path] = np.zeros(shape, "float32")  # The paper's zero-initialised new head.
            continue
        if path.startswith("pre_logits/") and plan["fresh_pre_logits"]:
            values[path] = keras.ops.convert_to_numpy(variable)  # Its own random initialisation.
            continue
        if path not in remaining:
            missing.append(path)
            continue
        value = remaining.pop(path)
        if path == "position_embedding/embedding" and value.ndim == 3 and source_grid != target_grid:
            if value.shape[1] == 1 + source_grid[0] * source_grid[1]:
                value = resample_position_embedding(value, source_grid, target_grid, method=method, antialias=antialias)
                logger.info(
                    "Resampled the position embedding from %dx%d to %dx%d (%s%s).",
                    *source_grid,
                    *target_grid,
                    method,
                    ", antialias" if antialias else "",
                )
        if tuple(value.shape) != shape:
            mismatched.append((path, tuple(value.shape), shape))
            continue
        values[path] = value
    unexpected = sorted(remaining)
    if missing or unexpected or mismatched:
        found = checkpoint.describe()
        raise mismatch_error(
            f"{checkpoint.path} ({checkpoint.layout}; {found}) does not fit {_describe_model(model, variant)}. "
            "Is it the checkpoint of another variant? No weights were loaded.",
            missing=missing,
            unexpected=unexpected,
            mismatched=mismatched,
        )
    return values


def assign(model, values):
    """Assigns prepared values (every variable must have one) in the variables' dtypes."""
    for variable in model.weights:
        dtype = keras.backend.standardize_dtype(variable.dtype)
        variable.assign(np.asarray(values[variable.path], dtype=dtype))


def _names_a_file(weights):
    if not isinstance(weights, (str, os.PathLike)):
        return False
    text = os.fspath(weights)
    return text.startswith(sources.HUB_SCHEME) or os.path.exists(text)


@dataclasses.dataclass
class _Loading:
    """A checkpoint read and planned for a model: `load_into` assigns it once the model is built."""

    checkpoint: Checkpoint
    plan: dict
    source_grid: tuple
    config: dict
    variant: str

    def load_into(self, model):
        values = assemble(
            model,
            self.checkpoint,
            self.plan,
            self.source_grid,
            self.config["embedding_grid"],
            self.config["resample_method"],
            self.config["resample_antialias"],
            variant=self.variant,
        )
        # Heads do not change a tensor's fused shape, so `assemble` (which reports every shape that differs)
        # cannot see them differ: a file that declares its heads is held to the model's here.
        self.checkpoint.num_heads(self.config["num_heads"])
        assign(model, values)


def prepare(config, weights, variant=None):
    """Reads the checkpoint `weights` names for a model of `config`, before the model is built.

    Args:
        config: the checked arguments of a `keras_vit.VisionTransformer`.
        weights: as for `build_pretrained`; checkpoint tags and `"imagenet"`
            need `variant`.
        variant: the `VARIANTS` key of the architecture, or None.

    Returns:
        `(config, loading)`: the arguments to build the model with (the
        checkpoint's `pre_logits` kept when its head is, an open input size
        given the checkpoint's grid), and what `loading.load_into(model)`
        assigns to the built model.
    """
    if config["resample_method"] not in RESAMPLING_METHODS:
        raise ValueError(
            f"`resample_method` must be one of {RESAMPLING_METHODS}. Received: {config['resample_method']!r}"
        )
    if variant is None and not _names_a_file(weights):
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
    source_grid = checkpoint_grid(checkpoint, source.info, None if open_size else config["embedding_grid"])
    if checkpoint.format == "official" and not config["gelu_approximate"]:
        logger.info(
            "%s comes from the official JAX code, which uses tanh-approximate GELU; this model uses exact "
            "GELU like timm and transformers (logits differ by ~1e-3). Pass gelu_approximate=True to "
            "match the JAX outputs exactly.",
            source.describe(),
        )
    found = checkpoint.architecture(checkpoint.declared_heads() or config["num_heads"], source_grid)
    plan, representation_size = _plan_top(found, config, source.describe())
    config = dict(config, representation_size=representation_size)
    if open_size:
        config["embedding_grid"] = source_grid
    return config, _Loading(checkpoint, plan, source_grid, config, variant)
