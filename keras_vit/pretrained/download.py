"""Fetching checkpoint files into a local cache, safely.

Two kinds of source:

- **Hugging Face Hub** (`hf_download`): through `huggingface_hub`, so its
  cache (`HF_HUB_CACHE`, default `~/.cache/huggingface/hub`), offline mode
  (`HF_HUB_OFFLINE=1`) and authentication apply. After the download the file
  is checked against the Hub's own sha256 (LFS files are stored in that cache
  under their sha256).
- **Plain https URLs** (`download_url`, `weights="https://..."`: a mirror of
  a checkpoint, say): into `KERAS_VIT_CACHE` (default `~/.cache/keras_vit`),
  one folder per URL (`url_cache_path`: the file keeps its name, the folder
  is named after the sha256 of the whole URL, so mirrors that all serve a
  `model.safetensors` never share an entry), under a file lock so parallel
  workers do not clash, staged by
  `keras_vit.utils.files` and checked (announced length, sha256 when known) before
  it is renamed into place. A failure or a kill leaves nothing that is ever
  taken for a cached file. The official bucket (`gs://vit_models`) is not a
  source: it has refused anonymous downloads since February 2026.
  `keras.utils.get_file` is not used for this: it has no timeout, writes to
  the final path and reports every failure as a bare `Exception`.

`KERAS_VIT_OFFLINE=1` (or `HF_HUB_OFFLINE=1`) forbids network access; when
the host cannot be reached within `PROBE_TIMEOUT` seconds the same happens
(no retries). Files must then be cached already, else one short
`OfflineError` says which file and how to pre-seed the cache.
"""

import hashlib
import http.client
import logging
import os
import re
import urllib.error
import urllib.parse
import urllib.request

from keras_vit.pretrained.errors import (
    CorruptCheckpointError,
    DownloadError,
    HashMismatchError,
    MissingDependencyError,
    OfflineError,
    TruncatedDownloadError,
)
from keras_vit.utils import extras, files, validation

logger = logging.getLogger("keras_vit.pretrained")

DEFAULT_TIMEOUT = 60.0
PROBE_TIMEOUT = 2.0
URL_SCHEMES = ("https", "http")
_CHUNK = 1 << 20
_TRUE = ("1", "true", "yes", "on")
_CACHE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,199}")
# 16 hex digits (64 bits) of the URL's sha256 name its cache folder: short enough to read in a path, and an
# accidental collision between two URLs is out of reach (under one in a billion among 100,000 URLs).
_URL_KEY_DIGITS = 16


def require(module):
    """Imports an optional dependency of the `weights` extra, or says how to install it.

    Raises:
        MissingDependencyError: the module is not installed.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        message = extras.error(module, "downloading pretrained weights", extra="weights")
        raise MissingDependencyError(str(message)) from error


def reachable(url, timeout=PROBE_TIMEOUT):
    """Whether a TCP connection to `url`'s host opens within `timeout` seconds.

    Name resolution can hang far longer than a connect timeout, so the probe
    runs in a daemon thread that is abandoned after `timeout`.
    """
    import socket
    import threading

    parsed = urllib.parse.urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    result = []

    def probe():
        try:
            socket.create_connection((parsed.hostname, port), timeout=timeout).close()
            result.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result)


def cache_dir():
    """The folder URL downloads are cached in: `$KERAS_VIT_CACHE` or `~/.cache/keras_vit`."""
    return os.environ.get("KERAS_VIT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "keras_vit")


def is_offline():
    """Whether network access is forbidden (`KERAS_VIT_OFFLINE` or `HF_HUB_OFFLINE` set to 1/true)."""
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in ("KERAS_VIT_OFFLINE", "HF_HUB_OFFLINE"))


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _preseed_hint(what):
    return (
        f"Pre-seed the cache on a machine with network access ({what}) and copy the cache folder here "
        "(or point KERAS_VIT_CACHE / HF_HUB_CACHE at the copy)."
    )


def check_url(url):
    """Returns `url` if it is an http(s) URL with a host, else raises `ValueError`.

    >>> check_url("https://example.org/vit.npz")
    'https://example.org/vit.npz'
    """
    parsed = urllib.parse.urlparse(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in URL_SCHEMES or not parsed.hostname:
        raise ValueError(f"`url` must be an {' or '.join(URL_SCHEMES)} URL with a host. Received: url={url!r}")
    return url


def check_cache_name(filename):
    """Returns `filename` if it is a plain file name that stays inside the cache, else raises `ValueError`.

    >>> check_cache_name("vit.npz")
    'vit.npz'
    """
    if not isinstance(filename, str) or not _CACHE_NAME.fullmatch(filename) or filename in (".", ".."):
        raise ValueError(
            "`filename` must be a plain file name (letters, digits, '._+=-', not starting with '.', no folder "
            f"separators), so that it stays inside the cache. Received: filename={filename!r}"
        )
    return filename


def url_cache_path(url, directory=None):
    """The path `download_url(url)` caches `url` at: `<directory>/<key>/<file name>`.

    The file name is the URL's last path component (`download` when that is
    not a plain file name), so the extension that tells a checkpoint's format
    is kept. The name alone does not identify the file (every Hugging Face
    mirror serves a `model.safetensors`), so the folder `key` is the first
    16 hex digits of the sha256 of the whole URL, query included: two URLs
    never share an entry, and the same URL always finds its own. To pre-seed
    an offline machine by hand, copy the file to this path.

    Args:
        url: an https (or http) URL.
        directory: the cache folder. Defaults to `cache_dir()`.

    Returns:
        The path, whether or not the file is there yet.

    Raises:
        ValueError: `url` is not an http(s) URL with a host.

    >>> url_cache_path("https://example.org/vit.npz", directory="cache")
    'cache/22acdc53bec523b9/vit.npz'
    """
    check_url(url)
    name = os.path.basename(urllib.parse.urlparse(url).path)
    if not _CACHE_NAME.fullmatch(name):
        name = "download"  # The folder already tells the URLs apart; the name only has to be a safe one.
    key = hashlib.sha256(url.encode()).hexdigest()[:_URL_KEY_DIGITS]
    return os.path.join(os.fspath(directory) if directory is not None else cache_dir(), key, name)


def download_url(url, sha256=None, directory=None, filename=None, timeout=DEFAULT_TIMEOUT, offline=None):
    """Downloads `url` into the cache (once) and returns the local path.

    Args:
        url: an https (or http) URL; other schemes are refused.
        sha256: optional expected hex digest; checked on download and on
            every cache hit.
        directory: the cache folder. Defaults to `cache_dir()`.
        filename: a plain file name: the file is then cached as
            `directory/filename` exactly, and the caller keeps that name
            unique to the URL (pass `sha256` when it might not be). Defaults
            to `url_cache_path(url, directory)`, one folder per URL.
        timeout: seconds to wait for the connection and for each read.
        offline: forbid network access. Defaults to `is_offline()`.

    Returns:
        The path of the verified, complete file.

    Raises:
        OfflineError: offline (or the host is unreachable) and not cached.
        TruncatedDownloadError: fewer bytes arrived than announced.
        HashMismatchError: the bytes do not match `sha256`.
        DownloadError: any other HTTP or network failure.
        ValueError: a bad argument (scheme, file name, sha256, timeout).
        The cache never keeps a partial or unverified file.
    """
    FileLock = require("filelock").FileLock
    check_url(url)
    if filename is not None:
        check_cache_name(filename)
    if sha256 is not None and not (isinstance(sha256, str) and re.fullmatch(r"[0-9a-fA-F]{64}", sha256)):
        raise ValueError(f"`sha256` must be 64 hexadecimal digits or None. Received: sha256={sha256!r}")
    timeout = validation.finite_float("timeout", timeout, minimum=0, include_minimum=False)
    directory = os.fspath(directory) if directory is not None else cache_dir()
    offline = is_offline() if offline is None else offline
    final = url_cache_path(url, directory) if filename is None else os.path.join(directory, filename)
    folder, name = os.path.split(final)
    hint = _preseed_hint(f"`keras-vit download MODEL --weights {url}`")
    os.makedirs(folder, exist_ok=True)
    # A hidden lock name: it is never taken for a cached checkpoint.
    with FileLock(os.path.join(folder, f".{name}.lock")):
        if os.path.isfile(final):
            if sha256 is None or sha256_of(final) == sha256.lower():
                return final
            logger.warning("Cached %s does not have the expected sha256 %s; downloading it again.", final, sha256)
        if offline or not reachable(url, min(timeout, PROBE_TIMEOUT)):
            why = "offline mode is on (KERAS_VIT_OFFLINE / HF_HUB_OFFLINE)" if offline else "its host is unreachable"
            raise OfflineError(f"{url} is not cached at {final} and {why}. {hint}")
        with files.atomic_file(final) as staged:
            _transfer(url, staged, final, sha256, timeout, hint)
    return final


def _transfer(url, temp, final, sha256, timeout, hint):
    request = urllib.request.Request(url, headers={"User-Agent": "keras-vit"})
    digest = hashlib.sha256()
    received = 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            announced = response.headers.get("Content-Length")
            with open(temp, "wb") as out:
                for chunk in iter(lambda: response.read(_CHUNK), b""):
                    out.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
    except http.client.IncompleteRead as error:
        raise TruncatedDownloadError(
            f"The transfer of {url} stopped early ({received + len(error.partial)} bytes of "
            f"{received + len(error.partial) + (error.expected or 0)}). Nothing was cached; try again. {hint}"
        ) from error
    except urllib.error.HTTPError as error:
        raise DownloadError(f"Downloading {url} failed with HTTP {error.code} {error.reason}. {hint}") from error
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        reason = getattr(error, "reason", error)
        raise OfflineError(
            f"Could not reach {url} ({reason}; timeout {timeout:g}s) and it is not cached at {final}. {hint}"
        ) from error
    if announced is not None and received != int(announced):
        raise TruncatedDownloadError(
            f"The server announced {announced} bytes for {url} but sent {received}. Nothing was cached; "
            f"try again. {hint}"
        )
    if sha256 is not None and digest.hexdigest() != sha256.lower():
        raise HashMismatchError(
            f"{url} downloaded with sha256 {digest.hexdigest()}, expected {sha256.lower()}. The file was "
            "discarded; the source changed or the transfer was corrupted."
        )


def _hub_cache_path(repo_id, cache_dir_=None):
    constants = require("huggingface_hub.constants")

    folder = "models--" + repo_id.replace("/", "--")
    return os.path.join(cache_dir_ or constants.HF_HUB_CACHE, folder)


def verify_hub_blob(path):
    """Checks a file from the `huggingface_hub` cache against its blob name.

    The cache stores LFS files as `blobs/<sha256>` and links snapshots to
    them; a file whose bytes do not hash to that name is corrupt.

    Raises:
        CorruptCheckpointError: the bytes do not match.
    """
    real = os.path.realpath(path)
    name = os.path.basename(real)
    if os.path.basename(os.path.dirname(real)) != "blobs" or not re.fullmatch(r"[0-9a-f]{64}", name):
        return False  # Not an LFS blob (or a local_dir copy): nothing to check against.
    actual = sha256_of(real)
    if actual != name:
        raise CorruptCheckpointError(
            f"{path} (blob {real}) has sha256 {actual}, but the Hub published {name}: the cached file "
            "is corrupt or truncated. Delete the blob and download it again."
        )
    return True


def hf_download(repo_id, filename="model.safetensors", revision=None, cache_dir_=None, offline=None):
    """Fetches `repo_id/filename` through `huggingface_hub` and verifies it.

    Args:
        repo_id: `"org/name"` on the Hugging Face Hub.
        filename: the file in the repo. Defaults to `"model.safetensors"`.
        revision: optional branch, tag or commit.
        cache_dir_: optional `huggingface_hub` cache folder.
        offline: only use the cache. Defaults to `is_offline()`.

    Returns:
        The local path (inside the `huggingface_hub` cache).

    Raises:
        OfflineError: offline / unreachable and not cached.
        DownloadError: the repo or file does not exist, or HTTP failure.
        CorruptCheckpointError: the cached bytes do not match the Hub's sha256.
    """
    hub = require("huggingface_hub")
    hub_errors = require("huggingface_hub.errors")
    constants = require("huggingface_hub.constants")

    declared = is_offline() if offline is None else offline
    # huggingface_hub retries an unreachable host for ~30 s; a 2 s probe makes "offline" a cache lookup.
    offline = declared or not reachable(constants.ENDPOINT)
    where = _hub_cache_path(repo_id, cache_dir_)
    hint = _preseed_hint(f"`keras-vit download MODEL --weights TAG` or `hf download {repo_id} {filename}`")
    try:
        path = hub.hf_hub_download(
            repo_id,
            filename,
            revision=revision,
            cache_dir=cache_dir_,
            local_files_only=offline,
            library_name="keras-vit",
        )
    except hub_errors.LocalEntryNotFoundError as error:
        why = "offline mode is on" if declared else f"{constants.ENDPOINT} is unreachable" if offline else error
        raise OfflineError(
            f"{repo_id}/{filename} is not in the Hugging Face cache ({where}) and {why}. {hint}"
        ) from None
    except (
        hub_errors.RepositoryNotFoundError,
        hub_errors.EntryNotFoundError,
        hub_errors.RevisionNotFoundError,
    ) as error:
        raise DownloadError(
            f"The Hub has no {filename} in {repo_id}{'@' + revision if revision else ''}: {error}"
        ) from error
    except (hub_errors.HfHubHTTPError, OSError) as error:
        raise DownloadError(f"Downloading {repo_id}/{filename} from the Hub failed: {error}. {hint}") from error
    verify_hub_blob(path)
    return path
