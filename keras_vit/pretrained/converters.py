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

from keras_vit.pretrained import hybrid_tables, tables
from keras_vit.pretrained.errors import CheckpointError

# The plain ViT layouts first: a plain file ties with the hybrid layouts (which
# only add the ResNet backbone) and so keeps its plain layout.
LAYOUTS = tables.LAYOUTS + hybrid_tables.HYBRID_LAYOUTS

FORMATS = tuple(dict.fromkeys(layout.format for layout in LAYOUTS))


def detect_layout(tensors, layouts=LAYOUTS):
    """The layout among `layouts` that accounts for most of the file's names.

    Raises:
        CheckpointError: no layout's patch-embedding tensor is present.
    """
    best, best_score = None, 0
    for layout in layouts:
        score = layout.score(tensors)
        if score > best_score:
            best, best_score = layout, score
    if best is None:
        sample = sorted(tensors)[:8]
        labels = ", ".join(dict.fromkeys(layout.label for layout in layouts))
        raise CheckpointError(
            f"This is not a ViT checkpoint in a layout keras_vit reads ({labels}): none of their "
            f"patch-embedding tensors is present. First names: {sample}."
        )
    return best


def detect_format(tensors, layouts=LAYOUTS):
    """Returns `"official"`, `"timm"` or `"hf"` from a checkpoint's tensor names.

    Raises:
        CheckpointError: none matches (the message shows some names).
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
        raise CheckpointError(
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
