"""The one way keras_vit writes a file: whole or not at all.

Every output (checkpoints, weight exports, the download cache, training
backups and metrics, plots, benchmark results) is written to a temporary
folder beside its target (named `.keras_vit-tmp-...`, never a name an output
could have), flushed with `fsync`, then renamed into place with `os.replace`:
a rename inside one file system is atomic, so a reader sees the old output or
the new one, never a half-written file. A killed write may leave its
temporary folder behind, never a partial file under the target's name.

The staged file keeps the target's own name inside the temporary folder, so
writers that read the suffix (`model.save`, `figure.savefig`) or name
companion files after it (OpenVINO's `.bin` beside its `.xml`) work unchanged.

`replace=False` (exports) refuses to write when the target exists, checked
before the work starts and again just before the rename.

Example:

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = write_json(os.path.join(folder, "metrics.json"), {"accuracy": 0.98})
>>> with atomic_file(os.path.join(folder, "notes.txt")) as staged:
...     with open(staged, "w") as handle:
...         _ = handle.write("complete or absent")
>>> with atomic_directory(os.path.join(folder, "export")) as staged:
...     _ = write_text(os.path.join(staged, "a.txt"), "1")
>>> sorted(os.listdir(folder))
['export', 'metrics.json', 'notes.txt']
"""

import contextlib
import json
import os
import shutil
import tempfile

TEMP_PREFIX = ".keras_vit-tmp-"


def _fsync(path):
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    except OSError:
        pass  # Some file systems cannot fsync a folder; the files themselves were synced.
    finally:
        os.close(handle)


def _fsync_tree(path):
    if os.path.isdir(path):
        for root, _, names in os.walk(path):
            for name in names:
                if not os.path.islink(os.path.join(root, name)):
                    _fsync(os.path.join(root, name))
            _fsync(root)
    else:
        _fsync(path)


def _refuse_existing(path):
    if os.path.lexists(path):
        raise FileExistsError(f"{path} exists and this output never replaces a file: choose a new path or remove it.")


@contextlib.contextmanager
def _temporary_folder(path):
    """Yields `(target, staged)`: the absolute target and a path of the same name in a temporary folder beside it."""
    target = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(target)
    if not name:
        raise ValueError(f"An output path must name a file or folder. Received: path={path!r}")
    os.makedirs(directory, exist_ok=True)
    temporary = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=directory)
    try:
        yield target, os.path.join(temporary, name)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(path, replace=True):
    """Yields a temporary path to write; when the block ends without an exception it replaces `path` whole.

    Args:
        path: the output file. Its folder is created if needed.
        replace: bool. `False`: raise `FileExistsError` if `path` exists
            (before the block runs, and again before the rename).

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "scores.txt")
    >>> with atomic_file(path) as staged:
    ...     with open(staged, "w") as handle:
    ...         _ = handle.write("0.98")
    >>> open(path).read()
    '0.98'
    """
    folder, name = os.path.split(os.path.abspath(os.fspath(path)))
    if os.fspath(path).endswith(os.sep):
        raise ValueError(f"An output path must name a file. Received: path={path!r}")
    with atomic_files(folder, [name], replace) as staged:
        yield staged[name]


@contextlib.contextmanager
def atomic_files(folder, names, replace=True):
    """Yields `{name: temporary path}`; on success each file replaces its namesake in `folder`.

    The files are staged together in one temporary folder (a writer may name
    one after another) and renamed into place one after the other: an
    exception leaves every old file as it was. A kill during the renames,
    a few microseconds, may leave some new files beside old ones.

    Args:
        folder: the output folder. It is created if needed.
        names: the plain file names of the set.
        replace: bool. `False`: raise `FileExistsError` if any name exists.
    """
    names = [os.fspath(name) for name in names]
    if not names or any(os.path.basename(name) != name or name in ("", ".", "..") for name in names):
        raise ValueError(f"`names` must be plain file names, at least one. Received: names={names!r}")
    with _temporary_folder(os.path.join(folder, names[0])) as (first, staged_first):
        directory, temporary = os.path.dirname(first), os.path.dirname(staged_first)
        targets = [os.path.join(directory, name) for name in names]
        for target in targets if not replace else ():
            _refuse_existing(target)
        yield {name: os.path.join(temporary, name) for name in names}
        for name, target in zip(names, targets):
            if not os.path.isfile(os.path.join(temporary, name)):
                raise OSError(f"Nothing was written to {target}.")
            if os.path.isdir(target):
                raise IsADirectoryError(f"{target} is a folder; choose another output path.")
            if not replace:
                _refuse_existing(target)
            _fsync(os.path.join(temporary, name))
        for name, target in zip(names, targets):
            os.replace(os.path.join(temporary, name), target)
        _fsync(directory)


@contextlib.contextmanager
def atomic_directory(path, replace=True):
    """Yields a temporary folder to fill; on success it replaces the folder `path` whole.

    An existing folder at `path` is moved into the temporary folder and the
    new one renamed into place: readers see the complete old folder or the
    complete new one, never a mix (between the two renames, for an instant,
    none). The old folder may only hold names the new one also holds
    (anything else would be lost): otherwise `FileExistsError` and nothing
    changes.

    Args:
        path: the output folder. Its parent is created if needed.
        replace: bool. `False`: raise `FileExistsError` if `path` exists.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "export")
    >>> with atomic_directory(path) as staged:
    ...     _ = write_text(os.path.join(staged, "config.json"), "{}")
    >>> os.listdir(path)
    ['config.json']
    """
    with _temporary_folder(path) as (target, staged):
        if not replace:
            _refuse_existing(target)
        elif os.path.lexists(target) and (not os.path.isdir(target) or os.path.islink(target)):
            raise FileExistsError(f"{target} exists and is not a folder; choose another output path.")
        os.mkdir(staged)
        yield staged
        if not replace:
            _refuse_existing(target)
        elif os.path.lexists(target):
            foreign = sorted(set(os.listdir(target)) - set(os.listdir(staged)))
            if foreign:
                raise FileExistsError(
                    f"{target} already holds files this output would not rewrite ({', '.join(foreign[:5])}); "
                    "they would be lost. Choose a new or empty folder."
                )
        _fsync_tree(staged)
        if os.path.lexists(target):
            os.rename(target, staged + ".old")  # removed with the temporary folder
        os.rename(staged, target)
        _fsync(os.path.dirname(target))


def check_output_path(path):
    """Checks, before any long work, that an output file can be written at `path`.

    Args:
        path: the output file that will be written later.

    Returns:
        `path` as a string.

    Raises:
        FileNotFoundError: its folder does not exist.
        NotADirectoryError / IsADirectoryError: the folder is a file, or
            the path is a folder.
        PermissionError: the folder is not writable.

    >>> import tempfile
    >>> check_output_path(tempfile.mkdtemp() + "/missing/report.json")
    Traceback (most recent call last):
    ...
    FileNotFoundError: The output folder ... does not exist; create it first or choose another path.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(directory):
        raise FileNotFoundError(
            f"The output folder {directory} does not exist; create it first or choose another path."
        )
    if not os.path.isdir(directory):
        raise NotADirectoryError(f"The output folder {directory} is a file; choose another path.")
    if os.path.isdir(path):
        raise IsADirectoryError(f"The output {path} is a folder; give a file name.")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(f"The output folder {directory} is not writable; choose another path.")
    return path


def check_output_folder(path):
    """Checks, before any long work, that results can be written into the folder `path` (made later if missing).

    Args:
        path: the output folder.

    Returns:
        `path` as a string.

    Raises:
        NotADirectoryError: `path`, or the nearest existing folder above
            it, is a file.
        PermissionError: that folder is not writable.

    >>> import tempfile
    >>> report = tempfile.mkdtemp() + "/report.txt"
    >>> _ = write_text(report, "results")
    >>> check_output_folder(report)
    Traceback (most recent call last):
    ...
    NotADirectoryError: The output folder ... is a file; choose another folder.
    """
    path = os.fspath(path)
    existing = os.path.abspath(path)
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)  # the folders still to be made are made under it
    if not os.path.isdir(existing):
        where = path if existing == os.path.abspath(path) else existing
        raise NotADirectoryError(f"The output folder {where} is a file; choose another folder.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(f"The output folder {existing} is not writable; choose another folder.")
    return path


def write_bytes(path, data):
    """Writes `data` to `path` atomically (see `atomic_file`) and returns `path`."""
    with atomic_file(path) as staged:
        with open(staged, "wb") as handle:
            handle.write(data)
    return os.fspath(path)


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically and returns `path`."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path, data, **dump_kwargs):
    """Writes `data` as indented JSON (plus a newline) to `path` atomically and returns `path`.

    Args:
        path: the output file.
        data: anything `json.dumps` accepts.
        **dump_kwargs: passed to `json.dumps` (default `indent=2, sort_keys=True`).
    """
    options = {"indent": 2, "sort_keys": True, **dump_kwargs}
    return write_text(path, json.dumps(data, **options) + "\n")
