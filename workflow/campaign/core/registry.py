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
from pathlib import Path
from types import ModuleType

import campaign
from campaign.core.errors import CampaignError
from campaign.core.stage import Phase, Stage

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
    out: dict[str, Stage] = {}
    for phase in phases():
        for stage in phase.stages:
            if stage.name in out:
                raise CampaignError(f"stage '{stage.name}' is declared twice ({phase.name})")
            out[stage.name] = stage
    return out


def get_stage(name: str) -> Stage:
    try:
        return stages()[name]
    except KeyError:
        known = ", ".join(stages())
        raise CampaignError(f"unknown stage '{name}' (known: {known})") from None


def stage_spec_text(name: str, params: dict, **wildcards) -> str:
    """The stage's params subset as canonical JSON: what a rule passes to the stage command."""
    from campaign.core.hashing import canonical_json

    return canonical_json(get_stage(name).spec(params, **wildcards))


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
