"""Download and cache behaviour against a local HTTP server and a pre-seeded Hub cache.

No test touches the internet: the server runs in a thread of the test
process, and the Hub tests use `huggingface_hub`'s real offline code path on
a cache folder laid out the way it lays caches out.
"""

import hashlib
import http.server
import os
import threading

import numpy as np
import pretrained_helpers as ph
import pytest

from keras_vit import pretrained
from keras_vit.pretrained import download, sources
from keras_vit.utils import extras

PAYLOAD = bytes(range(256)) * 64


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self):
        self.server.hits[self.path] = self.server.hits.get(self.path, 0) + 1
        if self.path.startswith("/ok/"):
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAYLOAD)))
            self.end_headers()
            self.wfile.write(PAYLOAD)
        elif self.path.startswith("/short/"):
            # Announces the full length, sends half, closes: a truncated transfer.
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAYLOAD)))
            self.end_headers()
            self.wfile.write(PAYLOAD[: len(PAYLOAD) // 2])
            self.wfile.flush()
            self.close_connection = True
        elif self.path.startswith("/forbidden/"):
            self.send_error(403, "Forbidden")
        else:
            self.send_error(404)


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.hits = {}
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("KERAS_VIT_CACHE", str(directory))
    monkeypatch.delenv("KERAS_VIT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return directory


def _url(server, path):
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def _leftovers(directory):
    # The files under the cache, as paths relative to it (an entry's empty folder may stay; nothing else may).
    return sorted(
        os.path.relpath(os.path.join(folder, name), directory)
        for folder, _, names in os.walk(directory)
        for name in names
    )


def test_download_then_cache_hit(server, cache):
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    first = download.download_url(_url(server, "/ok/vit.npz"), sha256=digest)
    second = download.download_url(_url(server, "/ok/vit.npz"), sha256=digest)
    assert first == second == download.url_cache_path(_url(server, "/ok/vit.npz"))
    assert open(first, "rb").read() == PAYLOAD
    assert server.hits["/ok/vit.npz"] == 1
    assert _leftovers(cache) == [os.path.relpath(first, cache)]


def test_hash_mismatch_leaves_nothing(server, cache):
    with pytest.raises(pretrained.DownloadError, match="0000"):
        download.download_url(_url(server, "/ok/vit.npz"), sha256="0" * 64)
    assert _leftovers(cache) == []


def test_corrupted_cache_entry_is_downloaded_again(server, cache):
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    stale = download.url_cache_path(_url(server, "/ok/vit.npz"))
    os.makedirs(os.path.dirname(stale))
    with open(stale, "wb") as handle:
        handle.write(b"stale")
    path = download.download_url(_url(server, "/ok/vit.npz"), sha256=digest)
    assert path == stale
    assert open(path, "rb").read() == PAYLOAD
    assert server.hits["/ok/vit.npz"] == 1


def test_truncated_transfer_leaves_nothing(server, cache):
    with pytest.raises(pretrained.DownloadError):
        download.download_url(_url(server, "/short/vit.npz"))
    assert _leftovers(cache) == []


def test_http_error_is_typed_and_explained(server, cache):
    with pytest.raises(pretrained.DownloadError, match="403") as info:
        download.download_url(_url(server, "/forbidden/vit.npz"))
    assert "keras-vit download" in str(info.value)
    assert _leftovers(cache) == []


def test_offline_names_file_cache_and_preseeding(server, cache, monkeypatch):
    monkeypatch.setenv("KERAS_VIT_OFFLINE", "1")
    with pytest.raises(pretrained.DownloadError) as info:
        download.download_url(_url(server, "/ok/vit.npz"))
    message = str(info.value)
    where = download.url_cache_path(_url(server, "/ok/vit.npz"))
    assert f"not cached at {where} " in message and "keras-vit download" in message and "\n" not in message
    assert server.hits == {}
    assert _leftovers(cache) == []


def test_unreachable_host_is_an_offline_error(cache):
    import socket

    with socket.socket() as probe:  # A port nobody listens on.
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(pretrained.DownloadError, match="unreachable"):
        download.download_url(f"http://127.0.0.1:{port}/vit.npz")
    assert _leftovers(cache) == []


def test_parallel_workers_all_get_the_complete_file(server, cache):
    results, errors = [], []

    def worker():
        try:
            results.append(download.download_url(_url(server, "/ok/shared.npz")))
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(set(results)) == 1
    assert open(results[0], "rb").read() == PAYLOAD
    assert _leftovers(cache) == [os.path.relpath(results[0], cache)]


# ----------------------------------------------------------------- one cache entry per URL


def test_urls_that_share_a_file_name_get_their_own_cache_entries(server, cache):
    # Every Hugging Face mirror serves a `model.safetensors`: the name alone must not pick the cached file.
    a, b = _url(server, "/ok/vit-a/model.safetensors"), _url(server, "/ok/vit-b/model.safetensors")
    first, second = download.download_url(a), download.download_url(b)
    assert first != second
    assert os.path.basename(first) == os.path.basename(second) == "model.safetensors"  # the name stays readable
    assert server.hits == {"/ok/vit-a/model.safetensors": 1, "/ok/vit-b/model.safetensors": 1}
    assert _leftovers(cache) == sorted(os.path.relpath(path, cache) for path in (first, second))


def test_a_file_cached_for_one_url_is_not_used_for_another(server, cache, monkeypatch):
    a, b = _url(server, "/ok/vit-a/model.safetensors"), _url(server, "/ok/vit-b/model.safetensors")
    cached = download.download_url(a)
    monkeypatch.setenv("KERAS_VIT_OFFLINE", "1")
    assert download.download_url(a) == cached
    with pytest.raises(pretrained.DownloadError) as info:
        download.download_url(b)
    # One paragraph that names b's own entry, where the user pre-seeds it, and not a's.
    message, own = str(info.value), download.url_cache_path(b)
    assert f"not cached at {own} " in message and cached not in message and "\n" not in message
    os.makedirs(os.path.dirname(own), exist_ok=True)
    with open(own, "wb") as handle:
        handle.write(PAYLOAD[:16])
    assert download.download_url(b) == own
    assert server.hits == {"/ok/vit-a/model.safetensors": 1}


@pytest.mark.parametrize(
    "other",
    [
        "https://b.example/o2/vit-b/model.safetensors",  # another host and folder
        "https://a.example/o1/vit-b/model.safetensors",  # another folder
        "https://a.example/o1/vit-a/model.safetensors?revision=2",  # another query
        "http://a.example/o1/vit-a/model.safetensors",  # another scheme
    ],
)
def test_a_preseeded_file_serves_only_its_own_url(other, cache, monkeypatch):
    # The audit's case, offline: a file pre-seeded for one URL must not be loaded for another of the same name.
    monkeypatch.setenv("KERAS_VIT_OFFLINE", "1")
    url = "https://a.example/o1/vit-a/model.safetensors"
    seeded = download.url_cache_path(url)
    os.makedirs(os.path.dirname(seeded))
    with open(seeded, "wb") as handle:
        handle.write(PAYLOAD)
    assert download.download_url(url) == seeded
    with pytest.raises(pretrained.DownloadError) as info:
        download.download_url(other)
    assert f"not cached at {download.url_cache_path(other)} " in str(info.value)
    assert download.url_cache_path(other) != seeded and seeded not in str(info.value)


def test_a_url_maps_to_one_cache_path_across_calls(server, cache, monkeypatch):
    # The key is a sha256 of the URL (not Python's salted `hash`), so every process finds the same entry.
    url = _url(server, "/ok/vit.npz")
    expected = os.path.join(str(cache), hashlib.sha256(url.encode()).hexdigest()[:16], "vit.npz")
    assert download.url_cache_path(url) == download.url_cache_path(url) == expected
    assert download.download_url(url) == download.download_url(url, sha256=hashlib.sha256(PAYLOAD).hexdigest())
    monkeypatch.setenv("KERAS_VIT_OFFLINE", "1")
    assert download.download_url(url) == expected
    assert server.hits == {"/ok/vit.npz": 1}


# ----------------------------------------------------------------- Hugging Face Hub, offline


def _seed_hub_cache(root, repo_id, filename, data, blob_name=None):
    """Lays a file out as huggingface_hub's cache does: blobs/<sha256>, snapshots/<rev>/file, refs/main."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    revision = "0" * 40
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "snapshots" / revision).mkdir(parents=True)
    blob = repo / "blobs" / (blob_name or hashlib.sha256(data).hexdigest())
    blob.write_bytes(data)
    (repo / "refs" / "main").write_text(revision)
    os.symlink(os.path.relpath(blob, repo / "snapshots" / revision), repo / "snapshots" / revision / filename)
    return repo


def test_hub_offline_reads_a_preseeded_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _seed_hub_cache(tmp_path, "org/vit", "model.safetensors", PAYLOAD)
    path = download.hf_download("org/vit", "model.safetensors", cache_dir_=str(tmp_path))
    assert open(path, "rb").read() == PAYLOAD


def test_hub_offline_and_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(pretrained.DownloadError) as info:
        download.hf_download("org/missing", "model.safetensors", cache_dir_=str(tmp_path))
    message = str(info.value)
    assert "org/missing/model.safetensors" in message
    assert str(tmp_path / "models--org--missing") in message
    assert "hf download org/missing model.safetensors" in message


def test_registry_tag_loads_from_a_preseeded_hub_cache(tmp_path, monkeypatch):
    # The whole path of ViTTi16(weights=tag) offline: registry -> huggingface_hub
    # cache lookup -> safetensors reader -> timm converter -> model.
    from huggingface_hub import constants

    import keras_vit

    ph.register_variant(monkeypatch, name="Ti/16", hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, patch_size=16)
    source = keras_vit.VisionTransformer(
        **keras_vit.models.variants.VARIANTS["Ti/16"], input_shape=(224, 224, 3), classes=1000
    )
    exported = pretrained.export_weights(source, tmp_path / "export.safetensors", "timm")
    info = pretrained.resolve("Ti/16", "augreg_in21k_ft_in1k", (224, 224))
    _seed_hub_cache(tmp_path / "hub", info.hub_repo, info.hub_filename, open(exported, "rb").read())
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = keras_vit.ViTTi16(weights="augreg_in21k_ft_in1k")
    expected, loaded = ph.keras_weights(source), ph.keras_weights(model)
    assert sorted(expected) == sorted(loaded)
    for name, value in expected.items():
        np.testing.assert_array_equal(loaded[name], value, err_msg=name)


def test_registry_never_tries_the_refusing_bucket(server, cache, monkeypatch):
    def hub_unavailable(*args, **kwargs):
        raise pretrained.DownloadError("Hub down in this test")

    monkeypatch.setattr(download, "hf_download", hub_unavailable)
    info = pretrained.resolve("B/16", "augreg_in21k", (224, 224))
    monkeypatch.setattr(
        sources.registry,
        "resolve",
        lambda variant, tag, size: pretrained.CheckpointInfo(**{**info.__dict__, "url": _url(server, "/ok/B_16.npz")}),
    )
    with pytest.raises(pretrained.DownloadError, match="Hub down"):
        sources.fetch(sources.resolve_source("B/16", "augreg_in21k"))
    assert server.hits == {}


def test_offline_hub_fails_at_once_with_one_short_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import constants

    cache = str(tmp_path / "hub")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", cache)
    with pytest.raises(pretrained.DownloadError) as info:
        sources.fetch(sources.resolve_source("B/16", "augreg_in21k"))
    message = str(info.value)
    assert message.count(cache) == 1 and message.count("Pre-seed") == 1 and "keras-vit download" in message
    # Short whatever the cache's path (a test's temporary folder is ~100 characters, a user's ~30).
    assert len(message.replace(cache, "~/.cache/huggingface/hub")) < 500


def test_unreachable_hub_is_offline_without_retries(tmp_path, monkeypatch):
    # The endpoint is a local port nobody listens on: the probe fails and the cache is used, no retry loop.
    import socket

    from huggingface_hub import constants

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("KERAS_VIT_OFFLINE", raising=False)
    with pytest.raises(pretrained.DownloadError, match="unreachable"):
        download.hf_download("org/vit", "model.safetensors", cache_dir_=str(tmp_path))
    _seed_hub_cache(tmp_path, "org/vit", "model.safetensors", PAYLOAD)
    assert open(download.hf_download("org/vit", "model.safetensors", cache_dir_=str(tmp_path)), "rb").read() == PAYLOAD


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.org/vit.npz", "data:,x", "https:///nohost.npz", "vit.npz"]
)
def test_only_http_urls_are_downloaded(url, cache):
    with pytest.raises(ValueError, match="`url` must be an https or http URL"):
        download.download_url(url)
    assert not cache.exists()


@pytest.mark.parametrize("filename", ["../x", "/tmp/x", "a/b", ".hidden", "..", ""])
def test_cache_names_cannot_escape_the_cache(filename, server, cache, tmp_path):
    with pytest.raises(ValueError, match="`filename` must be a plain file name"):
        download.download_url(_url(server, "/ok/vit.npz"), filename=filename)
    assert server.hits == {} and not (tmp_path / "x").exists()


def test_weights_can_be_an_https_mirror(server, cache):
    source = sources.resolve_source("B/16", _url(server, "/ok/vit.npz"))
    assert source.kind == "url"
    path, format = sources.fetch(source)
    assert open(path, "rb").read() == PAYLOAD and format is None
    with pytest.raises(ValueError, match="https or http"):
        sources.resolve_source("B/16", "ftp://example.org/vit.npz")


def test_missing_extra_names_the_install_command(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # what an absent package looks like to import
    with pytest.raises(extras.MissingDependencyError, match=r"keras-vision-transformer\[weights\]"):
        download.hf_download("org/vit")
