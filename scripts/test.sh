#!/usr/bin/env bash
# Runs ruff (format check + lint), then the whole test suite once per Keras backend (slow tests included);
# fails if ruff or any backend fails.
#
#   scripts/test.sh                               # everything, on tensorflow, jax and torch
#   BACKENDS="jax" scripts/test.sh -k attention   # one backend; extra arguments go to pytest
#   PYTEST_WORKERS=0 scripts/test.sh              # no pytest-xdist workers (serial, one process)
#
# Every backend's run ends with its 25 slowest tests and the tests over the per-test time limit
# (tests/budget.py: 30 s, 90 s for the few named end-to-end tests, stretched on a busy machine) and fails on
# them; KERAS_VIT_TEST_BUDGET=report only lists them.
#
# Each backend runs as `KERAS_BACKEND=<backend> .venv/bin/python -m pytest -n $PYTEST_WORKERS "$@"`.
# Expects .venv from scripts/bootstrap.sh (`make test` runs that first). pytest's exit code 5 (no test
# collected) counts as a failure.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${VENV:-.venv}/bin/python"
BACKENDS="${BACKENDS:-tensorflow jax torch}"
PYTEST_WORKERS="${PYTEST_WORKERS:-2}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

if [[ ! -x "$PYTHON" ]]; then
    echo "test.sh: $PYTHON not found; run scripts/bootstrap.sh (or make test) first" >&2
    exit 1
fi

# Style first: a formatting or lint error fails fast, before any backend runs.
echo "test.sh: ruff format --check and ruff check"
if ! "${VENV:-.venv}/bin/ruff" format --check --quiet . || ! "${VENV:-.venv}/bin/ruff" check --quiet .; then
    echo "test.sh: ruff found style problems; run '.venv/bin/ruff format . && .venv/bin/ruff check --fix .'" >&2
    exit 1
fi

# Each backend's output is kept so that the closing summary can repeat why a backend failed: a CI log is often
# read from its tail, and pytest's own summary of the first backend scrolls away under the next two.
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

# The machine's own speed before and after: this VM's Python speed varies up to 2x from hour to hour, and the
# suite's time with it (docs/development.md, "Test budget").
speed_before="$("$PYTHON" tests/machine_speed.py)"
echo "test.sh: before the tests, $speed_before"

summary=()
failed=0
for backend in $BACKENDS; do
    echo
    echo "=============================== KERAS_BACKEND=$backend ==============================="
    start=$SECONDS
    KERAS_BACKEND="$backend" "$PYTHON" -m pytest -n "$PYTEST_WORKERS" "$@" 2>&1 | tee "$logs/$backend"
    rc=${PIPESTATUS[0]}
    if [[ $rc -eq 0 ]]; then
        status="ok"
    else
        status="FAILED (pytest exit code $rc)"
        failed=1
    fi
    summary+=("test.sh: KERAS_BACKEND=$backend: $status in $((SECONDS - start)) s")
    # The budget plugin's header (the run's total against its reference): how slow this machine was.
    while IFS= read -r line; do
        summary+=("    $line")
    done < <(grep -E -o 'all [0-9]+ took [0-9]+ s.*[^= ]' "$logs/$backend" | head -n 1)
    if [[ $rc -ne 0 ]]; then
        # pytest's short summary lines (FAILED/ERROR), the budget plugin's OVER BUDGET lines and its 10 slowest
        # tests (what else was slow on this machine).
        while IFS= read -r line; do
            summary+=("    $line")
        done < <(
            grep -E '^(FAILED|ERROR) |OVER BUDGET: ' "$logs/$backend" | head -n 40
            echo "the 10 slowest:"
            grep -E -A 10 'slowest tests \(limit' "$logs/$backend" | tail -n +2 | head -n 10
        )
    fi
done

echo
printf '%s\n' "${summary[@]}"
echo "test.sh: before the tests, $speed_before; after them, $("$PYTHON" tests/machine_speed.py)"
if [[ $failed -ne 0 ]]; then
    echo "test.sh: FAILED on at least one backend"
    exit 1
fi
echo "test.sh: all backends passed"
