"""Discovery: the phases (subpackages that declare `PHASE`) and the members of registries.

A phase is found by its folder: `campaign/<name>/__init__.py` defining `PHASE`. A registry (the
preflight checks, the ablation designs, the quantization variants) is a package whose modules are
its members, one module each, named after the member: a new member is a new file. Names come from
the file names, so listing them (for the params schema, when the Snakefile builds the DAG) imports
nothing; `discover` imports the members when a stage needs them.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import campaign
from campaign.core.errors import CampaignError
from campaign.core.io import resolve
from campaign.core.stage import (
    REFERENCES,
    Derived,
    EachGuard,
    From,
    Input,
    Output,
    Phase,
    PreviousLook,
    Stage,
    wildcards_of,
)

NOT_PHASES = ("core", "tools")  # subpackages that are infrastructure, not steps of the DAG


@functools.cache
def phases() -> tuple[Phase, ...]:
    """Every declared phase, in DAG order."""
    found = []
    for info in pkgutil.iter_modules(campaign.__path__):
        if not info.ispkg or info.name in NOT_PHASES:
            continue
        module = importlib.import_module(f"campaign.{info.name}")
        phase = getattr(module, "PHASE", None)
        if isinstance(phase, Phase):
            found.append(phase)
    return tuple(sorted(found, key=lambda p: (p.order, p.name)))


@functools.cache
def stages() -> dict[str, Stage]:
    """Every declared stage by name, in DAG order; a stage that gathers what the phases
    contribute (Stage.gather: the report, the index) as its gather function completes it."""
    out: dict[str, Stage] = {}
    for phase in phases():
        for stage in phase.stages:
            if stage.name in out:
                raise CampaignError(f"stage '{stage.name}' is declared twice ({phase.name})")
            out[stage.name] = stage
    for name, stage in out.items():
        if stage.gather is not None:
            out[name] = resolve(stage.gather)(stage, phases())
    return out


def merged_inputs(stage: Stage, parts: list[tuple[str, Mapping[str, Input]]]) -> dict:
    """The stage's inputs and those its contributions read ([(who, {name: source})]): one name
    read by two of them must name the same file."""
    inputs: dict[str, Input] = dict(stage.inputs)
    owner = dict.fromkeys(inputs, f"stage '{stage.name}'")
    for who, part in parts:
        for name, source in part.items():
            if name in inputs and inputs[name] != source:
                raise CampaignError(
                    f"{who}: input '{name}' is {source!r}, but {owner[name]} reads "
                    f"{inputs[name]!r} under that name"
                )
            inputs.setdefault(name, source)
            owner.setdefault(name, who)
    return inputs


def get_stage(name: str) -> Stage:
    try:
        return stages()[name]
    except KeyError:
        known = ", ".join(stages())
        raise CampaignError(f"unknown stage '{name}' (known: {known})") from None


def produced(ref: Input, declared: Mapping[str, Stage] | None = None) -> Output:
    """The output an input reference names (its producer's declaration); `declared`: the stages
    to look in (default: the registry's)."""
    declared = stages() if declared is None else declared
    if ref.stage not in declared:
        raise CampaignError(f"no stage '{ref.stage}' (known: {', '.join(declared)})")
    producer = declared[ref.stage]
    try:
        return producer.outputs[ref.output]
    except KeyError:
        known = ", ".join(producer.outputs)
        raise CampaignError(
            f"stage '{ref.stage}' has no output '{ref.output}' (it writes: {known})"
        ) from None


# EachGuard expands {guard}, and {run} where its path holds one (a base job has none).
GUARD_EXPANDS = ({"guard"}, {"guard", "run"})


def wiring_problems(declared: Mapping[str, Stage] | None = None) -> list[str]:
    """What is wrong with the stages' declarations, one line each (none: []): an input naming
    an unknown stage or output, an EachRun/EachJob whose path lacks the wildcards it expands,
    a From whose path holds wildcards the consumer's jobs do not have, two stages writing one
    path, a final stage whose outputs expand over more than the runs."""
    declared = stages() if declared is None else declared
    problems = []
    writers: dict[str, str] = {}
    for stage in declared.values():
        for out in stage.outputs.values():
            if out.path in writers:
                problems.append(
                    f"stages '{writers[out.path]}' and '{stage.name}' both write {out.path}"
                )
            writers.setdefault(out.path, stage.name)
        if stage.final and set(stage.wildcards) - {"run"}:
            problems.append(
                f"stage '{stage.name}': final, but its outputs expand over "
                f"{{{', '.join(stage.wildcards)}}} (a target of `snakemake` expands over runs only)"
            )
        for name, ref in {**stage.inputs, **stage.after}.items():
            if isinstance(ref, Derived) and stage.derive_inputs is None:
                problems.append(
                    f"stage '{stage.name}', input '{name}': Derived, but the stage has no "
                    "derive_inputs to find its files"
                )
            if isinstance(ref, REFERENCES):
                problem = _reference_problem(stage, ref, declared)
                if problem:
                    problems.append(f"stage '{stage.name}', input '{name}': {problem}")
    return problems


def _reference_problem(stage: Stage, ref: Input, declared: Mapping[str, Stage]) -> str | None:
    try:
        path = produced(ref, declared).path
    except CampaignError as e:
        return str(e)
    held = set(wildcards_of(path))
    if isinstance(ref, From | PreviousLook):  # the consumer's own wildcards
        extra = held - set(stage.wildcards)
        if extra:
            return (
                f"{path} holds {{{', '.join(sorted(extra))}}}, which the stage's jobs do not "
                "have (EachRun and EachJob expand them)"
            )
    elif isinstance(ref, EachGuard):
        if held not in GUARD_EXPANDS:
            return f"EachGuard needs a path in {{guard}} or {{guard, run}}: {path}"
    elif held != set(ref.expands):
        want = ", ".join(ref.expands)
        return f"{type(ref).__name__} needs a path in {{{want}}}: {path}"
    return None


def final_outputs(params: dict) -> list[Output]:
    """The targets of a bare `snakemake`: every output of every final stage, in DAG order (the
    per-run ones as patterns in `{run}`, expanded over the kept runs by the Snakefile)."""
    return [
        out
        for stage in stages().values()
        if stage.is_final(params)
        for out in stage.outputs.values()
    ]


def _package_dir(package: str) -> Path:
    module = importlib.import_module(package)
    return Path(module.__file__).parent


def member_names(package: str) -> list[str]:
    """Names of a registry's members: its module files (not starting with `_`), sorted."""
    return sorted(
        info.name
        for info in pkgutil.iter_modules([str(_package_dir(package))])
        if not info.name.startswith("_")
    )


def discover(package: str) -> dict[str, ModuleType]:
    """Import every member of a registry package: {name: module}."""
    return {name: importlib.import_module(f"{package}.{name}") for name in member_names(package)}
