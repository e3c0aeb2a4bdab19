"""keras_vit.utils.files: the one way outputs are written (pure file I/O: runs on one backend only)."""

import os
import subprocess
import sys
import textwrap

import keras
import pytest

from keras_vit.utils import files

pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax", reason="pure file I/O: one backend's run is enough")


def _temporary(folder):
    return [name for name in os.listdir(folder) if name.startswith(files.TEMP_PREFIX)]


def test_file_mode_follows_umask(tmp_path):
    previous = os.umask(0o027)
    try:
        path = files.write_text(tmp_path / "a.txt", "x")
        with files.atomic_directory(tmp_path / "folder") as staged:
            files.write_text(os.path.join(staged, "b.txt"), "y")
    finally:
        os.umask(previous)
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert os.stat(tmp_path / "folder").st_mode & 0o777 == 0o750
    assert os.stat(tmp_path / "folder" / "b.txt").st_mode & 0o777 == 0o640


def test_failure_keeps_old_file_and_leaves_nothing(tmp_path):
    target = tmp_path / "model.keras"
    files.write_text(target, "old")
    with pytest.raises(RuntimeError), files.atomic_file(target) as staged:
        assert os.path.basename(staged) == "model.keras"  # writers that read the suffix see the target's own
        with open(staged, "w") as handle:
            handle.write("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["model.keras"]


def test_nothing_written_is_an_error(tmp_path):
    with pytest.raises(OSError, match="Nothing was written"), files.atomic_file(tmp_path / "x.json"):
        pass
    assert os.listdir(tmp_path) == []


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
    assert sorted(os.listdir(tmp_path)) == ["export"]


KILLED_WRITE = """
import importlib.util, os, sys
# keras_vit.utils.files is standard library only: loaded alone, the child skips importing Keras.
spec = importlib.util.spec_from_file_location("files", sys.argv[1])
files = importlib.util.module_from_spec(spec)
spec.loader.exec_module(files)
target = sys.argv[2]
if sys.argv[3] == "file":
    with files.atomic_file(target) as staged:
        with open(staged, "w") as handle:
            handle.write("half")
            handle.flush()
            os._exit(9)
with files.atomic_directory(target) as staged:
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
    script = textwrap.dedent(KILLED_WRITE)
    assert subprocess.run([sys.executable, "-c", script, files.__file__, str(target), kind]).returncode == 9
    assert (target if kind == "file" else target / "config.json").read_text() == "old"
    assert len(_temporary(tmp_path)) == 1 and sorted(os.listdir(tmp_path)) == sorted(["out", *_temporary(tmp_path)])
    files.write_text(tmp_path / "next.txt", "the next write is not disturbed by the leftover")
    assert (tmp_path / "next.txt").read_text().startswith("the next write")


def test_file_set_failure_or_bad_names_change_nothing(tmp_path):
    files.write_text(tmp_path / "a.txt", "old")
    with pytest.raises(RuntimeError), files.atomic_files(tmp_path, ["a.txt", "b.txt"]) as staged:
        files.write_text(staged["a.txt"], "new")
        raise RuntimeError("failed while writing b.txt")
    with pytest.raises(OSError, match="b.txt"), files.atomic_files(tmp_path, ["a.txt", "b.txt"]) as staged:
        files.write_text(staged["a.txt"], "new")
    (tmp_path / "b.txt").mkdir()
    with pytest.raises(IsADirectoryError, match="folder"), files.atomic_files(tmp_path, ["a.txt", "b.txt"]) as staged:
        for path in staged.values():
            files.write_text(path, "new")
    assert (tmp_path / "a.txt").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]
    for names in ([], ["../a.txt"], [".."]):
        with pytest.raises(ValueError, match="names"), files.atomic_files(tmp_path, names):
            pass


def test_file_set_is_written_with_names_a_writer_derives_from_each_other(tmp_path):
    # OpenVINO writes `x.bin` beside the `x.xml` it is given: both must land under their own names.
    with files.atomic_files(tmp_path, ["x.xml", "x.bin"]) as staged:
        files.write_text(staged["x.xml"], "graph")
        files.write_text(os.path.splitext(staged["x.xml"])[0] + ".bin", "weights")
    assert (tmp_path / "x.bin").read_text() == "weights"
    assert sorted(os.listdir(tmp_path)) == ["x.bin", "x.xml"]


def test_no_replace_outputs_are_written_when_the_names_are_free(tmp_path):
    with files.atomic_file(tmp_path / "a.onnx", replace=False) as staged:
        files.write_text(staged, "mine")
    with files.atomic_files(tmp_path, ["b.xml", "b.bin"], replace=False) as staged:
        for path in staged.values():
            files.write_text(path, "mine")
    with files.atomic_directory(tmp_path / "saved", replace=False) as staged:
        files.write_text(os.path.join(staged, "saved_model.pb"), "mine")
    assert sorted(os.listdir(tmp_path)) == ["a.onnx", "b.bin", "b.xml", "saved"]
    assert (tmp_path / "b.bin").read_text() == (tmp_path / "saved" / "saved_model.pb").read_text() == "mine"


def test_no_replace_outputs_refuse_a_file_there_before_or_after_the_work(tmp_path):
    # An export checks its names first, then works for minutes: a file someone writes meanwhile must stand too.
    files.write_text(tmp_path / "taken.onnx", "someone else's")
    with pytest.raises(FileExistsError, match="taken.onnx"), files.atomic_file(tmp_path / "taken.onnx", replace=False):
        pytest.fail("the block must not run when the name is taken")
    with (
        pytest.raises(FileExistsError, match="a.onnx"),
        files.atomic_file(tmp_path / "a.onnx", replace=False) as staged,
    ):
        files.write_text(staged, "mine")
        files.write_text(tmp_path / "a.onnx", "someone else's")
    with (
        pytest.raises(FileExistsError, match="b.bin"),
        files.atomic_files(tmp_path, ["b.xml", "b.bin"], replace=False) as staged,
    ):
        for path in staged.values():
            files.write_text(path, "mine")
        files.write_text(tmp_path / "b.bin", "someone else's")
    with (
        pytest.raises(FileExistsError, match="saved"),
        files.atomic_directory(tmp_path / "saved", replace=False) as staged,
    ):
        files.write_text(os.path.join(staged, "saved_model.pb"), "mine")
        os.mkdir(tmp_path / "saved")
    assert sorted(os.listdir(tmp_path)) == ["a.onnx", "b.bin", "saved", "taken.onnx"]
    assert (tmp_path / "a.onnx").read_text() == (tmp_path / "b.bin").read_text() == "someone else's"
    assert os.listdir(tmp_path / "saved") == []
