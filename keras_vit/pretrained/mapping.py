"""Weight-name tables, read in both directions.

A `Layout` is a key prefix and `Part`s (patch embedding, blocks, head, ...); a `Part` is `Row`s: a keras_vit weight
path, its key(s) in the file and the `Transform` between them. The same rows read a file (`Layout.read`) and write
one (`Layout.write`). `{i}` in a template is a block number found from the names present; a scanned part
(`scan="i"`) stacks the blocks on a leading axis. Every key a row needs must be in the file and every tensor of the
file must be used: both lists come in one `CheckpointError`.

Example:

>>> import numpy as np
>>> part = Part("norm", rows(("encoder_norm/gamma", "norm.weight"), ("encoder_norm/beta", "norm.bias")))
>>> layout = Layout("demo", "demo", "demo layout", (part,))
>>> weights = layout.read({"norm.weight": np.ones(2), "norm.bias": np.zeros(2)})
>>> sorted(weights)
['encoder_norm/beta', 'encoder_norm/gamma']
>>> sorted(layout.write(weights))
['norm.bias', 'norm.weight']
"""

import collections
import dataclasses
import math
import re
import string
from collections.abc import Callable

import numpy as np

from keras_vit.pretrained.errors import CheckpointError, mismatch_error


@dataclasses.dataclass(frozen=True)
class Transform:
    """An invertible change between a file's tensors and one keras_vit weight.

    `forward(*file_arrays)` gives the keras_vit array, `backward(array, context)` the file's arrays, and the
    optional `reads(*file_shapes)` the architecture facts the file's shapes hold (`{"num_heads": 12}`); `rank`, where
    set, the rank of its first file tensor, which tells apart two layouts of the same names (a layout's first row).
    """

    name: str
    forward: Callable
    backward: Callable
    reads: Callable = None
    rank: int = None


def _transpose(x):
    return np.ascontiguousarray(np.transpose(x))


def _heads(context):
    if not context.get("num_heads"):
        raise ValueError("The official layout keeps attention kernels per head: pass num_heads.")
    return int(context["num_heads"])


IDENTITY = Transform("identity", lambda x: x, lambda x, context: (x,))
# PyTorch linears are (out, in); Keras Dense kernels (in, out).
TRANSPOSE = Transform("transpose", _transpose, lambda x, context: (_transpose(x),))
# PyTorch convolutions are (out, in, h, w); Keras kernels HWIO.
TORCH_CONV = Transform(
    "torch_conv_to_hwio",
    lambda x: np.ascontiguousarray(np.transpose(x, (2, 3, 1, 0))),
    lambda x, context: (np.ascontiguousarray(np.transpose(x, (3, 2, 0, 1))),),
    rank=4,
)
HWIO = Transform("hwio", IDENTITY.forward, IDENTITY.backward, rank=4)


def _flat_patches(x):
    side = math.isqrt(x.shape[0] // 3)
    if side * side * 3 != x.shape[0]:
        raise ValueError(f"{x.shape[0]} inputs are not the flattened pixels of a square RGB patch")
    return np.ascontiguousarray(x.reshape(side, side, 3, x.shape[1]))


# A linear patch embedding (NaFlex: transformers' Siglip2, timm's and big_vision's) on RGB patches flattened in
# (row, col, channel) order is keras_vit's patch convolution, its kernel (in, D) reshaped to HWIO.
FLAT_PATCHES = Transform(
    "flat_patches",
    _flat_patches,
    lambda x, context: (x.reshape(-1, x.shape[-1]),),
    reads=lambda shape: {"linear_patches": True},
    rank=2,
)
TORCH_FLAT_PATCHES = Transform(
    "torch_flat_patches",
    lambda x: _flat_patches(_transpose(x)),
    lambda x, context: (_transpose(x.reshape(-1, x.shape[-1])),),
    reads=FLAT_PATCHES.reads,
    rank=2,
)


def grid_table(leading):
    """A position table kept as a grid `((1,) * leading + (rows, cols, D))` (NaFlex) as keras_vit's rows; its shape
    says the grid (written back, a square)."""

    def backward(x, context):
        side = math.isqrt(x.shape[1])
        return (x.reshape((1,) * leading + (side, side, x.shape[-1])),)

    return Transform(
        f"grid_table({leading})",
        lambda x: x.reshape(1, -1, x.shape[-1]),
        backward,
        reads=lambda shape: {"position_grid": tuple(int(side) for side in shape[-3:-1])},
    )


# Flax keeps (D, heads, head_dim) kernels, (heads, head_dim) biases and a (heads, head_dim, D) output kernel.
MERGE_HEADS_IN = Transform(
    "merge_heads_in",
    lambda x: x.reshape(x.shape[0], -1),
    lambda x, context: (x.reshape(x.shape[0], _heads(context), -1),),
    reads=lambda *shapes: {"num_heads": int(shapes[0][1])},
)
MERGE_HEADS_BIAS = Transform(
    "merge_heads_bias",
    lambda x: x.reshape(-1),
    lambda x, context: (x.reshape(_heads(context), -1),),
    reads=lambda *shapes: {"num_heads": int(shapes[0][0])},
)
MERGE_HEADS_OUT = Transform(
    "merge_heads_out",
    lambda x: x.reshape(-1, x.shape[-1]),
    lambda x, context: (x.reshape(_heads(context), -1, x.shape[-1]),),
    reads=lambda *shapes: {"num_heads": int(shapes[0][0])},
)


def fuse(each, axis, count=3):
    """`count` file tensors, each changed by `each`, concatenated on `axis` (q, k, v -> qkv)."""
    return Transform(
        f"fuse({each.name}, axis={axis})",
        lambda *xs: np.concatenate([each.forward(x) for x in xs], axis=axis),
        lambda x, context: tuple(each.backward(piece, context)[0] for piece in np.split(x, count, axis=axis)),
        reads=each.reads,
    )


def _drop_class_row(x, context):
    if np.any(x[:, :1]):
        raise ValueError("this layout has no position embedding for the class token, but its row is not zero")
    return (np.ascontiguousarray(x[:, 1:]),)


# big_vision adds the position embedding before prepending the class token: a zero row is the same model.
ZERO_CLASS_ROW = Transform(
    "zero_class_row", lambda x: np.concatenate([np.zeros_like(x[:, :1]), x], axis=1), _drop_class_row
)
# transformers' DINOv2 with registers gives only the class token a position row: keras_vit folds it in (as timm
# does) and keeps the patch rows; written back, the class token's row is zero (the same model).
FOLD_CLASS_POSITION = Transform("fold_class_position", lambda cls, rows: cls + rows[:, :1], lambda x, context: (x,))
PATCH_POSITIONS = Transform("patch_positions", lambda x: x[:, 1:], lambda x, context: (ZERO_CLASS_ROW.forward(x),))


def _split_query_value(x, context):
    query, key, value = np.split(x, 3)
    if np.any(key):
        raise ValueError("this layout has no key bias, but the key third of the qkv bias is not zero")
    return query, value


# EVA's and DINOv3's query and value biases without a key bias: a fused qkv bias whose key third is zero.
ZERO_KEY_BIAS = Transform("zero_key_bias", lambda q, v: np.concatenate([q, np.zeros_like(q), v]), _split_query_value)
# DINOv3's own files keep the whole qkv bias and a mask that zeroes its key third at every call.
MASKED_BIAS = Transform("masked_bias", lambda bias, mask: bias * mask, lambda x, context: (x, np.ones_like(x)))
# Naver's learned RoPE frequencies `(2, depth, heads, head_dim / 2)` show the heads.
MIXED_FREQUENCIES = Transform(
    "mixed_frequencies", lambda x: x, IDENTITY.backward, reads=lambda shape: {"num_heads": int(shape[2])}
)


def leading_axes(count):
    """The file's tensor lacks `count` leading unit axes (transformers' position tables, CLIP's class token)."""
    return Transform(
        f"leading_axes({count})",
        lambda x: x.reshape((1,) * count + x.shape),
        lambda x, context: (x.reshape(x.shape[count:]),),
    )


def packed_in_proj(each, query):
    """The query (else the key-value) rows of a packed `[q; k; v]` (`nn.MultiheadAttention`'s `in_proj`), by `each`."""
    return Transform(
        f"packed_in_proj({each.name}, query={query})",
        lambda x: each.forward(x[: len(x) // 3] if query else x[len(x) // 3 :]),
        each.backward,
    )


@dataclasses.dataclass(frozen=True)
class Row:
    """One keras_vit weight and the file key(s) it comes from (relative to the part's roots)."""

    keras: str
    keys: tuple
    transform: Transform = IDENTITY


def rows(*specs):
    """Rows from `(keras, key_or_keys[, transform])` tuples."""
    return tuple(
        Row(keras_name, (keys,) if isinstance(keys, str) else tuple(keys), *transform)
        for keras_name, keys, *transform in specs
    )


# One row with its indices filled in; `index` is the position on a scanned part's stacked axis.
_Entry = collections.namedtuple("_Entry", "keras keys transform index")


def _matches(template, names):
    """The `{field: number}` of every name in `names` that `template` matches."""
    if "{" not in template:
        return [{}] if template in names else []
    pattern = ""
    for literal, field, _, _ in string.Formatter().parse(template):
        pattern += re.escape(literal) + (f"(?P<{field}>\\d+)" if field else "")
    matches = map(re.compile(pattern).fullmatch, names)
    return [{field: int(number) for field, number in match.groupdict().items()} for match in matches if match]


@dataclasses.dataclass(frozen=True)
class Part:
    """Rows present as a whole: a model part (embedding, blocks, norm, head).

    Attributes:
        keras_root, key_root: prefixes (templates) of the rows' keras paths and file keys.
        optional: present only when the file (or the weights) has any of its tensors, e.g. a head.
        scan: the index the file stacks on a leading axis (`"i"`), or None.
        offsets: `{index: n}`: the file's number is keras_vit's plus n.
        prefixed: whether the layout's prefix applies (HF's classifier is outside its `vit.`).
    """

    name: str
    rows: tuple
    keras_root: str = ""
    key_root: str = ""
    optional: bool = False
    scan: str = None
    offsets: dict = dataclasses.field(default_factory=dict)
    prefixed: bool = True

    def _indices(self, templates, names, reading):
        """The index dicts (keras_vit numbering) of every match of `templates` in `names`."""
        found = set()
        for template in templates:
            for index in _matches(template, names):
                if reading:
                    index = {field: number - self.offsets.get(field, 0) for field, number in index.items()}
                found.add(tuple(sorted(index.items())))
        return [dict(index) for index in sorted(found)]

    def expand(self, names, prefix, reading):
        """The entries of this part for `names` (a file's `{key: array}` if `reading`, else keras_vit paths)."""
        prefix = prefix if self.prefixed else ""
        keras_names = [self.keras_root + row.keras for row in self.rows]
        file_keys = [[prefix + self.key_root + key for key in row.keys] for row in self.rows]
        templates = [key for keys in file_keys for key in keys] if reading else keras_names
        if self.optional and not any(_matches(template, names) for template in templates):
            return []
        if self.scan and reading:
            stacked = next((names[key] for key in templates if key in names), None)
            indices = [] if stacked is None else [{self.scan: n} for n in range(int(np.shape(stacked)[0]))]
        elif "{" in templates[0]:
            indices = self._indices(templates, names, reading)
        else:
            indices = [{}]
        entries = []
        for index in indices:
            file_index = {field: number + self.offsets.get(field, 0) for field, number in index.items()}
            for row, keras_name, keys in zip(self.rows, keras_names, file_keys):
                entries.append(
                    _Entry(
                        keras_name.format(**index),
                        tuple(key.format(**file_index) for key in keys),
                        row.transform,
                        index.get(self.scan) if self.scan else None,
                    )
                )
        return entries


@dataclasses.dataclass(frozen=True)
class Layout:
    """One checkpoint layout: its parts, prefix and the rules around them.

    Attributes:
        format, label, description: `"official"`; `"official .npz"` for messages; this layout, for logs.
        parts: the `Part`s; the first row of the first part (the patch embedding) recognises the layout (by its
            name, and by its rank where its transform says one).
        prefix: prepended to every file key of a prefixed part.
        ignore: file-key prefixes that are skipped (optimizer state).
        requires: `(key, message)`: recognised but refused with `CheckpointError(message)` when `key` is absent.
        refuses: `(keras prefix, message)`: weights the layout cannot hold (`ValueError(message)` on writing).
        writes: whether `from_keras` may write this layout.
        write_when: the keras_vit path whose presence selects this layout for writing ("" for always).
        write_unless: the keras_vit path whose absence selects it ("" for always), e.g. a position table.
        gated_mlp: whether it holds gated MLPs (`mlp_activation="swiglu"`): False, True, or None (either).
        config: the `config.json` defaults of the layout's transformers model class (what the tensors do not show).
        rope: what says its rotary position embedding: `""` (it has none), `"name"` (the timm model name) or
            `"config"` (the transformers config).
    """

    format: str
    label: str
    description: str
    parts: tuple
    prefix: str = ""
    ignore: tuple = ()
    requires: tuple = ()
    refuses: tuple = ()
    writes: bool = False
    write_when: str = ""
    write_unless: str = ""
    gated_mlp: bool = False
    config: dict = dataclasses.field(default_factory=dict)
    rope: str = ""

    def with_parts(self, *parts, **changes):
        """This layout with more parts (and any field changed), e.g. a ResNet stem."""
        return dataclasses.replace(self, parts=self.parts + tuple(parts), **changes)

    def _plan(self, names, reading):
        return [entry for part in self.parts for entry in part.expand(names, self.prefix, reading)]

    def _ignored(self, names):
        return {name for name in names if self.ignore and name.startswith(self.ignore)}

    def used(self, tensors):
        """The file's tensors this layout reads."""
        return {key for entry in self._plan(tensors, reading=True) for key in entry.keys} & set(tensors)

    def score(self, tensors):
        """How many of the file's tensors this layout accounts for (0 if its first tensor is absent)."""
        part = self.parts[0]
        probe = (self.prefix if part.prefixed else "") + part.key_root + part.rows[0].keys[0]
        if probe not in tensors or part.rows[0].transform.rank not in (None, len(tensors[probe].shape)):
            return 0
        return len(self.used(tensors)) + len(self._ignored(tensors))

    def read(self, tensors):
        """Converts `{file key: array}` to `{keras_vit path: array}`, or raises one `CheckpointError`."""
        for key, message in self.requires:
            if self.prefix + key not in tensors:
                raise CheckpointError(message)
        entries = self._plan(tensors, reading=True)
        used = self._ignored(tensors)
        missing = []
        for entry in entries:
            missing += [key for key in entry.keys if key not in tensors and key not in missing]
            used.update(entry.keys)
        unexpected = sorted(set(tensors) - used)
        if missing or unexpected:
            raise mismatch_error(
                f"The checkpoint does not have the {self.label} ViT layout keras_vit expects.",
                missing=missing,
                unexpected=unexpected,
                hint="Unexpected tensors usually mean a different architecture (distillation token, "
                "layer scale, MAP head, hybrid ResNet stem, ...), which this layout does not describe.",
            )
        weights = {}
        for entry in entries:
            arrays = [np.asarray(tensors[key]) for key in entry.keys]
            if entry.index is not None:
                arrays = [array[entry.index] for array in arrays]
            try:
                weights[entry.keras] = entry.transform.forward(*arrays)
            except (ValueError, IndexError) as error:
                shapes = [array.shape for array in arrays]
                raise mismatch_error(
                    f"Cannot convert {entry.keras} from {', '.join(entry.keys)} (shapes {shapes}, "
                    f"transform {entry.transform.name}): {error}."
                ) from error
        return weights

    def shape_facts(self, tensors):
        """The architecture facts the file's declared shapes hold, e.g. `{"num_heads": 12}` (`Transform.reads`)."""
        facts = {}
        for entry in self._plan(tensors, reading=True):
            if entry.transform.reads is None:
                continue
            skip = 0 if entry.index is None else 1  # a scanned part's leading block axis
            found = entry.transform.reads(*(tuple(tensors[key].shape)[skip:] for key in entry.keys))
            for name, value in found.items():
                if facts.setdefault(name, value) != value:
                    raise mismatch_error(f"The checkpoint's tensors disagree on {name}: {facts[name]} and {value}.")
        return facts

    def write(self, weights, context=None):
        """Converts `{keras_vit path: array}` to `{file key: array}`; `context` holds `num_heads`.

        Raises:
            ValueError: the layout cannot hold some weights, or a transform lacks `num_heads`.
            CheckpointError: weights missing or left over.
        """
        context = dict(context or {})
        for keras_prefix, message in self.refuses:
            if any(name.startswith(keras_prefix) for name in weights):
                raise ValueError(message)
        entries = self._plan(weights, reading=False)
        missing = [entry.keras for entry in entries if entry.keras not in weights]
        unexpected = sorted(set(weights) - {entry.keras for entry in entries})
        if missing or unexpected:
            raise mismatch_error(
                f"These weights do not have the ViT structure the {self.label} layout describes.",
                missing=missing,
                unexpected=unexpected,
            )
        tensors, stacks = {}, collections.defaultdict(list)
        for entry in entries:
            pieces = entry.transform.backward(np.asarray(weights[entry.keras]), context)
            for key, piece in zip(entry.keys, pieces):
                if entry.index is None and key in tensors:
                    tensors[key] = np.concatenate([tensors[key], piece])  # a packed projection, in row order
                elif entry.index is None:
                    tensors[key] = np.ascontiguousarray(piece)
                else:
                    stacks[key].append(piece)  # entries come in block order
        for key, pieces in stacks.items():
            tensors[key] = np.stack(pieces)
        return tensors
