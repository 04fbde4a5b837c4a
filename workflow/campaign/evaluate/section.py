"""What the evaluation shows: its report sections (the ablation effects, the seed spread against
the reference floor, an adaptive campaign's looks, every decision in words) and their figures.
Each renderer reads the report stage's inputs by name (campaign.report.render.ReportInputs); the
section functions take paths and tables, so a test calls them without a stage.

matplotlib is imported inside the figure functions: the package's light modules must stay fast
to import.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from campaign.core.figures import ACCENT, BAD, GOOD, NEUTRAL, empty_axes, empty_figure, figure_axes
from campaign.core.io import read_table
from campaign.core.stage import Section
from campaign.core.wording import level_words
from campaign.evaluate.records import Decisions


def effects_section(comparisons_path: Path, decisions: Decisions) -> Section:
    comparisons = read_table(
        comparisons_path,
        ("split", "kind", "subject", "reference", "estimate", "ci_low", "ci_high", "decision"),
    )
    on = comparisons[(comparisons["split"] == decisions.decide_on)]
    effects = on[on["kind"] != "floor"].copy()
    effects["label"] = [
        subject if subject.endswith(f"({kind})") else f"{subject} ({kind})"
        for subject, kind in zip(effects["subject"], effects["kind"], strict=True)
    ]
    shown = ["kind", "subject", "reference", "n_seeds", "estimate", "ci_low", "ci_high"]
    shown += [c for c in ("p_holm", "seed_sd", "seeds_needed", "decision") if c in effects]
    lines = [
        f"Effects on {decisions.decide_on} {decisions.metric} against the reference, with "
        f"{decisions.confidence or 0.95:.0%} intervals; the minimum useful effect is "
        f"{(decisions.min_useful_effect or 0) * 100:.1f} points.",
        f"{len(effects)} comparison(s): "
        + ", ".join(f"{n} {d}" for d, n in effects["decision"].value_counts().sort_index().items())
        + ".",
    ]
    return Section(
        lines,
        [(f"Comparisons ({decisions.decide_on})", effects[[c for c in shown if c in effects]])],
        (
            effects_figure,
            (
                effects[["label", "estimate", "ci_low", "ci_high", "decision"]],
                float(decisions.min_useful_effect or 0.0),
                decisions.metric,
            ),
        ),
    )


def seeds_section(metrics: pd.DataFrame, comparisons_path: Path, decisions: Decisions) -> Section:
    metric, split = decisions.metric, decisions.decide_on
    rows = metrics[(metrics["metric"] == metric) & (metrics["split"] == split)]
    per_seed = rows[rows["kind"] == "run"][["cell", "seed", "value", "run"]].dropna(subset=["cell"])
    cells = rows[rows["kind"] == "cell"][["cell", "value", "ci_low", "ci_high"]]
    floors = rows[rows["kind"] == "floor"][["variant", "value", "ci_low", "ci_high"]]
    comparisons = read_table(comparisons_path, ("split", "kind", "subject", "decision"))
    vs_floor = comparisons[(comparisons["kind"] == "floor") & (comparisons["split"] == split)]
    spread = (
        per_seed.groupby("cell")["value"]
        .agg(seeds="size", mean="mean", sd="std", low="min", high="max")
        .reset_index()
    )
    lines = [
        f"{len(per_seed)} run(s) in {len(spread)} cell(s), {split} {metric}; each dot is one "
        f"seed, the bar the cell's mean and interval; the lines are the reference floors.",
        "Reference floor: "
        + "; ".join(
            f"{f.variant} {level_words(f.value, f.ci_low, f.ci_high)}" for f in floors.itertuples()
        )
        + ".",
    ]
    for c in vs_floor.itertuples():
        lines.append(f"{c.subject} vs {c.reference}: {c.decision}.")
    return Section(
        lines,
        [
            ("Seed spread per cell", spread),
            ("Reference floor", floors),
            (
                "Cells against the floor",
                vs_floor[["subject", "reference", "estimate", "ci_low", "ci_high", "decision"]],
            ),
        ],
        (
            seeds_figure,
            (per_seed[["cell", "seed", "value"]], cells, floors[["variant", "value"]], metric),
        ),
    )


def decisions_section(decisions: Decisions) -> Section:
    """The verdict first, then the kept cell's held-out number (its `reported` level: the split
    it was not chosen on, free of the winner's curse), then the decisions in words."""
    lines = list(decisions.lines)
    verdict = decisions.verdict.line if decisions.verdict is not None else None
    if verdict:
        lines = [verdict, *(line for line in lines if line != verdict)]
    best = decisions.best_cell
    if best is not None:
        chosen_on = best.chosen_on or decisions.decide_on
        reported = best.reported
        runs = ", ".join(best.runs)
        if reported.value is not None:
            level = level_words(reported.value, reported.ci_low, reported.ci_high)
            value = f"{best.reported_on} {decisions.metric} {level}; chosen on {chosen_on}"
            if best.reported_cells:  # the keep chose among the cells: Bonferroni over them
                value += f"; interval for all {best.reported_cells} cells at once"
        else:
            level = level_words(best.value, best.ci_low, best.ci_high)
            value = f"{chosen_on} {decisions.metric} {level}; chosen on it: optimistic"
        lines.insert(1 if lines else 0, f"Best cell: {best.cell} ({value}; runs {runs}).")
    columns = ["kind", "subject", "reference", "estimate", "decision"]
    table = pd.DataFrame(
        [{k: getattr(d, k) for k in columns} for d in decisions.decisions], columns=columns
    )
    return Section(lines, [("Decisions", table)], None)


# What a generated-text campaign shows of its outputs (errors/<name>.parquet; empty or absent
# for the label tasks, whose section is then left out).
SAMPLE_COLUMNS = ("variant", "split", "id", "score", "reference", "prediction")


def samples_section(errors: Path, metrics: pd.DataFrame, decisions: dict) -> Section | None:
    """What the variants generated: the first items of the decision split for every variant,
    the lowest-scored items of each, the generation metric and perplexity per variant, and for
    JSON extraction the per-field outcomes. The report escapes every text (HTML and Markdown):
    a generated answer is data, never markup. None when the campaign generates nothing."""
    path = Path(errors) / "samples.parquet"
    if not path.is_file():
        return None
    samples = read_table(path, SAMPLE_COLUMNS)
    if samples.empty:
        return None
    split, metric = decisions.decide_on, decisions.metric
    shown = samples[samples["split"] == split][
        ["variant", "id", "score", "reference", "prediction"]
    ]
    worst = read_table(Path(errors) / "worst.parquet", SAMPLE_COLUMNS)
    worst = worst[(worst["split"] == split) & ~worst["variant"].str.startswith("cell: ")]
    rows = metrics[(metrics["split"] == split) & metrics["metric"].isin([metric, "perplexity"])]
    scores = rows.pivot_table(index="variant", columns="metric", values="value", aggfunc="first")
    lines = [
        f"Generated text on {split}, each item scored by {metric} in [0, 1] against its reference "
        f"(1: the same answer); perplexity is exp of the mean loss per answer token (trained runs "
        f"only). First {shown['id'].nunique()} items of every variant, then each variant's "
        "lowest-scored items.",
    ]
    tables = [
        (f"Scores per variant ({split})", scores.reset_index()),
        (f"Samples ({split})", shown.reset_index(drop=True)),
        (f"Lowest-scored items ({split})", worst.drop(columns="split").reset_index(drop=True)),
    ]
    fields = Path(errors) / "fields.parquet"
    if fields.is_file():
        table = pd.read_parquet(fields)
        if not table.empty:
            tables.append((f"JSON fields ({split})", table[table["split"] == split]))
    more_lines, more_tables = cell_errors(Path(errors), split)
    return Section(lines + more_lines, tables + more_tables, None)


# Fixed and broken items the report lists (the largest changes; the file holds them all).
CHANGES_SHOWN = 20


def cell_errors(errors: Path, split: str) -> tuple[list[str], list]:
    """The cells' error analysis (tasks/generation/errors.py) on `split`: each cell's
    lowest-scored items pooled over its seeds, and the items fixed and broken between the
    control and the kept option, counted and listed. ([], []) for an evaluation without them."""
    from campaign.evaluate.errors import CHANGE_RULE, KEPT_CHANGE_COLUMNS, WORST_CELL_COLUMNS

    lines, tables = [], []
    worst_path, changes_path = errors / "worst_cells.parquet", errors / "kept_changes.parquet"
    if worst_path.is_file():
        worst = read_table(worst_path)
        if not worst.empty:
            worst = worst[worst["split"] == split][list(WORST_CELL_COLUMNS)]
            tables.append(
                (
                    f"Lowest-scored items per cell, pooled over seeds ({split})",
                    worst.drop(columns="split").reset_index(drop=True),
                )
            )
    if changes_path.is_file():
        changes = read_table(changes_path)
        if not changes.empty:
            changes = changes[changes["split"] == split][list(KEPT_CHANGE_COLUMNS)]
        if not changes.empty:
            kept, control = changes["kept"].iloc[0], changes["control"].iloc[0]
            fixed = int((changes["change"] == "fixed").sum())
            lines.append(
                f"From the control ({control}) to the kept option ({kept}) on {split}: {fixed} "
                f"items fixed, {len(changes) - fixed} broken ({CHANGE_RULE}); the "
                f"{CHANGES_SHOWN} largest pooled changes below, every one in "
                "results/evaluation/errors/kept_changes.parquet."
            )
            shown = changes.drop(columns=["split", "kept", "control"]).head(CHANGES_SHOWN)
            title = f"Items fixed and broken, kept option against the control ({split})"
            tables.append((title, shown.reset_index(drop=True)))
    return lines, tables


def render_samples(inputs) -> Section | None:
    return samples_section(inputs.one("errors"), inputs.metrics(), inputs.decisions())


def render_effects(inputs) -> Section:
    return effects_section(inputs.one("comparisons"), inputs.decisions())


def render_seeds(inputs) -> Section:
    return seeds_section(inputs.metrics(), inputs.one("comparisons"), inputs.decisions())


def render_decisions(inputs) -> Section:
    return decisions_section(inputs.decisions())


def render_looks(inputs) -> Section | None:
    """The section for an adaptive campaign, None for a fixed one."""
    lines = inputs.decisions().adaptive_looks or []
    if not lines:
        return None
    return Section(pre="\n".join(lines))


def effects_figure(effects: pd.DataFrame, min_useful: float, metric: str):
    """Each comparison's effect with its interval, in points; the band is the minimum useful
    effect.

    effects: columns label, estimate, ci_low, ci_high (fractions), decision.
    """
    fig, (ax,) = figure_axes(height_in=max(2.5, 0.55 * len(effects) + 1.4))
    if effects.empty:
        return empty_figure(fig, "no comparisons")
    y = list(range(len(effects)))
    est = effects["estimate"] * 100
    low = (effects["estimate"] - effects["ci_low"]) * 100
    high = (effects["ci_high"] - effects["estimate"]) * 100
    colors = [
        GOOD if d == "adopt" else BAD if d == "reject" else NEUTRAL for d in effects["decision"]
    ]
    ax.axvspan(-min_useful * 100, min_useful * 100, color="#eeeeee", label="below useful effect")
    ax.axvline(0, color="black", linewidth=0.8)
    for i in y:
        ax.errorbar(
            est.iloc[i],
            i,
            xerr=[[low.iloc[i]], [high.iloc[i]]],
            fmt="o",
            capsize=4,
            color=colors[i],
        )
        ax.text(
            est.iloc[i],
            i - 0.25,
            f"{est.iloc[i]:+.1f} ({effects['decision'].iloc[i]})",
            ha="center",
            fontsize="small",
        )
    ax.set_yticks(y, effects["label"])
    ax.invert_yaxis()
    ax.set_ylim(len(y) - 0.5, -0.8)
    ax.set_xlabel(f"effect on {metric} (points, with interval)")
    ax.set_title("Ablation and quantization effects")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig


def seeds_figure(per_seed: pd.DataFrame, cells: pd.DataFrame, floors: pd.DataFrame, metric: str):
    """Each cell's seeds (dots), its mean with interval (bar), and the reference floors (lines).

    per_seed: columns cell, seed, value. cells: columns cell, value, ci_low, ci_high.
    floors: columns variant, value.
    """
    fig, (ax,) = figure_axes()
    names = sorted(set(per_seed["cell"]) | set(cells["cell"]))
    if not names:
        empty_axes(ax, "no cells")
    x = {c: i for i, c in enumerate(names)}
    for c in cells.itertuples():
        lo, hi = max(c.value - c.ci_low, 0), max(c.ci_high - c.value, 0)
        ax.errorbar(
            x[c.cell],
            c.value,
            yerr=[[lo], [hi]],
            fmt="_",
            markersize=18,
            capsize=6,
            color=ACCENT,
            label="cell mean, interval" if x[c.cell] == 0 else None,
        )
    # Seeds side by side right of the cell's bar (no text per dot: equal scores would stack
    # their labels); the legend says what a dot is.
    ordered = per_seed.sort_values(["cell", "seed"])
    rank = ordered.groupby("cell").cumcount()
    for i, (s, k) in enumerate(zip(ordered.itertuples(), rank, strict=True)):
        ax.scatter(
            x[s.cell] + 0.12 + 0.06 * k,
            s.value,
            color=BAD,
            zorder=3,
            label="one seed" if i == 0 else None,
        )
    for f, style in zip(floors.itertuples(), ("--", ":", "-."), strict=False):
        ax.axhline(f.value, color=NEUTRAL, linestyle=style, label=f"floor: {f.variant}")
    # One factor a line, so names side by side stay apart; upright when many cells.
    ax.set_xticks(range(len(names)), [n.replace(", ", "\n") for n in names], fontsize="small")
    if len(names) > 6:
        ax.tick_params(axis="x", labelrotation=90)
    ax.set_xlim(-0.6, max(len(names) - 0.4, 0.6))
    lows = [*cells["ci_low"], *per_seed["value"], *floors["value"]]
    highs = [*cells["ci_high"], *per_seed["value"], *floors["value"]]
    if lows:
        ax.set_ylim(max(min(lows), 0) - 0.05, min(max(highs), 1) + 0.05)
    ax.set_ylabel(metric)
    ax.set_title("Seed spread per cell, against the reference floor")
    # Outside the axes: inside, it could cover a cell's dots or bar.
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
