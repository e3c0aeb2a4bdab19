"""What `weights=` can name, and fetching it.

`resolve_source` only parses and looks up (it never touches the network), so
a typo fails fast; `fetch` then brings the file into a cache.
"""

import dataclasses
import logging
import os

from keras_vit.pretrained import download, registry
from keras_vit.pretrained.errors import DownloadError, OfflineError, UnknownWeightsError

logger = logging.getLogger("keras_vit.pretrained")

HUB_SCHEME = "hf://"


@dataclasses.dataclass(frozen=True)
class WeightsSource:
    """A resolved `weights=` value.

    Attributes:
        kind: `"registry"`, `"file"` or `"hub"`.
        info: the `CheckpointInfo` for registry tags, else None.
        path: the local path for files.
        repo_id, filename, revision: the Hub location for `hf://` handles.
    """

    kind: str
    info: object = None
    path: object = None
    repo_id: object = None
    filename: str = "model.safetensors"
    revision: object = None

    def describe(self):
        if self.kind == "registry":
            return f"{self.info.name} ({self.info.hub_repo})"
        if self.kind == "hub":
            return f"{HUB_SCHEME}{self.repo_id}/{self.filename}" + (f"@{self.revision}" if self.revision else "")
        return str(self.path)


def parse_hub_handle(handle):
    """Parses `hf://org/repo[/path/file.safetensors][@revision]`."""
    body = handle[len(HUB_SCHEME) :]
    revision = None
    if "@" in body:
        body, revision = body.rsplit("@", 1)
    parts = [part for part in body.split("/") if part]
    if len(parts) < 2 or revision == "":
        raise UnknownWeightsError(
            f"A Hub handle is 'hf://org/repo', optionally followed by '/file.safetensors' and "
            f"'@revision'. Received: {handle!r}"
        )
    filename = "/".join(parts[2:]) or "model.safetensors"
    return WeightsSource("hub", repo_id="/".join(parts[:2]), filename=filename, revision=revision or None)


def resolve_source(variant, weights, image_size=(224, 224)):
    """Interprets `weights` for `variant` without any network access.

    Args:
        variant: `"B/16"` etc.
        weights: a tag or `"imagenet"`, a local file or directory, or
            `"hf://org/repo[/file][@revision]"`.
        image_size: `(height, width)` the model is built at (picks the
            nearest resolution of a tag).

    Returns:
        A `WeightsSource`.

    Raises:
        UnknownWeightsError: nothing matches; lists the variant's tags.
    """
    if not isinstance(weights, (str, os.PathLike)):
        raise UnknownWeightsError(
            f"`weights` must be None, a checkpoint tag, a file path or 'hf://org/repo'. "
            f"Received: weights={weights!r} of type {type(weights).__name__}"
        )
    text = os.fspath(weights)
    if text.startswith(HUB_SCHEME):
        return parse_hub_handle(text)
    if registry.is_tag(variant, text):
        return WeightsSource("registry", info=registry.resolve(variant, text, image_size))
    if os.path.exists(text):
        return WeightsSource("file", path=text)
    message = registry.unknown_tag_message(variant, text)
    if os.sep in text or os.path.splitext(text)[1]:
        message = f"No file or directory {text!r} exists. " + message
    raise UnknownWeightsError(message)


def fetch(source, timeout=download.DEFAULT_TIMEOUT):
    """Brings the source's file into the cache.

    Registry checkpoints come from the Hub first; the official bucket URL is
    tried only if the Hub copy cannot be had.

    Returns:
        `(path, format)`: the local file and its layout if known (None for
        files and Hub handles: detected from the tensor names).
    """
    if source.kind == "file":
        return source.path, None
    if source.kind == "hub":
        return download.hf_download(source.repo_id, source.filename, source.revision), None
    info = source.info
    try:
        return download.hf_download(info.hub_repo, info.hub_filename), info.format
    except DownloadError as hub_error:
        if not info.url:
            raise
        logger.warning("Hub copy of %s unavailable (%s); trying the official URL %s.", info.name, hub_error, info.url)
        try:
            return download.download_url(info.url, sha256=None, timeout=timeout), "official"
        except DownloadError as url_error:
            kind = (
                OfflineError
                if isinstance(hub_error, OfflineError) and isinstance(url_error, OfflineError)
                else DownloadError
            )
            raise kind(
                f"Could not fetch {info.name} from any source.\n- Hub: {hub_error}\n- URL: {url_error}"
            ) from url_error
