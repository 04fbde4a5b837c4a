"""The stage registry: what each stage runs, which code and libraries make up its version.

Imported by the Snakefile at DAG-build time, so it imports nothing heavy; a stage's function
is imported only when the stage runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign.errors import CampaignError

PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Stage:
    name: str
    entry: str  # "module:function" taking a StageContext
    modules: tuple[str, ...]  # whose source text is the stage's code version
    libraries: tuple[str, ...]  # whose installed versions are part of the content key
    inputs: tuple[str, ...]  # logical input names (each one file or a list of files)
    outputs: tuple[str, ...]  # logical output names
    spec: Callable[..., Any]  # (params, **wildcards) -> the params subset the stage reads
    # The part of the spec that decides the result (hashed into the content key); default: all.
    key_view: Callable[[Any], Any] | None = None

    def key_params(self, spec: Any) -> Any:
        return spec if self.key_view is None else self.key_view(spec)

    def module_files(self) -> list[Path]:
        return [PACKAGE_DIR / (m.removeprefix("campaign.") + ".py") for m in self.modules]

    def function(self):
        module_name, func_name = self.entry.split(":")
        return getattr(importlib.import_module(module_name), func_name)


# Each stage reads exactly this subset of params; the Snakefile passes it through `params:` so
# Snakemake's params trigger fires for these keys and no others.
def _data_spec(params: dict) -> dict:
    return params["data"]


def _split_spec(params: dict) -> dict:
    data = params["data"]
    return {
        "sources": data["sources"],
        "fields": data["fields"],
        "privacy": data["privacy"],
        "split": params["split"],
        "seed": params["campaign"]["seed"],
    }


def _run_spec(params: dict, run: str) -> dict:
    from campaign.plan import run_spec

    return run_spec(params, run)


def _plan_spec(params: dict) -> list[dict]:
    from campaign.plan import plan_index, plan_rows

    return plan_rows(list(plan_index(params).values()))


def _preflight_spec(params: dict) -> dict:
    """The baseline recipe (first seed), the checks' settings, and the plan size to project."""
    from campaign.plan import plan_index, resolved_spec

    return {
        "run": resolved_spec(params, {}, params["ablation"]["seeds"][0]),
        "preflight": params["preflight"],
        "plan_size": len(plan_index(params)),
    }


def _no_spec(params: dict) -> None:
    return None


def _run_identity(spec: dict) -> dict:
    from campaign.plan import identity

    return identity(spec)


# What a training job runs and reads (preflight runs the same code on the baseline recipe).
TRAINING_MODULES = tuple(
    f"campaign.{m}" for m in ("train", "models", "batches", "checkpoint", "devices", "hashing")
)
TRAINING_LIBRARIES = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "peft",
    "numpy",
    "pandas",
    "pyarrow",
)
TRAINING_INPUTS = ("train", "validation", "test", "base_model")

STAGES: dict[str, Stage] = {
    s.name: s
    for s in (
        Stage(
            name="manifest",
            entry="campaign.manifest:stage",
            modules=("campaign.manifest", "campaign.hashing"),
            libraries=("pandas", "pyarrow", "blake3"),
            inputs=("sources", "previous"),
            outputs=("manifest", "summary", "diff"),
            spec=_data_spec,
        ),
        Stage(
            name="split",
            entry="campaign.split:stage",
            modules=(
                "campaign.split",
                "campaign.dedup",
                "campaign.privacy",
                "campaign.manifest",
                "campaign.hashing",
            ),
            libraries=("pandas", "pyarrow", "numpy", "blake3"),
            inputs=("sources",),
            outputs=("train", "validation", "test", "audit", "audit_table", "privacy"),
            spec=_split_spec,
        ),
        Stage(
            name="run_spec",
            entry="campaign.plan:stage_run_spec",
            modules=("campaign.plan", "campaign.config", "campaign.hashing"),
            libraries=(),
            inputs=(),
            outputs=("spec",),
            spec=_run_spec,
        ),
        Stage(
            name="preflight",
            entry="campaign.preflight:stage",
            modules=(
                "campaign.preflight",
                *TRAINING_MODULES,
                "campaign.memory",
                "campaign.envreport",
            ),
            libraries=TRAINING_LIBRARIES,
            inputs=TRAINING_INPUTS,
            outputs=("report", "report_text"),
            spec=_preflight_spec,
        ),
        Stage(
            name="train",
            entry="campaign.train:stage",
            modules=TRAINING_MODULES,
            libraries=TRAINING_LIBRARIES,
            inputs=TRAINING_INPUTS,
            outputs=(
                "model",
                "metrics",
                "predictions_validation",
                "predictions_test",
                "run_manifest",
            ),
            spec=_run_spec,
            key_view=_run_identity,
        ),
        Stage(
            name="plan_table",
            entry="campaign.plan:stage_plan_table",
            modules=("campaign.plan", "campaign.config", "campaign.hashing"),
            libraries=(),
            inputs=(),
            outputs=("runs",),
            spec=_plan_spec,
        ),
        Stage(
            name="metrics",
            entry="campaign.metrics:stage",
            modules=("campaign.metrics",),
            libraries=(),
            inputs=("summary", "runs", "run_manifests"),
            outputs=("metrics",),
            spec=_no_spec,
        ),
    )
}


def get_stage(name: str) -> Stage:
    try:
        return STAGES[name]
    except KeyError:
        raise CampaignError(f"unknown stage '{name}' (known: {', '.join(STAGES)})") from None


def stage_spec_text(name: str, params: dict, **wildcards) -> str:
    """The stage's params subset as canonical JSON: what a rule passes to the stage command."""
    from campaign.hashing import canonical_json

    return canonical_json(get_stage(name).spec(params, **wildcards))


def code_files(name: str) -> list[str]:
    """The stage's module files, relative to the working folder when inside it (for Snakemake)."""
    out = []
    for path in get_stage(name).module_files():
        try:
            out.append(str(path.relative_to(Path.cwd())))
        except ValueError:
            out.append(str(path))
    return out
