"""The test suite's time budget, enforced: a pytest plugin loaded by conftest.py.

`make test` must finish within 15 minutes on the idle 2-core machine, all three
backends. What keeps it there is a per-test limit: a test may take at most
`LIMIT_S` seconds (setup, call and teardown together, so a fixture is charged
to the test that first builds it), except the end-to-end tests named in
`SLOW_TESTS`, at most 8, each under `SLOW_LIMIT_S`. At the end of a run the
plugin prints the 25 slowest tests and fails the run when one is over its
limit, naming it and what to do.

The limits are for a machine that runs nothing but this suite. On a shared
machine (a CI runner can be 2-3x slower) a test's limit stretches by the load:
the 1-minute load average per core when its report arrives, when above 1 (the
suite's own two workers keep a 2-core machine at about 1).
`KERAS_VIT_TEST_LOAD_SCALING=off` turns that off.

`KERAS_VIT_TEST_LIMIT_S` overrides `LIMIT_S` (a slower machine; the check of
the check uses it). `KERAS_VIT_TEST_BUDGET` is `on` (fail) or `report` (list
the tests over their limit without failing); `ENFORCED_BY_DEFAULT` says which
applies when it is unset.
"""

import collections
import os

LIMIT_S = 30.0
SLOW_LIMIT_S = 90.0
MAX_SLOW_TESTS = 8
SHOWN = 25

# Whether a run fails on a test over its limit when KERAS_VIT_TEST_BUDGET is unset. Off until the whole
# suite has been measured within the limits on the idle machine (docs/development.md, "Test budget").
ENFORCED_BY_DEFAULT = False

# End-to-end tests allowed up to SLOW_LIMIT_S: node-id prefixes (no parameters), each with why it is slow.
SLOW_TESTS = {
    "tests/test_quiet.py::test_every_command_is_quiet_at_the_default_verbosity": "every keras-vit command in one "
    "fresh process per backend, stderr checked at the file-descriptor level (60 s on tensorflow: three exports)",
}


def load_per_core():
    """The 1-minute load average per core: about 1 while this suite's two workers run on an otherwise idle 2-core
    machine, 3 when other jobs make it three times as busy."""
    return os.getloadavg()[0] / (os.cpu_count() or 1)


class Budget:
    def __init__(self, limit_s=None, enforce=True, scale_by_load=True):
        assert len(SLOW_TESTS) <= MAX_SLOW_TESTS, "at most 8 end-to-end tests may exceed the per-test limit"
        self.limit_s = LIMIT_S if limit_s is None else limit_s
        self.enforce = enforce
        self.scale_by_load = scale_by_load
        self.seconds = collections.defaultdict(float)
        self.stretch = collections.defaultdict(lambda: 1.0)

    def limit_for(self, nodeid):
        base = nodeid.split("[")[0]
        return (SLOW_LIMIT_S if base in SLOW_TESTS else self.limit_s) * self.stretch[nodeid]

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] += report.duration
        if self.scale_by_load:
            self.stretch[report.nodeid] = max(self.stretch[report.nodeid], load_per_core())

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
        terminalreporter.section(f"the {len(slowest)} slowest tests (limit {self.limit_s:g} s, tests/budget.py)")
        for nodeid, seconds in slowest:
            terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")
        for nodeid in self.over_budget():
            stretched = f", stretched x{self.stretch[nodeid]:.1f} by the load" if self.stretch[nodeid] > 1 else ""
            terminalreporter.write_line(
                f"OVER BUDGET: {nodeid} took {self.seconds[nodeid]:.1f} s (limit {self.limit_for(nodeid):.3g} s"
                f"{stretched}): "
                "make it cheaper (a smaller model, a shared fixture, no fresh process) or, for an end-to-end "
                "test, name it in tests/budget.py SLOW_TESTS",
                red=True,
            )

    def pytest_sessionfinish(self, session, exitstatus):
        if self.enforce and exitstatus == 0 and self.over_budget():
            session.exitstatus = 1


def from_environment():
    limit = os.environ.get("KERAS_VIT_TEST_LIMIT_S")
    return Budget(
        limit_s=float(limit) if limit else None,
        enforce=os.environ.get("KERAS_VIT_TEST_BUDGET", "on" if ENFORCED_BY_DEFAULT else "report") == "on",
        scale_by_load=os.environ.get("KERAS_VIT_TEST_LOAD_SCALING", "on") != "off",
    )
