#!/usr/bin/env bash
# Run the demo campaign on the embedded data (data/raw/demo.jsonl) with the workstation profile.
# Extra arguments go to Snakemake, e.g. `bash scripts/demo.sh --cores 2` or `-n` for a dry run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
campaign validate
campaign plan
# profiles/default is Snakemake's workflow profile: applied without --profile.
snakemake "$@"
campaign status
echo "results: results/ (metrics: results/metrics.json, manifest: results/data/)"
