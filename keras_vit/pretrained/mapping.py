"""Declarative weight-name tables, read in both directions.

A checkpoint layout is a `Layout`: an optional key prefix and a list of
`Part`s (patch embedding, blocks, final norm, head, ...). A `Part` is a list
of `Row`s, each a keras_vit weight path, the key(s) the tensor has in the
file and the named `Transform` between the two. The same rows convert a file
to keras_vit names (`Layout.read`) and keras_vit weights to the file
(`Layout.write`), so the two directions cannot drift apart.

Templates may hold indices: `{i}` in a block part is the block number, found
from the names present (file names when reading, keras_vit paths when
writing); a part may hold more (`block{i}/unit{j}`) and shift the file's
numbering (`offsets={"i": 1}` when the file counts from 1). A scanned part
(`scan="i"`) has one file tensor per row with the blocks stacked on a
leading axis.

Accounting is strict: every key a row needs must be in the file (else
"missing"), every tensor of the file must be used or ignored (else
"unexpected"), and both lists come in one `CheckpointError`.

Another model family composes its own layouts from these parts, e.g.
`layout.with_parts(stem_part)` for a ResNet stem, and passes them to
`converters.to_keras(tensors, layouts=...)`.

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

import dataclasses
import re
import string
from collections.abc import Callable

import numpy as np

from keras_vit.pretrained.errors import CheckpointError, mismatch_error

# --------------------------------------------------------------------------- transforms


@dataclasses.dataclass(frozen=True)
class Transform:
    """A named, invertible change of layout between a file's tensors and one keras_vit weight.

    Attributes:
        name: shown in error messages.
        forward: `(*file_arrays) -> keras_array`.
        backward: `(keras_array, context) -> tuple of file arrays` (one per key of the row).
        needs: context entries `backward` needs (e.g. `"num_heads"` to split heads).
        reads: optional `(*file_shapes) -> dict`: architecture facts the file's
            tensor shapes hold that the keras_vit weight no longer shows
            (flax's per-head kernels give `"num_heads"`; a fused kernel cannot).
    """

    name: str
    forward: Callable
    backward: Callable
    needs: tuple = ()
    reads: Callable = None


def _transpose(x):
    return np.ascontiguousarray(np.transpose(x))


def _heads(context):
    return int(context["num_heads"])


IDENTITY = Transform("identity", lambda x: x, lambda x, context: (x,))
# PyTorch linears are (out, in); Keras Dense kernels (in, out).
TRANSPOSE = Transform("transpose", _transpose, lambda x, context: (_transpose(x),))
# PyTorch convolutions are (out, in, h, w); Keras kernels HWIO.
TORCH_CONV = Transform(
    "torch_conv_to_hwio",
    lambda x: np.ascontiguousarray(np.transpose(x, (2, 3, 1, 0))),
    lambda x, context: (np.ascontiguousarray(np.transpose(x, (3, 2, 0, 1))),),
)
# Flax's attention keeps (D, heads, head_dim) kernels, (heads, head_dim) biases
# and a (heads, head_dim, D) output kernel; keras_vit merges the head axes.
MERGE_HEADS_IN = Transform(
    "merge_heads_in",
    lambda x: x.reshape(x.shape[0], -1),
    lambda x, context: (x.reshape(x.shape[0], _heads(context), -1),),
    needs=("num_heads",),
    reads=lambda *shapes: {"num_heads": int(shapes[0][1])},
)
MERGE_HEADS_BIAS = Transform(
    "merge_heads_bias",
    lambda x: x.reshape(-1),
    lambda x, context: (x.reshape(_heads(context), -1),),
    needs=("num_heads",),
    reads=lambda *shapes: {"num_heads": int(shapes[0][0])},
)
MERGE_HEADS_OUT = Transform(
    "merge_heads_out",
    lambda x: x.reshape(-1, x.shape[-1]),
    lambda x, context: (x.reshape(_heads(context), -1, x.shape[-1]),),
    needs=("num_heads",),
    reads=lambda *shapes: {"num_heads": int(shapes[0][0])},
)


def fuse(each, axis, count=3):
    """`count` file tensors, each changed by `each`, concatenated on `axis` (e.g. q, k, v -> qkv)."""
    return Transform(
        f"fuse({each.name}, axis={axis})",
        lambda *xs: np.concatenate([each.forward(x) for x in xs], axis=axis),
        lambda x, context: tuple(each.backward(piece, context)[0] for piece in np.split(x, count, axis=axis)),
        needs=each.needs,
        reads=each.reads,
    )


def _drop_class_row(x, context):
    if np.any(x[:, :1]):
        raise ValueError("this layout has no position embedding for the class token, but its row is not zero")
    return (np.ascontiguousarray(x[:, 1:]),)


# big_vision adds the position embedding before prepending the class token,
# so the class token gets none: a zero row is the same model.
ZERO_CLASS_ROW = Transform(
    "zero_class_row", lambda x: np.concatenate([np.zeros_like(x[:, :1]), x], axis=1), _drop_class_row
)


# --------------------------------------------------------------------------- tables


@dataclasses.dataclass(frozen=True)
class Row:
    """One keras_vit weight and the file key(s) it comes from (templates relative to the part's roots)."""

    keras: str
    keys: tuple
    transform: Transform = IDENTITY


def rows(*specs):
    """Rows from `(keras, key_or_keys[, transform])` tuples."""
    made = []
    for keras_name, keys, *transform in specs:
        made.append(Row(keras_name, (keys,) if isinstance(keys, str) else tuple(keys), *transform))
    return tuple(made)


@dataclasses.dataclass(frozen=True)
class _Entry:
    keras: str
    keys: tuple
    transform: Transform
    index: object = None  # position on the stacked axis of a scanned part


def _fields(template):
    return [field for _, field, _, _ in string.Formatter().parse(template) if field]


def _pattern(template):
    parts = []
    for literal, field, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field:
            parts.append(f"(?P<{field}>\\d+)")
    return re.compile("".join(parts) + r"\Z")


@dataclasses.dataclass(frozen=True)
class Part:
    """A group of rows that is present as a whole: a model part (embedding, blocks, norm, head).

    Attributes:
        name: for messages.
        rows: the `Row`s.
        keras_root / key_root: prefixes of the rows' keras paths / file keys
            (templates, e.g. `"encoder_block_{i}/"`, `"blocks.{i}."`).
        optional: present only when the file (or the weights) has any of
            its tensors, e.g. a head.
        scan: the index the file stacks on a leading axis (`"i"`), or None.
        offsets: `{index: n}`: the file's number is keras_vit's plus n.
        prefixed: whether the layout's prefix applies (HF's classifier is
            outside its `vit.` prefix).
    """

    name: str
    rows: tuple
    keras_root: str = ""
    key_root: str = ""
    optional: bool = False
    scan: str = None
    offsets: dict = dataclasses.field(default_factory=dict)
    prefixed: bool = True

    def renamed(self, names):
        """The part with each `old -> new` in `names` substituted in its file keys."""

        def rename(key):
            for old, new in names.items():
                key = key.replace(old, new)
            return key

        return dataclasses.replace(
            self,
            rows=tuple(dataclasses.replace(row, keys=tuple(rename(key) for key in row.keys)) for row in self.rows),
        )

    def _templates(self, prefix):
        prefix = prefix if self.prefixed else ""
        for row in self.rows:
            yield row, self.keras_root + row.keras, [prefix + self.key_root + key for key in row.keys]

    def _file_index(self, index):
        return {name: value + self.offsets.get(name, 0) for name, value in index.items()}

    def _indices(self, templates, names, shift):
        """The index dicts of every match of `templates` in `names` (file numbering shifted by `shift`)."""
        found = set()
        for template in templates:
            if not _fields(template):
                continue
            pattern = _pattern(template)
            head = template.split("{", 1)[0]
            for name in names:
                if name.startswith(head) and (match := pattern.match(name)):
                    index = {k: int(v) - shift * self.offsets.get(k, 0) for k, v in match.groupdict().items()}
                    found.add(tuple(sorted(index.items())))
        indices = [dict(index) for index in sorted(found)]
        fields = {field for template in templates for field in _fields(template)}
        if len(fields) == 1 and indices:
            (field,) = fields
            numbers = sorted(index[field] for index in indices)
            if numbers != list(range(len(numbers))):
                raise mismatch_error(
                    f"The {self.name} of the checkpoint are not numbered 0..N-1 (in keras_vit's numbering): "
                    f"found {numbers}.",
                    missing=[str(n) for n in sorted(set(range(max(numbers) + 1)) - set(numbers))],
                )
        return indices

    def expand(self, names, prefix, reading):
        """The entries of this part for `names` (a file's `{key: array}` if `reading`, else keras_vit paths)."""
        templates = list(self._templates(prefix))
        all_keys = [key for _, _, keys in templates for key in keys]
        all_keras = [keras_name for _, keras_name, _ in templates]
        if self.optional:
            present = _any_present(all_keys if reading else all_keras, names)
            if not present:
                return []
        if self.scan and reading:
            stacked = next((names[key] for key in all_keys if key in names), None)
            indices = [] if stacked is None else [{self.scan: n} for n in range(int(np.shape(stacked)[0]))]
        elif reading:
            indices = self._indices(all_keys, names, shift=1) if _fields(all_keys[0]) else [{}]
        else:
            indices = self._indices(all_keras, names, shift=0) if _fields(all_keras[0]) else [{}]
        entries = []
        for index in indices:
            file_index = self._file_index(index)
            for row, keras_name, keys in templates:
                entries.append(
                    _Entry(
                        keras_name.format(**index),
                        tuple(key.format(**file_index) for key in keys),
                        row.transform,
                        index.get(self.scan) if self.scan else None,
                    )
                )
        return entries


def _any_present(templates, names):
    for template in templates:
        if _fields(template):
            pattern, head = _pattern(template), template.split("{", 1)[0]
            if any(name.startswith(head) and pattern.match(name) for name in names):
                return True
        elif template in names:
            return True
    return False


@dataclasses.dataclass(frozen=True)
class Layout:
    """One checkpoint layout: its parts, prefix and the rules around them.

    Attributes:
        format: the format's name (`"official"`, `"timm"`, `"hf"`, ...).
        label: the format for messages (`"official .npz"`).
        description: this layout for logs.
        parts: the `Part`s; the first row of the first part is the probe
            that recognises the layout (the patch embedding).
        prefix: prepended to every file key of a prefixed part.
        ignore: file-key prefixes that are skipped (optimizer state).
        requires: `(key, message)`: the layout is recognised but refused
            with `CheckpointError(message)` when `key` is absent.
        refuses: `(keras prefix, message)`: weights the layout cannot hold;
            writing them raises `ValueError(message)`.
        writes: whether `converters.from_keras` may write this layout.
        write_when: the keras_vit path whose presence selects this layout
            for writing among the format's writable layouts ("" for always).
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

    def with_parts(self, *parts, **changes):
        """This layout with more parts (and any field changed), e.g. a ResNet stem."""
        return dataclasses.replace(self, parts=self.parts + tuple(parts), **changes)

    @property
    def probe(self):
        part = self.parts[0]
        return (self.prefix if part.prefixed else "") + part.key_root + part.rows[0].keys[0]

    def _plan(self, names, reading):
        return [entry for part in self.parts for entry in part.expand(names, self.prefix, reading)]

    def _ignored(self, names):
        return {name for name in names if self.ignore and name.startswith(self.ignore)}

    def score(self, tensors):
        """How many of the file's tensors this layout accounts for (0 if its probe is absent)."""
        if self.probe not in tensors:
            return 0
        used = {key for entry in self._plan(tensors, reading=True) for key in entry.keys}
        return len(used & set(tensors)) + len(self._ignored(tensors))

    def read(self, tensors):
        """Converts `{file key: array}` to `{keras_vit path: array}`.

        Raises:
            CheckpointError: a required tensor (`requires`) is absent,
                missing or unexpected tensors, or a tensor whose shape the
                transform cannot take.
        """
        for key, message in self.requires:
            if self.prefix + key not in tensors:
                raise CheckpointError(message)
        entries = self._plan(tensors, reading=True)
        used = set(self._ignored(tensors))
        missing = []
        for entry in entries:
            for key in entry.keys:
                if key not in tensors and key not in missing:
                    missing.append(key)
                used.add(key)
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
            weights[entry.keras] = _apply(entry, arrays)
        return weights

    def shape_facts(self, tensors):
        """The architecture facts the file's tensor shapes declare (see `Transform.reads`), e.g.
        `{"num_heads": 12}` for flax's per-head attention kernels; read from the declared shapes only.

        Raises:
            CheckpointError: two tensors declare different values.
        """
        facts = {}
        for entry in self._plan(tensors, reading=True):
            if entry.transform.reads is None or not all(key in tensors for key in entry.keys):
                continue
            # A scanned part stacks the blocks on a leading axis.
            skip = 0 if entry.index is None else 1
            found = entry.transform.reads(*(tuple(tensors[key].shape)[skip:] for key in entry.keys))
            for name, value in found.items():
                if facts.setdefault(name, value) != value:
                    raise mismatch_error(f"The checkpoint's tensors disagree on {name}: {facts[name]} and {value}.")
        return facts

    def write(self, weights, context=None):
        """Converts `{keras_vit path: array}` to `{file key: array}`.

        Args:
            weights: keras_vit-named arrays.
            context: what transforms need (`{"num_heads": 12}`).

        Raises:
            ValueError: the layout cannot hold some weights (`refuses`), or
                a transform needs a context entry that is not given.
            CheckpointError: weights missing or left over.
        """
        context = dict(context or {})
        for keras_prefix, message in self.refuses:
            if any(name.startswith(keras_prefix) for name in weights):
                raise ValueError(message)
        entries = self._plan(weights, reading=False)
        for entry in entries:
            for need in entry.transform.needs:
                if not context.get(need):
                    raise ValueError(
                        f"The {self.label} layout's `{entry.transform.name}` transform needs `{need}`: pass {need}."
                    )
        missing = [entry.keras for entry in entries if entry.keras not in weights]
        unexpected = sorted(set(weights) - {entry.keras for entry in entries})
        if missing or unexpected:
            raise mismatch_error(
                f"These weights do not have the ViT structure the {self.label} layout describes.",
                missing=missing,
                unexpected=unexpected,
            )
        out, stacks = {}, {}
        for entry in entries:
            pieces = entry.transform.backward(np.asarray(weights[entry.keras]), context)
            for key, piece in zip(entry.keys, pieces):
                if entry.index is None:
                    out[key] = np.ascontiguousarray(piece)
                else:
                    stacks.setdefault(key, {})[entry.index] = piece
        for key, pieces in stacks.items():
            out[key] = np.stack([pieces[n] for n in range(len(pieces))])
        return out


def _apply(entry, arrays):
    # A malformed tensor (wrong rank, say) must become a clear error naming it,
    # not a reshape traceback from deep inside NumPy.
    try:
        if entry.index is not None:
            arrays = [array[entry.index] for array in arrays]
        return entry.transform.forward(*arrays)
    except (ValueError, IndexError) as error:
        shapes = [tuple(np.shape(array)) for array in arrays]
        raise mismatch_error(
            f"Cannot convert {entry.keras} from {', '.join(entry.keys)} (shapes {shapes}, "
            f"transform {entry.transform.name}): {error}."
        ) from error
