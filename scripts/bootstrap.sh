#!/usr/bin/env bash
# Creates .venv (system `python3 -m venv`) and installs requirements/ci.txt, requirements/no-deps.txt (without
# dependencies) plus this package (editable).
#
# Idempotent: a stamp file in the venv records the sha256 of requirements/*.txt + pyproject.toml; when it
# matches, nothing is installed and the script returns in well under a second. Delete .venv to start over.
#
# Environment: PYTHON (default python3) picks the interpreter for a new venv; VENV (default .venv) its path.
# KERAS=nightly also creates .venv-nightly: a venv layered on $VENV (a .pth line adds its site-packages) with
# keras-nightly, keras-hub-nightly and keras-openvino installed over Keras and keras-hub; delete it to take a newer
# nightly.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
STAMP="$VENV/.keras_vit_bootstrap"

want="$(cat requirements/ci.txt requirements/no-deps.txt pyproject.toml | sha256sum | cut -d' ' -f1)"

nightly() {
    local side="$VENV-nightly"
    [[ "${KERAS:-}" == "nightly" ]] || return 0
    if "$side/bin/python" -c "import keras" 2>/dev/null; then
        echo "bootstrap: $side has keras $("$side/bin/python" -c "import keras; print(keras.__version__)")"
        return 0
    fi
    rm -rf "$side"
    "$VENV/bin/python" -m venv --without-pip "$side"
    local base side_packages
    base="$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")"
    side_packages="$("$side/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")"
    echo "import site; site.addsitedir('$base')" > "$side_packages/zz_keras_vit_base.pth"
    echo "bootstrap: installing keras-nightly, keras-hub-nightly and keras-openvino into $side"
    # Keras 3.16 ships its OpenVINO backend as the keras-openvino package.
    "$side/bin/python" -m pip install -qq --disable-pip-version-check --pre keras-nightly keras-hub-nightly keras-openvino
}

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] && "$VENV/bin/python" -c "" 2>/dev/null; then
    echo "bootstrap: $VENV is up to date"
    nightly
    exit 0
fi

if ! "$VENV/bin/python" -c "" 2>/dev/null; then
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        echo "bootstrap: $PYTHON must be Python >= 3.10 (found: $("$PYTHON" --version 2>&1 || echo none))" >&2
        exit 1
    fi
    echo "bootstrap: creating $VENV with $("$PYTHON" --version 2>&1)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi

rm -f "$STAMP"
start=$SECONDS
echo "bootstrap: installing requirements/ci.txt into $VENV (first run: several minutes)"
# -qq: this machine's pip config prints a warning per missing local-index entry; errors still show.
"$VENV/bin/python" -m pip install -qq --disable-pip-version-check -r requirements/ci.txt
# Their real requirements are in ci.txt; see the file for why they are installed without the declared ones.
"$VENV/bin/python" -m pip install -qq --disable-pip-version-check --no-deps -r requirements/no-deps.txt
"$VENV/bin/python" -m pip install -qq --disable-pip-version-check --no-deps -e .
echo "$want" > "$STAMP"
echo "bootstrap: done in $((SECONDS - start)) s"
nightly
