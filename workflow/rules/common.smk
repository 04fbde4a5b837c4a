# Shared setup and the generic helpers of every phase: params validation, the interpreter and
# package a stage command runs with, the plan's runs, and each stage's params subset, code version
# and command-line arguments as the stage registry declares them. Phase files hold wiring only.
import os
import shlex
import sys
from pathlib import Path

from snakemake.utils import validate

# The package in this checkout, not whichever one the environment installed: the code a job's
# code version names is the code it runs (two checkouts may share one virtual environment).
PACKAGE_ROOT = str(Path(workflow.basedir) / "workflow")
sys.path.insert(0, PACKAGE_ROOT)

from campaign.core.code import code_version
from campaign.core.errors import CampaignError
from campaign.core.params import validate as validate_params
from campaign.core.registry import get_stage, stage_spec_text
from campaign.data import expand_sources
from campaign.plan import RUN_ID_PATTERN, plan_index

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
except CampaignError as e:
    sys.exit(f"error: {e}")
validate(config, "../schemas/params.schema.yaml", set_default=False)
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
RUNS = list(plan_index(config))
SPLITS = {
    name: f"results/data/splits/{name}.parquet"
    for name in ("train", "validation", "test")
}

# Stage commands run with this interpreter and this checkout's package, so a job (local or on a
# cluster node) needs no activated virtual environment.
# One spelling of the interpreter however Snakemake was started (`snakemake` runs .venv/bin/python3,
# `python -m snakemake` .venv/bin/python): it is part of every job's params.
_PYTHON = (
    Path(sys.prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
)
PYTHON = str(_PYTHON) if _PYTHON.exists() else sys.executable
CAMPAIGN = (
    f"PYTHONPATH={shlex.quote(PACKAGE_ROOT)}${{PYTHONPATH:+:$PYTHONPATH}} "
    f"{shlex.quote(PYTHON)} -m campaign"
)
STATE_DIR = config["campaign"]["state_dir"]
# What every stage job runs: the stage's subcommand with its params subset (--spec), its inputs
# (--in) and outputs (--out) by the names the stage declares, and its log.
STAGE_SHELL = (
    "{params.campaign} {params.command} --spec {params.spec:q} "
    "--state-dir {params.state_dir:q} {params.args} --log {log:q}"
)


def run_paths(pattern):
    """`pattern` (with `{run}`) for every planned run."""
    return [pattern.format(run=run) for run in RUNS]


def stage_command(stage):
    return get_stage(stage).command


_CODE = {}


def stage_code(stage):
    """The stage's code version (its import closure, docstrings and comments aside): a param, so
    a code change reruns the stage's jobs and a comment or docstring edit reruns nothing.
    """
    if stage not in _CODE:
        _CODE[stage] = code_version(get_stage(stage).module)
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
    """Everything STAGE_SHELL reads, for one stage: the command, its params subset, its code
    version (a param, so Snakemake reruns the stage's jobs when its code changes), its file
    arguments, the store folder."""
    return {
        "campaign": CAMPAIGN,
        "command": stage_command(stage),
        "code": stage_code(stage),
        "spec": stage_spec(stage),
        "args": stage_args(stage),
        "state_dir": STATE_DIR,
    }


def _file_args(flag, files, names):
    args = []
    for name in names:
        value = files.get(name) or []
        for path in [value] if isinstance(value, str) else value:
            args.append(f"{flag} {name}={shlex.quote(str(path))}")
    return args


def stage_args(stage):
    """A params function: `--in NAME=PATH` for each declared input the job has (other inputs
    only order it) and `--out NAME=PATH` for each output."""
    declared = get_stage(stage)

    def args(wildcards, input, output):
        return " ".join(
            _file_args("--in", input, declared.inputs)
            + _file_args("--out", output, declared.outputs)
        )

    return args
