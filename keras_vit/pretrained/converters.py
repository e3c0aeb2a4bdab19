"""Converting checkpoint layouts to and from keras_vit's weight names.

keras_vit names every weight by its Keras variable path, e.g.
`encoder_block_3/attention/qkv/kernel`. The layouts it reads and writes are
declared as tables in `tables` (one per model part and format: the official
JAX `.npz` with its variants, timm, Hugging Face `transformers`); this module
picks the layout that accounts for a file's names and runs the table in the
wanted direction (see `mapping`). Conversion is pure NumPy, so it is
identical on every backend.

Example:

>>> import numpy as np
>>> tensors = {"embedding/kernel": np.zeros((8, 8, 3, 4)), "embedding/bias": np.zeros(4), "cls": np.zeros((1, 1, 4))}
>>> detect_format(tensors)
'official'
"""

import dataclasses
import re

from keras_vit.layers.resnet import output_stride
from keras_vit.pretrained import hybrid_tables, tables
from keras_vit.pretrained.errors import CheckpointFormatError, mismatch_error

# The plain ViT layouts first: a plain file ties with the hybrid layouts (which
# only add the ResNet backbone) and so keeps its plain layout.
LAYOUTS = tables.LAYOUTS + hybrid_tables.HYBRID_LAYOUTS

FORMATS = tuple(dict.fromkeys(layout.format for layout in LAYOUTS))


def detect_layout(tensors, layouts=LAYOUTS):
    """The layout among `layouts` that accounts for most of the file's names.

    Raises:
        CheckpointFormatError: no layout's patch-embedding tensor is present.
    """
    best, best_score = None, 0
    for layout in layouts:
        score = layout.score(tensors)
        if score > best_score:
            best, best_score = layout, score
    if best is None:
        sample = sorted(tensors)[:8]
        labels = ", ".join(dict.fromkeys(layout.label for layout in layouts))
        raise CheckpointFormatError(
            f"This is not a ViT checkpoint in a layout keras_vit reads ({labels}): none of their "
            f"patch-embedding tensors is present. First names: {sample}."
        )
    return best


def detect_format(tensors, layouts=LAYOUTS):
    """Returns `"official"`, `"timm"` or `"hf"` from a checkpoint's tensor names.

    Raises:
        CheckpointFormatError: none matches (the message shows some names).
    """
    return detect_layout(tensors, layouts).format


def to_keras(tensors, format=None, layouts=LAYOUTS):
    """Converts a checkpoint dict to keras_vit names.

    Args:
        tensors: `{name: np.ndarray}` as read from the file.
        format: `"official"`, `"timm"`, `"hf"` or None to detect it.
        layouts: the layouts to choose from (a model family with more parts
            passes its own, see `mapping.Layout.with_parts`).

    Returns:
        `(weights, layout)`: the converted dict and a description of the layout.
    """
    layout = detect_layout(tensors, layouts)
    if format is not None and format != layout.format:
        raise CheckpointFormatError(
            f"Expected a {format} checkpoint but the tensor names are those of the {layout.format} layout."
        )
    return layout.read(tensors), layout.description


def writer(weights, format, layouts=LAYOUTS):
    """The layout `from_keras` writes `weights` in for `format`."""
    formats = tuple(dict.fromkeys(layout.format for layout in layouts))
    if format not in formats:
        raise ValueError(f"`format` must be one of {formats}. Received: format={format!r}")
    candidates = [layout for layout in layouts if layout.format == format and layout.writes]
    # A layout written only for some weights (a head, a ResNet backbone) wins over an unconditional one.
    candidates.sort(key=lambda layout: not layout.write_when)
    return next(layout for layout in candidates if not layout.write_when or layout.write_when in weights)


def from_keras(weights, format, num_heads=None, layouts=LAYOUTS):
    """Converts keras_vit weights to `format` (`"official"` needs `num_heads`)."""
    return writer(weights, format, layouts).write(weights, {"num_heads": num_heads})


def num_blocks(weights):
    """The number of transformer blocks in keras_vit-named `weights`."""
    indices = {int(match.group(1)) for name in weights if (match := re.match(r"encoder_block_(\d+)/", name))}
    if indices != set(range(len(indices))):
        raise mismatch_error(f"The transformer blocks are not numbered 0..N-1: found {sorted(indices)}.")
    return len(indices)


@dataclasses.dataclass
class CheckpointFacts:
    """What a converted checkpoint says about the architecture it came from."""

    hidden_dim: int
    num_layers: int
    patch_size: tuple
    num_positions: int
    classes: object
    representation_size: object
    # A hybrid's ResNet: units per stage (() for the root only); None for a plain ViT.
    stage_depths: object = None

    @property
    def token_size(self):
        """Image pixels per token side: the patch size times a hybrid's ResNet stride."""
        stride = 1 if self.stage_depths is None else output_stride(self.stage_depths)
        return (self.patch_size[0] * stride, self.patch_size[1] * stride)

    def describe(self):
        parts = [
            f"hidden {self.hidden_dim}",
            f"{self.num_layers} blocks",
            f"patch {self.patch_size[0]}x{self.patch_size[1]}",
        ]
        if self.stage_depths is not None:
            parts.append(f"ResNet stages {self.stage_depths}")
        parts.append(f"{self.classes}-class head" if self.classes else "no head")
        if self.representation_size:
            parts.append(f"pre_logits {self.representation_size}")
        return ", ".join(parts)


def facts(weights):
    """The `CheckpointFacts` of keras_vit-named `weights`."""
    kernel = weights["patch_embedding/projection/kernel"]
    return CheckpointFacts(
        hidden_dim=int(kernel.shape[-1]),
        num_layers=num_blocks(weights),
        patch_size=tuple(int(s) for s in kernel.shape[:2]),
        num_positions=int(weights["position_embedding/embedding"].shape[1]),
        classes=int(weights["head/bias"].shape[0]) if "head/bias" in weights else None,
        representation_size=int(weights["pre_logits/bias"].shape[0]) if "pre_logits/bias" in weights else None,
        stage_depths=_stage_depths(weights),
    )


def _stage_depths(weights):
    if hybrid_tables.ROOT_KERNEL not in weights:
        return None
    units = {}
    for name in weights:
        if match := re.match(r"patch_embedding/backbone/block(\d+)_unit(\d+)/conv1/kernel$", name):
            units.setdefault(int(match.group(1)), set()).add(int(match.group(2)))
    return tuple(len(units[stage]) for stage in sorted(units))
