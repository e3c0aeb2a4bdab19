"""keras_vit.utils.files: the one way outputs are written (pure file I/O: runs on one backend only)."""

import os
import shutil
import subprocess
import sys
import textwrap

import keras
import pytest

from keras_vit.utils import files

pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax", reason="pure file I/O: one backend's run is enough")


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


def test_stale_staging_of_a_killed_process_is_cleaned_and_old_folder_restored(tmp_path):
    # A child stages a folder swap and dies (os._exit) between the two renames of the fallback path.
    target = tmp_path / "export"
    with files.atomic_directory(target) as staged:
        files.write_text(os.path.join(staged, "config.json"), "old")
    script = textwrap.dedent(
        f"""
        import os
        from keras_vit.utils import files
        files._exchange = lambda a, b: False
        real_rename = os.rename
        def rename(source, destination):
            real_rename(source, destination)
            if destination.endswith(".previous"):
                os._exit(9)
        os.rename = rename
        with files.atomic_directory({str(target)!r}) as staged:
            files.write_text(os.path.join(staged, "config.json"), "new")
        """
    )
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    assert subprocess.run([sys.executable, "-c", script], env=env).returncode == 9
    assert not target.exists()
    (leftover,) = os.listdir(tmp_path)
    assert files.is_temporary(leftover)
    files.write_text(tmp_path / "other.txt", "next run")  # any write into the folder cleans up
    assert sorted(os.listdir(tmp_path)) == ["export", "other.txt"]
    assert (target / "config.json").read_text() == "old"


def test_staging_of_a_running_process_is_left_alone(tmp_path):
    alive = tmp_path / f"{files.TEMP_PREFIX}{os.getpid()}.{files._HOST}.beef"
    alive.mkdir()
    assert files.clean_stale(tmp_path) == []
    assert alive.exists()


def _kill_during_file_set(folder, kill_at_rename):
    """Runs a child that writes the set (a.txt, b.txt) = "new" and dies at its `kill_at_rename`-th rename."""
    script = textwrap.dedent(
        f"""
        import importlib.util, os
        # keras_vit.utils.files is standard library only: loaded alone, the child skips importing Keras.
        spec = importlib.util.spec_from_file_location("files", {files.__file__!r})
        files = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(files)
        real_replace, count = os.replace, [0]
        def replace(source, destination):
            count[0] += 1
            if count[0] == {kill_at_rename}:
                os._exit(9)
            real_replace(source, destination)
        os.replace = replace
        with files.atomic_files({str(folder)!r}, ["a.txt", "b.txt"]) as staged:
            for path in staged.values():
                files.write_text(path, "new")
        """
    )
    assert subprocess.run([sys.executable, "-c", script]).returncode == 9


@pytest.mark.parametrize(
    ("kill_at_rename", "expected"),
    # The staged files' own atomic writes are renames 1 and 2; 3 and 4 put the set in place.
    [(2, "old"), (3, "new"), (4, "new")],
    ids=["before-commit", "first-of-set", "second-of-set"],
)
def test_file_set_killed_anywhere_is_all_old_or_all_new_after_the_next_write(tmp_path, kill_at_rename, expected):
    for name in ("a.txt", "b.txt", "history.csv"):
        files.write_text(tmp_path / name, "old")
    _kill_during_file_set(tmp_path, kill_at_rename)
    files.write_text(tmp_path / "history.csv", "next run")  # any write into the folder finishes or drops the set
    assert (tmp_path / "a.txt").read_text() == (tmp_path / "b.txt").read_text() == expected
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt", "history.csv"]


def test_file_set_failure_or_bad_names_change_nothing(tmp_path):
    files.write_text(tmp_path / "a.txt", "old")
    with pytest.raises(RuntimeError), files.atomic_files(tmp_path, ["a.txt", "b.txt"]) as staged:
        files.write_text(staged["a.txt"], "new")
        raise RuntimeError("failed while writing b.txt")
    with pytest.raises(OSError, match="b.txt"), files.atomic_files(tmp_path, ["a.txt", "b.txt"]) as staged:
        files.write_text(staged["a.txt"], "new")
    (tmp_path / "b.txt").mkdir()
    with pytest.raises(FileExistsError, match="folder"), files.atomic_files(tmp_path, ["a.txt", "b.txt"]) as staged:
        for path in staged.values():
            files.write_text(path, "new")
    assert (tmp_path / "a.txt").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]
    for names in ([], ["../a.txt"], ["a.txt", "a.txt"], [".commit"]):
        with pytest.raises(ValueError, match="names"), files.atomic_files(tmp_path, names):
            pass


@pytest.fixture(params=["renameat2", "hard-link", "no-links"])
def no_replace_primitive(request, monkeypatch):
    """The ways a no-replace commit is made: Linux renameat2, else a hard link, else a check just before."""
    if request.param != "renameat2":
        monkeypatch.setattr(files, "_renameat2", lambda source, destination, flag: False)
    if request.param == "no-links":

        def no_link(source, destination):
            raise PermissionError(1, "Operation not permitted")  # as on file systems without hard links

        monkeypatch.setattr(os, "link", no_link)
    return request.param


def test_no_replace_outputs_are_written_when_the_names_are_free(tmp_path, no_replace_primitive):
    with files.atomic_file(tmp_path / "a.onnx", replace=False) as staged:
        files.write_text(staged, "mine")
    with files.atomic_files(tmp_path, ["b.xml", "b.bin"], replace=False) as staged:
        for path in staged.values():
            files.write_text(path, "mine")
    with files.atomic_directory(tmp_path / "saved", replace=False) as staged:
        files.write_text(os.path.join(staged, "saved_model.pb"), "mine")
    assert sorted(os.listdir(tmp_path)) == ["a.onnx", "b.bin", "b.xml", "saved"]
    assert (tmp_path / "b.bin").read_text() == (tmp_path / "saved" / "saved_model.pb").read_text() == "mine"


def test_no_replace_outputs_leave_a_file_that_appeared_while_they_were_written(tmp_path, no_replace_primitive):
    # An export checks its names first, then works for minutes: a file someone writes meanwhile must stand.
    def someone_elses(path, folder=False):
        os.mkdir(path) if folder else files.write_text(path, "someone else's")

    with (
        pytest.raises(FileExistsError, match="a.onnx appeared while"),
        files.atomic_file(tmp_path / "a.onnx", replace=False) as staged,
    ):
        files.write_text(staged, "mine")
        someone_elses(tmp_path / "a.onnx")
    # The set's second name is taken: its first, already renamed into place, is taken back.
    with (
        pytest.raises(FileExistsError, match="b.bin appeared while"),
        files.atomic_files(tmp_path, ["b.xml", "b.bin"], replace=False) as staged,
    ):
        for path in staged.values():
            files.write_text(path, "mine")
        someone_elses(tmp_path / "b.bin")
    for folder in (False, True):  # an empty folder is replaced by a plain rename: it must stand too
        with (
            pytest.raises(FileExistsError, match="saved appeared while"),
            files.atomic_directory(tmp_path / "saved", replace=False) as staged,
        ):
            files.write_text(os.path.join(staged, "saved_model.pb"), "mine")
            someone_elses(tmp_path / "saved", folder)
        shutil.rmtree(tmp_path / "saved") if folder else os.remove(tmp_path / "saved")
    assert sorted(os.listdir(tmp_path)) == ["a.onnx", "b.bin"]
    assert (tmp_path / "a.onnx").read_text() == (tmp_path / "b.bin").read_text() == "someone else's"


@pytest.mark.parametrize("taken", [False, True], ids=["names-free", "a-name-taken"])
def test_a_killed_no_replace_set_is_finished_or_withdrawn_by_the_next_write(tmp_path, taken):
    # Killed after the commit, between the renames: v.xml is in place, v.bin still staged.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    staging = tmp_path / f"{files.TEMP_PREFIX}{int(dead.stdout)}.{files._HOST}.dead"
    staging.mkdir()
    (staging / ".commit").write_text('{"names": ["v.xml", "v.bin"]}')
    (staging / "v.bin").write_text("new")
    (tmp_path / "v.xml").write_text("new")
    if taken:
        (tmp_path / "v.bin").write_text("someone else's")
    files.write_text(tmp_path / "history.csv", "next run")
    expected = ["history.csv", "v.bin"] if taken else ["history.csv", "v.bin", "v.xml"]
    assert sorted(os.listdir(tmp_path)) == expected
    assert (tmp_path / "v.bin").read_text() == ("someone else's" if taken else "new")
