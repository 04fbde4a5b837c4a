"""compare's report (report.md, report.html): the verdict block, the assumptions, each scope's
decisions with their intervals, the models' levels, and what would decide each open question;
rendered by the report phase's renderers (the same escaping and layout as the campaign's)."""

from __future__ import annotations

from pathlib import Path

from campaign.core.stage import Section
from campaign.evaluate import evaluation_flags, evaluation_verdict, verdict_block

COSTS = "not measured (compare reads scores only)"

COMPARED = ["subject", "reference", "estimate", "ci_low", "ci_high", "adj_low", "adj_high",
            "p_holm", "n_seeds", "decision"]  # fmt: skip
LEVELS = ["variant", "value", "ci_low", "ci_high", "interval_over"]
ADVICE = ["scope", "question", "decision", "seeds_needed", "items_needed", "items_now", "note"]


def summary_lines(scope) -> list[str]:
    """A scope's verdict block (words.verdict_block on the stage's values), then its lines."""
    d = scope.decisions
    block = verdict_block(evaluation_verdict(d, evaluation_flags(d), COSTS, None))
    return [*block, "", *d.lines]


def advice_rows(scopes) -> list[dict]:
    """One row per open question of every scope: the seeds per cell or the evaluation items that
    would decide it (sized by the stage's what_would_decide), or why none is given."""
    rows = []
    for s in scopes:
        for q in s.decisions.open_questions:
            rows.append(
                {
                    "scope": s.name,
                    "question": q.subject,
                    "decision": q.decision,
                    "n_seeds": q.n_seeds,
                    "seeds_needed": q.seeds_needed,
                    "seeds_needed_low": q.seeds_needed_low,
                    "seeds_needed_high": q.seeds_needed_high,
                    "items_needed": q.items_needed,
                    "items_now": s.n_items,
                    "dominant": q.dominant,
                    "note": q.items_note or q.seeds_note,
                }
            )
    return rows


def _table(rows: list[dict], columns: list[str]):
    import pandas as pd

    frame = pd.DataFrame(rows)
    return frame[[c for c in columns if c in frame.columns]] if len(frame) else frame


def sections(scopes, primary, assumed, meta) -> list[Section]:
    first = next((s for s in scopes if s.name == primary), None)
    out = [
        Section(
            lines=summary_lines(first)[: summary_lines(first).index("")]
            if first
            else ["No single verdict: several tasks and no pooled decision (--pool items)"],
            key="verdict",
            title="Verdict",
        ),
        Section(
            lines=[*assumed, *(f"{r['name']}: {r['source']}" for r in meta.get("runs", []))],
            key="inputs",
            title="Inputs and assumptions",
        ),
    ]
    for s in scopes:
        out.append(
            Section(
                lines=list(s.decisions.lines),
                tables=[
                    (
                        f"{s.name}: comparisons ({s.metric}, {s.n_items} items)",
                        _table(s.comparisons, COMPARED),
                    ),
                    (f"{s.name}: each run's level", _table(s.metrics, LEVELS)),
                ],  # fmt: skip
                key=f"scope-{len(out)}",
                title=s.name,
            )
        )
    advice = advice_rows(scopes)
    out.append(
        Section(
            lines=["What would decide each open question (seeds per model, or evaluation items)"]
            if advice
            else ["No question is left open"],
            tables=[("Open questions", _table(advice, ADVICE))] if advice else [],
            key="advice",
            title="What would decide the open questions",
        )
    )
    return out


def write_report(folder: Path, scopes, primary, assumed, meta) -> None:
    from campaign.report import render_html, render_markdown

    parts = sections(scopes, primary, assumed, meta)
    title = "Compare: " + ", ".join(sorted({r["model"] for r in meta.get("runs", [])}))
    (folder / "report.md").write_text(render_markdown(title, parts, {}), encoding="utf-8")
    (folder / "report.html").write_text(render_html(title, parts, {}), encoding="utf-8")
