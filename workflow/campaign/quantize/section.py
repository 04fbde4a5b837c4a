"""What quantization shows: its report section (each variant's size, latency and quality on the
decision split, and the variants skipped with why) and its figure.

matplotlib is imported inside the figure function: the package's light modules must stay fast
to import.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from campaign.core.figures import empty_axes, empty_figure, figure_axes
from campaign.core.io import read_table
from campaign.core.stage import Section


def quantize_section(variants_path: Path, metrics: pd.DataFrame, decisions) -> Section:
    """The quantized variants' quality against size and latency (`decisions`: the evaluation's
    records, campaign.evaluate.Decisions)."""
    variants = read_table(
        variants_path, ("run", "variant", "status", "size_bytes", "latency_ms_p50")
    )
    metric, split = decisions.metric, decisions.decide_on
    quality = metrics[(metrics["metric"] == metric) & (metrics["split"] == split)]
    quality = quality.set_index("variant")["value"]
    points = []
    for v in variants[variants["status"] == "ok"].itertuples():
        points.append(
            {
                "label": f"{v.run}/{v.variant}",
                "size_bytes": float(v.size_bytes),
                "latency_ms": float(v.latency_ms_p50),
                "value": quality.get(f"{v.run}/{v.variant}", math.nan),
            }
        )
        ratio = getattr(v, "size_ratio", math.nan)
        speedup = getattr(v, "speedup", math.nan)
        base = {"label": f"{v.run} (fp32)", "value": quality.get(v.run, math.nan)}
        if (
            pd.notna(ratio)
            and pd.notna(speedup)
            and base["label"] not in {p["label"] for p in points}
        ):
            points.append(
                base
                | {"size_bytes": v.size_bytes * ratio, "latency_ms": v.latency_ms_p50 * speedup}
            )
    points = pd.DataFrame(points, columns=["label", "size_bytes", "latency_ms", "value"])
    shown = [
        c
        for c in (
            "run",
            "variant",
            "status",
            "reason",
            "size_bytes",
            "latency_ms_p50",
            "size_ratio",
            "speedup",
            "agreement",
        )
        if c in variants
    ]
    table = variants[shown].copy()
    table[metric] = [
        quality.get(f"{r}/{v}", math.nan)
        for r, v in zip(table["run"], table["variant"], strict=True)
    ]
    skipped = variants[variants["status"] != "ok"]
    lines = [
        f"{int((variants['status'] == 'ok').sum())} quantized variant(s) measured; "
        f"{split} {metric} against size and latency."
    ]
    for s in skipped.itertuples():
        lines.append(
            f"{s.run}/{s.variant} {s.status}: {getattr(s, 'reason', '') or ''}".rstrip(": ")
        )
    for s in decisions.skipped_variants:
        lines.append(f"skipped: {s.variant}: {s.reason or 'no reason given'}")
    return Section(
        lines,
        [("Variants", table)],
        (quantize_figure, (points, metric)),
    )


def render_quantize(inputs) -> Section:
    return quantize_section(inputs.one("variants"), inputs.metrics(), inputs.decisions())


def quantize_figure(points: pd.DataFrame, metric: str):
    """Quality against size (left) and latency (right) per variant; each variant has its own
    marker and colour, named in one legend below the axes (names beside crowded points would
    overlap).

    points: columns label, size_bytes, latency_ms, value (quality; NaN where not measured).
    """
    fig, (left, right) = figure_axes(2)
    if points.empty:
        return empty_figure(fig, "no quantized variant")
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
