#!/usr/bin/env bash
# Create .venv and install the project (pinned, see pyproject.toml) if it is missing or stale.
# Idempotent and quick when nothing changed. Needs Python 3.11 (`PYTHON=python3.11` to choose).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
stamp=.venv/.installed
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch is pinned to 2.13.0: a CPU build of it is enough for the demo and the tests.
.venv/bin/python -m pip install --quiet -e '.[test]'
echo "$want" > "$stamp"
echo "setup: .venv ready ($(.venv/bin/python --version))"
