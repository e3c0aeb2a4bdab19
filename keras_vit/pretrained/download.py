"""Fetching checkpoint files into a local cache.

Two kinds of source:

- **Hugging Face Hub** (`hf_download`): `huggingface_hub.hf_hub_download`,
  so its cache (`HF_HUB_CACHE`, default `~/.cache/huggingface/hub`), its
  integrity checks, offline mode (`HF_HUB_OFFLINE=1`) and authentication
  apply.
- **Plain https URLs** (`download_url`, `weights="https://..."`: a mirror of
  a checkpoint, say): `keras.utils.get_file` (with `file_hash` when the
  sha256 is known) into `KERAS_VIT_CACHE` (default `~/.cache/keras_vit`), one
  folder per URL (`url_cache_path`), through a temporary file renamed into
  place (`keras_vit.utils.files`), so a failed or killed download never
  leaves a partial file that would be taken for a cached one. The official
  bucket (`gs://vit_models`) is not a source: it has refused anonymous
  downloads since February 2026.

`KERAS_VIT_OFFLINE=1` (or `HF_HUB_OFFLINE=1`) forbids network access; a host
that cannot be reached within `PROBE_TIMEOUT` seconds counts as offline (no
retries). Files must then be cached already, else one short `DownloadError`
says which file and how to pre-seed the cache.
"""

import hashlib
import os
import re
import socket
import threading
import urllib.parse

from keras_vit.pretrained.errors import DownloadError
from keras_vit.utils import extras, files

PROBE_TIMEOUT = 2.0
URL_SCHEMES = ("https", "http")
_TRUE = ("1", "true", "yes", "on")
_CACHE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,199}")
# 16 hex digits (64 bits) of the URL's sha256 name its cache folder: short enough to read in a path, and an
# accidental collision between two URLs is out of reach (under one in a billion among 100,000 URLs).
_URL_KEY_DIGITS = 16


def reachable(url, timeout=PROBE_TIMEOUT):
    """Whether a TCP connection to `url`'s host opens within `timeout` seconds.

    Name resolution can hang far longer than a connect timeout, so the probe
    runs in a daemon thread that is abandoned after `timeout`.
    """
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


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_url(url, sha256=None, directory=None, filename=None, offline=None):
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
        offline: forbid network access. Defaults to `is_offline()`.

    Returns:
        The path of the complete (and, with `sha256`, verified) file.

    Raises:
        DownloadError: offline (or the host is unreachable) and not cached,
            an HTTP or network failure, a truncated transfer, or bytes that
            do not match `sha256`. The cache never keeps a partial file.
        ValueError: a bad argument (scheme, file name, sha256).
    """
    check_url(url)
    if filename is not None:
        check_cache_name(filename)
    if sha256 is not None and not (isinstance(sha256, str) and re.fullmatch(r"[0-9a-fA-F]{64}", sha256)):
        raise ValueError(f"`sha256` must be 64 hexadecimal digits or None. Received: sha256={sha256!r}")
    directory = os.fspath(directory) if directory is not None else cache_dir()
    offline = is_offline() if offline is None else offline
    final = url_cache_path(url, directory) if filename is None else os.path.join(directory, filename)
    if os.path.isfile(final) and (sha256 is None or sha256_of(final) == sha256.lower()):
        return final
    hint = _preseed_hint(f"`keras-vit download MODEL --weights {url}`")
    if offline or not reachable(url):
        why = "offline mode is on (KERAS_VIT_OFFLINE / HF_HUB_OFFLINE)" if offline else "its host is unreachable"
        raise DownloadError(f"{url} is not cached at {final} and {why}. {hint}")
    import keras

    with files.atomic_file(final) as staged:
        try:
            keras.utils.get_file(
                os.path.basename(staged),
                url,
                cache_dir=os.path.dirname(staged),
                cache_subdir="",
                file_hash=sha256,
                hash_algorithm="sha256",
            )
        except Exception as error:  # get_file reports HTTP and network failures as a bare Exception
            raise DownloadError(f"Downloading {url} failed ({error}); nothing was cached. {hint}") from error
    return final


def hf_download(repo_id, filename="model.safetensors", revision=None, cache_dir_=None, offline=None):
    """Fetches `repo_id/filename` through `huggingface_hub.hf_hub_download`.

    Args:
        repo_id: `"org/name"` on the Hugging Face Hub.
        filename: the file in the repo. Defaults to `"model.safetensors"`.
        revision: optional branch, tag or commit.
        cache_dir_: optional `huggingface_hub` cache folder.
        offline: only use the cache. Defaults to `is_offline()`.

    Returns:
        The local path (inside the `huggingface_hub` cache).

    Raises:
        DownloadError: offline / unreachable and not cached, the repo or
            file does not exist, or an HTTP failure.
    """
    hub = extras.require("huggingface_hub", "downloading pretrained weights", extra="weights")
    hub_errors = extras.require("huggingface_hub.errors", "downloading pretrained weights", extra="weights")
    constants = extras.require("huggingface_hub.constants", "downloading pretrained weights", extra="weights")

    declared = is_offline() if offline is None else offline
    # huggingface_hub retries an unreachable host for ~30 s; a 2 s probe makes "offline" a cache lookup.
    offline = declared or not reachable(constants.ENDPOINT)
    where = os.path.join(cache_dir_ or constants.HF_HUB_CACHE, "models--" + repo_id.replace("/", "--"))
    hint = _preseed_hint(f"`keras-vit download MODEL --weights TAG` or `hf download {repo_id} {filename}`")
    try:
        return hub.hf_hub_download(
            repo_id,
            filename,
            revision=revision,
            cache_dir=cache_dir_,
            local_files_only=offline,
            library_name="keras-vit",
        )
    except hub_errors.LocalEntryNotFoundError:
        why = "offline mode is on" if declared else f"{constants.ENDPOINT} is unreachable"
        raise DownloadError(
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
