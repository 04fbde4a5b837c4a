# Shared helpers: config validation, the planner, and the small functions rules read config through.
import json
import shlex
import sys
from pathlib import Path

from snakemake.utils import validate

from campaign.config import validate as validate_params
from campaign.errors import CampaignError
from campaign.hashing import canonical_json
from campaign.manifest import expand_sources
from campaign.plan import RUN_ID_PATTERN, plan_index
from campaign.stages import code_files, get_stage

# One-line error naming the key (e.g. `ablation.factors.train.lr: expected a list of numbers`);
# then Snakemake's own check against the same schema file.
try:
    validate_params(config, source="params")
except CampaignError as e:
    sys.exit(f"error: {e}")
validate(config, "../schemas/params.schema.yaml", set_default=False)

# Stage commands run with this interpreter, so a job finds the package without an activated venv.
CAMPAIGN = f"{shlex.quote(sys.executable)} -m campaign"
STATE_DIR = config["campaign"]["state_dir"]
# Keep the stage's own log, and show its last lines (the one-line error) when it fails.
LOGGED = "> {log} 2>&1 || {{ rc=$?; tail -n 3 {log} >&2; exit $rc; }}"

try:
    RUNS = plan_index(config)
    SOURCES = [str(p) for p in expand_sources(config["data"]["sources"], Path("."))]
except CampaignError as e:
    sys.exit(f"error: {e}")


wildcard_constraints:
    run=RUN_ID_PATTERN,


def stage_code(stage):
    """The stage's package modules: listed as inputs so a code change reruns its jobs."""
    return code_files(stage)


def stage_spec(stage, **wildcards):
    """The params subset the stage reads, as canonical JSON (what the params trigger compares)."""
    return canonical_json(get_stage(stage).spec(config, **wildcards))


def in_args(input, *names):
    """`--in NAME=PATH` for each file of each named input (one file or a list)."""
    args = []
    for name in names:
        value = input.get(name) or []
        for path in [value] if isinstance(value, str) else value:
            args.append(f"--in {name}={shlex.quote(str(path))}")
    return " ".join(args)


def planned_run_specs(wildcards):
    return [f"results/runs/{run}/spec.json" for run in RUNS]
