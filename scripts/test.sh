#!/usr/bin/env bash
# Runs ruff (format check and lint), then the whole test suite once per Keras backend; fails if any of them fails.
#
#   scripts/test.sh                               # everything, on tensorflow, jax and torch
#   BACKENDS="jax" scripts/test.sh -k attention   # one backend; extra arguments go to pytest
#   PYTEST_WORKERS=0 scripts/test.sh              # no pytest-xdist workers
#   KERAS=nightly scripts/test.sh                 # against keras-nightly in .venv-nightly (scripts/bootstrap.sh)
#
# Each backend runs `pytest -n $PYTEST_WORKERS --dist worksteal` (a worker that runs out of tests takes the other's)
# and ends with its 25 slowest tests. Expects .venv from scripts/bootstrap.sh (`make test` runs that first).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BASE_VENV="${VENV:-.venv}"
VENV="$BASE_VENV"
[[ "${KERAS:-}" == "nightly" ]] && VENV="$BASE_VENV-nightly"
BACKENDS="${BACKENDS:-tensorflow jax torch}"
PYTEST_WORKERS="${PYTEST_WORKERS:-2}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "test.sh: $VENV/bin/python not found; run scripts/bootstrap.sh (or make test) first" >&2
    exit 1
fi

echo "test.sh: ruff format --check and ruff check"
if ! "$BASE_VENV/bin/ruff" format --check --quiet . || ! "$BASE_VENV/bin/ruff" check --quiet .; then
    echo "test.sh: ruff found style problems; run '$BASE_VENV/bin/ruff format . && $BASE_VENV/bin/ruff check --fix .'" >&2
    exit 1
fi

# Each backend's log is kept so that the closing summary (where a CI log is read) repeats its failures.
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
summary=()
failed=0
for backend in $BACKENDS; do
    echo
    echo "=============================== KERAS_BACKEND=$backend ($("$VENV/bin/python" -c "import keras; print('keras', keras.__version__)" 2>/dev/null)) ==============================="
    start=$SECONDS
    KERAS_BACKEND="$backend" "$VENV/bin/python" -m pytest -n "$PYTEST_WORKERS" --dist worksteal "$@" 2>&1 \
        | tee "$logs/$backend"
    rc=${PIPESTATUS[0]}
    if [[ $rc -eq 0 ]]; then
        summary+=("test.sh: KERAS_BACKEND=$backend: ok in $((SECONDS - start)) s")
    else
        failed=1
        summary+=("test.sh: KERAS_BACKEND=$backend: FAILED (pytest exit code $rc) in $((SECONDS - start)) s")
        mapfile -t failures < <(grep -E '^(FAILED|ERROR) ' "$logs/$backend" | head -n 40)
        summary+=("${failures[@]/#/    }")
    fi
done

echo
printf '%s\n' "${summary[@]}"
if [[ $failed -ne 0 ]]; then
    echo "test.sh: FAILED on at least one backend"
    exit 1
fi
echo "test.sh: all backends passed"
