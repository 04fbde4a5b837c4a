"""The report's figures: one pure function per figure, small tables in, a matplotlib Figure out,
and `png_bytes` to render one the same way every time (fixed size, no date or software stamp, so
the same tables give the same bytes and `campaign reproduce` can compare them).

matplotlib is imported inside the functions: the package's light modules must stay fast to import.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

WIDTH_IN, HEIGHT_IN, DPI = 9.0, 4.6, 100  # 900 x 460 pixels
GOOD, BAD, NEUTRAL, ACCENT = "#2a9d8f", "#e76f51", "#8d99ae", "#264653"


def _figure(ncols: int = 1, height_in: float = HEIGHT_IN):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(WIDTH_IN, height_in), dpi=DPI, squeeze=False)
    return fig, list(axes[0])


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes, without the metadata that differs between renders; closes it."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _empty(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color=NEUTRAL)
    ax.set_xticks([])
    ax.set_yticks([])


def data_figure(per_source_label: pd.DataFrame, privacy_kinds: pd.DataFrame):
    """Left: records per label, stacked by source. Right: privacy findings per kind.

    per_source_label: columns source, label, records. privacy_kinds: columns kind, records.
    """
    fig, (left, right) = _figure(2)
    if per_source_label.empty:
        _empty(left, "no records")
    else:
        table = per_source_label.pivot_table(
            index="label", columns="source", values="records", aggfunc="sum", fill_value=0
        ).sort_index()
        bottom = pd.Series(0, index=table.index)
        for source in table.columns:
            left.bar(table.index, table[source], bottom=bottom, label=source)
            bottom = bottom + table[source]
        left.set_ylabel("records")
        left.set_title("Records per label and source")
        left.tick_params(axis="x", rotation=30)
        left.legend(fontsize="small")
    kinds = privacy_kinds.sort_values("kind", ascending=False)
    if kinds.empty:
        _empty(right, "no privacy scan")
    else:
        colors = [BAD if n > 0 else NEUTRAL for n in kinds["records"]]
        right.barh(kinds["kind"], kinds["records"], color=colors)
        for y, n in enumerate(kinds["records"]):
            right.text(n, y, f" {int(n)}", va="center", fontsize="small")
        right.set_xlabel("records flagged")
        right.set_title("Privacy findings per kind")
        right.set_xlim(0, max(1, kinds["records"].max()) * 1.2)
    fig.tight_layout()
    return fig


def leakage_figure(leaks: pd.DataFrame):
    """What crosses between train and the evaluation splits: this split vs a naive one.

    leaks: columns what, this_split, naive_split (counts; a symlog axis keeps zeros visible).
    """
    fig, (ax,) = _figure()
    y = range(len(leaks))
    h = 0.38
    ax.barh([i + h / 2 for i in y], leaks["naive_split"], height=h, color=BAD, label="naive split")
    ax.barh([i - h / 2 for i in y], leaks["this_split"], height=h, color=GOOD, label="this split")
    for i, (a, b) in enumerate(zip(leaks["this_split"], leaks["naive_split"], strict=True)):
        ax.text(b, i + h / 2, f" {int(b)}", va="center", fontsize="small")
        ax.text(a, i - h / 2, f" {int(a)}", va="center", fontsize="small")
    ax.set_yticks(list(y), leaks["what"])
    ax.invert_yaxis()
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(0, max(10, leaks[["this_split", "naive_split"]].to_numpy().max()) * 40)
    ax.set_xlabel("count (symmetric log scale)")
    ax.set_title("Leaks across splits: this split vs a naive per-record split")
    ax.legend(loc="center right")
    fig.tight_layout()
    return fig


def memory_figure(components: pd.DataFrame, fit: pd.DataFrame):
    """Left: memory estimate vs measurement per component. Right: need vs usable per card.

    components: columns component, estimated, measured (bytes).
    fit: columns card, need_bytes, usable_bytes, fits.
    """
    fig, (left, right) = _figure(2)
    if components.empty:
        _empty(left, "no memory measurement")
    else:
        y = range(len(components))
        h = 0.38
        left.barh([i - h / 2 for i in y], components["estimated"] / 2**20, h, label="estimated")
        left.barh([i + h / 2 for i in y], components["measured"] / 2**20, h, label="measured")
        left.set_yticks(list(y), components["component"])
        left.invert_yaxis()
        left.set_xlabel("MiB")
        left.set_title("Estimate vs measurement (one step)")
        left.legend(fontsize="small")
    if fit.empty:
        _empty(right, "no target cards")
    else:
        y = range(len(fit))
        colors = [GOOD if f else BAD for f in fit["fits"]]
        right.barh(list(y), fit["usable_bytes"] / 2**30, color="#dddddd", label="usable")
        right.barh(list(y), fit["need_bytes"] / 2**30, color=colors, height=0.5, label="needed")
        right.set_xscale("log")
        right.set_yticks(list(y), fit["card"])
        right.invert_yaxis()
        right.set_xlabel("GiB (log scale)")
        right.set_title("Fit on the target cards")
        right.legend(fontsize="small")
    fig.tight_layout()
    return fig


def curves_figure(curves: pd.DataFrame):
    """Left: training loss per run. Right: validation accuracy per run.

    curves: columns run, step, split ('train' or 'validation'), loss, accuracy.
    """
    fig, (left, right) = _figure(2)
    if curves.empty:
        _empty(left, "no run finished")
        _empty(right, "no run finished")
    markers = ("o", "s", "^", "D", "v", "P", "X", "*")
    for i, (run, rows) in enumerate(curves.groupby("run", sort=True)):
        train = rows[rows["split"] == "train"].sort_values("step")
        val = rows[rows["split"] == "validation"].sort_values("step")
        (line,) = left.plot(train["step"], train["loss"], linewidth=1.2, label=run)
        # Runs that score alike overlap: a marker of its own (and shrinking) keeps each visible.
        right.plot(
            val["step"],
            val["accuracy"],
            marker=markers[i % len(markers)],
            markersize=max(9 - i, 4),
            color=line.get_color(),
            label=run,
        )
    if not curves.empty:
        left.set_xlabel("step")
        left.set_ylabel("training loss")
        left.set_title("Training loss")
        right.set_xlabel("step")
        right.set_ylabel("validation accuracy")
        right.set_title("Validation accuracy")
        left.legend(fontsize="x-small")
    fig.tight_layout()
    return fig


def effects_figure(effects: pd.DataFrame, min_useful: float, metric: str):
    """Each comparison's effect with its interval, in points; the band is the minimum useful
    effect.

    effects: columns label, estimate, ci_low, ci_high (fractions), decision.
    """
    fig, (ax,) = _figure(height_in=max(2.5, 0.55 * len(effects) + 1.4))
    if effects.empty:
        _empty(ax, "no comparisons")
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
    fig, (ax,) = _figure()
    names = sorted(set(per_seed["cell"]) | set(cells["cell"]))
    if not names:
        _empty(ax, "no cells")
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
    fig, (left, right) = _figure(2)
    if points.empty:
        _empty(left, "no quantized variant")
        _empty(right, "no quantized variant")
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
            _empty(ax, f"{xlabel}: not measured")
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


def budget_figure(plans: pd.DataFrame, currency: str):
    """The cost of each way to buy the work, cheapest marked, those that miss the deadline hatched.

    plans: columns label, cost, meets_deadline, cheapest (one scenario's rows).
    """
    fig, (ax,) = _figure(height_in=max(2.5, 0.32 * len(plans) + 1.4))
    if plans.empty:
        _empty(ax, "no plan")
        fig.tight_layout()
        return fig
    y = list(range(len(plans)))
    colors = [GOOD if c else NEUTRAL for c in plans["cheapest"]]
    bars = ax.barh(y, plans["cost"], color=colors)
    for bar, ok in zip(bars, plans["meets_deadline"], strict=True):
        if not ok:
            bar.set_hatch("//")
            bar.set_edgecolor(BAD)
    for i, (cost, ok) in enumerate(zip(plans["cost"], plans["meets_deadline"], strict=True)):
        note = "" if ok else "  misses the deadline"
        shown = f"{cost:,.2f}" if cost >= 1 or cost == 0 else f"{cost:.2g}"
        ax.text(cost, i, f" {shown}{note}", va="center", fontsize="x-small")
    ax.set_yticks(y, plans["label"], fontsize="small")
    ax.invert_yaxis()
    positive = plans["cost"][plans["cost"] > 0]
    if not positive.empty and positive.max() / max(positive.min(), 1e-12) > 100:
        # The linear part ends at a power of ten, so 0 and the first decade stay apart.
        ax.set_xscale("symlog", linthresh=10 ** np.floor(np.log10(max(positive.min(), 1e-6))))
    ax.set_xlim(0, max(plans["cost"].max(), 1e-9) * 4)
    ax.set_xlabel(f"cost ({currency}; green: cheapest that meets the deadline)")
    ax.set_title("What the work costs on each offer")
    fig.tight_layout()
    return fig


def forecast_figure(forecast: pd.DataFrame):
    """Each finished run's projected and calibrated forecast against what it took (hours).

    forecast: columns run, projected_hours, actual_hours, forecast_from_earlier_hours.
    """
    from matplotlib import ticker

    fig, (ax,) = _figure()
    done = forecast.dropna(subset=["actual_hours"])
    if done.empty:
        _empty(ax, "no run finished")
        fig.tight_layout()
        return fig
    columns = ["actual_hours", "projected_hours", "forecast_from_earlier_hours"]
    hours = done[columns].to_numpy(dtype=float)
    positive = hours[(hours > 0) & pd.notna(hours)]
    if positive.size == 0:
        _empty(ax, "no positive durations")
        fig.tight_layout()
        return fig
    # Seconds for short campaigns (the tiny demo's runs take seconds), hours otherwise.
    unit, scale = ("seconds", 3600.0) if positive.max() < 0.5 else ("hours", 1.0)
    actual = done["actual_hours"] * scale
    ax.scatter(actual, done["projected_hours"] * scale, color=BAD, label="projected")
    cal = done.dropna(subset=["forecast_from_earlier_hours"])
    ax.scatter(
        cal["actual_hours"] * scale,
        cal["forecast_from_earlier_hours"] * scale,
        color=GOOD,
        marker="s",
        label="calibrated (from the runs before it)",
    )
    lo, hi = positive.min() * scale / 2, positive.max() * scale * 2
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, label="forecast = actual")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel(f"actual {unit}")
    ax.set_ylabel(f"forecast {unit}")
    ax.set_title("Forecast vs actual, per finished run")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
