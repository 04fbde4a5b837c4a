"""docs/stages.md from the stage registry: for every stage, in DAG order, the rule that runs it
(rule file and name), the function its job calls, its inputs (where each comes from, with the
path), its outputs (path and kind) and what it reads of the params (its `--spec`, shown for the
project's params.yaml).

The page is how a Snakemake user goes from a rule to the Python behind it in one step, and back.
Run `python -m campaign.tools.stages_doc` to rewrite it, `--check` to fail when it is out of date
(tests/tools/test_stages_doc.py does), so a stage added, renamed or rewired shows here at once.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml

from campaign.core.params import validate
from campaign.core.registry import phases, produced, stages
from campaign.core.stage import (
    Derived,
    EachGuard,
    EachJob,
    EachLook,
    EachLookRun,
    EachRun,
    Figure,
    Folder,
    From,
    Nothing,
    PreviousLook,
    Stage,
)
from campaign.tools.docgen import PARAMS_PATH, ROOT
from campaign.tools.docgen import main as generate

RULES_DIR = ROOT / "workflow" / "rules"
DOC_PATH = ROOT / "docs" / "stages.md"

# `rule name:` / `checkpoint name:` (indented inside an `if`, as the adaptive looks are).
_RULE = re.compile(r"^\s*(rule|checkpoint)\s+(\w+)\s*:")
_SHELL = re.compile(r"stage_shell\(\"(\w+)\"\)")

# How each input kind reads in the table: what the job gets.
_KIND = {
    From: "one file",
    EachRun: "one per kept run",
    EachLookRun: "one per run of the look",
    EachLook: "one per look",
    PreviousLook: "the look before",
    EachJob: "one per quantize job",
    EachGuard: "one per guard task (x kept run)",
}


def rules_of(rules_dir: Path = RULES_DIR) -> dict[str, tuple[str, str, str]]:
    """{stage: (rule file, rule or checkpoint, its name)}: the rule whose shell runs the stage."""
    found: dict[str, tuple[str, str, str]] = {}
    for path in sorted(rules_dir.glob("*.smk")):
        current = None
        for line in path.read_text(encoding="utf-8").splitlines():
            if m := _RULE.match(line):
                current = (m.group(1), m.group(2))
            elif (m := _SHELL.search(line)) and current is not None:
                found[m.group(1)] = (f"workflow/rules/{path.name}", *current)
    return found


def _input_row(name: str, source, declared: Mapping[str, Stage]) -> str:
    if isinstance(source, Derived):
        return f"| `{name}` | the files the params name | — |"
    if isinstance(source, Nothing):
        return f"| `{name}` | none in the DAG (a person may pass one) | — |"
    path = produced(source, declared).path
    ancient = " (its age never reruns the job)" if getattr(source, "ancient", False) else ""
    return (
        f"| `{name}` | `{source.stage}` → `{source.output}`, {_KIND[type(source)]}{ancient} "
        f"| `{path}` |"
    )


def _output_kind(output) -> str:
    if isinstance(output, Folder):
        return "folder"
    if isinstance(output, Figure):
        return f"figure ({output.category})"
    return "file"


def spec_keys(stage: Stage, params: dict) -> list[str]:
    """The names in the stage's params subset for `params` (a dict's keys one level down too):
    what a change must touch to rerun the stage."""
    from campaign.guards import guard_names
    from campaign.plan import kept_runs  # the plan's runs give a per-run stage its wildcards

    values = {
        "run": (kept_runs(params) or [""])[0],
        "variant": (params["quantization"]["variants"] or [""])[0],
        "look": "1",
        # a guard job's params with a guard where params.yaml names none (evaluation.guards)
        "guard": (guard_names(params) or ["<guard>"])[0],
    }
    if not guard_names(params):
        evaluation = {**params["evaluation"], "guards": [{"task": "<guard>"}]}
        params = {**params, "evaluation": evaluation}
    spec = stage.spec(params, **{w: values[w] for w in stage.wildcards}) or {}
    keys = []
    for key, value in spec.items():
        inner = ", ".join(sorted(value)) if isinstance(value, dict) and value else ""
        keys.append(f"`{key}` ({inner})" if inner else f"`{key}`")
    return keys


def stage_block(stage: Stage, rule: tuple[str, str, str] | None, params: dict) -> Iterator[str]:
    declared = stages()
    yield f"### {stage.name}"
    yield ""
    yield stage.help
    yield ""
    where = f"`{rule[1]} {rule[2]}` in `{rule[0]}`" if rule else "no rule (run by hand)"
    yield f"- **rule:** {where}"
    yield f"- **runs:** `{stage.entry}` (`campaign {stage.command}`)"
    if stage.wildcards:
        yield f"- **one job per:** {', '.join(f'`{{{w}}}`' for w in stage.wildcards)}"
    keys = spec_keys(stage, params)
    yield f"- **reads of the params:** {'; '.join(keys) if keys else 'nothing'}"
    yield ""
    if stage.inputs:
        yield "| input | from | path |"
        yield "| --- | --- | --- |"
        yield from (_input_row(n, s, declared) for n, s in stage.inputs.items())
        yield ""
    yield "| output | kind | path |"
    yield "| --- | --- | --- |"
    for name, output in stage.outputs.items():
        yield f"| `{name}` | {_output_kind(output)} | `{output.path}` |"
    yield ""


def render(params: dict) -> str:
    """The whole page for `params` (validated)."""
    rules = rules_of()
    lines = [
        "# Stages",
        "",
        "Generated from the stage declarations (each phase's `__init__.py`) by",
        "`python -m campaign.tools.stages_doc`; do not edit by hand. Every rule is the same",
        "wiring (`workflow/rules/common.smk`: `stage_inputs`, `stage_outputs`, `stage_params`,",
        "`stage_shell`): its job runs `campaign <command>`, which calls the function named here",
        "through the runner and the store. Params are those of `params.yaml`.",
        "",
    ]
    for phase in phases():
        if not phase.stages:
            continue
        lines += [f"## {phase.name}", ""]
        for stage in phase.stages:
            lines += list(stage_block(stages()[stage.name], rules.get(stage.name), params))
    return "\n".join(lines).rstrip("\n") + "\n"


def load_params(path: Path = PARAMS_PATH) -> dict:
    with open(path, encoding="utf-8") as f:
        params = yaml.safe_load(f)
    validate(params, source=str(path.name))
    return params


def main(argv: list[str] | None = None) -> int:
    def page() -> str:
        return render(load_params())

    doc = __doc__.split("\n\n")[0]
    return generate(page, DOC_PATH, "campaign.tools.stages_doc", doc, argv)


if __name__ == "__main__":
    sys.exit(main())
