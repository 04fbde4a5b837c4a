"""The figures of the evaluation's and the quantization's report sections (the other phases draw
theirs in their own `section.py`): one pure function per figure, small tables in, a matplotlib
Figure out; campaign.core.figures renders it to the same bytes every time.

matplotlib is imported inside the functions: the package's light modules must stay fast to import.
"""

from __future__ import annotations

import pandas as pd

from campaign.core.figures import ACCENT, BAD, GOOD, NEUTRAL, empty_axes, figure_axes


def effects_figure(effects: pd.DataFrame, min_useful: float, metric: str):
    """Each comparison's effect with its interval, in points; the band is the minimum useful
    effect.

    effects: columns label, estimate, ci_low, ci_high (fractions), decision.
    """
    fig, (ax,) = figure_axes(height_in=max(2.5, 0.55 * len(effects) + 1.4))
    if effects.empty:
        empty_axes(ax, "no comparisons")
        fig.tight_layout()
        return fig
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


def quantize_figure(points: pd.DataFrame, metric: str):
    """Quality against size (left) and latency (right) per variant; each variant has its own
    marker and colour, named in one legend below the axes (names beside crowded points would
    overlap).

    points: columns label, size_bytes, latency_ms, value (quality; NaN where not measured).
    """
    fig, (left, right) = figure_axes(2)
    if points.empty:
        empty_axes(left, "no quantized variant")
        empty_axes(right, "no quantized variant")
        fig.tight_layout()
        return fig
    markers = ("o", "s", "^", "D", "v", "P", "X", "*")
    labels = list(dict.fromkeys(points["label"]))
    style = {
        label: {"marker": markers[i % len(markers)], "color": f"C{i % 10}"}
        for i, label in enumerate(labels)
    }
    for ax, column, xlabel in (
        (left, "size_bytes", "size (KiB)"),
        (right, "latency_ms", "latency p50 (ms)"),
    ):
        shown = points.dropna(subset=[column, "value"])
        if shown.empty:
            empty_axes(ax, f"{xlabel}: not measured")
            continue
        scale = 1 / 1024 if column == "size_bytes" else 1
        for p in shown.itertuples():
            ax.scatter(getattr(p, column) * scale, p.value, s=46, label=p.label, **style[p.label])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric)
        xs = shown[column] * scale
        ax.set_xlim(0, xs.max() * 1.2 if xs.max() > 0 else 1)
        ax.set_title(f"Quality vs {xlabel.split(' ')[0]}")
    handles = {}
    for ax in (left, right):
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    if handles:
        ncol = min(len(handles), 3)
        rows = -(-len(handles) // ncol)
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="lower center",
            ncol=ncol,
            fontsize="small",
            frameon=False,
        )
        fig.tight_layout(rect=(0, min(0.07 * rows + 0.02, 0.5), 1, 1))
    else:
        fig.tight_layout()
    return fig
