"""keras_vit.utils.files: outputs whole or absent, never replaced unasked (pure file I/O: one backend's run)."""

import os
import subprocess
import sys
import tempfile

import keras
import pytest

from keras_vit.utils import files

pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax", reason="pure file I/O: one backend's run is enough")


def _temporary(folder):
    return [name for name in os.listdir(folder) if name.startswith(files.TEMP_PREFIX)]


def test_a_failed_or_empty_write_keeps_the_old_file_and_leaves_nothing(tmp_path):
    target = tmp_path / "model.keras"
    files.write_text(target, "old")
    with pytest.raises(RuntimeError), files.atomic_file(target) as staged:
        assert os.path.basename(staged) == "model.keras"  # the target's own suffix
        files.write_text(staged, "half")
        raise RuntimeError("killed")
    with pytest.raises(OSError, match="x.json"), files.atomic_file(tmp_path / "x.json"):
        pass
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["model.keras"]


def test_directory_is_swapped_whole_and_refuses_foreign_files(tmp_path):
    target = tmp_path / "export"
    for version in ("1", "2"):
        with files.atomic_directory(target) as staged:
            files.write_text(os.path.join(staged, "model.safetensors"), version)
            files.write_text(os.path.join(staged, "config.json"), version)
    assert (target / "model.safetensors").read_text() == (target / "config.json").read_text() == "2"
    files.write_text(target / "README.md", "mine")
    with pytest.raises(FileExistsError, match="README.md"), files.atomic_directory(target) as staged:
        files.write_text(os.path.join(staged, "config.json"), "3")
    assert (target / "config.json").read_text() == "2" and (target / "README.md").exists()
    assert os.listdir(tmp_path) == ["export"]
    # The modes follow the umask.
    previous = os.umask(0o027)
    try:
        with files.atomic_directory(tmp_path / "folder") as staged:
            files.write_text(os.path.join(staged, "b.txt"), "y")
    finally:
        os.umask(previous)
    assert os.stat(tmp_path / "folder").st_mode & 0o777 == 0o750
    assert os.stat(tmp_path / "folder" / "b.txt").st_mode & 0o777 == 0o640


KILLED_WRITE = """
import importlib.util, os, sys
# keras_vit.utils.files alone: the child skips importing Keras.
spec = importlib.util.spec_from_file_location("files", sys.argv[1])
files = importlib.util.module_from_spec(spec)
spec.loader.exec_module(files)
if sys.argv[3] == "file":
    with files.atomic_file(sys.argv[2]) as staged:
        with open(staged, "w") as handle:
            handle.write("half")
            handle.flush()
            os._exit(9)
with files.atomic_directory(sys.argv[2]) as staged:
    files.write_text(os.path.join(staged, "config.json"), "new")
    os._exit(9)
"""


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_killed_write_leaves_the_old_output_and_only_a_temporary_folder(tmp_path, kind):
    target = tmp_path / "out"
    if kind == "file":
        files.write_text(target, "old")
    else:
        with files.atomic_directory(target) as staged:
            files.write_text(os.path.join(staged, "config.json"), "old")
    assert subprocess.run([sys.executable, "-c", KILLED_WRITE, files.__file__, str(target), kind]).returncode == 9
    assert (target if kind == "file" else target / "config.json").read_text() == "old"
    assert len(_temporary(tmp_path)) == 1 and sorted(os.listdir(tmp_path)) == sorted(["out", *_temporary(tmp_path)])
    files.write_text(tmp_path / "next.txt", "the leftover does not disturb the next write")


def test_a_file_set_lands_whole_or_not_at_all(tmp_path):
    # OpenVINO writes `x.bin` beside the `x.xml` it is given: both land under their own names.
    with files.atomic_files(tmp_path, ["x.xml", "x.bin"]) as staged:
        files.write_text(staged["x.xml"], "graph")
        files.write_text(os.path.splitext(staged["x.xml"])[0] + ".bin", "weights")
    assert (tmp_path / "x.bin").read_text() == "weights"
    with pytest.raises(RuntimeError), files.atomic_files(tmp_path, ["x.xml", "x.bin"]) as staged:
        files.write_text(staged["x.xml"], "new")
        raise RuntimeError("failed while writing x.bin")
    with pytest.raises(OSError, match="x.bin"), files.atomic_files(tmp_path, ["x.xml", "x.bin"]) as staged:
        files.write_text(staged["x.xml"], "new")
    (tmp_path / "folder").mkdir()
    with pytest.raises(IsADirectoryError), files.atomic_files(tmp_path, ["x.xml", "folder"]) as staged:
        for path in staged.values():
            files.write_text(path, "new")
    assert (tmp_path / "x.xml").read_text() == "graph"
    assert sorted(os.listdir(tmp_path)) == ["folder", "x.bin", "x.xml"]
    for names in ([], ["../a.txt"], [".."]):
        with pytest.raises(ValueError, match="names"), files.atomic_files(tmp_path, names):
            pass


def test_no_replace_outputs_refuse_a_file_there_before_or_after_the_work(tmp_path):
    with files.atomic_file(tmp_path / "free.onnx", replace=False) as staged:
        files.write_text(staged, "mine")
    assert (tmp_path / "free.onnx").read_text() == "mine"
    with pytest.raises(FileExistsError, match="free.onnx"), files.atomic_file(tmp_path / "free.onnx", replace=False):
        pytest.fail("the block ran")
    # An export checks its names first, then works for minutes: a file someone writes meanwhile stands too.
    with pytest.raises(FileExistsError, match="a.onnx"), files.atomic_file(tmp_path / "a.onnx", replace=False) as s:
        files.write_text(s, "mine")
        files.write_text(tmp_path / "a.onnx", "someone else's")
    with pytest.raises(FileExistsError, match="b.bin"), files.atomic_files(tmp_path, ["b.xml", "b.bin"], False) as s:
        for path in s.values():
            files.write_text(path, "mine")
        files.write_text(tmp_path / "b.bin", "someone else's")
    with pytest.raises(FileExistsError, match="saved"), files.atomic_directory(tmp_path / "saved", False) as s:
        files.write_text(os.path.join(s, "saved_model.pb"), "mine")
        os.mkdir(tmp_path / "saved")
    assert sorted(os.listdir(tmp_path)) == ["a.onnx", "b.bin", "free.onnx", "saved"]
    assert (tmp_path / "a.onnx").read_text() == (tmp_path / "b.bin").read_text() == "someone else's"
    assert os.listdir(tmp_path / "saved") == []


def _tiny_vit():
    import keras_vit

    return keras_vit.VisionTransformer(
        patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(16, 16, 3), classes=3
    )


def _private_file(folder):
    handle, path = tempfile.mkstemp(dir=folder)  # 0600, as safetensors' and other writers' own temporary files
    os.close(handle)
    return path


def _write(kind, out):
    """Writes one kind of output into `out` through the library's own writer; returns the paths it made."""
    from keras_vit.evaluation import report
    from keras_vit.pretrained import export_weights
    from keras_vit.training import atomic_save_model

    if kind == "file":
        with files.atomic_file(out / "a.bin") as staged:
            os.replace(_private_file(out), staged)
        return [out / "a.bin"]
    if kind == "folder":  # save_pretrained folders, SavedModels: a subfolder and a private file inside
        with files.atomic_directory(out / "saved") as staged:
            os.mkdir(os.path.join(staged, "variables"))
            os.replace(_private_file(out), os.path.join(staged, "variables", "data"))
        return [out / "saved", out / "saved" / "variables", out / "saved" / "variables" / "data"]
    if kind == "safetensors":
        return [export_weights(_tiny_vit(), out / "w.safetensors", "timm")]
    if kind == "npz":
        return [export_weights(_tiny_vit(), out / "w.npz", "official")]
    if kind == "hf":
        export_weights(_tiny_vit(), out / "hf", "hf")
        return [out / "hf", out / "hf" / "model.safetensors", out / "hf" / "config.json"]
    if kind == "keras":
        atomic_save_model(_tiny_vit(), out / "m.keras")
        return [out / "m.keras"]
    # metrics.json and its PNG figure, as `keras-vit evaluate` writes them
    metrics = {
        "fewshot": {"1": {"mean": 0.5, "std": 0.1}},
        "linear_probe": {"accuracy": 0.6},
        "knn": {"k": 1, "accuracy": 0.4},
    }
    return list(report.write_results(metrics, out).values())


@pytest.mark.parametrize("kind", ["file", "folder", "safetensors", "npz", "hf", "keras", "metrics_and_png"])
def test_every_output_gets_the_mode_of_the_users_umask(tmp_path, kind):
    if kind == "metrics_and_png":
        pytest.importorskip("matplotlib")
    previous = os.umask(0o022)
    try:
        paths = _write(kind, tmp_path)
    finally:
        os.umask(previous)
    modes = {os.path.basename(path): oct(os.stat(path).st_mode & 0o7777) for path in paths}
    assert modes == {os.path.basename(path): "0o755" if os.path.isdir(path) else "0o644" for path in paths}
