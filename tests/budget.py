"""The test suite's time budget, enforced: a pytest plugin loaded by conftest.py.

`make test` must finish within 15 minutes on the idle 2-core machine, all three
backends. What keeps it there is a per-test limit: a test may take at most
`LIMIT_S` seconds (setup, call and teardown together, so a fixture is charged
to the test that first builds it), except the end-to-end tests named in
`SLOW_TESTS`, at most 8, each under `SLOW_LIMIT_S`. At the end of a run the
plugin prints the 25 slowest tests and fails the run when one is over its
limit, naming it and what to do.

The limits are for the idle 2-core machine they were set on. On a slower or
shared machine (a CI runner can be 2-3x slower) a test's limit stretches by the
largest of these measures of how slow the machine was:
- the whole run, the larger of two: the sum of every test's seconds against
  that sum in a run of the whole suite on the reference machine
  (`REFERENCE_TOTAL_S`), and the machine's own Python speed, a loop timed
  when the run starts and when it ends (tests/machine_speed.py), against the
  loop on the reference machine. Both catch what the machine does not report
  (a slower CPU, a runner throttled by its host, this VM's hours at half
  speed), and neither lets through a test that is slow only against the
  others: one test taking 60 s more moves the total by a few per cent, and
  the loop not at all. The loop also covers a backend whose run one test
  dominates (torch: the torch.compile test is a third of its total, so a
  slower hour shows in that test's time and hardly in the rest);
- the 1-minute load average per core when the test's report arrives, when
  above 1 (the suite's own two workers keep a 2-core machine at about 1);
- on a virtual machine whose host runs others and says so, 1 / (1 - the share
  of CPU time stolen by the host) since the previous report;
- how long the test's own threads waited for a CPU: the kernel counts, per
  thread, the time it was ready to run but not running (`schedstat`). Each
  test's (CPU + wait) / CPU is compared with the run's median of that ratio,
  so a test that ran through a minute in which something else took the CPUs
  stretches, while a test that merely sleeps does not (it waits for nothing):
  a shared runner can take the CPUs without a trace in the load average. A
  test slow inside its own process (the jax hybrid mixed-precision test: 11.8 s
  alone, 77 s in one run of the suite) waits for nothing and is not stretched.
  This stretch multiplies the first.
`KERAS_VIT_TEST_LOAD_SCALING=off` turns them all off.

`KERAS_VIT_TEST_LIMIT_S` overrides `LIMIT_S` (a slower machine; the check of
the check uses it). `KERAS_VIT_TEST_BUDGET` is `on` (fail) or `report` (list
the tests over their limit without failing); `ENFORCED_BY_DEFAULT` says which
applies when it is unset.
"""

import collections
import glob
import os
import statistics

import pytest
from machine_speed import REFERENCE_LOOP_S, loop_seconds

LIMIT_S = 30.0
SLOW_LIMIT_S = 90.0
MAX_SLOW_TESTS = 8
SHOWN = 25
# A test whose threads used less CPU than this tells nothing about waiting for one.
MIN_CPU_S = 1.0

# Whether a run fails on a test over its limit when KERAS_VIT_TEST_BUDGET is unset: on since the whole suite
# was measured within the limits on the idle machine (docs/development.md, "Test budget").
ENFORCED_BY_DEFAULT = True

# End-to-end tests allowed up to SLOW_LIMIT_S: node-id prefixes (no parameters), each with why it is slow.
# Idle seconds from a clean-clone run (docs/development.md).
SLOW_TESTS = {
    "tests/test_quiet.py::test_every_command_is_quiet_at_the_default_verbosity": "every keras-vit command in one "
    "fresh process per backend, stderr checked at the file-descriptor level (23-37 s)",
    "tests/test_readme.py::test_every_readme_block_runs": "every README block, in README order, in one process "
    "(61 s, tensorflow only): make run, three finetune runs, inspect, two evaluate runs, the Python snippets",
    "tests/test_multihost.py::test_finetune_in_two_processes_writes_once_and_resumes_on_every_process": "two JAX "
    "processes killed mid-run, then keras-vit launch resumes both: five interpreters (63 s, jax only)",
    "tests/test_models.py::test_jit_compiled_fit_and_predict_on_a_one_block_model": "torch.compile of a train and a "
    "predict step on CPU, graph breaks inside Keras included: on torch 88.1 s in a torch run at 1.14x the reference "
    "Python speed, run alone (tests/alone.py) and cold with the run's own empty TorchInductor cache and precompiled "
    "header (tests/conftest.py), as on a fresh machine; a few seconds elsewhere",
    "tests/test_benchmark_memory.py::test_tiny_run_writes_the_report_with_ratios": "the memory benchmark's worker "
    "processes, timm's rows on the torch run (33 s there)",
    "tests/test_quantization.py::test_classifier_quantizes_and_reloads": "int8, float8 and int4 of a classifier, "
    "each saved, revived in a fresh process and compiled (32 s on jax)",
    "tests/test_finetune.py::test_sigkill_mid_epoch_then_restart_resumes_from_backup": "a fresh keras-vit finetune "
    "process killed mid-epoch, then the resumed run to the end (23-30 s on tensorflow)",
}


# The sum of every test's seconds (setup, call and teardown) in a run of the whole suite with 2 workers on the
# idle reference machine, per backend (docs/development.md, "Test budget"). Update it when the suite grows.
REFERENCE_TOTAL_S = {"tensorflow": 572.0, "jax": 776.0, "torch": 289.0}


def load_per_core():
    """The 1-minute load average per core: about 1 while this suite's two workers run on an otherwise idle 2-core
    machine, 3 when other jobs make it three times as busy."""
    return os.getloadavg()[0] / (os.cpu_count() or 1)


def cpu_times():
    """(stolen, total) CPU ticks since boot from /proc/stat; (0, 0) where there is none (not Linux)."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    # user nice system idle iowait irq softirq steal [guest guest_nice, already counted in user and nice]
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_stretch(before, after):
    """1 / (1 - the share of CPU time the host took between two `cpu_times()` samples)."""
    stolen, total = after[0] - before[0], after[1] - before[1]
    return 1.0 / max(1.0 - stolen / total, 0.1) if total > 0 else 1.0


def thread_times():
    """{thread's schedstat path: (CPU seconds, seconds ready to run but waiting for a CPU)} of this process's
    threads, from Linux's /proc/self/task/*/schedstat; {} where there is none."""
    times = {}
    for path in glob.glob("/proc/self/task/*/schedstat"):
        try:
            with open(path) as stat:
                running, waiting = stat.read().split()[:2]
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
        times[path] = (int(running) / 1e9, int(waiting) / 1e9)
    return times


def cpu_and_wait_since(before, after):
    """(CPU seconds, waiting seconds) of the threads in `after` since `before` (a thread new since then counts
    from its start; one that ended meanwhile is lost, which only understates the wait)."""
    cpu = sum(running - before.get(thread, (0.0, 0.0))[0] for thread, (running, _) in after.items())
    wait = sum(waiting - before.get(thread, (0.0, 0.0))[1] for thread, (_, waiting) in after.items())
    return cpu, wait


def children_cpu_seconds():
    """CPU seconds of this process's child processes that have ended and been waited for (a compiler it ran, a
    fresh interpreter): the kernel adds them to the parent once it collects them."""
    times = os.times()
    return times.children_user + times.children_system


CPU_WAIT_PROPERTY = "keras_vit_budget_cpu_wait_s"
CHILDREN_CPU_PROPERTY = "keras_vit_budget_children_cpu_s"


class ThreadClock:
    """Runs where the tests run (each xdist worker, or the only process): adds to every test report the CPU
    seconds its threads used, the seconds they waited for a CPU, and the CPU seconds of the child processes it ran,
    for `Budget` to read in the controller."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        sample = getattr(item, "_keras_vit_budget_threads", None)
        if sample is not None:
            threads, children = thread_times(), children_cpu_seconds()
            properties = outcome.get_result().user_properties
            properties.append((CPU_WAIT_PROPERTY, cpu_and_wait_since(sample[0], threads)))
            properties.append((CHILDREN_CPU_PROPERTY, children - sample[1]))
            item._keras_vit_budget_threads = threads, children

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        item._keras_vit_budget_threads = thread_times(), children_cpu_seconds()


class Budget:
    def __init__(self, limit_s=None, enforce=True, scale_by_load=True, reference_total_s=None):
        assert len(SLOW_TESTS) <= MAX_SLOW_TESTS, "at most 8 end-to-end tests may exceed the per-test limit"
        self.limit_s = LIMIT_S if limit_s is None else limit_s
        self.enforce = enforce
        self.scale_by_load = scale_by_load
        self.reference_total_s = reference_total_s
        self.seconds = collections.defaultdict(float)
        self.stretch = collections.defaultdict(lambda: 1.0)
        self.cpu_and_wait = collections.defaultdict(lambda: (0.0, 0.0))
        self.children_cpu = collections.defaultdict(float)
        self._typical_waiting = None  # the run's median `waiting`, computed once after the last report
        self.cpu_sample = cpu_times()
        self.loop_samples = []  # `loop_seconds()` at the run's start and end

    def machine_slowness(self):
        """How many times slower than the reference machine this one ran Python, from the loop timed at the run's
        start and end (their mean: a run that slows down halfway gets half the difference), at least 1."""
        if not (self.scale_by_load and self.loop_samples):
            return 1.0
        return max(1.0, statistics.mean(self.loop_samples) / REFERENCE_LOOP_S)

    def run_slowness(self):
        """How many times slower this run was than the reference run, at least 1 (a partial run, or a faster
        machine, keeps the limits as they are): the larger of its tests' summed seconds against the reference
        run's and `machine_slowness`."""
        if not self.scale_by_load:
            return 1.0
        by_total = sum(self.seconds.values()) / self.reference_total_s if self.reference_total_s else 1.0
        return max(1.0, by_total, self.machine_slowness())

    def sample_machine_speed(self):
        if self.scale_by_load:
            self.loop_samples.append(loop_seconds())

    # First, before pytest-xdist starts its workers: with both cores busy importing frameworks the loop would time
    # the workers, not the machine.
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session):
        self.sample_machine_speed()

    def waiting(self, nodeid):
        """(CPU + wait) / CPU of `nodeid`'s threads: how many times longer its work took for want of a CPU."""
        cpu, wait = self.cpu_and_wait.get(nodeid, (0.0, 0.0))
        return (cpu + wait) / cpu if cpu >= MIN_CPU_S else None

    def cpu_starvation(self, nodeid):
        """`nodeid`'s `waiting` against the run's median, at least 1; 1 for a test with under `MIN_CPU_S` of CPU
        (nothing to tell) or when load scaling is off."""
        if self._typical_waiting is None:
            ratios = [ratio for ratio in map(self.waiting, self.cpu_and_wait) if ratio is not None]
            self._typical_waiting = statistics.median(ratios) if ratios else 0.0
        own = self.waiting(nodeid)
        if not (self.scale_by_load and self._typical_waiting and own):
            return 1.0
        return max(1.0, own / self._typical_waiting)

    def stretch_for(self, nodeid):
        return max(self.stretch[nodeid], self.run_slowness() * self.cpu_starvation(nodeid))

    def limit_for(self, nodeid):
        base = nodeid.split("[")[0]
        return (SLOW_LIMIT_S if base in SLOW_TESTS else self.limit_s) * self.stretch_for(nodeid)

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] += report.duration
        for name, value in getattr(report, "user_properties", ()):
            if name == CPU_WAIT_PROPERTY:
                before = self.cpu_and_wait[report.nodeid]
                self.cpu_and_wait[report.nodeid] = (before[0] + value[0], before[1] + value[1])
                self._typical_waiting = None
            elif name == CHILDREN_CPU_PROPERTY:
                self.children_cpu[report.nodeid] += value
        if self.scale_by_load:
            sample = cpu_times()
            busy = max(load_per_core(), steal_stretch(self.cpu_sample, sample))
            self.cpu_sample = sample
            self.stretch[report.nodeid] = max(self.stretch[report.nodeid], busy)

    def over_budget(self):
        return sorted(
            (nodeid for nodeid, seconds in self.seconds.items() if seconds > self.limit_for(nodeid)),
            key=self.seconds.get,
            reverse=True,
        )

    def pytest_terminal_summary(self, terminalreporter):
        slowest = sorted(self.seconds.items(), key=lambda item: item[1], reverse=True)[:SHOWN]
        if not slowest:
            return
        total = sum(self.seconds.values())
        reference = f" ({total / self.reference_total_s:.2f}x the reference run)" if self.reference_total_s else ""
        if self.loop_samples:
            loops = " and ".join(f"{loop:.2f}" for loop in self.loop_samples)
            reference += f"; Python loop {loops} s, reference {REFERENCE_LOOP_S:g} s"
        terminalreporter.section(
            f"the {len(slowest)} slowest tests (limit {self.limit_s:g} s, tests/budget.py); "
            f"all {len(self.seconds)} took {total:.0f} s{reference}"
        )
        for nodeid, seconds in slowest:
            starved = self.cpu_starvation(nodeid)
            note = f"  (its threads waited for a CPU x{starved:.2f} the run's median)" if starved >= 1.1 else ""
            terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}{note}")
        for nodeid in self.over_budget():
            stretch = self.stretch_for(nodeid)
            stretched = (
                f", stretched x{stretch:.2f} for a slow or busy machine: the run x{self.run_slowness():.2f} "
                f"(its Python loop x{self.machine_slowness():.2f}), "
                f"waiting for a CPU x{self.cpu_starvation(nodeid):.2f}, load or steal x{self.stretch[nodeid]:.2f}"
                if stretch >= 1.005  # printed to two decimals: x1.00 would explain nothing
                else ""
            )
            # Its threads' own seconds tell a test that did more work (CPU near the wall time) from one kept off
            # the CPU some other way (neither adds up to the wall time: blocked on a lock, a child process, I/O).
            cpu, wait = self.cpu_and_wait.get(nodeid, (0.0, 0.0))
            threads = f"; its threads ran {cpu:.1f} s and waited {wait:.1f} s for a CPU" if cpu else ""
            children = self.children_cpu.get(nodeid, 0.0)
            # A compiler or an interpreter it waited on: their CPU, where their waiting is not counted.
            threads += f"; its child processes ran {children:.1f} s" if children >= 0.05 else ""
            terminalreporter.write_line(
                f"OVER BUDGET: {nodeid} took {self.seconds[nodeid]:.1f} s (limit {self.limit_for(nodeid):.3g} s"
                f"{stretched}{threads}): "
                "make it cheaper (a smaller model, a shared fixture, no fresh process) or, for an end-to-end "
                "test, name it in tests/budget.py SLOW_TESTS",
                red=True,
            )

    def pytest_sessionfinish(self, session, exitstatus):
        # The workers have finished: the machine is as idle as at the start. Before the summary, which reads it.
        self.sample_machine_speed()
        if self.enforce and exitstatus == 0 and self.over_budget():
            session.exitstatus = 1


def from_environment(backend=None):
    """The check as the environment sets it, for a run on `backend` (whose reference total applies)."""
    limit = os.environ.get("KERAS_VIT_TEST_LIMIT_S")
    return Budget(
        limit_s=float(limit) if limit else None,
        enforce=os.environ.get("KERAS_VIT_TEST_BUDGET", "on" if ENFORCED_BY_DEFAULT else "report") == "on",
        scale_by_load=os.environ.get("KERAS_VIT_TEST_LOAD_SCALING", "on") != "off",
        reference_total_s=REFERENCE_TOTAL_S.get(backend),
    )
