"""Downloads and caches against a local HTTP server and a pre-seeded Hub cache (the jax run only; no internet)."""

import concurrent.futures
import hashlib
import http.server
import os
import socket
import threading

import keras
import numpy as np
import pretrained_helpers as ph
import pytest

from keras_vit import pretrained
from keras_vit.pretrained import download

pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax", reason="backend-independent: the jax run")
PAYLOAD = bytes(range(256)) * 64


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self):
        self.server.hits[self.path] = self.server.hits.get(self.path, 0) + 1
        if self.path.startswith("/forbidden/"):
            return self.send_error(403)
        self.send_response(200)
        self.send_header("Content-Length", str(len(PAYLOAD)))
        self.end_headers()
        # /short/ announces the full length, sends half and closes: a truncated transfer.
        self.wfile.write(PAYLOAD[: len(PAYLOAD) // 2] if self.path.startswith("/short/") else PAYLOAD)


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.hits = {}
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    httpd.url = lambda path: f"http://127.0.0.1:{httpd.server_address[1]}{path}"
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


def _files(directory):
    # An entry's empty folder may stay; nothing else may.
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*") if path.is_file())


def _unused_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_download_once_then_from_the_cache(server, cache, monkeypatch):
    url, digest = server.url("/ok/vit.npz"), hashlib.sha256(PAYLOAD).hexdigest()
    # The key is a sha256 of the URL (not Python's salted `hash`), so every process finds the same entry.
    expected = os.path.join(str(cache), hashlib.sha256(url.encode()).hexdigest()[:16], "vit.npz")
    assert download.download_url(url, sha256=digest) == download.download_url(url) == expected
    open(expected, "wb").write(b"corrupted")
    assert download.download_url(url, sha256=digest) == expected  # downloaded again
    monkeypatch.setenv("KERAS_VIT_OFFLINE", "1")
    assert download.download_url(url, sha256=digest) == expected
    assert open(expected, "rb").read() == PAYLOAD
    assert server.hits == {"/ok/vit.npz": 2}
    assert _files(cache) == [os.path.relpath(expected, cache)]


@pytest.mark.parametrize(
    "path, sha256, match",
    [("/ok/vit.npz", "0" * 64, "0000"), ("/short/vit.npz", None, "failed"), ("/forbidden/vit.npz", None, "403")],
    ids=["wrong-hash", "truncated", "http-403"],
)
def test_a_failed_download_caches_nothing(server, cache, path, sha256, match):
    with pytest.raises(pretrained.DownloadError, match=match) as info:
        download.download_url(server.url(path), sha256=sha256)
    assert "keras-vit download" in str(info.value)
    assert _files(cache) == []


def test_offline_or_unreachable_names_the_cache_entry_and_how_to_preseed(server, cache, monkeypatch):
    with pytest.raises(pretrained.DownloadError, match="unreachable"):
        download.download_url(f"http://127.0.0.1:{_unused_port()}/vit.npz")
    monkeypatch.setenv("KERAS_VIT_OFFLINE", "1")
    with pytest.raises(pretrained.DownloadError) as info:
        download.download_url(server.url("/ok/vit.npz"))
    message = str(info.value)
    assert download.url_cache_path(server.url("/ok/vit.npz")) in message and "keras-vit download" in message
    assert "\n" not in message and server.hits == {} and _files(cache) == []


def test_parallel_workers_all_get_the_complete_file(server, cache):
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: download.download_url(server.url("/ok/shared.npz")), range(4)))
    assert len(set(results)) == 1 and open(results[0], "rb").read() == PAYLOAD
    assert _files(cache) == [os.path.relpath(results[0], cache)]


def test_a_cached_file_serves_only_its_own_url(cache, monkeypatch):
    # Every Hugging Face mirror serves a `model.safetensors`: the name alone must not pick the cached file.
    monkeypatch.setenv("KERAS_VIT_OFFLINE", "1")
    url = "https://a.example/o1/vit-a/model.safetensors"
    seeded = download.url_cache_path(url)
    os.makedirs(os.path.dirname(seeded))
    open(seeded, "wb").write(PAYLOAD)
    assert download.download_url(url) == seeded
    for other in (url.replace("a.", "b."), url.replace("vit-a", "vit-b"), url + "?revision=2", url.replace("s:", ":")):
        own = download.url_cache_path(other)
        assert os.path.basename(own) == "model.safetensors"  # the name stays readable
        with pytest.raises(pretrained.DownloadError, match=own):
            download.download_url(other)


@pytest.mark.parametrize(
    "url, filename",
    [(url, None) for url in ("file:///etc/passwd", "ftp://example.org/v.npz", "data:,x", "https:///v.npz", "v.npz")]
    + [("https://example.org/v.npz", name) for name in ("../x", "/tmp/x", "a/b", ".hidden", "..", "")],
)
def test_only_http_urls_are_downloaded_and_only_into_the_cache(url, filename, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_VIT_OFFLINE", "1")  # a check that let it through would end in a DownloadError
    with pytest.raises(ValueError, match="url" if filename is None else "filename"):
        download.download_url(url, filename=filename)
    assert not cache.exists() and not (tmp_path / "x").exists()


# ----------------------------------------------------------------- Hugging Face Hub


def _seed_hub_cache(root, repo_id, filename, data):
    """Lays a file out as huggingface_hub's cache does without symlinks: refs/main, snapshots/<revision>/file."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    (repo / "snapshots" / ("0" * 40)).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    (repo / "snapshots" / ("0" * 40) / filename).write_bytes(data)


@pytest.mark.parametrize("offline", ["declared", "unreachable"])
def test_a_tag_offline_fails_at_once_then_loads_from_a_preseeded_hub_cache(offline, tmp_path, monkeypatch):
    # ViTTi16(weights=tag): registry -> huggingface_hub cache -> safetensors -> timm layout -> model.
    from huggingface_hub import constants

    import keras_vit

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("KERAS_VIT_OFFLINE", raising=False)
    if offline == "declared":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:  # the probe fails: the cache is used with no retry loop
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{_unused_port()}")
    ph.register_variant(monkeypatch, name="Ti/16", hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, patch_size=16)
    info = pretrained.resolve("Ti/16", "augreg_in21k_ft_in1k", (224, 224))
    with pytest.raises(pretrained.DownloadError) as error:
        keras_vit.ViTTi16(weights=info.tag)
    message = str(error.value)
    assert str(tmp_path / "hub" / ("models--" + info.hub_repo.replace("/", "--"))) in message
    assert f"hf download {info.hub_repo} model.safetensors" in message and "\n" not in message
    assert ("offline mode is on" if offline == "declared" else "unreachable") in message
    source = keras_vit.ViTTi16(input_shape=(224, 224, 3))
    exported = pretrained.export_weights(source, tmp_path / "export.safetensors", "timm")
    _seed_hub_cache(tmp_path / "hub", info.hub_repo, info.hub_filename, open(exported, "rb").read())
    loaded = ph.keras_weights(keras_vit.ViTTi16(weights=info.tag))
    for name, value in ph.keras_weights(source).items():
        np.testing.assert_array_equal(loaded.pop(name), value, err_msg=name)
    assert not loaded


def test_a_gated_checkpoint_says_to_accept_its_license_and_log_in(monkeypatch):
    # DINOv3's weights: the Hub answers an account that has not accepted the license with GatedRepoError.
    import huggingface_hub
    from huggingface_hub import errors as hub_errors

    import keras_vit

    class Gated(hub_errors.GatedRepoError):
        def __init__(self, message):
            Exception.__init__(self, message)  # its HTTP response is beside the point

    def refuse(repo_id, filename, **kwargs):
        raise Gated(f"401 Client Error.\nCannot access gated repo {repo_id}.")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    monkeypatch.setattr(download, "reachable", lambda url, timeout=None: True)
    for name in ("KERAS_VIT_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    repo = pretrained.resolve("S/16", "dinov3_lvd1689m").hub_repo
    with pytest.raises(pretrained.DownloadError) as error:
        keras_vit.ViTS16(weights="dinov3_lvd1689m", include_top=False)
    message = str(error.value)
    assert f"accept its license at https://huggingface.co/{repo}" in message and "hf auth login" in message
    assert "\n" not in message and "has no" not in message
