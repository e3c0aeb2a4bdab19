"""`@pytest.mark.alone` (tests/alone.py): such a test runs while the other xdist workers wait, and runs last.

Cost: two pytest runs with two xdist workers that import neither Keras nor a backend, ~10 s.
"""

import json
import os
import pathlib
import subprocess
import sys

import alone
import keras
import pytest

TESTS_DIR = pathlib.Path(__file__).resolve().parent

needs_one_run = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="no backend involved: one run")


def _intervals_of_a_run_with_two_workers(folder, with_locks):
    """Runs an `alone` test of 1.5 s first, beside six tests of 0.4 s, in two xdist workers; returns each test's
    (start, end) by name."""
    (folder / "conftest.py").write_text(
        f"import os, sys\nsys.path.insert(0, {str(TESTS_DIR)!r})\n"
        "import alone\n\n"
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'alone: runs alone')\n"
        f"    if {with_locks!r}:\n"
        "        config.pluginmanager.register(alone.Alone(os.path.dirname(__file__)), 'alone')\n"
    )
    record = (
        "import json, os, time\n\n"
        "def record(name, seconds):\n"
        "    start = time.time()\n"
        "    time.sleep(seconds)\n"
        "    with open(os.path.join(os.path.dirname(__file__), 'intervals.jsonl'), 'a') as out:\n"
        "        out.write(json.dumps([name, start, time.time()]) + '\\n')\n\n"
    )
    tests = "import pytest\n\n@pytest.mark.alone\ndef test_alone():\n    record('alone', 1.5)\n\n" + "".join(
        f"def test_other_{i}():\n    record('other_{i}', 0.4)\n\n" for i in range(6)
    )
    (folder / "test_run.py").write_text(record + tests)
    (folder / "intervals.jsonl").unlink(missing_ok=True)
    # The first test to gw0, the second to gw1, and so on: the alone test starts at once, beside other_0.
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "load"]
    result = subprocess.run(command + [str(folder)], capture_output=True, text=True, cwd=folder, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = (folder / "intervals.jsonl").read_text().splitlines()
    return {name: (start, end) for name, start, end in map(json.loads, lines)}


def _overlapping(intervals):
    start, end = intervals.pop("alone")
    return sorted(
        name for name, (other_start, other_end) in intervals.items() if other_start < end and start < other_end
    )


@needs_one_run
def test_an_alone_test_overlaps_no_other_test(tmp_path):
    assert _overlapping(_intervals_of_a_run_with_two_workers(tmp_path, with_locks=True)) == []
    # The check of the check: without the locks, the other worker runs its tests meanwhile.
    assert _overlapping(_intervals_of_a_run_with_two_workers(tmp_path, with_locks=False)) != []


def test_alone_tests_come_last_in_this_run(request):
    items = request.session.items
    flags = [alone.runs_alone(item) for item in items]
    assert flags == sorted(flags), "an alone test before another test"
    compiled = [item for item in items if item.name == "test_jit_compiled_fit_and_predict_on_a_one_block_model"]
    assert all(alone.runs_alone(item) for item in compiled)
    assert os.path.isdir(os.environ[alone.LOCKS_VARIABLE])
