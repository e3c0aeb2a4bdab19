"""What `weights=` can name: `resolve_source` parses it offline (a typo fails fast), `fetch` downloads it."""

import contextlib
import dataclasses
import os
import posixpath

from keras_vit.pretrained import download, registry
from keras_vit.pretrained.errors import DownloadError

HUB_SCHEME = "hf://"


@dataclasses.dataclass(frozen=True)
class WeightsSource:
    """A resolved `weights=` value: `kind` `"registry"` (with `info`), `"file"` or `"url"` (`path`), or `"hub"`."""

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
    body, at, revision = handle[len(HUB_SCHEME) :].partition("@")
    parts = [part for part in body.split("/") if part]
    if len(parts) < 2 or (at and not revision):
        raise ValueError(f"A Hub handle is 'hf://org/repo[/file.safetensors][@revision]'. Received: {handle!r}")
    filename = "/".join(parts[2:]) or "model.safetensors"
    return WeightsSource("hub", repo_id="/".join(parts[:2]), filename=filename, revision=revision or None)


def resolve_source(variant, weights, image_size=(224, 224)):
    """The `WeightsSource` of `weights` (a tag, a file or folder, `hf://org/repo[/file][@revision]` or a URL)."""
    if not isinstance(weights, (str, os.PathLike)):
        raise ValueError(
            "`weights` must be None, a checkpoint tag, a file path or 'hf://org/repo'. "
            f"Received: weights={weights!r} of type {type(weights).__name__}"
        )
    text = os.fspath(weights)
    if text.startswith(HUB_SCHEME):
        return parse_hub_handle(text)
    if "://" in text:
        return WeightsSource("url", path=download.check_url(text))
    if text in registry.available_tags(variant):
        return WeightsSource("registry", info=registry.resolve(variant, text, image_size))
    if os.path.exists(text):
        return WeightsSource("file", path=text)
    message = registry.unknown_tag_message(variant, text)
    if os.sep in text or os.path.splitext(text)[1]:
        message = f"No file or directory {text!r} exists. " + message
    raise ValueError(message)


def fetch(source):
    """Brings the source's file into the cache; returns `(path, format)` (format None: found from the names)."""
    if source.kind == "file":
        return source.path, None
    if source.kind == "hub":
        path = download.hf_download(source.repo_id, source.filename, source.revision)
        folder = posixpath.dirname(source.filename)
        for name in ("config.json", "preprocessor_config.json"):
            # Beside the weights for the reader; a config only adds what the tensors cannot say (pixel mean and std).
            with contextlib.suppress(DownloadError):
                download.hf_download(source.repo_id, posixpath.join(folder, name), source.revision)
        return path, None
    if source.kind == "url":
        return download.download_url(source.path), None
    # The Hub copy only: the official bucket refuses anonymous downloads.
    return download.hf_download(source.info.hub_repo, source.info.hub_filename), source.info.format
