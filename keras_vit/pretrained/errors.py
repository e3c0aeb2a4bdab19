"""Typed errors of the pretrained-weights machinery.

Every error says what was received and what to do. They derive from the
built-in exception a caller would naturally catch (`ValueError` for bad
checkpoints, `OSError` for download and cache problems) and from one common
`WeightsError`, so `except keras_vit.pretrained.WeightsError` catches them all.
"""

from keras_vit.utils import extras


class WeightsError(Exception):
    """Base class of every pretrained-weights error."""


class UnknownWeightsError(WeightsError, ValueError):
    """`weights=` names no tag, alias, file or Hub handle for this variant."""


class CheckpointFormatError(WeightsError, ValueError):
    """The file is not a checkpoint this library can read (or refuses to read, like pickles)."""


class CorruptCheckpointError(CheckpointFormatError):
    """The file has a known format but is truncated or damaged."""


class CheckpointMismatchError(WeightsError, ValueError):
    """The checkpoint's tensors do not match the model: missing, unexpected or wrongly shaped.

    Attributes:
        missing: list of names the model needs but the checkpoint lacks.
        unexpected: list of checkpoint names nothing in the model uses.
        mismatched: list of `(name, checkpoint_shape, model_shape)`.
    """

    def __init__(self, message, missing=(), unexpected=(), mismatched=()):
        super().__init__(message)
        self.missing = list(missing)
        self.unexpected = list(unexpected)
        self.mismatched = list(mismatched)


class DownloadError(WeightsError, OSError):
    """A checkpoint could not be fetched into the cache."""


class OfflineError(DownloadError):
    """Offline mode (or no network) and the file is not in the cache."""


class HashMismatchError(DownloadError):
    """The downloaded bytes do not have the expected sha256."""


class TruncatedDownloadError(DownloadError):
    """The server sent fewer bytes than it announced."""


_LIST_LIMIT = 12


def _summarise(names):
    names = list(names)
    shown = ", ".join(str(name) for name in names[:_LIST_LIMIT])
    return shown + (f", ... ({len(names) - _LIST_LIMIT} more)" if len(names) > _LIST_LIMIT else "")


def mismatch_error(what, missing=(), unexpected=(), mismatched=(), hint=""):
    """Builds one `CheckpointMismatchError` that lists every problem (the first 12 of each kind)."""
    parts = [what]
    if missing:
        parts.append(f"Missing ({len(missing)}): {_summarise(missing)}.")
    if unexpected:
        parts.append(f"Unexpected ({len(unexpected)}): {_summarise(unexpected)}.")
    if mismatched:
        shown = [f"{name} {tuple(got)} vs model {tuple(want)}" for name, got, want in mismatched]
        parts.append(f"Wrong shapes ({len(mismatched)}): {_summarise(shown)}.")
    if hint:
        parts.append(hint)
    return CheckpointMismatchError(" ".join(parts), missing, unexpected, mismatched)


class MalformedCheckpointError(CorruptCheckpointError):
    """One field of the file (a header entry's shape, offsets or dtype, a metadata value) is invalid.

    Attributes:
        path: the file.
        field: the field, e.g. `"header['head.weight'].data_offsets"`.
    """

    def __init__(self, path, field, problem):
        super().__init__(f"{path}: {field} {problem}. The file is damaged or was not written by a checkpoint tool.")
        self.path = str(path)
        self.field = field


class NonFiniteWeightsError(CorruptCheckpointError):
    """The checkpoint holds NaN or infinite values.

    Attributes:
        path: the file.
        names: the tensors (keras_vit names) with non-finite values.
    """

    def __init__(self, path, names):
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        super().__init__(
            f"{path} holds NaN or infinite values in {len(names)} tensor(s): {shown}. A model loaded from it "
            "would only output NaN; the training run that wrote it diverged or the file is damaged."
        )
        self.path = str(path)
        self.names = list(names)


class MissingDependencyError(WeightsError, extras.MissingDependencyError):
    """An optional dependency of the `weights` extra is missing; the message names the extra to install."""
