"""The one way keras_vit writes a file: whole or not at all.

Every output (checkpoints, weight exports, the download cache, training
backups and metrics, plots, benchmark results) is written through this leaf
module (standard library only), so that

- a reader never sees a half-written file: the content goes to a private
  staging folder next to the target, is flushed and `fsync`ed, and is renamed
  into place in one step (a rename inside one file system is atomic);
- outputs made of several files (a Hugging Face folder with
  `model.safetensors` + `config.json`, a backup with its metadata) are
  staged as a folder and swapped in as a whole (Linux `renameat2` with
  `RENAME_EXCHANGE`; elsewhere two renames, with the old folder kept inside
  the staging folder so that the next run restores it if a kill fell between
  them);
- a set of files that shares a folder with other outputs (the `finetune`
  job's model, metrics and curves) is staged whole, then committed with a
  journal: a kill before the commit leaves the old set, a kill during the
  renames is rolled forward to the new set by the next write into that
  folder (`atomic_files`);
- an output that must never replace anything (`replace=False`: exports) is
  committed with a rename that fails when the target exists (Linux
  `renameat2` with `RENAME_NOREPLACE`; elsewhere a hard link, which fails the
  same way), so a file that appears while the output is being written is
  left as it is;
- files get the mode a plain `open()` gives under the current umask (0644
  under the usual 022), not the 0600 of `tempfile.mkstemp`;
- a failure removes everything staged, and the staging folders of killed
  processes (named `.keras_vit-tmp.<pid>.<host>.<random>`, never a name an
  output could have) are removed by the next write into the same folder.

Writers that take a path (`model.save`, `figure.savefig`,
`safetensors.numpy.save_file`) write into the path `atomic_file` yields: it
has the target's own file name (Keras checks the `.keras` / `.weights.h5`
suffix), and any temporary file such a library makes for itself lands in the
staging folder too, so it is cleaned with it.

Example:

>>> import json, os, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = write_json(os.path.join(folder, "metrics.json"), {"accuracy": 0.98})
>>> with atomic_file(os.path.join(folder, "notes.txt")) as staged:
...     with open(staged, "w") as handle:
...         _ = handle.write("complete or absent")
>>> with atomic_directory(os.path.join(folder, "export")) as staged:
...     _ = write_text(os.path.join(staged, "a.txt"), "1")
...     _ = write_text(os.path.join(staged, "b.txt"), "2")
>>> sorted(os.listdir(folder))
['export', 'metrics.json', 'notes.txt']
"""

import contextlib
import ctypes
import errno
import json
import os
import secrets
import shutil
import socket
import zlib

__all__ = [
    "TEMP_PREFIX",
    "atomic_directory",
    "atomic_file",
    "atomic_files",
    "check_output_folder",
    "check_output_path",
    "clean_stale",
    "directory_mode",
    "file_mode",
    "is_temporary",
    "write_bytes",
    "write_json",
    "write_text",
]

TEMP_PREFIX = ".keras_vit-tmp."
_PREVIOUS = ".previous"
# Inside a staging folder: the names of a committed file set still to be renamed into place.
_JOURNAL = ".commit"
# Stale staging folders are only judged on the host that made them (a pid means nothing elsewhere).
_HOST = f"{zlib.crc32(socket.gethostname().encode()):08x}"


def is_temporary(name):
    """Whether a file name is one of this module's staging folders (never an output).

    >>> is_temporary(".keras_vit-tmp.123.0a1b2c3d.f00d")
    True
    >>> is_temporary("model.safetensors")
    False
    """
    return os.path.basename(os.fspath(name)).startswith(TEMP_PREFIX)


def _umask():
    # /proc tells the umask without changing it (os.umask must set it to read it, which races with threads).
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode():
    """The mode `open(path, "w")` gives a new file under the current umask (0o644 under 022)."""
    return 0o666 & ~_umask()


def directory_mode():
    """The mode `os.mkdir` gives a new folder under the current umask (0o755 under 022)."""
    return 0o777 & ~_umask()


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def clean_stale(directory):
    """Removes the staging folders that killed processes left in `directory`.

    A staging folder belongs to a process of this host that no longer runs.
    If the process was killed between the two renames of a folder swap (no
    `renameat2`), the old output it had moved aside is put back first; if it
    was killed while renaming a committed file set (`atomic_files`), the rest
    of the set is renamed into place first.

    Returns:
        The list of paths removed.
    """
    directory = os.fspath(directory) or "."
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if not is_temporary(name):
            continue
        parts = name[len(TEMP_PREFIX) :].split(".")
        if len(parts) != 3 or parts[1] != _HOST or not parts[0].isdigit() or _pid_alive(int(parts[0])):
            continue
        staging = os.path.join(directory, name)
        _roll_forward(staging, directory)
        with contextlib.suppress(OSError):
            for entry in os.listdir(staging):
                target = os.path.join(directory, entry[: -len(_PREVIOUS)])
                if entry.endswith(_PREVIOUS) and not os.path.lexists(target):
                    os.rename(os.path.join(staging, entry), target)
        shutil.rmtree(staging, ignore_errors=True)
        removed.append(staging)
    return removed


def _roll_forward(staging, directory):
    """Renames into `directory` what a committed file set left in `staging`."""
    try:
        with open(os.path.join(staging, _JOURNAL)) as journal:
            commit = json.load(journal)
    except (OSError, ValueError):
        return  # No commit: the set never started to appear, and the old one stands.
    # A list: a set that replaces its namesakes; a dict: one that never replaces a file (`replace=False`).
    names, replace = (commit, True) if isinstance(commit, list) else (commit.get("names", []), False)
    names = [name for name in names if isinstance(name, str) and os.path.basename(name) == name]
    pending = [name for name in names if os.path.isfile(os.path.join(staging, name))]
    if replace:
        for name in pending:
            os.replace(os.path.join(staging, name), os.path.join(directory, name))
    else:
        try:
            _commit_without_replacing(staging, directory, pending)
        except FileExistsError:
            # A name was taken since the kill: the set is withdrawn, the part already in place with it.
            for name in set(names) - set(pending):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(directory, name))
    _fsync_path(directory, directory=True)


def _fsync_path(path, directory=False):
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        handle = os.open(path, flags)
    except OSError:
        return  # Folders cannot be opened on every platform; the data itself was synced.
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _finish_tree(path):
    """fsyncs every file under `path` and gives files and folders the umask modes."""
    fmode, dmode = file_mode(), directory_mode()
    if os.path.isdir(path) and not os.path.islink(path):
        for root, folders, names in os.walk(path):
            for name in names:
                full = os.path.join(root, name)
                if not os.path.islink(full):
                    os.chmod(full, fmode)
                    _fsync_path(full)
            for name in folders:
                os.chmod(os.path.join(root, name), dmode)
            _fsync_path(root, directory=True)
        os.chmod(path, dmode)
    else:
        os.chmod(path, fmode)
        _fsync_path(path)


@contextlib.contextmanager
def _staging(path):
    path = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(path)
    if not name:
        raise ValueError(f"An output path must name a file or folder. Received: path={path!r}")
    os.makedirs(directory, exist_ok=True)
    clean_stale(directory)
    staging = os.path.join(directory, f"{TEMP_PREFIX}{os.getpid()}.{_HOST}.{secrets.token_hex(4)}")
    os.mkdir(staging, 0o700)
    try:
        yield path, os.path.join(staging, name), staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(path, replace=True):
    """Yields a temporary path to write; on success it replaces `path` whole.

    The yielded path is inside a private staging folder next to `path` and
    has the same file name. When the block ends without an exception the file
    is fsynced, given the umask mode and renamed onto `path`; on any exception
    (or if nothing was written) everything staged is removed and `path` is
    left as it was.

    Args:
        path: the output file. Its folder is created if needed.
        replace: bool. `False`: never replace a file at `path`, one that
            appeared while the block ran included (`FileExistsError`, and
            that file is left as it is).

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "scores.txt")
    >>> with atomic_file(path) as staged:
    ...     with open(staged, "w") as handle:
    ...         _ = handle.write("0.98")
    >>> open(path).read()
    '0.98'
    """
    with _staging(path) as (final, staged, _):
        yield staged
        if not os.path.isfile(staged):
            raise OSError(f"Nothing was written to {final}.")
        _finish_tree(staged)
        if replace:
            os.replace(staged, final)
        else:
            try:
                _rename_no_replace(staged, final)
            except FileExistsError:
                raise _appeared(final) from None
        _fsync_path(os.path.dirname(final), directory=True)


@contextlib.contextmanager
def atomic_files(folder, names, replace=True):
    """Yields temporary paths to write; on success the files replace their namesakes in `folder` as one set.

    For outputs that belong together but share a folder with others (so the
    folder cannot be swapped whole): every file is staged and synced first,
    then a journal of the names is written (the commit point), then the files
    are renamed into place. An exception or a kill before the commit leaves
    the old files as they were; a kill during the renames is completed by the
    next `keras_vit.utils.files` write into `folder` (`clean_stale`), so the folder
    never keeps a mix of old and new.

    Args:
        folder: the output folder. It is created if needed.
        names: the file names of the set (plain names, no folders).
        replace: bool. `False`: never replace a file of the set's names, one
            that appeared while the block ran included (`FileExistsError`;
            none of the set is left in place).

    Example:

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with atomic_files(folder, ["a.txt", "b.txt"]) as staged:
    ...     _ = write_text(staged["a.txt"], "1")
    ...     with open(staged["b.txt"], "w") as handle:
    ...         _ = handle.write("2")
    >>> sorted(os.listdir(folder))
    ['a.txt', 'b.txt']
    """
    names = list(names)
    if not names or any(
        not isinstance(n, str) or os.path.basename(n) != n or n in ("", ".", "..", _JOURNAL) or is_temporary(n)
        for n in names
    ):
        raise ValueError(f"`names` must be plain file names, at least one. Received: names={names!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"`names` must not repeat a name. Received: names={names!r}")
    with _staging(os.path.join(folder, names[0])) as (final, _, staging):
        directory = os.path.dirname(final)
        yield {name: os.path.join(staging, name) for name in names}
        missing = [name for name in names if not os.path.isfile(os.path.join(staging, name))]
        if missing:
            raise OSError(f"Nothing was written to {', '.join(missing)} in {directory}.")
        in_the_way = [name for name in names if os.path.isdir(os.path.join(directory, name))]
        if in_the_way:
            raise FileExistsError(f"{', '.join(in_the_way)} in {directory} is a folder; choose another output folder.")
        for name in names:
            _finish_tree(os.path.join(staging, name))
        journal = os.path.join(staging, _JOURNAL)
        with open(journal, "w") as handle:
            json.dump(names if replace else {"names": names}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        _fsync_path(staging, directory=True)
        if replace:
            _roll_forward(staging, directory)
        else:
            _commit_without_replacing(staging, directory, names)


def _commit_without_replacing(staging, directory, names):
    """Renames a staged file set into `directory`; if one name is taken, takes back what it had put in place."""
    placed = []
    try:
        for name in names:
            _rename_no_replace(os.path.join(staging, name), os.path.join(directory, name))
            placed.append(name)
    except FileExistsError:
        with contextlib.suppress(OSError):  # the set is withdrawn: a kill from here on leaves no roll-forward
            os.remove(os.path.join(staging, _JOURNAL))
        for name in placed:
            os.rename(os.path.join(directory, name), os.path.join(staging, name))
        raise _appeared(os.path.join(directory, names[len(placed)])) from None
    _fsync_path(directory, directory=True)


_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2


def _renameat2(source, destination, flag):
    """Linux renameat2 with `flag`; False where the system or file system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(source), at_fdcwd, os.fsencode(destination), flag) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), destination)  # EEXIST gives a FileExistsError


def _exchange(first, second):
    """Swaps two paths atomically (Linux renameat2); False where the system cannot."""
    return _renameat2(first, second, _RENAME_EXCHANGE)


def _rename_no_replace(source, destination):
    """Renames `source` to `destination`, or raises FileExistsError if `destination` exists.

    In one step where the system can: `renameat2(RENAME_NOREPLACE)`, else for
    a file a hard link (which fails if the name exists) and an unlink.
    """
    if _renameat2(source, destination, _RENAME_NOREPLACE):
        return
    if not os.path.isdir(source):
        try:
            os.link(source, destination)
        except FileExistsError:
            raise
        except OSError:
            pass  # No hard links on this file system: the check below, a moment before the rename.
        else:
            os.unlink(source)
            return
    if os.path.lexists(destination):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), destination)
    os.rename(source, destination)


def _appeared(path):
    return FileExistsError(
        f"{path} appeared while this output was being written and was left as it is; "
        "choose a new path or remove it first."
    )


@contextlib.contextmanager
def atomic_directory(path, replace=True):
    """Yields a temporary folder to fill; on success it replaces the folder `path` whole.

    For outputs made of several files: readers see the complete old folder or
    the complete new one, never a mix. An existing folder at `path` may only
    hold names the new one also holds (it is replaced, so anything else in it
    would be lost): otherwise a `FileExistsError` is raised and nothing
    changes.

    Args:
        path: the output folder. Its parent is created if needed.
        replace: bool. `False`: never replace anything at `path`, a file or
            folder that appeared while the block ran included
            (`FileExistsError`, and what is there is left as it is).

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "export")
    >>> with atomic_directory(path) as staged:
    ...     _ = write_text(os.path.join(staged, "config.json"), "{}")
    >>> os.listdir(path)
    ['config.json']
    """
    with _staging(path) as (final, staged, staging):
        os.mkdir(staged)
        yield staged
        if not replace:
            _finish_tree(staged)
            try:
                _rename_no_replace(staged, final)
            except FileExistsError:
                raise _appeared(final) from None
            except OSError as error:  # without renameat2: a folder that appeared, empty or not
                if os.path.lexists(final):
                    raise _appeared(final) from error
                raise
            _fsync_path(os.path.dirname(final), directory=True)
            return
        if os.path.lexists(final):
            if not os.path.isdir(final) or os.path.islink(final):
                raise FileExistsError(f"{final} exists and is not a folder; choose another output path.")
            foreign = sorted(set(os.listdir(final)) - set(os.listdir(staged)))
            if foreign:
                raise FileExistsError(
                    f"{final} already holds files this output would not rewrite ({', '.join(foreign[:5])}); "
                    "they would be lost. Choose a new or empty folder."
                )
        _finish_tree(staged)
        if not os.path.lexists(final):
            os.rename(staged, final)
        elif not _exchange(staged, final):
            # Two renames: a kill between them leaves the old folder in the staging folder,
            # from where clean_stale() puts it back.
            previous = os.path.join(staging, os.path.basename(final) + _PREVIOUS)
            os.rename(final, previous)
            os.rename(staged, final)
        _fsync_path(os.path.dirname(final), directory=True)


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
