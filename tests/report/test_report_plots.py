"""The report's figures on small hand-made tables: each renders a PNG of a sensible size, draws
what its tables hold (one mark per run, per comparison, per plan), marks what a reader must see
(the cheapest offer, a plan that misses the deadline), and renders to the same bytes twice."""

from __future__ import annotations

import struct

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from campaign.budget.section import budget_figure, forecast_figure
from campaign.core import figures as palette
from campaign.core.figures import png_bytes
from campaign.data.section import data_figure, leakage_figure
from campaign.evaluate.section import effects_figure, seeds_figure
from campaign.preflight.section import memory_figure
from campaign.quantize.section import quantize_figure
from campaign.train.section import curves_figure


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def check_png(fig) -> bytes:
    data = png_bytes(fig)
    width, height = png_size(data)
    assert 200 <= width <= 4000 and 150 <= height <= 4000, (width, height)
    return data


def test_data_figure_stacks_sources_and_marks_findings():
    per_label = pd.DataFrame(
        {"source": ["a.csv", "a.csv", "b.csv"], "label": ["x", "y", "x"], "records": [5, 3, 2]}
    )
    kinds = pd.DataFrame({"kind": ["email", "phone"], "records": [4, 0]})
    fig = data_figure(per_label, kinds)
    left, right = fig.axes
    # Label x holds 5 + 2 records: the stacked bars' tops reach 7 for x and 3 for y.
    tops = {}
    for bar in left.patches:
        x = round(bar.get_x() + bar.get_width() / 2)
        tops[x] = max(tops.get(x, 0), bar.get_y() + bar.get_height())
    assert sorted(tops.values()) == [3, 7]
    widths = sorted(bar.get_width() for bar in right.patches)
    assert widths == [0, 4]
    check_png(fig)


def test_leakage_figure_labels_every_count():
    leaks = pd.DataFrame(
        {"what": ["groups", "pairs"], "this_split": [0, 0], "naive_split": [12, 3400]}
    )
    fig = leakage_figure(leaks)
    texts = {t.get_text().strip() for t in fig.axes[0].texts}
    assert {"0", "12", "3400"} <= texts
    check_png(fig)


def test_memory_figure_colours_cards_that_do_not_fit():
    components = pd.DataFrame(
        {
            "component": ["weights", "gradients"],
            "estimated": [2**20, 2**20],
            "measured": [2**20, 2**21],
        }
    )
    fit = pd.DataFrame(
        {"card": ["small", "big"], "need_bytes": [2**33, 2**33], "usable_bytes": [2**32, 2**35],
         "fits": [False, True]}
    )  # fmt: skip
    fig = memory_figure(components, fit)
    needed = [b for b in fig.axes[1].patches if b.get_height() == 0.5]
    assert [to_hex(b.get_facecolor()) for b in needed] == [palette.BAD, palette.GOOD]
    check_png(fig)


def curves_table() -> pd.DataFrame:
    rows = []
    for run, shift in (("run-a", 0.0), ("run-b", 0.1)):
        rows += [(run, s, "train", 2.0 - s / 10 + shift, np.nan) for s in range(1, 11)]
        rows += [(run, s, "validation", 1.0, 0.5 + s / 100) for s in (5, 10)]
    return pd.DataFrame(rows, columns=["run", "step", "split", "loss", "accuracy"])


def test_curves_figure_draws_one_loss_line_and_one_validation_line_per_run():
    fig = curves_figure(curves_table())
    loss, val = fig.axes
    assert [line.get_label() for line in loss.lines] == ["run-a", "run-b"]
    assert [len(line.get_xdata()) for line in loss.lines] == [10, 10]
    assert [list(line.get_xdata()) for line in val.lines] == [[5, 10], [5, 10]]
    # The same colour for a run's two lines.
    assert [line.get_color() for line in loss.lines] == [line.get_color() for line in val.lines]
    check_png(fig)


def test_effects_figure_draws_each_interval_in_points():
    effects = pd.DataFrame(
        {"label": ["lr (main)", "int8 (quantized)"], "estimate": [0.02, -0.004],
         "ci_low": [0.01, -0.01], "ci_high": [0.03, 0.002], "decision": ["adopt", "reject"]}
    )  # fmt: skip
    fig = effects_figure(effects, min_useful=0.01, metric="accuracy")
    ax = fig.axes[0]
    # Each errorbar's horizontal segment spans its interval, in points.
    spans = sorted(
        tuple(np.round(seg[:, 0], 6))
        for coll in ax.collections
        for seg in coll.get_segments()
        if seg[0, 1] == seg[1, 1]
    )
    assert spans == [(-1.0, 0.2), (1.0, 3.0)]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(effects["label"])
    check_png(fig)


def test_seeds_figure_shows_every_seed_and_each_floor():
    per_seed = pd.DataFrame(
        {"cell": ["lr=1", "lr=1", "lr=3"], "seed": [1, 2, 1], "value": [0.6, 0.7, 0.5]}
    )
    cells = pd.DataFrame(
        {
            "cell": ["lr=1", "lr=3"],
            "value": [0.65, 0.5],
            "ci_low": [0.5, 0.4],
            "ci_high": [0.8, 0.6],
        }
    )
    floors = pd.DataFrame({"variant": ["floor/majority", "floor/tfidf"], "value": [0.2, 0.45]})
    fig = seeds_figure(per_seed, cells, floors, "accuracy")
    ax = fig.axes[0]
    dots = [tuple(np.round(p, 3)) for c in ax.collections for p in c.get_offsets()]
    assert sorted(y for _, y in dots if _ % 1) == [0.5, 0.6, 0.7]  # the seeds, beside the bars
    floor_lines = [line for line in ax.lines if line.get_label().startswith("floor: ")]
    assert sorted(line.get_ydata()[0] for line in floor_lines) == [0.2, 0.45]
    check_png(fig)


def test_quantize_figure_places_variants_by_size_and_latency():
    points = pd.DataFrame(
        {"label": ["r/fp32", "r/int8"], "size_bytes": [4096.0, 1024.0],
         "latency_ms": [10.0, 4.0], "value": [0.9, 0.88]}
    )  # fmt: skip
    fig = quantize_figure(points, "accuracy")
    size_ax, latency_ax = fig.axes

    def placed(ax):
        return sorted(tuple(p) for c in ax.collections for p in c.get_offsets())

    assert placed(size_ax) == [(1.0, 0.88), (4.0, 0.9)]
    assert placed(latency_ax) == [(4.0, 0.88), (10.0, 0.9)]
    # Each variant named once, in the figure's legend (not beside its points).
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["r/fp32", "r/int8"]
    assert not size_ax.texts and not latency_ax.texts
    check_png(fig)


def test_budget_figure_marks_the_cheapest_and_hatches_missed_deadlines():
    plans = pd.DataFrame(
        {"label": ["box, hourly", "cloud, hourly", "cloud, 3-day package x1"],
         "cost": [12.0, 41.67, 50.0], "meets_deadline": [True, True, False],
         "cheapest": [True, False, False]}
    )  # fmt: skip
    fig = budget_figure(plans, "EUR")
    bars = fig.axes[0].patches
    assert [to_hex(b.get_facecolor()) for b in bars] == [
        palette.GOOD,
        palette.NEUTRAL,
        palette.NEUTRAL,
    ]
    assert [b.get_hatch() for b in bars] == [None, None, "//"]
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts[0].strip() == "12.00" and "misses the deadline" in texts[2]
    check_png(fig)


def test_forecast_figure_plots_projected_and_calibrated_against_actual():
    forecast = pd.DataFrame(
        {"run": ["a", "b", "c"], "projected_hours": [1.0, 1.0, 1.0],
         "actual_hours": [2.0, 2.2, np.nan], "forecast_from_earlier_hours": [np.nan, 2.0, 2.1]}
    )  # fmt: skip
    fig = forecast_figure(forecast)
    ax = fig.axes[0]
    projected, calibrated = (c.get_offsets() for c in ax.collections)
    assert sorted(map(tuple, projected)) == [(2.0, 1.0), (2.2, 1.0)]  # unfinished run c left out
    assert [tuple(p) for p in calibrated] == [(2.2, 2.0)]
    assert ax.get_xlabel() == "actual hours"
    # A campaign of seconds is drawn in seconds.
    short = forecast.assign(
        **{c: forecast[c] / 3600 for c in forecast.columns if c.endswith("hours")}
    )
    assert forecast_figure(short).axes[0].get_xlabel() == "actual seconds"
    check_png(fig)


@pytest.mark.parametrize(
    "make",
    [
        lambda: curves_figure(curves_table().iloc[0:0]),
        lambda: effects_figure(
            pd.DataFrame(columns=["label", "estimate", "ci_low", "ci_high", "decision"]), 0.01, "a"
        ),
        lambda: budget_figure(
            pd.DataFrame(columns=["label", "cost", "meets_deadline", "cheapest"]), "EUR"
        ),
        lambda: quantize_figure(
            pd.DataFrame(columns=["label", "size_bytes", "latency_ms", "value"]), "accuracy"
        ),
    ],
)
def test_an_empty_table_gives_a_figure_that_says_so(make):
    fig = make()
    messages = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert messages and all(m.startswith("no ") for m in messages)
    check_png(fig)


def test_the_same_tables_render_to_the_same_bytes():
    first = png_bytes(curves_figure(curves_table()))
    again = png_bytes(curves_figure(curves_table()))
    other = png_bytes(curves_figure(curves_table().assign(loss=1.0)))
    assert first == again and first != other
    assert b"Software" not in first and b"matplotlib" not in first


def test_a_users_matplotlib_settings_do_not_reach_the_report_bytes():
    """The report's key holds matplotlib's version, not the user's matplotlibrc: a figure drawn
    under other settings (here a bigger font and another style) has the same bytes."""
    import matplotlib

    from campaign.core.stage import Section
    from campaign.report.stage import render_figure

    section = Section(figure=(curves_figure, (curves_table(),)), key="curves")
    plain = render_figure(section)
    with matplotlib.rc_context({"font.size": 20, "axes.grid": True, "lines.linewidth": 4}):
        styled = render_figure(section)
        assert png_bytes(curves_figure(curves_table())) != plain  # the rc matters
    assert styled == plain
