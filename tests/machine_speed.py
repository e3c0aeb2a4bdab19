"""How fast this machine runs plain Python right now: logged by `scripts/test.sh` before and after the suite, and
measured by the test budget (tests/budget.py) at the start and end of each backend's run.

    python tests/machine_speed.py    # "machine speed: a 10-million-step Python loop took 0.38 s"

On the development VM (2 cores, AMD EPYC) a loop like this one ran 2x slower at one hour than at another, with
nothing else running, and the test suite's time followed it (docs/development.md, "Test budget"). A run's
timings mean little without this line: the test budget's own measure (a backend's summed test time against its
reference run) cannot tell a slower machine from a larger suite. Standard library only, under 2 s.
"""

import time

STEPS = 10_000_000

# The loop's seconds on the idle development VM (2 cores, AMD EPYC) in the fast hours the test budget's limits were
# set in: 0.35-0.39 s (docs/development.md, "Test budget").
REFERENCE_LOOP_S = 0.37


def loop_seconds(steps=STEPS):
    """Seconds for `steps` additions in a Python `for` loop: the interpreter's speed, which most tests depend on."""
    start = time.perf_counter()
    total = 0
    for step in range(steps):
        total += step
    return time.perf_counter() - start


if __name__ == "__main__":
    print(f"machine speed: a {STEPS // 1_000_000}-million-step Python loop took {loop_seconds():.2f} s")
