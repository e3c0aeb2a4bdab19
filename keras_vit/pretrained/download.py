"""Fetching checkpoint files: Hub files with `huggingface_hub`, URLs with `keras.utils.get_file`.

`KERAS_VIT_OFFLINE=1` or `HF_HUB_OFFLINE=1`, or a host that does not answer within `PROBE_TIMEOUT` seconds, means
the file must already be cached; else one `DownloadError` says how to pre-seed the cache.
"""

import contextlib
import hashlib
import os
import re
import socket
import threading
import urllib.parse

from keras_vit.pretrained.errors import DownloadError
from keras_vit.utils import extras, files

PROBE_TIMEOUT = 2.0
_CACHE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,199}")


def reachable(url, timeout=PROBE_TIMEOUT):
    """Whether a TCP connection to `url`'s host opens within `timeout` seconds."""
    parsed = urllib.parse.urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    result = []

    def probe():
        with contextlib.suppress(OSError):
            socket.create_connection((parsed.hostname, port), timeout=timeout).close()
            result.append(True)

    # Name resolution can hang far longer than a connect timeout: the thread is abandoned after `timeout`.
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result)


def cache_dir():
    """The folder URL downloads are cached in: `$KERAS_VIT_CACHE` or `~/.cache/keras_vit`."""
    return os.environ.get("KERAS_VIT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "keras_vit")


def is_offline():
    """Whether `KERAS_VIT_OFFLINE` or `HF_HUB_OFFLINE` forbids network access."""
    values = [os.environ.get(name, "").strip().lower() for name in ("KERAS_VIT_OFFLINE", "HF_HUB_OFFLINE")]
    return any(value in ("1", "true", "yes", "on") for value in values)


def _preseed_hint(command):
    return (
        f"Pre-seed the cache on a machine with network access ({command}) and copy the cache folder here "
        "(or point KERAS_VIT_CACHE / HF_HUB_CACHE at the copy)."
    )


def check_url(url):
    """Returns `url` if it is an http(s) URL with a host, else raises `ValueError`."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("https", "http") or not parsed.hostname:
        raise ValueError(f"`url` must be an https or http URL with a host. Received: url={url!r}")
    return url


def url_cache_path(url, directory=None):
    """`<directory>/<first 16 hex digits of the URL's sha256>/<file name>`: every Hub mirror has a model.safetensors."""
    check_url(url)
    name = os.path.basename(urllib.parse.urlparse(url).path)
    if not _CACHE_NAME.fullmatch(name):
        name = "download"
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    return os.path.join(os.fspath(directory) if directory is not None else cache_dir(), key, name)


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_url(url, sha256=None, directory=None, filename=None):
    """Downloads `url` into the cache once, staged and renamed into place; returns the local path.

    Args:
        url: an https (or http) URL.
        sha256: optional expected hex digest, checked on download and on every cache hit.
        directory: the cache folder. Defaults to `cache_dir()`.
        filename: a plain file name unique to the URL. Defaults to `url_cache_path`'s.
    """
    check_url(url)
    if filename is not None and not _CACHE_NAME.fullmatch(filename):
        raise ValueError(f"`filename` must be a plain file name inside the cache. Received: filename={filename!r}")
    directory = os.fspath(directory) if directory is not None else cache_dir()
    offline = is_offline()
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


def hf_download(repo_id, filename="model.safetensors", revision=None):
    """Fetches `repo_id/filename` with `huggingface_hub` into its cache; returns the local path."""
    hub = extras.require("huggingface_hub", "downloading pretrained weights", extra="weights")
    from huggingface_hub import constants
    from huggingface_hub import errors as hub_errors

    declared = is_offline()
    # huggingface_hub retries an unreachable host for ~30 s; a 2 s probe makes "offline" a cache lookup.
    offline = declared or not reachable(constants.ENDPOINT)
    where = os.path.join(constants.HF_HUB_CACHE, "models--" + repo_id.replace("/", "--"))
    hint = _preseed_hint(f"`keras-vit download MODEL --weights TAG` or `hf download {repo_id} {filename}`")
    try:
        return hub.hf_hub_download(
            repo_id, filename, revision=revision, local_files_only=offline, library_name="keras-vit"
        )
    except hub_errors.LocalEntryNotFoundError:
        why = "offline mode is on" if declared else f"{constants.ENDPOINT} is unreachable"
        raise DownloadError(
            f"{repo_id}/{filename} is not in the Hugging Face cache ({where}) and {why}. {hint}"
        ) from None
    except hub_errors.GatedRepoError as error:  # a RepositoryNotFoundError: the file is there, not yet for this account
        raise DownloadError(
            f"{repo_id} is gated on the Hub: accept its license at https://huggingface.co/{repo_id} and log in "
            "(`hf auth login` or HF_TOKEN), then try again."
        ) from error
    except (
        hub_errors.RepositoryNotFoundError,
        hub_errors.EntryNotFoundError,
        hub_errors.RevisionNotFoundError,
    ) as error:
        at = f"@{revision}" if revision else ""
        raise DownloadError(f"The Hub has no {filename} in {repo_id}{at}: {error}") from error
    except (hub_errors.HfHubHTTPError, OSError) as error:
        raise DownloadError(f"Downloading {repo_id}/{filename} from the Hub failed: {error}. {hint}") from error
