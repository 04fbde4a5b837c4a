"""docs/registries.md from the registries: every quantization variant, preflight check, ablation
design, task, metric and floor the code accepts, read from where the params check reads them.

Run `python -m campaign.tools.registries_doc` to rewrite it, `--check` to fail when it is out of
date (tests/tools/test_registries_doc.py does), so a new module shows here at once.
"""

from __future__ import annotations

import ast
import contextlib
import sys
from pathlib import Path

import yaml

from campaign.core.params import SCHEMA_PATH
from campaign.core.tasks import TASKS
from campaign.tools.docgen import ROOT
from campaign.tools.docgen import main as generate

DOC_PATH = ROOT / "docs" / "registries.md"
PACKAGE = ROOT / "workflow" / "campaign"


def summary(path: Path) -> str:
    """A module's docstring, first paragraph, on one line, less its leading `name: `."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    return text.split(": ", 1)[1] if text.startswith(f"{path.stem}: ") else text


def _cell(value) -> str:
    if isinstance(value, (tuple, list)):
        value = ", ".join(str(v) for v in value)
    return str(value).replace("|", "\\|")


def constants(path: Path) -> dict:
    """A module's top-level literal assignments (`METHOD = "..."`), read without importing it:
    the tools use other phases through their public names only."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
            with contextlib.suppress(ValueError, TypeError, SyntaxError):
                found[target.id] = ast.literal_eval(node.value)
    return found


def variants() -> list[str]:
    from campaign.core.registry import discover
    from campaign.quantize import get_variant

    # The registry the params check reads (`quantization.variants` takes these names).
    found = discover("campaign.quantize.variants")
    rows = ["| variant | method | library | devices | tasks |", "| --- | --- | --- | --- | --- |"]
    for name in sorted(found):
        module = found[name]
        method = module.METHOD
        if getattr(module, "CANARY", False):
            method += " (a canary: built to be rejected)"
        needs = getattr(module, "NEEDS", None)  # what the run's model must have: its tasks
        tasks = get_variant(name).tasks if needs else "every task"
        cells = [f"`{name}`", method, module.LIBRARY, module.DEVICES, tasks]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return rows


def modules(folder: str) -> list[tuple[str, str]]:
    """(name, summary) of every module of a registry folder, read without importing it."""
    found = sorted(p for p in (PACKAGE / folder).glob("*.py") if not p.stem.startswith("_"))
    return [(p.stem, summary(p)) for p in found]


def checks() -> list[str]:
    def order(path: Path) -> int:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "ORDER" for t in node.targets
            ):
                return ast.literal_eval(node.value)
        return 0

    folder = PACKAGE / "preflight" / "checks"
    names = sorted(modules("preflight/checks"), key=lambda m: (order(folder / f"{m[0]}.py"), m[0]))
    return ["| check | what it checks |", "| --- | --- |"] + [
        f"| `{name}` | {_cell(text)} |" for name, text in names
    ]


def designs() -> list[str]:
    return ["| design | cells |", "| --- | --- |"] + [
        f"| `{name}` | {_cell(text)} |" for name, text in modules("plan/designs")
    ]


def tasks() -> list[str]:
    from campaign.core.tasks import floors_of, module_of, packing_refusal, scoring_of

    schema = yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
    names = schema["properties"]["model"]["properties"]["task"]["enum"]
    rows = ["| task | scored by | floors | decided on | packs |", "| --- | --- | --- | --- | --- |"]
    for name in names:
        metric = f"`{module_of(name).decision_key()}`"
        floors = ", ".join(f"`{f}`" for f in floors_of(name))
        packs = "no" if packing_refusal(name) else "yes"
        rows.append(f"| `{name}` | {scoring_of(name)} | {floors} | {metric} | {packs} |")
    return rows


def text_metrics() -> tuple[list[str], dict]:
    """The generated-text metrics (METRICS of the text_scores.py in a task's package, in
    order) and the libraries in their key, read from the module's source."""
    path = next(
        folder / "text_scores.py"
        for folder in (PACKAGE.parent.joinpath(*t.module.split(".")) for t in TASKS.values())
        if (folder / "text_scores.py").is_file()
    )
    names, libraries = [], constants(path).get("METRIC_LIBRARIES", {})
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "METRICS":
            names = [k.value for k in node.value.keys]
    return names, libraries


def metrics() -> list[str]:
    schema = yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
    label = schema["properties"]["evaluation"]["properties"]["metric"]["enum"]
    rows = ["| metric | key | tasks | libraries in the key |", "| --- | --- | --- | --- |"]
    rows += [f"| `{m}` | `evaluation.metric` | the label tasks | |" for m in label]
    names, libraries = text_metrics()
    for name in names:
        rows.append(
            f"| `{name}` | `model.generation.metric` | generation "
            f"| {', '.join(libraries.get(name, ()))} |"
        )
    rows.append(
        "| a dotted name `package.module.function` | `model.generation.metric` | generation "
        "| its module file, by content |"
    )
    return rows


def render() -> str:
    sections = [
        ("Quantization variants", "Named in `quantization.variants`.", variants),
        ("Preflight checks", "Named in `preflight.blocking`; in report order.", checks),
        ("Ablation designs", "Named in `ablation.design`.", designs),
        ("Tasks", "Named in `model.task`; its floors are what `evaluation.floor` may name.", tasks),
        ("Metrics", "What a campaign is decided on.", metrics),
    ]
    lines = [
        "# Registries",
        "",
        "<!-- Generated by `python -m campaign.tools.registries_doc` from the registries. -->",
        "",
        "Every name the params accept where a registry decides: one module per entry (adding one:",
        "[extending.md](extending.md)).",
    ]
    for title, key, rows in sections:
        lines += ["", f"## {title}", "", key, "", *rows()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    doc = __doc__.split("\n\n")[0]
    return generate(render, DOC_PATH, "campaign.tools.registries_doc", doc, argv)


if __name__ == "__main__":
    sys.exit(main())
