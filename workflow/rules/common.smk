# Shared setup and the small named functions every rule reads config through (rule files hold
# rules only). All logic lives in the `campaign` package.
import os
import shlex
import sys
from pathlib import Path

from snakemake.utils import validate

# The package in this checkout, not whichever one the environment installed: the code a rule
# lists as input is the code its job runs (two checkouts may share one virtual environment).
PACKAGE_ROOT = str(Path(workflow.basedir) / "workflow")
sys.path.insert(0, PACKAGE_ROOT)

from campaign.config import validate as validate_params
from campaign.errors import CampaignError
from campaign.manifest import expand_sources
from campaign.plan import RUN_ID_PATTERN, plan_index
from campaign.stages import code_files, stage_spec_text

# One-line error naming the file and key (e.g. `ablation.factors.train.lr: expected a list of
# numbers`); then Snakemake's own check against the same schema file.
# `--configfile other.yaml` replaces params.yaml instead of being merged over it (Snakemake's
# default), so a campaign is exactly the file named: no key left over from params.yaml.
if workflow.overwrite_configfiles:
    import yaml

    config.clear()
    for _path in workflow.overwrite_configfiles:
        with open(_path, encoding="utf-8") as _f:
            _loaded = yaml.safe_load(_f)
        if not isinstance(_loaded, dict):
            sys.exit(f"error: {os.path.relpath(_path)}: expected a mapping of sections")
        config.update(_loaded)
    PARAMS_FILES = ", ".join(os.path.relpath(f) for f in workflow.overwrite_configfiles)
else:
    PARAMS_FILES = (
        ", ".join(os.path.relpath(f) for f in workflow.configfiles) or "params"
    )
try:
    validate_params(config, source=PARAMS_FILES)
    RUNS = plan_index(config)
    # Each run's params subset as the run_spec stage reads it, serialized once.
    RUN_SPECS = {run: stage_spec_text("run_spec", config, run=run) for run in RUNS}
    SOURCES = [str(p) for p in expand_sources(config["data"]["sources"], Path("."))]
except CampaignError as e:
    sys.exit(f"error: {e}")
validate(config, "../schemas/params.schema.yaml", set_default=False)

# Stage commands run with this interpreter and this checkout's package, so a job (local or on a
# cluster node) needs no activated virtual environment.
# One spelling of the interpreter however Snakemake was started (`snakemake` runs .venv/bin/python3,
# `python -m snakemake` .venv/bin/python): it is part of every rule's params.
_PYTHON = (
    Path(sys.prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
)
PYTHON = str(_PYTHON) if _PYTHON.exists() else sys.executable
CAMPAIGN = (
    f"PYTHONPATH={shlex.quote(PACKAGE_ROOT)}${{PYTHONPATH:+:$PYTHONPATH}} "
    f"{shlex.quote(PYTHON)} -m campaign"
)
STATE_DIR = config["campaign"]["state_dir"]


wildcard_constraints:
    run=RUN_ID_PATTERN,


# ------------------------------------------------------------------ generic
def stage_code(stage):
    """The stage's package modules: listed as inputs so a code change reruns its jobs."""
    return code_files(stage)


def stage_spec(stage, **wildcards):
    """The params subset the stage reads, as canonical JSON (what the params trigger compares)."""
    return stage_spec_text(stage, config, **wildcards)


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
    return RUN_SPECS[wildcards.run]


def plan_spec(wildcards):
    return stage_spec("plan_table")


# ------------------------------------------------------------------ preflight phase
def preflight_spec(wildcards):
    return stage_spec("preflight")


# ------------------------------------------------------------------ train phase
SPLITS = {
    name: f"results/data/splits/{name}.parquet"
    for name in ("train", "validation", "test")
}
# A pretrained model folder is an input (its content is part of the key); from_config: none.
BASE_MODEL = (
    [] if config["model"]["source"] == "from_config" else [config["model"]["source"]]
)
# The same for every training job: built once, not per job (1,000 runs → 1,000 jobs).
TRAIN_IN_ARGS = in_args({**SPLITS, "base_model": BASE_MODEL}, *SPLITS, "base_model")


def base_model(wildcards):
    return BASE_MODEL


def train_inputs(wildcards):
    return TRAIN_IN_ARGS


def trained_models(wildcards):
    return [f"results/runs/{run}/predictions_test.parquet" for run in RUNS]


# ------------------------------------------------------------------ report phase
def trained_run_manifests(wildcards):
    return [f"results/runs/{run}/run_manifest.json" for run in RUNS]


def metrics_inputs(wildcards, input):
    return in_args(input, "summary", "runs", "run_manifests")
