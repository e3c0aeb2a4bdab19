#!/usr/bin/env bash
# Line and branch coverage of keras_vit and keras_vit_cli: the whole suite once per backend (as scripts/test.sh
# runs it), the subprocesses the tests start (CLI runs, example scripts, fresh-process checks) included, all
# combined into one figure ([tool.coverage.*] in pyproject.toml). Not part of `make test`: measuring slows the suite.
#
#   scripts/coverage.sh                        # all backends; prints the report, writes .coverage-data/
#   BACKENDS=jax scripts/coverage.sh -k data   # one backend; extra arguments go to pytest
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${VENV:-.venv}/bin/python"
BACKENDS="${BACKENDS:-tensorflow jax torch}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
# Absolute, so that a subprocess started in a temporary folder writes its data here too.
export COVERAGE_FILE="$PWD/.coverage-data/coverage"

rm -rf .coverage-data && mkdir -p .coverage-data
failed=0
for backend in $BACKENDS; do
    echo "coverage.sh: KERAS_BACKEND=$backend"
    start=$SECONDS
    KERAS_BACKEND="$backend" "$PYTHON" -m pytest -n "${PYTEST_WORKERS:-2}" --cov --cov-append --cov-report= \
        -p no:cacheprovider "$@" || failed=1
    echo "coverage.sh: KERAS_BACKEND=$backend done in $((SECONDS - start)) s"
done
"$PYTHON" -m coverage combine --quiet --keep 2>/dev/null
"$PYTHON" -m coverage report
exit $failed
