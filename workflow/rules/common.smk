# Shared setup and the small named functions every rule reads config through (rule files hold
# rules only). All logic lives in the `campaign` package.
import os
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

# One-line error naming the file and key (e.g. `ablation.factors.train.lr: expected a list of
# numbers`); then Snakemake's own check against the same schema file.
PARAMS_FILES = ", ".join(os.path.relpath(f) for f in workflow.configfiles) or "params"
try:
    validate_params(config, source=PARAMS_FILES)
    RUNS = plan_index(config)
    SOURCES = [str(p) for p in expand_sources(config["data"]["sources"], Path("."))]
except CampaignError as e:
    sys.exit(f"error: {e}")
validate(config, "../schemas/params.schema.yaml", set_default=False)

# Stage commands run with this interpreter, so a job (local or on a cluster node) finds the
# package without an activated virtual environment.
CAMPAIGN = f"{shlex.quote(sys.executable)} -m campaign"
STATE_DIR = config["campaign"]["state_dir"]


wildcard_constraints:
    run=RUN_ID_PATTERN,


# ------------------------------------------------------------------ generic
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


# ------------------------------------------------------------------ data phase
def data_sources(wildcards):
    return SOURCES


def previous_manifest(wildcards):
    previous = config["data"]["previous_manifest"]
    return [previous] if previous else []


def manifest_spec(wildcards):
    return stage_spec("manifest")


def manifest_inputs(wildcards, input):
    return in_args(input, "sources", "previous")


def split_spec(wildcards):
    return stage_spec("split")


def split_inputs(wildcards, input):
    return in_args(input, "sources")


# ------------------------------------------------------------------ plan phase
def planned_run_specs(wildcards):
    return [f"results/runs/{run}/spec.json" for run in RUNS]


def run_spec_json(wildcards):
    return stage_spec("run_spec", run=wildcards.run)


def plan_spec(wildcards):
    return stage_spec("plan_table")


# ------------------------------------------------------------------ report phase
def metrics_inputs(wildcards, input):
    return in_args(input, "summary", "runs")
