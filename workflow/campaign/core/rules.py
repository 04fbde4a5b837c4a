"""What workflow/rules/common.smk asks the package: the checks before any rule (one campaign
definition, valid params, a safe state folder, sound wiring), the command a job runs with, and
each stage's params, params subset, code version and command line as the stage registry declares
them. Phase files hold wiring only; what Snakemake itself provides (ancient, directory, report,
checkpoints) stays in common.smk.

Light on import: every `snakemake` call and every cluster job parses the Snakefile.
"""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from campaign.core.errors import CampaignError


def startup_problem(config: dict, params_file: str, configfiles, overrides) -> str | None:
    """What is wrong before any rule, as the words after "error: " (None: nothing).

    One name for the campaign definition: CAMPAIGN_PARAMS (`params_file`, default params.yaml),
    read by the Snakefile and by every `campaign` command, so `campaign status` always sees the
    campaign Snakemake ran. `--configfile` naming another file (`configfiles`), or `--config`
    overriding keys (`overrides`), would make the two disagree: refused in one line that says
    what to type instead. Then the params, against workflow/schemas/params.schema.yaml (with the
    registries' names filled in) plus each phase's own rules, the same check every `campaign`
    command runs; the state folder gc deletes in (not `/`, the home folder, a file or a folder
    of something else: core/store.py); and a stage input naming a stage or output that does not
    exist."""
    from campaign.core.params import validate
    from campaign.core.registry import wiring_problems
    from campaign.core.store import check_state_dir

    if configfiles and [os.path.realpath(f) for f in configfiles] != [
        os.path.realpath(params_file)
    ]:
        named = " ".join(os.path.relpath(f) for f in configfiles)
        return (
            f"--configfile {named}: name the campaign with CAMPAIGN_PARAMS={named} "
            f"instead (Snakemake and every `campaign` command read it)"
        )
    if overrides:
        return (
            "--config: edit the params file instead (CAMPAIGN_PARAMS, default "
            "params.yaml), so that Snakemake and every `campaign` command read one campaign"
        )
    try:
        validate(config, source=params_file)
    except CampaignError as e:
        return str(e)
    try:
        check_state_dir(config["campaign"]["state_dir"])
    except CampaignError as e:
        return f"{params_file}: {e}"
    for problem in wiring_problems():
        return problem
    return None


def campaign_command(package_root: str, conda: bool) -> str:
    """How a job runs `campaign`: this interpreter and this checkout's package, so a job (local
    or on a cluster node) needs no activated virtual environment. With `--sdm conda` (`conda`),
    the job's activated environment (workflow/envs/campaign.yaml) provides `python` instead.
    One spelling of the interpreter however Snakemake was started (`snakemake` runs
    .venv/bin/python3, `python -m snakemake` .venv/bin/python): it is part of every job's
    params."""
    versioned = Path(sys.prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if conda:
        python = "python"
    else:
        python = str(versioned) if versioned.exists() else sys.executable
    return (
        f"PYTHONPATH={shlex.quote(package_root)}${{PYTHONPATH:+:$PYTHONPATH}} "
        f"{shlex.quote(python)} -m campaign"
    )


class StageWiring:
    """Each stage's rule params and command line, from its declaration (core.registry), for
    one campaign's `config`; `campaign` is campaign_command's line, `state_dir` the store."""

    def __init__(self, config: dict, params_file: str, campaign: str, state_dir: str):
        self.config = config
        self.params_file = params_file
        self.campaign = campaign
        self.state_dir = state_dir
        self._code: dict = {}
        self._specs: dict = {}

    def code(self, stage: str) -> str:
        """The stage's code version (its import closure, docstrings and comments aside): a
        param, so a code change reruns the stage's jobs and a comment or docstring edit reruns
        nothing."""
        from campaign.core.code import code_version
        from campaign.core.registry import get_stage

        if stage not in self._code:
            self._code[stage] = code_version(*get_stage(stage).code_modules)
        return self._code[stage]

    def job_spec(self, stage: str, wildcards) -> tuple:
        """(the params subset the stage reads for this job, as canonical JSON). Memoized per
        spec function and wildcards, so the stages that read a run's spec (run_spec, train)
        build it once per run, and a job's params and derived inputs share it."""
        from campaign.core.hashing import canonical_json
        from campaign.core.registry import get_stage

        declared = get_stage(stage)
        values = dict(wildcards.items())
        key = (declared.spec, tuple(sorted(values.items())))
        if key not in self._specs:
            spec = declared.spec(self.config, **values)
            self._specs[key] = (spec, canonical_json(spec))
        return self._specs[key]

    def spec(self, stage: str) -> Callable:
        """A params function: the stage's params subset for this job as canonical JSON (what
        Snakemake's params trigger compares)."""

        def spec(wildcards):
            return self.job_spec(stage, wildcards)[1]

        return spec

    def params(self, stage: str) -> dict:
        """Everything shell reads, for one stage: the command, its params subset, its code
        version (a param, so Snakemake reruns the stage's jobs when its code changes), the
        store folder."""
        from campaign.core.registry import get_stage

        return {
            "campaign": self.campaign,
            "command": get_stage(stage).command,
            "code": self.code(stage),
            "spec": self.spec(stage),
            "state_dir": self.state_dir,
        }

    def derived_files(self, stage: str, name: str, wildcards) -> list[str]:
        """The files the params name for a job's input `name` (the stage's derive_inputs): data
        files, an earlier manifest or split, a pretrained model folder."""
        from campaign.core.registry import get_stage

        module_name, _, func_name = get_stage(stage).derive_inputs.partition(":")
        derive = getattr(importlib.import_module(module_name), func_name)
        try:
            found = derive(self.job_spec(stage, wildcards)[0], Path("."))
        except CampaignError as e:
            sys.exit(f"error: {self.params_file}: {e}")
        return [str(p) for p in found.get(name, [])]

    @staticmethod
    def shell(stage: str) -> str:
        """The job's command line: the stage's subcommand with its params subset (--spec), the
        compute threads, its inputs (--in) and outputs (--out) by the names the stage declares,
        and its log. Every input the stage declares must be an input of the rule (an empty list
        where the params name none), so the runner hashes exactly what it reads. Built once per
        rule: Snakemake fills in the paths when the job runs."""
        from campaign.core.registry import get_stage

        declared = get_stage(stage)
        files = [f"--in {name}={{input.{name}:q}}" for name in declared.inputs]
        files += [f"--out {name}={{output.{name}:q}}" for name in declared.outputs]
        return (
            "{params.campaign} {params.command} --spec {params.spec:q} "
            "--state-dir {params.state_dir:q} --threads {threads} "
            + " ".join(files)
            + " --log {log:q}"
        )


def phase_rule_files(basedir) -> list[str]:
    """workflow/rules/<phase>.smk of every phase the registry finds, in DAG order (a phase
    without a rule file has stages a person runs with `campaign <stage>` only)."""
    from campaign.core.registry import phases

    rules = Path(basedir) / "workflow" / "rules"
    return [f"workflow/rules/{p.name}.smk" for p in phases() if (rules / f"{p.name}.smk").is_file()]
