"""The two errors of the pretrained-weights machinery."""

_LIST_LIMIT = 12


class CheckpointError(ValueError):
    """A checkpoint keras_vit cannot use; `missing`, `unexpected` and `mismatched` (name, got, want) list why."""

    def __init__(self, message, missing=(), unexpected=(), mismatched=()):
        super().__init__(message)
        self.missing = list(missing)
        self.unexpected = list(unexpected)
        self.mismatched = list(mismatched)


class DownloadError(OSError):
    """A checkpoint could not be fetched; the message says how to pre-seed the cache."""


def summarise(names):
    """The first 12 of `names`, and how many more there are."""
    names = [str(name) for name in names]
    shown = ", ".join(names[:_LIST_LIMIT])
    if len(names) > _LIST_LIMIT:
        shown += f", ... ({len(names) - _LIST_LIMIT} more)"
    return shown


def mismatch_error(what, missing=(), unexpected=(), mismatched=(), hint=""):
    """One `CheckpointError` that lists every problem (the first 12 of each kind)."""
    parts = [what]
    if missing:
        parts.append(f"Missing ({len(missing)}): {summarise(missing)}.")
    if unexpected:
        parts.append(f"Unexpected ({len(unexpected)}): {summarise(unexpected)}.")
    if mismatched:
        shown = [f"{name} {tuple(got)} vs model {tuple(want)}" for name, got, want in mismatched]
        parts.append(f"Wrong shapes ({len(mismatched)}): {summarise(shown)}.")
    if hint:
        parts.append(hint)
    return CheckpointError(" ".join(parts), missing, unexpected, mismatched)
