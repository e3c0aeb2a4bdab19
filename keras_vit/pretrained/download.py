"""Fetching checkpoint files into a local cache, safely.

Two kinds of source:

- **Hugging Face Hub** (`hf_download`): through `huggingface_hub`, so its
  cache (`HF_HUB_CACHE`, default `~/.cache/huggingface/hub`), offline mode
  (`HF_HUB_OFFLINE=1`) and authentication apply. After the download the file
  is checked against the Hub's own sha256 (LFS files are stored in that cache
  under their sha256).
- **Plain URLs** (`download_url`): into `KERAS_VIT_CACHE` (default
  `~/.cache/keras_vit`), under a file lock so parallel workers do not clash,
  into a temporary file that is checked (announced length, sha256 when known)
  and only then renamed into place. A failure leaves nothing behind, so a
  truncated transfer is never found in the cache later.

`KERAS_VIT_OFFLINE=1` (or `HF_HUB_OFFLINE=1`) forbids network access: files
must already be cached, else an `OfflineError` says which file, where it would
be cached and how to pre-seed the cache (`keras-vit download` on a connected
machine, then copy the cache folder).
"""

import hashlib
import http.client
import logging
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request

from keras_vit.pretrained.errors import (
    CorruptCheckpointError,
    DownloadError,
    HashMismatchError,
    OfflineError,
    TruncatedDownloadError,
)

logger = logging.getLogger("keras_vit.pretrained")

DEFAULT_TIMEOUT = 60.0
_CHUNK = 1 << 20
_TRUE = ("1", "true", "yes", "on")


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
        f"To use it offline, pre-seed the cache on a machine with network access "
        f"(`keras-vit download MODEL --weights TAG`, or {what}) and copy the cache folder to the same "
        "place (or point KERAS_VIT_CACHE / HF_HUB_CACHE at the copy)."
    )


def _url_filename(url):
    name = os.path.basename(urllib.parse.urlparse(url).path)
    if not name or not re.fullmatch(r"[A-Za-z0-9._+=-]+", name):
        # Unusual names are replaced by a stable digest of the URL.
        name = hashlib.sha256(url.encode()).hexdigest()[:32]
    return name


def download_url(url, sha256=None, directory=None, filename=None, timeout=DEFAULT_TIMEOUT, offline=None):
    """Downloads `url` into the cache (once) and returns the local path.

    Args:
        url: an http(s) URL.
        sha256: optional expected hex digest; checked on download and on
            every cache hit.
        directory: the cache folder. Defaults to `cache_dir()`.
        filename: the cached file's name. Defaults to the URL's basename.
        timeout: seconds to wait for the connection and for each read.
        offline: forbid network access. Defaults to `is_offline()`.

    Returns:
        The path of the verified, complete file.

    Raises:
        OfflineError: offline (or the host is unreachable) and not cached.
        TruncatedDownloadError: fewer bytes arrived than announced.
        HashMismatchError: the bytes do not match `sha256`.
        DownloadError: any other HTTP or network failure.
        The cache never keeps a partial or unverified file.
    """
    from filelock import FileLock

    directory = directory or cache_dir()
    filename = filename or _url_filename(url)
    offline = is_offline() if offline is None else offline
    final = os.path.join(directory, filename)
    hint = _preseed_hint(f"`curl -o {final} {url}`")
    os.makedirs(directory, exist_ok=True)
    with FileLock(final + ".lock"):
        if os.path.isfile(final):
            if sha256 is None or sha256_of(final) == sha256.lower():
                return final
            logger.warning("Cached %s does not have the expected sha256 %s; downloading it again.", final, sha256)
            os.remove(final)
        if offline:
            raise OfflineError(
                f"{filename} is not in the cache ({final}) and offline mode is on "
                f"(KERAS_VIT_OFFLINE / HF_HUB_OFFLINE). It comes from {url}. {hint}"
            )
        handle, temp = tempfile.mkstemp(dir=directory, prefix=filename + ".", suffix=".part")
        os.close(handle)
        try:
            _transfer(url, temp, sha256, timeout, hint)
            os.replace(temp, final)
        finally:
            if os.path.exists(temp):
                os.remove(temp)
    return final


def _transfer(url, temp, sha256, timeout, hint):
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
        raise DownloadError(
            f"Downloading {url} failed with HTTP {error.code} {error.reason}. (The official "
            "gs://vit_models bucket has refused anonymous downloads since February 2026; the Hub "
            f"copies are the maintained source.) {hint}"
        ) from error
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        reason = getattr(error, "reason", error)
        raise OfflineError(
            f"Could not reach {url} ({reason}; timeout {timeout}s) and the file is not cached. {hint}"
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
    from huggingface_hub import constants

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
    from huggingface_hub import errors as hub_errors
    from huggingface_hub import hf_hub_download

    offline = is_offline() if offline is None else offline
    where = _hub_cache_path(repo_id, cache_dir_)
    hint = _preseed_hint(f"`hf download {repo_id} {filename}`")
    try:
        path = hf_hub_download(
            repo_id,
            filename,
            revision=revision,
            cache_dir=cache_dir_,
            local_files_only=offline,
            library_name="keras-vit",
        )
    except hub_errors.LocalEntryNotFoundError as error:
        raise OfflineError(
            f"{repo_id}/{filename} is not in the Hugging Face cache ({where}) and it could not be "
            f"downloaded ({'offline mode is on' if offline else error}). {hint}"
        ) from error
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
