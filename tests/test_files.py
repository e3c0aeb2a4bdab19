"""keras_vit.utils.files: outputs whole or absent, never replaced unasked (pure file I/O: one backend's run)."""

import os
import subprocess
import sys

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
