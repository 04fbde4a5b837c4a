# Shared setup and the generic helpers of every phase: the checks before any rule, the interpreter
# and package a stage command runs with, and each stage's inputs, outputs, params subset, code
# version and command-line arguments as the stage registry declares them (the Python side:
# campaign/core/rules.py). Which runs, looks and quantize jobs the DAG has is the plan's and the
# quantize phase's Python (campaign/plan/dag.py, campaign/quantize/targets.py), asked through
# DAG_RUNS. Phase files hold wiring only.
import os
import sys
from pathlib import Path

# The package in this checkout, not whichever one the environment installed: the code a job's
# code version names is the code it runs (two checkouts may share one virtual environment).
PACKAGE_ROOT = str(Path(workflow.basedir) / "workflow")
sys.path.insert(0, PACKAGE_ROOT)

from campaign.core.registry import final_outputs, get_stage, produced
from campaign.core.rules import (
    StageWiring,
    campaign_command,
    phase_rule_files as _phase_rule_files,
    startup_problem,
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
# Snakefile and by every `campaign` command. Refused before any rule, in one line naming the file
# or key (campaign/core/rules.py): `--configfile` or `--config`, invalid params, an unsafe state
# folder, a stage input naming a stage or output that does not exist.
PARAMS_FILES = os.environ.get("CAMPAIGN_PARAMS", "params.yaml")
_problem = startup_problem(
    config,
    PARAMS_FILES,
    workflow.overwrite_configfiles,
    workflow.config_settings.config,
)
if _problem is not None:
    sys.exit(f"error: {_problem}")
# Which runs the DAG has (campaign/plan/dag.py): the plan's kept runs (ablation.max_runs cut);
# with ablation.budget_hours the plan table (a checkpoint, plan.smk) cuts further; with
# ablation.adaptive the looks (checkpoints, evaluate.smk) append runs look by look. The rule
# files read BUDGET_CUT and ADAPTIVE to declare those checkpoints; train.smk reads a run's
# priority and devices from DAG_RUNS.
DAG_RUNS = DagRuns(config, checkpoints)
BUDGET_CUT = DAG_RUNS.budget_cut
ADAPTIVE = DAG_RUNS.adaptive

# Stage commands run with this interpreter and this checkout's package (or, with `--sdm conda`,
# the job's environment's `python`): campaign/core/rules.py.
CONDA_ENV = "../envs/campaign.yaml"
_IN_CONDA = any(
    "conda" in str(m).lower() for m in workflow.deployment_settings.deployment_method
)
CAMPAIGN = campaign_command(PACKAGE_ROOT, _IN_CONDA)
STATE_DIR = config["campaign"]["state_dir"]
# Each stage's params (command, params subset, code version, store) and command line, from its
# declaration: what every rule's `params:` and `shell:` take.
WIRING = StageWiring(config, PARAMS_FILES, CAMPAIGN, STATE_DIR)
stage_params = WIRING.params
stage_shell = WIRING.shell


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
            return WIRING.derived_files(stage, name, {})

        def files(wildcards):
            return WIRING.derived_files(stage, name, wildcards)

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


def phase_rule_files():
    """workflow/rules/<phase>.smk of every phase the registry finds, in DAG order."""
    return _phase_rule_files(workflow.basedir)
