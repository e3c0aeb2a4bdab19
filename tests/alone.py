"""`@pytest.mark.alone`: a test that runs while the other pytest-xdist workers wait.

For a test whose cost is compiling on every core at once: torch.compile traces in the test's own process while
g++ builds its kernels beside it, two cores' worth of work. Beside the other worker's tests it took 92-108 s in runs
of the suite, against 73-90 s with the machine to itself (docs/development.md, "Test budget"). Sorted last
(tests/conftest.py), it starts when the other workers are out of tests or nearly so, which keeps the wait short.

Two flock(2) locks in a folder of the run's own, taken around each test's whole protocol (before its setup, after
its teardown), so that no test's duration includes the wait:
- the room: every test holds it shared, an `alone` test exclusively;
- the gate: an `alone` test holds it from before it asks for the room until it leaves; every other test passes
  through it before asking for the room. Without it, the other workers' next tests would keep the room shared
  and the `alone` test waiting.
"""

import fcntl
import os

import pytest

MARKER = "alone"
LOCKS_VARIABLE = "KERAS_VIT_TESTS_ALONE_LOCKS"


def runs_alone(item):
    return item.get_closest_marker(MARKER) is not None


def _lock(path, operation):
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(descriptor, operation)
    return descriptor  # closing it releases the lock


class Alone:
    """The locks, in `folder`: one per run, shared by its xdist workers and by nothing else (a pytest run that a
    test starts has its own, or it would wait on the test that started it)."""

    def __init__(self, folder):
        self.gate = os.path.join(folder, "gate")
        self.room = os.path.join(folder, "room")

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if runs_alone(item):
            held = [_lock(self.gate, fcntl.LOCK_EX), _lock(self.room, fcntl.LOCK_EX)]
        else:
            gate = _lock(self.gate, fcntl.LOCK_EX)
            held = [_lock(self.room, fcntl.LOCK_SH)]
            os.close(gate)
        try:
            yield
        finally:
            for descriptor in reversed(held):
                os.close(descriptor)
