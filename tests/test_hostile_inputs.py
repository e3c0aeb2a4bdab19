"""Hostile and malformed inputs: one row per case (input, expected error, files that must not exist afterwards).

Every row runs on one backend only (file parsing and argument checks do not
depend on it), except the model rows, which run on all three. The SIGKILL
tests kill a convert, a weights export and a download at a random point and
check that the destination is the complete old state or the complete new one.
"""

import dataclasses
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc
import zipfile

import keras
import numpy as np
import pytest

import keras_vit
import keras_vit_cli as cli
from keras_vit.pretrained import converters, download, export, io, loader
from keras_vit.pretrained import errors as weights_errors
from keras_vit.utils import files

BACKEND = keras.backend.backend()
one_backend = pytest.mark.skipif(BACKEND != "jax", reason="backend-independent: runs on the jax run only")
TINY = dict(patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_model(classes=3, seed=0):
    keras.utils.set_random_seed(seed)
    return keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 3), classes=classes)


@pytest.fixture(scope="module")
def tiny_weights():
    return export.model_weights(tiny_model())


def timm_tensors(weights):
    return converters.from_keras(weights, "timm")


def raw_safetensors(path, header, data=b""):
    encoded = json.dumps(header).encode()
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)) + encoded + data)
    return str(path)


def one_tensor(**overrides):
    return {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], **overrides}}


@dataclasses.dataclass
class Case:
    """One hostile input: `act(tmp_path, weights)` must raise `error` (SystemExit: that exit code)."""

    id: str
    act: object
    error: type
    absent: tuple = ()
    match: str = ""
    code: int = None
    xfail: str = ""  # why the row still fails (another room's fix pending)
    names_file: bool = False  # the message names the file (every malformed-file row)


def _load(path):
    return lambda tmp, w: loader.load_checkpoint(path(tmp, w) if callable(path) else path)


def _safetensors_case(name, header, data):
    return Case(name, _load(lambda tmp, w: raw_safetensors(tmp / "x.safetensors", header, data)), None)


def _npz_with(tmp, weights, extra):
    path = export.write_weights(
        weights, tmp / "vit.npz", "official", loader.architecture_of_weights(weights, 2, (4, 4))
    )
    with zipfile.ZipFile(path, "a") as archive:
        for name, payload in extra.items():
            archive.writestr(name, payload)
    return path


def _npy_bytes(array):
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _raw_bytes(tmp, data):
    (tmp / "x.safetensors").write_bytes(data)
    return str(tmp / "x.safetensors")


def _with_nan(tmp, weights):
    tensors = timm_tensors(weights)
    tensors["blocks.0.mlp.fc1.weight"] = tensors["blocks.0.mlp.fc1.weight"].copy()
    tensors["blocks.0.mlp.fc1.weight"][0, 0] = np.nan
    tensors["head.bias"] = np.full_like(tensors["head.bias"], np.inf)
    from safetensors.numpy import save_file

    save_file(tensors, str(tmp / "nan.safetensors"))
    return str(tmp / "nan.safetensors")


def _bad_grid(tmp, weights, grid):
    from safetensors.numpy import save_file

    save_file(timm_tensors(weights), str(tmp / "g.safetensors"), metadata={"keras_vit.grid_size": grid})
    return loader.checkpoint_grid(loader.load_checkpoint(tmp / "g.safetensors"))


def _bad_hf_config(tmp, weights, image_size):
    from safetensors.numpy import save_file

    (tmp / "hf").mkdir()
    save_file(converters.from_keras(weights, "hf"), str(tmp / "hf" / "model.safetensors"))  # no grid metadata
    (tmp / "hf" / "config.json").write_text(json.dumps({"model_type": "vit", "image_size": image_size}))
    return loader.checkpoint_grid(loader.load_checkpoint(tmp / "hf"))


def _convert(tmp, weights, **arguments):
    architecture = tiny_model().get_config()
    source = export.write_weights(weights, tmp / "src.safetensors", "timm", architecture)
    return export.convert_checkpoint(source, tmp / "out.npz", **arguments)


def _export_into_foreign_folder(tmp, weights):
    (tmp / "out").mkdir()
    (tmp / "out" / "notes.txt").write_text("mine")
    return export.export_weights(tiny_model(), tmp / "out", "hf")


def _benchmark_missing_folder(tmp, weights):
    from benchmarks import __main__ as benchmark
    from benchmarks import runner

    def never(*args, **kwargs):  # pragma: no cover - reached only if the check comes too late
        raise AssertionError("a measurement started before the output folder was checked")

    runner.run_spec, original = never, runner.run_spec
    try:
        code = benchmark.main(["--variant", "Ti/16", "--quick", "--output", str(tmp / "missing" / "b.json")])
    finally:
        runner.run_spec = original
    if code == 1:
        raise FileNotFoundError("exit 1")  # the row expects the I/O error exit
    return code


def _plots():
    from keras_vit.inspection import plots

    return plots


OFFSETS_STRING = one_tensor(data_offsets=["0", "8"])
CASES = [
    # ---- safetensors headers: refused by the safetensors library, one error naming the file
    _safetensors_case("string-data-offsets", OFFSETS_STRING, b"\0" * 8),
    _safetensors_case("negative-shape", one_tensor(shape=[-2]), b"\0" * 8),
    _safetensors_case("non-numeric-shape", one_tensor(shape=["2"]), b"\0" * 8),
    _safetensors_case("float-shape", one_tensor(shape=[2.0]), b"\0" * 8),
    _safetensors_case("bool-offsets", one_tensor(data_offsets=[False, True]), b"\0"),
    _safetensors_case("offsets-wrong-size", one_tensor(data_offsets=[0, 4]), b"\0" * 4),
    _safetensors_case("overlapping", {**one_tensor(), "b": one_tensor()["a"]}, b"\0" * 8),
    _safetensors_case("truncated", one_tensor(), b"\0" * 4),
    _safetensors_case("entry-not-object", {"a": [1, 2]}, b""),
    Case(
        "header-is-list",
        _load(lambda t, w: raw_safetensors(t / "x.safetensors", [1, 2])),
        weights_errors.CheckpointError,
        match="neither",
    ),
    Case(
        "header-is-a-list-read-directly",
        lambda t, w: io.read_safetensors(raw_safetensors(t / "x.safetensors", [1, 2])),
        None,
    ),
    _safetensors_case("metadata-not-strings", {"__metadata__": {"x": 1}, **one_tensor()}, b"\0" * 8),
    Case("not-json", _load(lambda tmp, w: _raw_bytes(tmp, struct.pack("<Q", 3) + b"{xx")), None),
    Case(
        "unknown-dtype",
        _load(lambda tmp, w: raw_safetensors(tmp / "x.safetensors", one_tensor(dtype="F128"), b"\0" * 8)),
        weights_errors.CheckpointError,
        match="F128",
    ),
    # ---- metadata values
    Case("grid-not-numbers", lambda tmp, w: _bad_grid(tmp, w, "a,b"), None, match="keras_vit.grid_size"),
    Case("grid-zero", lambda tmp, w: _bad_grid(tmp, w, "0,16"), None, match="keras_vit.grid_size"),
    Case("grid-three", lambda tmp, w: _bad_grid(tmp, w, "4,4,4"), None, match="keras_vit.grid_size"),
    Case("hf-image-size-string", lambda tmp, w: _bad_hf_config(tmp, w, "32"), None, match="image_size"),
    Case("hf-image-size-negative", lambda tmp, w: _bad_hf_config(tmp, w, -32), None, match="image_size"),
    # ---- .npz archives: declarations checked before decompression
    Case(
        "npz-member-not-npy",
        _load(lambda tmp, w: _npz_with(tmp, w, {"evil.txt": b"x"})),
        weights_errors.CheckpointError,
        match="not a .npy",
    ),
    Case(
        "npz-size-lies",
        _load(lambda tmp, w: _npz_with(tmp, w, {"x.npy": _npy_bytes(np.zeros((1000,), "float32"))[:200]})),
        weights_errors.CheckpointError,
        match="'x.npy' size",
    ),
    Case(
        "keras-save-given-as-weights",
        _load(lambda tmp, w: shutil.copy(os.path.join(os.path.dirname(__file__), "fixtures", "plain_vit.keras"), tmp)),
        weights_errors.CheckpointError,
        match=r"Keras \.keras save.*load_model.*keras-vit convert",
    ),
    Case(
        "npz-object-array",
        _load(lambda tmp, w: _npz_with(tmp, w, {"x.npy": _npy_bytes(np.array([{}], dtype=object))})),
        weights_errors.CheckpointError,
        match="pickled",
    ),
    Case(
        "npz-unexpected-name",
        _load(lambda tmp, w: _npz_with(tmp, w, {"surprise.npy": _npy_bytes(np.zeros(3, "float32"))})),
        weights_errors.CheckpointError,
        match="surprise",
    ),
    # ---- values
    Case("nan-weights", _load(_with_nan), weights_errors.CheckpointError, match="fc1/kernel.*head/bias"),
    # ---- convert arguments: refused before the checkpoint is read (the CLI rows below check the flags)
    Case(
        "convert-image-size-negative",
        lambda t, w: _convert(t, w, image_size=(-32, -32)),
        ValueError,
        ("out.npz",),
        match="image_size",
    ),
    Case(
        "convert-num-heads-zero", lambda t, w: _convert(t, w, num_heads=0), ValueError, ("out.npz",), match="num_heads"
    ),
    # ---- outputs
    Case(
        "export-into-foreign-folder",
        _export_into_foreign_folder,
        FileExistsError,
        ("out/model.safetensors",),
        match="notes.txt",
    ),
    Case("benchmark-output-missing-folder", _benchmark_missing_folder, FileNotFoundError, ("missing",)),
    # ---- inspection functions
    Case(
        "plot-alpha-above-one",
        lambda t, w: _plots().plot_attention_rollout(
            np.zeros((1, 8, 8, 3)), np.zeros((1, 2, 2)), t / "a.png", alpha=2.0
        ),
        ValueError,
        ("a.png",),
        match="alpha",
    ),
    Case(
        "plot-dpi-nan",
        lambda t, w: _plots().plot_embedding_filters(np.zeros((2, 8, 8, 3)), t / "b.png", dpi=float("nan")),
        ValueError,
        ("b.png",),
        match="dpi",
    ),
    # ---- downloads
    Case(
        "download-file-scheme",
        lambda t, w: download.download_url("file:///etc/passwd", directory=t / "c"),
        ValueError,
        ("c",),
        match="https or http",
    ),
    Case(
        "download-name-escapes-cache",
        lambda t, w: download.download_url("https://example.org/v.npz", directory=t / "c", filename="../x"),
        ValueError,
        ("x", "c/x"),
        match="plain file name",
    ),
]


def _pipeline(**overrides):
    import tensorflow as tf

    from keras_vit.training import data

    dataset = tf.data.Dataset.from_tensor_slices((np.zeros((2, 8, 8, 3), "uint8"), np.zeros(2, "int32")))
    arguments = {"image_size": 8, "batch_size": 2, "num_classes": 2, **overrides}
    return data.train_pipeline(dataset, **arguments)


CASES += [
    # ---- other rooms' arguments (data, models): checked where they enter
    Case("mixup-alpha-negative", lambda t, w: _pipeline(mixup_alpha=-1.0), ValueError, match="mixup_alpha"),
    Case("pipeline-batch-size-zero", lambda t, w: _pipeline(batch_size=0), ValueError, match="batch_size"),
    Case("area-range-reversed", lambda t, w: _pipeline(area_range=(0.9, 0.1)), ValueError, match="area_range"),
    Case("area-range-above-one", lambda t, w: _pipeline(area_range=(0.5, 1.5)), ValueError, match="area_range"),
    Case(
        "input-shape-zero-channels",
        lambda t, w: keras_vit.VisionTransformer(**TINY, input_shape=(32, 32, 0)),
        ValueError,
        match="input_shape",
    ),
]
for _case in CASES:
    if _case.error is None:
        _case.error, _case.names_file = weights_errors.CheckpointError, True


PARAMS = [
    pytest.param(case, id=case.id, marks=[pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else [])
    for case in CASES
]


@one_backend
@pytest.mark.parametrize("case", PARAMS)
def test_hostile_input_is_refused(case, tmp_path, tiny_weights):
    assert issubclass(case.error, BaseException)
    with pytest.raises(case.error, match=case.match or None) as info:
        case.act(tmp_path, tiny_weights)
    if case.code is not None:
        assert info.value.code == case.code
    if case.names_file:
        assert str(tmp_path) in str(info.value)
    for name in case.absent:
        assert not (tmp_path / name).exists(), name
    assert not [name for name in os.listdir(tmp_path) if name.startswith(files.TEMP_PREFIX)]


@one_backend
def test_a_small_npz_bomb_under_an_unexpected_name_is_never_inflated(tmp_path, tiny_weights):
    # 1 GiB of zeros deflates to a few MB: the member is refused from its declared name before it is read.
    path = export.write_weights(
        tiny_weights, tmp_path / "bomb.npz", "official", loader.architecture_of_weights(tiny_weights, 2, (4, 4))
    )
    size = 1 << 30
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("junk/payload.npy", "w", force_zip64=True) as member:
            header = np.lib.format.header_data_from_array_1_0(np.zeros(0, "uint8"))
            header["shape"] = (size,)
            np.lib.format.write_array_header_1_0(member, header)
            chunk = bytes(1 << 22)
            for _ in range(size // len(chunk)):
                member.write(chunk)
    assert os.path.getsize(path) < 8 << 20  # a few MB on disk
    tracemalloc.start()
    try:
        with pytest.raises(weights_errors.CheckpointError, match="junk/payload"):
            loader.load_checkpoint(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak / 2**20:.0f} MiB allocated"


EMPTY_BATCH_OUTPUTS = [
    # (model keyword arguments, expected output shape for an empty batch of 40 x 32 images)
    (dict(include_top=True, input_shape=(40, 32, 3), classes=5), (0, 5)),
    (dict(include_top=False, pooling="gap"), (0, 16)),
    (dict(include_top=False), (0, 5, 4, 16)),
    (dict(include_top=False, return_sequence=True), (0, 21, 16)),
]


@pytest.mark.parametrize(("kwargs", "expected"), EMPTY_BATCH_OUTPUTS, ids=["head", "pooled", "feature-map", "sequence"])
def test_empty_batch_gives_an_empty_output_on_every_backend(kwargs, expected):
    model = keras_vit.VisionTransformer(patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, **kwargs)
    assert tuple(model(np.zeros((0, 40, 32, 3), "float32")).shape) == expected


# ------------------------------------------------------------------ the CLI never prints a traceback

CLI_ERRORS = [
    (["demo", "--model", "ViTXL99"], 2),
    (["demo", "--batch-size", "0"], 2),
    (["variants", "--classes", "-1"], 2),
    (["inspect", "--dpi", "0"], 2),
    (["inspect", "--discard-ratio", "1.5"], 2),
    (["download", "ViTTi16", "--weights", "no_such_tag"], 2),
    (["download", "ViTTi16", "--weights", "ftp://example.org/x.npz"], 2),
    (["download", "ViTTi16", "--image-size", "0", "--weights", "imagenet"], 2),
    (["convert", "{tmp}/missing.npz", "{tmp}/out.npz"], 1),
    (["convert", "{tmp}/bad.safetensors", "{tmp}/out.npz"], 2),
    (["convert", "{tmp}/bad.safetensors", "{tmp}/out.npz", "--num-heads", "0"], 2),
    (["convert", "{tmp}/bad.safetensors", "{tmp}/out.npz", "--image-size", "-32", "-32"], 2),
    (["predict", "{tmp}/missing.png", "--weights", "{tmp}/bad.safetensors"], 2),
    (["predict", "{tmp}/missing.png", "--top", "0"], 2),
    (["finetune", "--steps", "0", "--out", "{tmp}/run"], 2),
    (["finetune", "--batch-size", "0", "--out", "{tmp}/run"], 2),
    (["finetune", "--image-size", "-1", "--out", "{tmp}/run"], 2),
    (["finetune", "--mixup", "-1", "--out", "{tmp}/run"], 2),
]


@one_backend
@pytest.mark.parametrize("argv, code", CLI_ERRORS, ids=[" ".join(argv[:3]) for argv, _ in CLI_ERRORS])
def test_user_errors_end_in_one_line_without_traceback(argv, code, tmp_path, capsys):
    raw_safetensors(tmp_path / "bad.safetensors", OFFSETS_STRING, b"\0" * 8)
    argv = [arg.format(tmp=tmp_path) for arg in argv]
    try:
        returned = cli.main(argv)
    except SystemExit as exit_:  # argparse usage errors
        returned = exit_.code
    err = capsys.readouterr().err
    assert returned == code, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    if lines and lines[0].startswith("usage:"):
        lines = [line for line in lines if not line.startswith(("usage:", " "))]
    assert len(lines) == 1, err
    assert not (tmp_path / "out.npz").exists()


# ------------------------------------------------------------------ SIGKILL at a random point

KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    import keras_vit_cli as cli
    from keras_vit.pretrained import download
    kind, a, b, destination = sys.argv[1:5]
    for round_ in range(1000):
        source = a if round_ % 2 == 0 else b
        if kind == "download":
            download.download_url(source, directory=destination, filename="vit.bin", sha256=None)
            import os; os.remove(os.path.join(destination, "vit.bin"))
        elif kind == "export":
            assert cli.main(["convert", source, destination, "--to", "hf", "--num-heads", "2"]) == 0
        else:
            assert cli.main(["convert", source, destination, "--to", "timm", "--num-heads", "2"]) == 0
        print("done", flush=True)
    """
)


def _kill_at_random(args, tmp_path, rounds_before=1):
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
    process = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, *map(str, args)], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        for _ in range(rounds_before):
            while (line := process.stdout.readline()) and line.strip() != "done":
                pass
            assert line, "the writer stopped before its first complete round"
        time.sleep(random.uniform(0, 0.3))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()


def _two_checkpoints(tmp_path):
    paths = []
    for classes in (3, 7):
        paths.append(export.export_weights(tiny_model(classes, seed=classes), tmp_path / f"m{classes}.npz", "official"))
    return paths


@one_backend
@pytest.mark.parametrize("target", ["hf", "timm"])
def test_a_killed_convert_leaves_the_old_or_the_new_output(target, tmp_path):
    small, large = _two_checkpoints(tmp_path)
    destination = tmp_path / ("out" if target == "hf" else "out.safetensors")
    _kill_at_random(["export" if target == "hf" else "convert", small, large, destination], tmp_path)
    checkpoint = loader.load_checkpoint(destination)  # complete and readable
    classes = checkpoint.architecture(num_heads=2)["classes"]
    assert classes in (3, 7)
    if target == "hf":  # weights and config.json belong together
        config = json.loads((destination / "config.json").read_text())
        assert len(config["id2label"]) == classes
    if target == "hf":
        assert sorted(os.listdir(destination)) == ["config.json", "model.safetensors"]


@one_backend
def test_a_killed_download_leaves_nothing_or_the_complete_file(tmp_path):
    import http.server
    import threading

    payload = bytes(range(256)) * 8192  # 2 MiB, sent slowly so the kill lands mid-transfer

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

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/vit.bin"
        _kill_at_random(["download", url, url, tmp_path / "cache"], tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    cached = tmp_path / "cache" / "vit.bin"
    assert not cached.exists() or cached.read_bytes() == payload
    leftovers = [name for name in os.listdir(tmp_path / "cache") if not name.startswith(files.TEMP_PREFIX)]
    assert leftovers in ([], ["vit.bin"])  # beside, at most the killed download's temporary folder
