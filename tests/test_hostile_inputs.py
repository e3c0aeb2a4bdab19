"""Hostile and malformed inputs: each is refused with an error that names the bad value, and leaves no output.

File parsing and argument checks do not depend on the backend: they run on the jax run only, the model rows on
all three. A writer killed at a random point leaves each destination complete, old or new.
"""

import http.server
import io as bytes_io
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
import zipfile

import numpy as np
import pytest
from safetensors.numpy import save_file

import keras_vit
import keras_vit_cli as cli
from keras_vit.pretrained import converters, download, export, io, loader
from keras_vit.pretrained.errors import CheckpointError
from keras_vit.utils import files, keras_compat
from tests.helpers import BACKEND, REPO_ROOT

one_backend = pytest.mark.skipif(BACKEND != "jax", reason="backend-independent: runs on the jax run only")
TINY = dict(patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32)


def tiny_model(classes=3, seed=0):
    keras_compat.set_random_seed(seed)
    return keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=classes)


@pytest.fixture(scope="module")
def tiny_weights():
    return export.model_weights(tiny_model())


def raw_safetensors(path, header, data=b""):
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + data)
    return str(path)


def one_tensor(**overrides):
    return {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], **overrides}}


def _load_raw(header, data=b""):
    return lambda tmp, weights: loader.load_checkpoint(raw_safetensors(tmp / "x.safetensors", header, data))


def _raw_bytes(tmp, weights):
    (tmp / "x.safetensors").write_bytes(struct.pack("<Q", 3) + b"{xx")
    return tmp / "x.safetensors"


def _load(make):
    return lambda tmp, weights: loader.load_checkpoint(make(tmp, weights))


def _npy(array):
    buffer = bytes_io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _npz_with(name, payload):
    def make(tmp, weights):
        architecture = loader.architecture_of_weights(weights, 2, (4, 4))
        path = export.write_weights(weights, tmp / "vit.npz", "official", architecture)
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(name, payload)
        return path

    return make


def _with_nan(tmp, weights):
    tensors = converters.from_keras(weights, "timm")
    tensors["blocks.0.mlp.fc1.weight"] = tensors["blocks.0.mlp.fc1.weight"].copy()
    tensors["blocks.0.mlp.fc1.weight"][0, 0] = np.nan
    tensors["head.bias"] = np.full_like(tensors["head.bias"], np.inf)
    save_file(tensors, str(tmp / "nan.safetensors"))
    return str(tmp / "nan.safetensors")


def _grid(value):
    def act(tmp, weights):
        tensors = converters.from_keras(weights, "timm")
        save_file(tensors, str(tmp / "g.safetensors"), metadata={"keras_vit.grid_size": value})
        return loader.checkpoint_grid(loader.load_checkpoint(tmp / "g.safetensors"))

    return act


def _hf_image_size(value):
    def act(tmp, weights):
        (tmp / "hf").mkdir()
        save_file(converters.from_keras(weights, "hf"), str(tmp / "hf" / "model.safetensors"))  # no grid metadata
        (tmp / "hf" / "config.json").write_text(json.dumps({"model_type": "vit", "image_size": value}))
        return loader.checkpoint_grid(loader.load_checkpoint(tmp / "hf"))

    return act


def _convert(**arguments):
    def act(tmp, weights):
        source = export.write_weights(weights, tmp / "src.safetensors", "timm", tiny_model().get_config())
        return export.convert_checkpoint(source, tmp / "out.npz", **arguments)

    return act


def _export_into_foreign_folder(tmp, weights):
    (tmp / "out").mkdir()
    (tmp / "out" / "notes.txt").write_text("mine")
    return export.export_weights(tiny_model(), tmp / "out", "hf")


def _benchmark_into_missing_folder(tmp, weights):
    from benchmarks import __main__ as benchmark
    from benchmarks import runner

    def never(*args, **kwargs):
        raise AssertionError("a measurement started before the output folder was checked")

    runner.run_spec, original = never, runner.run_spec
    try:
        code = benchmark.main(["--variant", "Ti/16", "--quick", "--output", str(tmp / "missing" / "b.json")])
    finally:
        runner.run_spec = original
    if code == 1:
        raise FileNotFoundError("exit 1")
    return code


def _plot(name, *args, **kwargs):
    from keras_vit.inspection import plots

    return lambda tmp, weights: getattr(plots, name)(*args, tmp / "a.png", **kwargs)


def _download(url, filename=None):
    return lambda tmp, weights: download.download_url(url, directory=tmp / "c", filename=filename)


def row(id, act, error=CheckpointError, names=None):
    """A hostile input: `act(tmp_path, weights)` raises `error`, whose message names `names` (default: the file)."""
    return pytest.param(act, error, names, id=id)


# What no refused row may leave behind.
OUTPUTS = ("out.npz", "out/model.safetensors", "missing", "a.png", "c", "x")
IMAGES, ROLLOUT = np.zeros((2, 8, 8, 3)), np.zeros((2, 2, 2))
NO_CHANNELS = dict(TINY, input_shape=(32, 32, 0))


KERAS_SAVE = os.path.join(REPO_ROOT, "tests", "fixtures", "plain_vit.keras")
CASES = [
    # safetensors headers the safetensors library refuses
    row("string-data-offsets", _load_raw(one_tensor(data_offsets=["0", "8"]), b"\0" * 8)),
    row("negative-shape", _load_raw(one_tensor(shape=[-2]), b"\0" * 8)),
    row("non-numeric-shape", _load_raw(one_tensor(shape=["2"]), b"\0" * 8)),
    row("float-shape", _load_raw(one_tensor(shape=[2.0]), b"\0" * 8)),
    row("bool-offsets", _load_raw(one_tensor(data_offsets=[False, True]), b"\0")),
    row("offsets-wrong-size", _load_raw(one_tensor(data_offsets=[0, 4]), b"\0" * 4)),
    row("overlapping", _load_raw({**one_tensor(), "b": one_tensor()["a"]}, b"\0" * 8)),
    row("truncated", _load_raw(one_tensor(), b"\0" * 4)),
    row("entry-not-object", _load_raw({"a": [1, 2]})),
    row("header-is-list", _load_raw([1, 2])),
    row("header-is-list-read-directly", lambda t, w: io.read_safetensors(raw_safetensors(t / "x.safetensors", [1]))),
    row("metadata-not-strings", _load_raw({"__metadata__": {"x": 1}, **one_tensor()}, b"\0" * 8)),
    row("not-json", _load(_raw_bytes)),
    row("unknown-dtype", _load_raw(one_tensor(dtype="F128"), b"\0" * 8), names="F128"),
    # metadata values
    row("grid-not-numbers", _grid("a,b"), names="keras_vit.grid_size"),
    row("grid-zero", _grid("0,16"), names="keras_vit.grid_size"),
    row("grid-three", _grid("4,4,4"), names="keras_vit.grid_size"),
    row("hf-image-size-string", _hf_image_size("32"), names="image_size"),
    row("hf-image-size-negative", _hf_image_size(-32), names="-32"),
    # .npz archives: members refused from their declarations, before decompression
    row("npz-member-not-npy", _load(_npz_with("evil.txt", b"x")), names="evil.txt"),
    row("npz-size-lies", _load(_npz_with("x.npy", _npy(np.zeros(1000, "float32"))[:200])), names="x.npy"),
    row("npz-object-array", _load(_npz_with("x.npy", _npy(np.array([{}], dtype=object)))), names="x.npy"),
    row("npz-unexpected-name", _load(_npz_with("surprise.npy", _npy(np.zeros(3, "float32")))), names="surprise"),
    row("keras-save-given-as-weights", _load(lambda t, w: shutil.copy(KERAS_SAVE, t))),
    row("nan-weights", _load(_with_nan), names="fc1/kernel"),
    # arguments and outputs
    row("convert-image-size-negative", _convert(image_size=(-32, -32)), ValueError, "-32"),
    row("convert-num-heads-zero", _convert(num_heads=0), ValueError, "num_heads=0"),
    row("export-into-foreign-folder", _export_into_foreign_folder, FileExistsError, "notes.txt"),
    row("benchmark-output-missing-folder", _benchmark_into_missing_folder, FileNotFoundError, "exit 1"),
    row("plot-alpha-above-one", _plot("plot_attention_rollout", IMAGES, ROLLOUT, alpha=2.0), ValueError, "2.0"),
    row("plot-dpi-nan", _plot("plot_embedding_filters", IMAGES, dpi=float("nan")), ValueError, "nan"),
    row("download-file-scheme", _download("file:///etc/passwd"), ValueError, "file:///etc/passwd"),
    row("download-name-escapes-cache", _download("https://example.org/v.npz", filename="../x"), ValueError, "../x"),
    row("input-zero-channels", lambda t, w: keras_vit.VisionTransformer(**NO_CHANNELS), ValueError, "input_shape"),
]


@one_backend
@pytest.mark.parametrize("act, error, names", CASES)
def test_hostile_input_is_refused(act, error, names, tmp_path, tiny_weights):
    with pytest.raises(error) as info:
        act(tmp_path, tiny_weights)
    assert (str(tmp_path) if names is None else names) in str(info.value)
    assert not [name for name in OUTPUTS if (tmp_path / name).exists()]
    assert not [name for name in os.listdir(tmp_path) if name.startswith(files.TEMP_PREFIX)]


@one_backend
def test_a_small_npz_bomb_under_an_unexpected_name_is_never_inflated(tmp_path, tiny_weights):
    # 1 GiB of zeros deflates to a few MB: the member is refused from its declared name before it is read.
    architecture = loader.architecture_of_weights(tiny_weights, 2, (4, 4))
    path = export.write_weights(tiny_weights, tmp_path / "bomb.npz", "official", architecture)
    size = 1 << 30
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("junk/payload.npy", "w", force_zip64=True) as member:
            header = np.lib.format.header_data_from_array_1_0(np.zeros(0, "uint8"))
            header["shape"] = (size,)
            np.lib.format.write_array_header_1_0(member, header)
            chunk = bytes(1 << 22)
            for _ in range(size // len(chunk)):
                member.write(chunk)
    assert os.path.getsize(path) < 8 << 20
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match="junk/payload"):
            loader.load_checkpoint(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak / 2**20:.0f} MiB allocated"


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(include_top=True, input_shape=(40, 32, 3), classes=5), (0, 5)),
        (dict(include_top=False, pooling="gap"), (0, 16)),
        (dict(include_top=False), (0, 5, 4, 16)),
        (dict(include_top=False, return_sequence=True), (0, 21, 16)),
    ],
    ids=["head", "pooled", "feature-map", "sequence"],
)
def test_empty_batch_gives_an_empty_output_on_every_backend(kwargs, expected):
    model = keras_vit.VisionTransformer(**TINY, **kwargs)
    assert tuple(model(np.zeros((0, 40, 32, 3), "float32")).shape) == expected


# (arguments, exit code, the bad value the one-line message names); {tmp} is the test's folder.
CLI_ERRORS = [
    (["demo", "--model", "ViTXL99"], 2, "ViTXL99"),
    (["demo", "--batch-size", "0"], 2, "batch_size=0"),
    (["variants", "--classes", "-1"], 2, "classes=-1"),
    (["inspect", "--dpi", "0"], 2, "dpi=0"),
    (["inspect", "--discard-ratio", "1.5"], 2, "1.5"),
    (["download", "ViTTi16", "--weights", "no_such_tag"], 2, "no_such_tag"),
    (["download", "ViTTi16", "--weights", "ftp://example.org/x.npz"], 2, "ftp://example.org/x.npz"),
    (["download", "ViTTi16", "--image-size", "0", "--weights", "imagenet"], 2, "image_size=0"),
    (["download", "ViTTi16", "--weights", "none"], 2, "none"),
    (["convert", "{tmp}/missing.npz", "{tmp}/out.npz"], 1, "missing.npz"),
    (["convert", "{tmp}/bad.safetensors", "{tmp}/out.npz"], 2, "bad.safetensors"),
    (["convert", "{tmp}/bad.safetensors", "{tmp}/out.npz", "--num-heads", "0"], 2, "num_heads=0"),
    (["convert", "{tmp}/bad.safetensors", "{tmp}/out.npz", "--image-size", "-32", "-32"], 2, "-32"),
    (["convert", "{tmp}/bad.safetensors", "{tmp}/out.npz", "--to", "onnx"], 2, "onnx"),
    (["predict", "{tmp}/missing.png", "--weights", "{tmp}/bad.safetensors"], 2, "bad.safetensors"),
    (["predict", "{tmp}/missing.png", "--top", "0"], 2, "top=0"),
    (["finetune", "--steps", "0", "--out", "{tmp}/run"], 2, "steps=0"),
    (["finetune", "--model", "ViTZ99", "--out", "{tmp}/run"], 2, "ViTZ99"),
    (["finetune", "--model", "small", "--weights", "x", "--out", "{tmp}/run"], 2, "weights='x'"),
    (["finetune", "--batch-size", "10", "--accumulation-steps", "4", "--out", "{tmp}/run"], 2, "accumulation_steps=4"),
    (["evaluate", "ViTTi16", "--shots", "0,x", "--out", "{tmp}/run"], 2, "0,x"),
    (["export", "ViTTi16", "{tmp}/out.npz", "--format", "zip"], 2, "zip"),
    (["launch", "--processes", "0", "demo"], 2, "processes=0"),
]


@one_backend
@pytest.mark.parametrize("argv, code, names", CLI_ERRORS, ids=[" ".join(argv[:3]) for argv, _, _ in CLI_ERRORS])
def test_user_errors_end_in_one_line_naming_the_bad_value(argv, code, names, tmp_path, capsys):
    raw_safetensors(tmp_path / "bad.safetensors", one_tensor(data_offsets=["0", "8"]), b"\0" * 8)
    assert cli.main([arg.format(tmp=tmp_path) for arg in argv]) == code
    err = capsys.readouterr().err
    assert err.startswith(f"keras-vit {argv[0]}: ") and err.count("\n") == 1 and names in err, err
    assert sorted(os.listdir(tmp_path)) == ["bad.safetensors"]


# One writer per test: each round downloads a file (then deletes it) and converts a checkpoint to hf and timm.
WRITER = """
import os, sys
import keras_vit_cli as cli
from keras_vit.pretrained import download
url, small, large, out = sys.argv[1:5]
for round_ in range(1000):
    source = small if round_ % 2 == 0 else large
    download.download_url(url, directory=os.path.join(out, "cache"), filename="vit.bin", sha256=None)
    os.remove(os.path.join(out, "cache", "vit.bin"))
    for to, name in (("hf", "hf"), ("timm", "vit.safetensors")):
        arguments = ["convert", source, os.path.join(out, name), "--to", to, "--num-heads", "2", "--overwrite"]
        assert cli.main(arguments) == 0
    print("done", flush=True)
"""


@one_backend
def test_a_killed_writer_leaves_each_output_complete_old_or_new(tmp_path):
    payload = bytes(range(256)) * 8192  # 2 MiB, sent slowly so that a kill can land mid-transfer

    class Slow(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            for start in range(0, len(payload), 1 << 17):
                self.wfile.write(payload[start : start + (1 << 17)])
                time.sleep(0.01)

    small, large = (
        export.export_weights(tiny_model(classes, seed=classes), tmp_path / f"m{classes}.npz", "official")
        for classes in (3, 7)
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/vit.bin"
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, url, small, large, out], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        while (line := writer.stdout.readline()) and line.strip() != "done":
            pass
        assert line, "the writer stopped before its first complete round"
        time.sleep(random.uniform(0, 0.3))
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        server.shutdown()
        server.server_close()
    cached = out / "cache" / "vit.bin"
    assert not cached.exists() or cached.read_bytes() == payload
    assert [name for name in os.listdir(out / "cache") if not name.startswith(files.TEMP_PREFIX)] in ([], ["vit.bin"])
    assert loader.load_checkpoint(out / "vit.safetensors").architecture(num_heads=2)["classes"] in (3, 7)
    classes = loader.load_checkpoint(out / "hf").architecture(num_heads=2)["classes"]
    assert classes in (3, 7) and sorted(os.listdir(out / "hf")) == ["config.json", "model.safetensors"]
    assert len(json.loads((out / "hf" / "config.json").read_text())["id2label"]) == classes  # weights and config agree
