"""The per-test time limit of tests/budget.py fails a run with a deliberately slow test.

Cost: three pytest subprocesses that import neither Keras nor a backend, ~3 s.
"""

import json
import os
import pathlib
import subprocess
import sys
import types

import budget
import keras
import pytest

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="no backend involved: one run")

TESTS_DIR = pathlib.Path(__file__).resolve().parent


def run_pytest(folder, limit_s):
    (folder / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS_DIR)!r})\n"
        "from budget import from_environment\n\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(from_environment(), 'keras_vit_budget')\n"
    )
    env = dict(os.environ, KERAS_VIT_TEST_LIMIT_S=str(limit_s), KERAS_VIT_TEST_BUDGET="on")
    env["KERAS_VIT_TEST_LOAD_SCALING"] = "off"  # the verdict must not depend on what else the machine runs
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(folder)]
    return subprocess.run(command, capture_output=True, text=True, cwd=folder, env=env, timeout=120)


def test_a_test_over_the_limit_fails_the_run(tmp_path):
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(1.2)\n")
    result = run_pytest(tmp_path, limit_s=0.5)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    assert "OVER BUDGET: test_slow.py::test_sleeps took 1.2 s (limit 0.5 s)" in result.stdout
    assert "slowest tests" in result.stdout


def test_a_run_within_the_limit_passes_and_lists_the_slowest(tmp_path):
    (tmp_path / "test_quick.py").write_text("def test_quick():\n    pass\n")
    result = run_pytest(tmp_path, limit_s=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test_quick.py::test_quick" in result.stdout
    assert "OVER BUDGET" not in result.stdout


def test_report_mode_lists_without_failing(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_VIT_TEST_BUDGET", "report")
    assert not budget.from_environment().enforce
    monkeypatch.setenv("KERAS_VIT_TEST_BUDGET", "on")
    assert budget.from_environment().enforce


def test_named_end_to_end_tests_get_the_longer_limit(monkeypatch):
    monkeypatch.setattr(budget, "SLOW_TESTS", {"tests/test_x.py::test_long": "why"})
    check = budget.Budget(limit_s=30)
    check.seconds.update({"tests/test_x.py::test_long[a]": 80.0, "tests/test_x.py::test_other": 31.0})
    assert check.over_budget() == ["tests/test_x.py::test_other"]
    check.seconds["tests/test_x.py::test_long[a]"] = 95.0
    assert check.over_budget() == ["tests/test_x.py::test_long[a]", "tests/test_x.py::test_other"]


def test_the_slow_list_is_short_and_names_real_tests():
    assert len(budget.SLOW_TESTS) <= budget.MAX_SLOW_TESTS
    for nodeid, why in budget.SLOW_TESTS.items():
        path, _, name = nodeid.partition("::")
        assert why and f"def {name}(" in (TESTS_DIR.parent / path).read_text(), nodeid


def test_a_busy_machine_stretches_the_limit(monkeypatch):
    load = [1.0]
    monkeypatch.setattr(budget, "load_per_core", lambda: load[0])
    monkeypatch.setattr(budget, "cpu_times", lambda: (0, 0))
    check = budget.Budget(limit_s=30)

    class Report:
        def __init__(self, nodeid, duration):
            self.nodeid, self.duration = nodeid, duration

    check.pytest_runtest_logreport(Report("tests/test_x.py::test_idle", 40.0))
    load[0] = 3.0  # three times as busy as the suite alone makes it
    check.pytest_runtest_logreport(Report("tests/test_x.py::test_busy", 80.0))
    assert check.limit_for("tests/test_x.py::test_busy") == 90.0
    assert check.over_budget() == ["tests/test_x.py::test_idle"]
    assert budget.Budget(limit_s=30, scale_by_load=False).limit_for("tests/test_x.py::test_busy") == 30.0


def test_cpu_time_stolen_by_the_host_stretches_the_limit(monkeypatch):
    # A virtual machine whose host runs other machines: its load average looks idle, its CPU time is stolen.
    assert budget.steal_stretch((100, 1000), (100, 2000)) == 1.0
    assert budget.steal_stretch((100, 1000), (600, 2000)) == 2.0  # half of the time since the last report
    assert budget.steal_stretch((0, 0), (0, 0)) == 1.0
    stolen, total = budget.cpu_times()
    assert 0 <= stolen <= total
    samples = iter([(0, 0), (500, 1000)])
    # The last sample repeats: without xdist (-n 0) the live check of this very run samples through it too.
    monkeypatch.setattr(budget, "cpu_times", lambda: next(samples, (500, 1000)))
    monkeypatch.setattr(budget, "load_per_core", lambda: 0.5)
    check = budget.Budget(limit_s=30)

    class Report:
        nodeid, duration = "tests/test_x.py::test_stolen", 50.0

    check.pytest_runtest_logreport(Report())
    assert check.limit_for(Report.nodeid) == 60.0 and check.over_budget() == []


def test_a_slow_run_stretches_every_limit_by_its_total(monkeypatch):
    # A runner whose host slows it without saying so: an idle load average, no stolen time, every test slower.
    monkeypatch.setattr(budget, "load_per_core", lambda: 0.5)
    monkeypatch.setattr(budget, "cpu_times", lambda: (0, 0))
    check = budget.Budget(limit_s=30, reference_total_s=100.0)
    check.seconds.update({"tests/test_x.py::test_a": 40.0, "tests/test_x.py::test_b": 20.0})
    assert check.run_slowness() == 1.0 and check.over_budget() == ["tests/test_x.py::test_a"]  # 60 s of 100
    check.seconds.update({f"tests/test_x.py::test_{i}": 10.0 for i in range(9)})  # the whole run: 1.5x
    assert check.run_slowness() == 1.5 and check.limit_for("tests/test_x.py::test_a") == 45.0
    assert check.over_budget() == []
    check.seconds["tests/test_x.py::test_b"] = 80.0  # slow against the others: it moves the total by 40 %
    assert check.over_budget() == ["tests/test_x.py::test_b"]
    assert budget.Budget(limit_s=30, reference_total_s=100.0, scale_by_load=False).run_slowness() == 1.0


def test_each_backend_run_compares_with_its_own_reference(monkeypatch):
    monkeypatch.delenv("KERAS_VIT_TEST_LIMIT_S", raising=False)
    for backend, total in budget.REFERENCE_TOTAL_S.items():
        assert budget.from_environment(backend).reference_total_s == total > 0
    assert budget.from_environment("numpy").run_slowness() == 1.0  # no reference: the limits as they are


def test_a_test_whose_threads_waited_for_a_cpu_stretches_its_limit(monkeypatch):
    # A shared runner that gives the CPUs to something else for a minute: nothing in the load average, the test's
    # threads stood ready to run (Linux counts it per thread) for as long again as they ran.
    monkeypatch.setattr(budget, "load_per_core", lambda: 0.5)
    monkeypatch.setattr(budget, "cpu_times", lambda: (0, 0))
    check = budget.Budget(limit_s=30)
    check.seconds.update({f"tests/test_x.py::test_{i}": 10.0 for i in range(5)})
    check.cpu_and_wait.update({f"tests/test_x.py::test_{i}": (8.0, 2.0) for i in range(5)})  # the run: 1.25
    check.seconds.update({"tests/test_x.py::test_starved": 50.0, "tests/test_x.py::test_sleeps": 40.0})
    check.cpu_and_wait["tests/test_x.py::test_starved"] = (20.0, 30.0)  # 2.5: twice the run's median
    check.cpu_and_wait["tests/test_x.py::test_sleeps"] = (0.1, 0.0)  # waited for nothing: no stretch
    assert check.cpu_starvation("tests/test_x.py::test_starved") == 2.0
    assert check.limit_for("tests/test_x.py::test_starved") == 60.0
    assert check.cpu_starvation("tests/test_x.py::test_sleeps") == 1.0
    assert check.cpu_starvation("tests/test_x.py::test_0") == 1.0
    assert check.over_budget() == ["tests/test_x.py::test_sleeps"]
    check.seconds["tests/test_x.py::test_starved"] = 61.0  # beyond even the stretched limit
    assert check.over_budget() == ["tests/test_x.py::test_starved", "tests/test_x.py::test_sleeps"]
    assert budget.Budget(limit_s=30, scale_by_load=False).cpu_starvation("tests/test_x.py::test_starved") == 1.0


def _only_over_budget_line(check):
    lines = []
    reporter = type("Reporter", (), {"section": lambda self, title: None})()
    reporter.write_line = lambda line, **markup: lines.append(line)
    check.pytest_terminal_summary(reporter)
    (over,) = [line for line in lines if line.startswith("OVER BUDGET")]
    return over


def test_an_over_budget_line_says_how_long_the_threads_ran_and_waited(monkeypatch):
    # A test that took four times its CPU without waiting for one was held up by something else: the line says so.
    monkeypatch.setattr(budget, "load_per_core", lambda: 0.5)
    monkeypatch.setattr(budget, "cpu_times", lambda: (0, 0))
    check = budget.Budget(limit_s=30)
    check.seconds["tests/test_x.py::test_held_up"] = 80.0
    check.cpu_and_wait["tests/test_x.py::test_held_up"] = (20.0, 1.5)
    over = _only_over_budget_line(check)
    assert "took 80.0 s (limit 30 s; its threads ran 20.0 s and waited 1.5 s for a CPU)" in over


def test_an_over_budget_line_says_how_long_its_child_processes_ran(monkeypatch):
    # A test that waits on compilers it starts (torch.compile runs g++): their CPU, which its threads do not show.
    monkeypatch.setattr(budget, "load_per_core", lambda: 0.5)
    monkeypatch.setattr(budget, "cpu_times", lambda: (0, 0))
    check = budget.Budget(limit_s=30)
    check.seconds["tests/test_x.py::test_compiles"] = 80.0
    check.cpu_and_wait["tests/test_x.py::test_compiles"] = (40.0, 2.0)
    check.children_cpu["tests/test_x.py::test_compiles"] = 36.5
    over = _only_over_budget_line(check)
    assert "its threads ran 40.0 s and waited 2.0 s for a CPU; its child processes ran 36.5 s)" in over


def test_a_machine_running_python_slowly_stretches_every_limit(monkeypatch):
    # This VM at some hours: nothing else running, no stolen time, plain Python at half its usual speed.
    monkeypatch.setattr(budget, "load_per_core", lambda: 0.5)
    monkeypatch.setattr(budget, "cpu_times", lambda: (0, 0))

    def finished_run(loops):
        samples = iter(loops)
        monkeypatch.setattr(budget, "loop_seconds", lambda: next(samples))
        check = budget.Budget(limit_s=30)
        check.pytest_sessionstart(session=None)
        check.seconds.update({"tests/test_x.py::test_a": 40.0, "tests/test_x.py::test_b": 5.0})
        session = types.SimpleNamespace(exitstatus=0)
        check.pytest_sessionfinish(session, exitstatus=0)
        return check, session.exitstatus

    reference = budget.REFERENCE_LOOP_S
    # Half speed at the start, full speed at the end: x1.5 on average, a 45 s limit.
    check, exitstatus = finished_run([2 * reference, reference])
    assert check.loop_samples == [2 * reference, reference]
    assert check.machine_slowness() == pytest.approx(1.5) and check.run_slowness() == pytest.approx(1.5)
    assert check.limit_for("tests/test_x.py::test_a") == pytest.approx(45.0)
    assert check.over_budget() == [] and exitstatus == 0
    # The same run at the reference speed, or faster, fails: a faster machine keeps the limits as they are.
    for loops in ([reference, reference], [reference / 2, reference / 2]):
        check, exitstatus = finished_run(loops)
        assert check.machine_slowness() == 1.0
        assert check.over_budget() == ["tests/test_x.py::test_a"] and exitstatus == 1
    # Load scaling off: the loop is not even timed.
    off = budget.Budget(limit_s=30, scale_by_load=False)
    off.pytest_sessionstart(session=None)
    assert off.loop_samples == [] and off.machine_slowness() == 1.0


def test_the_loop_measures_this_machine():
    assert 0 < budget.loop_seconds(steps=100_000) < 5


def test_cpu_and_wait_count_new_threads_and_skip_ended_ones():
    before = {"a": (1.0, 0.5), "ended": (4.0, 4.0)}
    after = {"a": (3.0, 1.5), "new": (2.0, 0.25)}
    assert budget.cpu_and_wait_since(before, after) == (4.0, 1.25)


def test_each_report_carries_its_threads_cpu_and_wait_and_its_children_cpu(tmp_path):
    # The live path: the worker-side plugin's numbers reach the report the controller reads.
    (tmp_path / "conftest.py").write_text(
        f"import json, sys\nsys.path.insert(0, {str(TESTS_DIR)!r})\n"
        "import budget\n\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(budget.ThreadClock(), 'clock')\n\n"
        "def pytest_runtest_logreport(report):\n"
        "    with open('reports.jsonl', 'a') as out:\n"
        "        out.write(json.dumps([report.when, report.user_properties]) + '\\n')\n"
    )
    (tmp_path / "test_busy.py").write_text(
        "import subprocess, sys, time\n\ndef test_busy():\n    end = time.process_time() + 0.5\n"
        "    while time.process_time() < end:\n        pass\n"
        "    busy = 'import time\\nend = time.process_time() + 0.5\\nwhile time.process_time() < end:\\n    pass'\n"
        "    subprocess.run([sys.executable, '-c', busy], check=True)\n"
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    reports = {when: dict(properties) for when, properties in map(json.loads, open(tmp_path / "reports.jsonl"))}
    assert sorted(reports) == ["call", "setup", "teardown"]
    cpu, wait = reports["call"][budget.CPU_WAIT_PROPERTY]
    # The child interpreter's half second of busy loop, plus its start-up.
    assert 0.45 <= reports["call"][budget.CHILDREN_CPU_PROPERTY] < 5
    assert 0 <= reports["setup"][budget.CHILDREN_CPU_PROPERTY] < 0.45
    if budget.thread_times():  # Linux: the busy loop's half second of CPU, counted by the kernel
        assert 0.45 <= cpu < 5 and wait >= 0
    else:
        assert (cpu, wait) == (0, 0)
