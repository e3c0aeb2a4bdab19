"""Typed errors of the pretrained-weights machinery.

Every error says what was received and what to do. They derive from the
built-in exception a caller would naturally catch (`ValueError` for bad
checkpoints, `OSError` for download and cache problems) and from one common
`WeightsError`, so `except keras_vit.pretrained.WeightsError` catches them all.
"""


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
