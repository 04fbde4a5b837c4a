# Shared setup and the generic helpers of every phase: params validation, the interpreter and
# package a stage command runs with, the plan's runs, and each stage's params subset, code version
# and command-line arguments as the stage registry declares them. Phase files hold wiring only.
import os
import shlex
import sys
from pathlib import Path

# The package in this checkout, not whichever one the environment installed: the code a job's
# code version names is the code it runs (two checkouts may share one virtual environment).
PACKAGE_ROOT = str(Path(workflow.basedir) / "workflow")
sys.path.insert(0, PACKAGE_ROOT)

from campaign.core.code import code_version
from campaign.core.errors import CampaignError
from campaign.core.params import validate as validate_params
from campaign.core.registry import get_stage, stage_spec_text
from campaign.data import expand_sources
from campaign.plan import (
    RUN_ID_PATTERN,
    kept_in_table,
    kept_runs,
    run_priorities,
    run_spec_of,
)

# One-line error naming the file and key (e.g. `ablation.factors.train.lr: expected a list of
# numbers`), against workflow/schemas/params.schema.yaml (with the registries' names filled in)
# plus each phase's own rules; the same check every `campaign` command runs.
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
    if (
        os.path.relpath(os.environ.get("CAMPAIGN_PARAMS", "params.yaml"))
        != PARAMS_FILES
    ):
        print(
            f"note: `campaign` commands read CAMPAIGN_PARAMS (default params.yaml); run them "
            f"with CAMPAIGN_PARAMS={PARAMS_FILES} to see this campaign",
            file=sys.stderr,
        )
else:
    PARAMS_FILES = (
        ", ".join(os.path.relpath(f) for f in workflow.configfiles) or "params"
    )
try:
    validate_params(config, source=PARAMS_FILES)
except CampaignError as e:
    sys.exit(f"error: {e}")
# The campaign's inputs and plan: data files, an earlier manifest, a pretrained model folder (its
# content is part of every key that builds on it), the planned runs.
try:
    SOURCES = [str(p) for p in expand_sources(config["data"]["sources"], Path("."))]
except CampaignError as e:
    sys.exit(f"error: {PARAMS_FILES}: {e}")
PREVIOUS_MANIFEST = (
    [config["data"]["previous_manifest"]] if config["data"]["previous_manifest"] else []
)
BASE_MODEL = (
    [] if config["model"]["source"] == "from_config" else [config["model"]["source"]]
)
# The runs Snakemake trains, in the plan's order (ablation.max_runs cut); with
# ablation.budget_hours the plan table (a checkpoint, plan.smk) cuts further.
RUNS = kept_runs(config)
BUDGET_CUT = config["ablation"]["budget_hours"] is not None
PRIORITY = run_priorities(config)
SPLITS = {
    name: f"results/data/splits/{name}.parquet"
    for name in ("train", "validation", "test")
}

# Stage commands run with this interpreter and this checkout's package, so a job (local or on a
# cluster node) needs no activated virtual environment. With `--sdm conda`, the job's activated
# environment (workflow/envs/campaign.yaml) provides `python` instead.
# One spelling of the interpreter however Snakemake was started (`snakemake` runs .venv/bin/python3,
# `python -m snakemake` .venv/bin/python): it is part of every job's params.
CONDA_ENV = "../envs/campaign.yaml"
_PYTHON = (
    Path(sys.prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
)
if any(
    "conda" in str(m).lower() for m in workflow.deployment_settings.deployment_method
):
    PYTHON = "python"
else:
    PYTHON = str(_PYTHON) if _PYTHON.exists() else sys.executable
CAMPAIGN = (
    f"PYTHONPATH={shlex.quote(PACKAGE_ROOT)}${{PYTHONPATH:+:$PYTHONPATH}} "
    f"{shlex.quote(PYTHON)} -m campaign"
)
STATE_DIR = config["campaign"]["state_dir"]
# What a stage job runs (stage_shell): the stage's subcommand with its params subset (--spec),
# the compute threads, its inputs (--in) and outputs (--out) by the names the stage declares, and
# its log. Built once per rule: Snakemake fills in the paths when the job runs.


def run_paths(pattern):
    """`pattern` (with `{run}`) for every kept run: a list, or with ablation.budget_hours an
    input function that asks the plan table (a checkpoint) which runs it kept."""
    if not BUDGET_CUT:
        return [pattern.format(run=run) for run in RUNS]

    def kept_paths(wildcards):
        table = checkpoints.plan_table.get().output.runs
        return [pattern.format(run=run) for run in kept_in_table(table)]

    return kept_paths


def decision_predictions():
    """Every kept run's predictions on the split the evaluation decides on (the quantize
    selection scores them by evaluation.metric)."""
    split = config["evaluation"]["decide_on"]
    return run_paths(f"results/runs/{{run}}/predictions_{split}.parquet")


def run_priority(wildcards):
    """A training job's priority: the plan's order, the first run highest, so with few cores
    the runs that tell most finish first."""
    return PRIORITY.get(wildcards.run, 0)


def stage_command(stage):
    return get_stage(stage).command


_CODE = {}


def stage_code(stage):
    """The stage's code version (its import closure, docstrings and comments aside): a param, so
    a code change reruns the stage's jobs and a comment or docstring edit reruns nothing.
    """
    if stage not in _CODE:
        _CODE[stage] = code_version(*get_stage(stage).code_modules)
    return _CODE[stage]


_SPECS = {}


def stage_spec(stage):
    """A params function: the params subset the stage reads for this job, as canonical JSON
    (what Snakemake's params trigger compares). Memoized per spec function and wildcards, so the
    stages that read a run's spec (run_spec, train) serialize it once per run."""
    declared = get_stage(stage)

    def spec(wildcards):
        key = (declared.spec, tuple(sorted(wildcards.items())))
        if key not in _SPECS:
            _SPECS[key] = stage_spec_text(stage, config, **dict(wildcards.items()))
        return _SPECS[key]

    return spec


def stage_params(stage):
    """Everything stage_shell reads, for one stage: the command, its params subset, its code
    version (a param, so Snakemake reruns the stage's jobs when its code changes), the store
    folder."""
    return {
        "campaign": CAMPAIGN,
        "command": stage_command(stage),
        "code": stage_code(stage),
        "spec": stage_spec(stage),
        "state_dir": STATE_DIR,
    }


def stage_shell(stage):
    """The job's command line. Every input the stage declares must be an input of the rule (an
    empty list where the params name none), so the runner hashes exactly what it reads.
    """
    declared = get_stage(stage)
    files = [f"--in {name}={{input.{name}:q}}" for name in declared.inputs]
    files += [f"--out {name}={{output.{name}:q}}" for name in declared.outputs]
    return (
        "{params.campaign} {params.command} --spec {params.spec:q} "
        "--state-dir {params.state_dir:q} --threads {threads} "
        + " ".join(files)
        + " --log {log:q}"
    )


def train_devices(wildcards):
    """A run's train.devices: its cluster job asks for that many tasks (srun starts one worker
    per task) and GPUs."""
    return int(run_spec_of(config, wildcards.run)["train"].get("devices", 1))


def tracking_outputs():
    """The track phase's record for the default target (nothing with tracking off)."""
    return ["results/tracking/logged.json"] if config["tracking"]["enabled"] else []
