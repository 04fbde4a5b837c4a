#!/usr/bin/env bash
# Run the demo campaign (params.yaml: LoRA on the pretrained all-MiniLM-L6-v2, on the embedded
# quotations data/raw/fortunes.jsonl) with the workstation profile,
# then record its outputs in dvc.lock so that `dvc push` shares them (docs/integrations.md: Sharing results with DVC).
# Extra arguments go to Snakemake, e.g. `bash scripts/demo.sh --cores 2` or `-n` for a dry run.
# CAMPAIGN_PARAMS=other.yaml runs another campaign definition (Snakemake and `campaign` alike).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
started=$SECONDS  # the campaign's time, setup not counted
campaign validate
campaign plan
# profiles/default is Snakemake's workflow profile: applied without --profile.
snakemake "$@"
dry_run=0
for arg in "$@"; do
  case "$arg" in -n | --dry-run | --dryrun | -[a-zA-Z]*n) dry_run=1 ;; esac
done
# The results and the store as they are now, in dvc.lock (what `dvc push` uploads): recorded
# while `campaign status` runs (it reads, dvc hashes; neither writes what the other reads).
dvc_commit=
if [ "$dry_run" = 0 ] && [ -d .dvc ] && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  dvc_log=$(mktemp)
  dvc commit --force --quiet campaign >"$dvc_log" 2>&1 &
  dvc_commit=$!
fi
status_rc=0
campaign status || status_rc=$?  # a failure is reported after dvc commit has been waited for
echo "results: results/ (report: results/report/index.html, index: results/index.parquet," \
  "metrics: results/metrics.json, manifest: results/data/)"
# What to act on: the decisions, and what the campaign cost and what the rest would cost.
if [ "$dry_run" = 0 ]; then
  for summary in results/evaluation/summary.txt results/budget/summary.txt; do
    if [ -f "$summary" ]; then
      echo "--- $summary"
      cat "$summary"
    fi
  done
fi
if [ -n "$dvc_commit" ]; then
  status=0
  wait "$dvc_commit" || status=$?
  cat "$dvc_log"
  rm -f "$dvc_log"
  if [ "$status" != 0 ]; then
    echo "dvc commit failed (exit $status)" >&2
    exit "$status"
  fi
  echo "recorded in dvc.lock; to share: dvc remote add -d <name> <url> && dvc push, then" \
    "git add dvc.lock .dvc/config && git commit"
fi
if [ "$status_rc" != 0 ]; then
  echo "campaign status failed (exit $status_rc)" >&2
  exit "$status_rc"
fi
elapsed=$((SECONDS - started))
echo "demo: validate, plan, campaign and summaries took $((elapsed / 60)) min $((elapsed % 60)) s" \
  "(setup not counted)"
# Last, the verdict: the report's opening block (the option to keep, its quality and cost, the
# open questions with their price, the findings to act on), as results/report/summary.md has it.
if [ "$dry_run" = 0 ] && [ -f results/report/summary.md ]; then
  echo "--- verdict (results/report/summary.md)"
  awk '/^## Verdict/ {on = 1; next} on && /^## / {exit} on && NF {sub(/^- /, "  "); print}' \
    results/report/summary.md
fi
