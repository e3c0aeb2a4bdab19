"""Outputs written whole or not at all: staged beside the target, `fsync`ed, then moved into place by `os.replace`.

Each output keeps its own name inside a temporary folder beside it (`.keras_vit-tmp-...`), so writers that name
companion files after it (OpenVINO's `.bin` beside its `.xml`) work unchanged; a killed write leaves only that
folder. `replace=False` refuses an existing target, before the work and again before the rename. Every output gets
the mode a new file or folder gets from the user's umask, whatever mode its writer staged it with (`mkstemp`'s 0600).
"""

import contextlib
import json
import os
import shutil
import stat
import tempfile

TEMP_PREFIX = ".keras_vit-tmp-"


def _fsync(path):
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    except OSError:
        pass  # some file systems cannot fsync a folder; the files in it were synced
    finally:
        os.close(handle)


def _refuse_existing(path):
    if os.path.lexists(path):
        raise FileExistsError(f"{path} exists and this output never replaces a file: choose a new path or remove it.")


def _umask_modes(temporary):
    """`(file mode, folder mode)` new outputs get here: a probe folder made in the empty `temporary` reads the umask
    (and any default ACL) without `os.umask`'s set-and-restore, which races with other threads."""
    probe = os.path.join(temporary, "probe")
    os.mkdir(probe)
    try:
        mode = stat.S_IMODE(os.stat(probe).st_mode)  # with the setgid bit a shared folder passes on
    finally:
        os.rmdir(probe)
    return mode & 0o666, mode


def _set_modes(path, modes):
    """Gives the staged output `path` (a file, or a folder and all inside it) `modes`: `(file mode, folder mode)`."""
    file_mode, folder_mode = modes
    if not os.path.isdir(path):
        os.chmod(path, file_mode)
        return
    for root, _, names in os.walk(path):
        os.chmod(root, folder_mode)
        for name in names:
            if not os.path.islink(os.path.join(root, name)):
                os.chmod(os.path.join(root, name), file_mode)


@contextlib.contextmanager
def _temporary_folder(folder):
    os.makedirs(folder, exist_ok=True)
    temporary = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=folder)
    try:
        yield temporary, _umask_modes(temporary)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


@contextlib.contextmanager
def atomic_files(folder, names, replace=True):
    """Yields `{name: temporary path}`; when the block succeeds each file replaces its namesake in `folder`."""
    names = [os.fspath(name) for name in names]
    if not names or any(os.path.basename(name) != name or name in ("", ".", "..") for name in names):
        raise ValueError(f"`names` must be plain file names, at least one. Received: names={names!r}")
    folder = os.path.abspath(os.fspath(folder))
    targets = [os.path.join(folder, name) for name in names]
    for target in targets if not replace else ():
        _refuse_existing(target)
    with _temporary_folder(folder) as (temporary, modes):
        staged = {name: os.path.join(temporary, name) for name in names}
        yield staged
        for name, target in zip(names, targets):
            if not os.path.isfile(staged[name]):
                raise OSError(f"Nothing was written to {target}.")
            if os.path.isdir(target):
                raise IsADirectoryError(f"{target} is a folder; choose another output path.")
            if not replace:
                _refuse_existing(target)
            _set_modes(staged[name], modes)
            _fsync(staged[name])
        for name, target in zip(names, targets):
            os.replace(staged[name], target)
        _fsync(folder)


@contextlib.contextmanager
def atomic_file(path, replace=True):
    """Yields a temporary path (of the same file name) to write; on success it replaces `path` whole."""
    folder, name = os.path.split(os.path.abspath(os.fspath(path)))
    with atomic_files(folder, [name], replace) as staged:
        yield staged[name]


@contextlib.contextmanager
def atomic_directory(path, replace=True):
    """Yields a temporary folder to fill; on success it replaces the folder `path` whole.

    An existing folder holding a name the new one does not (it would be lost) raises `FileExistsError`.
    """
    target = os.path.abspath(os.fspath(path))
    if not replace:
        _refuse_existing(target)
    elif os.path.lexists(target) and (not os.path.isdir(target) or os.path.islink(target)):
        raise FileExistsError(f"{target} exists and is not a folder; choose another output path.")
    with _temporary_folder(os.path.dirname(target)) as (temporary, modes):
        staged = os.path.join(temporary, os.path.basename(target))
        os.mkdir(staged)
        yield staged
        if not replace:
            _refuse_existing(target)
        elif os.path.lexists(target):
            foreign = sorted(set(os.listdir(target)) - set(os.listdir(staged)))
            if foreign:
                raise FileExistsError(
                    f"{target} holds files this output would not rewrite ({', '.join(foreign[:5])}); they would be "
                    "lost. Choose a new or empty folder."
                )
        _set_modes(staged, modes)
        for root, _, names in os.walk(staged):
            for name in names:
                _fsync(os.path.join(root, name))
            _fsync(root)
        if os.path.lexists(target):
            os.rename(target, staged + ".old")  # removed with the temporary folder
        os.rename(staged, target)
        _fsync(os.path.dirname(target))


def check_output_path(path):
    """Checks, before any long work, that the output file `path` can be written later; returns it."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(directory):
        raise FileNotFoundError(f"The output folder {directory} does not exist; create it or choose another path.")
    if not os.path.isdir(directory):
        raise NotADirectoryError(f"The output folder {directory} is a file; choose another path.")
    if os.path.isdir(path):
        raise IsADirectoryError(f"The output {path} is a folder; give a file name.")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(f"The output folder {directory} is not writable; choose another path.")
    return path


def check_output_folder(path):
    """Checks, before any long work, that results can be written into the folder `path` (made later if missing)."""
    path = os.fspath(path)
    existing = os.path.abspath(path)
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)  # the folders still missing will be made under it
    if not os.path.isdir(existing):
        raise NotADirectoryError(f"The output folder {existing} is a file; choose another folder.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(f"The output folder {existing} is not writable; choose another folder.")
    return path


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically and returns `path`."""
    with atomic_file(path) as staged, open(staged, "w", encoding="utf-8") as handle:
        handle.write(text)
    return os.fspath(path)


def write_json(path, data, **dump_kwargs):
    """Writes `data` as JSON (`indent=2, sort_keys=True` unless `dump_kwargs` say otherwise) atomically."""
    return write_text(path, json.dumps(data, **{"indent": 2, "sort_keys": True, **dump_kwargs}) + "\n")
