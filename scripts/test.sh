#!/usr/bin/env bash
# Run the whole test suite: unit, stage-command, end-to-end Snakemake and DVC runs, lint, and the
# SLURM cluster test. The cluster test runs against a local single-node cluster that this script
# starts (and stops) when slurm-wlm is installed; set CAMPAIGN_SLURM=install to let it install the
# packages (root, Debian), and CAMPAIGN_REQUIRE_SLURM=1 to fail rather than skip without one.
# CAMPAIGN_CORPORA=install installs the Debian packages of the real-corpus tests first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

# The real public text some data tests read (Debian packages; they skip without it).
if [ "${CAMPAIGN_CORPORA:-}" = "install" ]; then
  bash scripts/corpora/install.sh
fi

started_slurm=0
if [ "${CAMPAIGN_SLURM:-}" = "install" ]; then
  bash scripts/slurm-cluster.sh install
fi
if command -v slurmctld >/dev/null 2>&1 && [ "${CAMPAIGN_SLURM:-}" != "off" ]; then
  # A cluster that already answers (this script's from another checkout, or a real one) is used.
  if ! timeout 20 sinfo -h >/dev/null 2>&1; then
    bash scripts/slurm-cluster.sh start
    started_slurm=1
  fi
fi
cleanup() { if [ "$started_slurm" = 1 ]; then bash scripts/slurm-cluster.sh stop || true; fi; }
trap cleanup EXIT

# One pytest-xdist worker per logical CPU: most tests wait on subprocesses (Snakemake, DVC, stage
# commands) that use one thread. Tests sharing the SLURM cluster stay on one worker (conftest);
# the finished tiny campaign is computed once for all workers. CAMPAIGN_TEST_WORKERS=0 runs the
# suite in this one process (pytest -p no:xdist also works).
python -m pytest -n "${CAMPAIGN_TEST_WORKERS:-logical}" --dist loadgroup "$@"
