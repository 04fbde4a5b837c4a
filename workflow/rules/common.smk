# Shared setup and the generic helpers of every phase: params validation, the interpreter and
# package a stage command runs with, and each stage's inputs, outputs, params subset, code version
# and command-line arguments as the stage registry declares them. Which runs, looks and quantize
# jobs the DAG has is the plan's and the quantize phase's Python (campaign/plan/dag.py,
# campaign/quantize/targets.py), asked through DAG_RUNS. Phase files hold wiring only.
import importlib
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
from campaign.core.hashing import canonical_json
from campaign.core.params import validate as validate_params
from campaign.core.store import check_state_dir
from campaign.core.registry import (
    final_outputs,
    get_stage,
    phases,
    produced,
    wiring_problems,
)
from campaign.core.stage import (
    Derived,
    EachGuard,
    EachJob,
    EachLook,
    EachLookRun,
    EachRun,
    PreviousLook,
    Figure,
    Folder,
    From,
    Nothing,
    wildcards_of,
)
from campaign.plan import RUN_ID_PATTERN
from campaign.plan.dag import DagRuns
from campaign.quantize import dag_job_paths
from campaign.guards import guard_paths

# One name for the campaign definition: CAMPAIGN_PARAMS (default params.yaml), read by the
# Snakefile and by every `campaign` command, so `campaign status` always sees the campaign
# Snakemake ran. `--configfile` naming another file, or `--config` overriding keys, would make
# the two disagree: refused in one line that says what to type instead.
PARAMS_FILES = os.environ.get("CAMPAIGN_PARAMS", "params.yaml")
if workflow.overwrite_configfiles and [
    os.path.realpath(f) for f in workflow.overwrite_configfiles
] != [os.path.realpath(PARAMS_FILES)]:
    _named = " ".join(os.path.relpath(f) for f in workflow.overwrite_configfiles)
    sys.exit(
        f"error: --configfile {_named}: name the campaign with CAMPAIGN_PARAMS={_named} "
        f"instead (Snakemake and every `campaign` command read it)"
    )
if workflow.config_settings.config:
    sys.exit(
        "error: --config: edit the params file instead (CAMPAIGN_PARAMS, default "
        "params.yaml), so that Snakemake and every `campaign` command read one campaign"
    )
# One-line error naming the file and key (e.g. `ablation.factors.train.lr: expected a list of
# numbers`), against workflow/schemas/params.schema.yaml (with the registries' names filled in)
# plus each phase's own rules; the same check every `campaign` command runs.
try:
    validate_params(config, source=PARAMS_FILES)
except CampaignError as e:
    sys.exit(f"error: {e}")
# gc deletes what it finds in the state folder: not `/`, the home folder, a file or a folder of
# something else (core/store.py), refused before any job runs.
try:
    check_state_dir(config["campaign"]["state_dir"])
except CampaignError as e:
    sys.exit(f"error: {PARAMS_FILES}: {e}")
# A stage input naming a stage or output that does not exist: one line, before any rule.
for _problem in wiring_problems():
    sys.exit(f"error: {_problem}")
# Which runs the DAG has (campaign/plan/dag.py): the plan's kept runs (ablation.max_runs cut);
# with ablation.budget_hours the plan table (a checkpoint, plan.smk) cuts further; with
# ablation.adaptive the looks (checkpoints, evaluate.smk) append runs look by look. The rule
# files read BUDGET_CUT and ADAPTIVE to declare those checkpoints; train.smk reads a run's
# priority and devices from DAG_RUNS.
DAG_RUNS = DagRuns(config, checkpoints)
BUDGET_CUT = DAG_RUNS.budget_cut
ADAPTIVE = DAG_RUNS.adaptive

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


def job_spec(stage, wildcards):
    """(the params subset the stage reads for this job, as canonical JSON). Memoized per spec
    function and wildcards, so the stages that read a run's spec (run_spec, train) build it once
    per run, and a job's params and derived inputs share it."""
    declared = get_stage(stage)
    values = dict(wildcards.items())
    key = (declared.spec, tuple(sorted(values.items())))
    if key not in _SPECS:
        spec = declared.spec(config, **values)
        _SPECS[key] = (spec, canonical_json(spec))
    return _SPECS[key]


def stage_spec(stage):
    """A params function: the stage's params subset for this job as canonical JSON (what
    Snakemake's params trigger compares)."""

    def spec(wildcards):
        return job_spec(stage, wildcards)[1]

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


def derived_files(stage, name, wildcards):
    """The files the params name for a job's input `name` (the stage's derive_inputs): data
    files, an earlier manifest or split, a pretrained model folder."""
    module_name, _, func_name = get_stage(stage).derive_inputs.partition(":")
    derive = getattr(importlib.import_module(module_name), func_name)
    try:
        found = derive(job_spec(stage, wildcards)[0], Path("."))
    except CampaignError as e:
        sys.exit(f"error: {PARAMS_FILES}: {e}")
    return [str(p) for p in found.get(name, [])]


def input_files(stage, name, source):
    """What Snakemake takes for one declared input: a path, a list, or an input function."""
    if isinstance(source, From):
        path = produced(source).path
        return ancient(path) if source.ancient else path
    # The kinds that expand over the campaign's runs, looks or quantize jobs: their phase's
    # Python lists them (campaign/plan/dag.py, campaign/quantize/targets.py).
    if isinstance(source, EachRun):
        return DAG_RUNS.run_paths(produced(source).path)
    if isinstance(source, EachJob):
        kept = DAG_RUNS.run_paths("{run}")
        return dag_job_paths(config, produced(source).path, kept, checkpoints)
    if isinstance(source, EachGuard):
        return guard_paths(config, produced(source).path, DAG_RUNS)
    if isinstance(source, EachLookRun):
        return DAG_RUNS.look_run_paths(produced(source).path)
    if isinstance(source, EachLook):
        return DAG_RUNS.look_paths(produced(source).path)
    if isinstance(source, PreviousLook):
        return DAG_RUNS.previous_look(produced(source).path)
    if isinstance(source, Nothing):
        return []
    if isinstance(source, Derived):
        if not get_stage(stage).wildcards:
            # Known now, so the dry run shows them from the start.
            return derived_files(stage, name, {})

        def files(wildcards):
            return derived_files(stage, name, wildcards)

        return files
    raise TypeError(f"stage '{stage}', input '{name}': unknown kind {source!r}")


def stage_inputs(stage):
    """The rule's inputs, by the names the stage declares (its `after` files included)."""
    declared = get_stage(stage)
    return {
        name: input_files(stage, name, source)
        for name, source in {**declared.inputs, **declared.after}.items()
    }


def output_file(output):
    """What Snakemake takes for one declared output: a path, directory() or report()."""
    if isinstance(output, Folder):
        return directory(output.path)
    if isinstance(output, Figure):
        # Its caption: workflow/report/<figure>.rst, where there is one.
        caption = (
            Path(workflow.basedir)
            / "workflow"
            / "report"
            / f"{Path(output.path).stem}.rst"
        )
        if not caption.is_file():
            return report(output.path, category=output.category)
        return report(
            output.path, caption=f"../report/{caption.name}", category=output.category
        )
    return output.path


def stage_outputs(stage):
    """The rule's outputs, by the names the stage declares."""
    return {name: output_file(out) for name, out in get_stage(stage).outputs.items()}


def final_targets():
    """What a bare `snakemake` builds: every output of the stages declared final (the per-run
    ones for every kept run), tracking's only with tracking.enabled."""
    targets = []
    for out in final_outputs(config):
        wildcards = wildcards_of(out.path)
        if wildcards and wildcards != ("run",):
            sys.exit(f"error: a final output can expand over runs only: {out.path}")
        targets.append(DAG_RUNS.run_paths(out.path) if wildcards else out.path)
    return targets


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


def phase_rule_files():
    """workflow/rules/<phase>.smk of every phase the registry finds, in DAG order (a phase
    without a rule file has stages a person runs with `campaign <stage>` only)."""
    rules = Path(workflow.basedir) / "workflow" / "rules"
    return [
        f"workflow/rules/{p.name}.smk"
        for p in phases()
        if (rules / f"{p.name}.smk").is_file()
    ]
