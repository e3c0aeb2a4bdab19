#!/usr/bin/env bash
# Runs ruff (format check + lint), then the whole test suite once per Keras backend (slow tests included);
# fails if ruff or any backend fails.
#
#   scripts/test.sh                               # everything, on tensorflow, jax and torch
#   BACKENDS="jax" scripts/test.sh -k attention   # one backend; extra arguments go to pytest
#   PYTEST_WORKERS=0 scripts/test.sh              # no pytest-xdist workers (serial, one process)
#
# Each backend runs as `KERAS_BACKEND=<backend> .venv/bin/python -m pytest -n $PYTEST_WORKERS --dist worksteal "$@"` and ends with
# its 25 slowest tests; a test over pytest-timeout's limit (pyproject.toml) fails. Expects .venv from
# scripts/bootstrap.sh (`make test` runs that first). pytest's exit code 5 (no test collected) counts as a failure.
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

# Each backend's output is kept so that the closing summary can repeat its failures: a CI log is often read from
# its tail, where the first backend's own summary has scrolled away.
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

summary=()
failed=0
for backend in $BACKENDS; do
    echo
    echo "=============================== KERAS_BACKEND=$backend ==============================="
    start=$SECONDS
    # worksteal: a worker that runs out of tests takes the other's queued ones, so one long test ends no run alone.
    KERAS_BACKEND="$backend" "$PYTHON" -m pytest -n "$PYTEST_WORKERS" --dist worksteal "$@" 2>&1 | tee "$logs/$backend"
    rc=${PIPESTATUS[0]}
    if [[ $rc -eq 0 ]]; then
        summary+=("test.sh: KERAS_BACKEND=$backend: ok in $((SECONDS - start)) s")
    else
        failed=1
        summary+=("test.sh: KERAS_BACKEND=$backend: FAILED (pytest exit code $rc) in $((SECONDS - start)) s")
        while IFS= read -r line; do
            summary+=("    $line")
        done < <(grep -E '^(FAILED|ERROR) ' "$logs/$backend" | head -n 40)
    fi
done

echo
printf '%s\n' "${summary[@]}"
if [[ $failed -ne 0 ]]; then
    echo "test.sh: FAILED on at least one backend"
    exit 1
fi
echo "test.sh: all backends passed"
