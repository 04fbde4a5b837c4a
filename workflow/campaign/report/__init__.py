"""The report phase: the campaign's headline numbers (`dvc metrics show`), and the report a user
reads instead of the logs (HTML and Markdown with figures, curves for `dvc plots show`)."""

from dataclasses import replace

from campaign.core.declare import files_in, sections_by
from campaign.core.errors import CampaignError
from campaign.core.io import module_of
from campaign.core.lazy import exports
from campaign.core.registry import merged_inputs
from campaign.core.stage import (
    EachRun,
    Figure,
    File,
    Findings,
    From,
    Phase,
    ReportSection,
    Stage,
)

# Renderers other commands reuse (`campaign compare`'s report): the same escaping and layout.
_PUBLIC = {"render_html": "stage", "render_markdown": "stage", "md_text": "stage"}
__getattr__, __dir__ = exports(__name__, _PUBLIC)


def _no_spec(params: dict) -> None:
    return None


def _report_spec(params: dict) -> dict:
    return {"campaign": params["campaign"]["name"]}


FIGURE_PATH = "results/report/figures/{key}.png"  # the Markdown links figures/<key>.png
SECTIONS = "campaign.report.render"  # the renderers of the sections the phases declare
_SECTION = sections_by(SECTIONS)  # the verdict's, among them


def sections_of(phases) -> list[ReportSection]:
    """Every phase's report sections, in report order (ReportSection.order, then key)."""
    found = sorted((s for p in phases for s in p.report), key=lambda s: (s.order, s.key))
    keys = [s.key for s in found]
    for key in keys:
        if keys.count(key) > 1:
            raise CampaignError(f"report: two sections declare the key '{key}'")
    return found


def findings_of(phases) -> list[Findings]:
    """Every phase's findings, in DAG order."""
    return [f for p in phases for f in p.findings]


def gather(stage: Stage, phases) -> Stage:
    """The report stage with what the phases contribute: every section's and every findings'
    inputs (one name, one file), a figure output per section with a figure, and the modules
    that render them as part of its code version."""
    sections, findings = sections_of(phases), findings_of(phases)
    parts = [(f"report section '{s.key}'", s.inputs) for s in sections]
    parts += [(f"findings {f.describe}", f.reads) for f in findings]
    figures = {
        f"fig_{s.key}": Figure(FIGURE_PATH.format(key=s.key), s.figure)
        for s in sections
        if s.figure is not None
    }
    code = {module_of(s.render) for s in sections} | {module_of(f.describe) for f in findings}
    return replace(
        stage,
        inputs=merged_inputs(stage, parts),
        outputs={**stage.outputs, **figures},
        code=tuple(sorted(set(stage.code) | code)),
    )


PHASE = Phase(
    name="report",
    order=80,
    # The verdict opens the report: the budget's block, with every phase's findings.
    report=(
        _SECTION(
            "verdict",
            "Verdict",
            0,
            {
                "budget_summary": From("budget", "summary"),
                "decisions": From("evaluate", "decisions"),
            },
        ),
    ),
    stages=(
        Stage(
            name="metrics",
            entry="campaign.report.metrics:stage",
            help="write the campaign's headline metrics",
            inputs={
                "summary": From("manifest", "summary"),
                "runs": From("plan_table", "runs"),
                "run_manifests": EachRun("train", "run_manifest"),
                "decisions": From("evaluate", "decisions"),
            },
            # Read by `dvc metrics show`.
            outputs={"metrics": File("results/metrics.json")},
            final=True,
            spec=_no_spec,
        ),
        Stage(
            name="report",
            entry="campaign.report.stage:stage_report",
            help="write the campaign's report: HTML and Markdown with figures",
            # Its own: the training logs (the curves as CSV); the sections' and the findings'
            # inputs come from the phases that declare them (gather).
            inputs={"run_metrics": EachRun("train", "metrics")},
            # index.html (figures embedded), summary.md (linking figures/, so each figure is
            # written to results/report/figures/<section>.png), the training curves as CSV for
            # `dvc plots show`; `snakemake --report` shows the figures with their captions.
            outputs=files_in(
                "results/report",
                html="index.html",
                markdown="summary.md",
                train_curves="train_curves.csv",
                validation_curves="validation_curves.csv",
            ),
            gather="campaign.report:gather",
            final=True,
            spec=_report_spec,
            # The figures' bytes depend on matplotlib's version (rendering, fonts it ships).
            libraries=("matplotlib", "numpy", "pandas", "pyarrow"),
        ),
    ),
)
