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
# The tests' subprocesses import this checkout's package (not another one an editable install points at).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Absolute, so that a subprocess started in a temporary folder writes its data here too.
export COVERAGE_FILE="$PWD/.coverage-data/coverage"

rm -rf .coverage-data && mkdir -p .coverage-data
failed=0
for backend in $BACKENDS; do
    echo "coverage.sh: KERAS_BACKEND=$backend"
    start=$SECONDS
    # --timeout: measuring slows every test (pyproject.toml's limit is for unmeasured runs).
    KERAS_BACKEND="$backend" "$PYTHON" -m pytest -n "${PYTEST_WORKERS:-2}" --cov --cov-append --cov-report= \
        --timeout=1800 -p no:cacheprovider "$@" || failed=1
    echo "coverage.sh: KERAS_BACKEND=$backend done in $((SECONDS - start)) s"
done
# --append: pytest-cov has already combined each run into COVERAGE_FILE; what is left are the files of processes
# that saved after it (such as an xdist worker's own start-up measurement: coverage's subprocess patch starts one in
# every Python process of the run, saved at its exit). A combine without --append would
# replace the suite's data with those few (how an earlier run reported 17 %).
"$PYTHON" -m coverage combine --append --quiet 2>/dev/null
"$PYTHON" -m coverage report
exit $failed
