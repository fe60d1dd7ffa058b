#!/usr/bin/env bash
# Create .venv (if missing) and install the project into it, editable, with the extras named in the
# first argument (comma-separated, e.g. "server" or "server,spark,test"; none: the client alone).
# Installing a further set later adds to what is there.
set -euo pipefail
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
EXTRAS="${1:-}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".${EXTRAS:+[$EXTRAS]}"
