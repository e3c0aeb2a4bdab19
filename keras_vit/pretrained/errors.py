"""The two errors of the pretrained-weights machinery, on the built-in bases a caller naturally catches.

- `CheckpointError(ValueError)`: a checkpoint that cannot be used (not a
  format keras_vit reads, damaged, malformed, NaN/inf values, or tensors that
  do not fit the model).
- `DownloadError(OSError)`: a file that cannot be fetched (offline, host
  unreachable, HTTP failure, wrong hash, truncated transfer).

An unknown `weights=` value is a plain `ValueError`, as in `keras.applications`;
a missing optional package is `keras_vit.utils.extras.MissingDependencyError`.
"""

_LIST_LIMIT = 12


class CheckpointError(ValueError):
    """A checkpoint keras_vit cannot use; the message names the file and what is wrong.

    Attributes:
        missing: names the model needs but the checkpoint lacks.
        unexpected: checkpoint names nothing in the model uses.
        mismatched: `(name, checkpoint_shape, model_shape)` tuples.
    """

    def __init__(self, message, missing=(), unexpected=(), mismatched=()):
        super().__init__(message)
        self.missing = list(missing)
        self.unexpected = list(unexpected)
        self.mismatched = list(mismatched)


class DownloadError(OSError):
    """A checkpoint could not be fetched into the cache; the message says how to pre-seed it."""


def _summarise(names):
    names = list(names)
    shown = ", ".join(str(name) for name in names[:_LIST_LIMIT])
    return shown + (f", ... ({len(names) - _LIST_LIMIT} more)" if len(names) > _LIST_LIMIT else "")


def mismatch_error(what, missing=(), unexpected=(), mismatched=(), hint=""):
    """One `CheckpointError` that lists every problem (the first 12 of each kind)."""
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
    return CheckpointError(" ".join(parts), missing, unexpected, mismatched)


def malformed(path, field, problem):
    """The `CheckpointError` for one invalid field of a file (a header entry, a metadata value)."""
    return CheckpointError(f"{path}: {field} {problem}. The file is damaged or was not written by a checkpoint tool.")


def non_finite(path, names):
    """The `CheckpointError` for NaN or infinite values in the tensors `names`."""
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return CheckpointError(
        f"{path} holds NaN or infinite values in {len(names)} tensor(s): {shown}. A model loaded from it "
        "would only output NaN; the training run that wrote it diverged or the file is damaged."
    )
