"""No two labels of a figure overlap at the size it is saved at: crowded points and many cells
(where names beside points or side by side would collide) on the figures that name them."""

from __future__ import annotations

import itertools

import pandas as pd

from campaign.core.figures import DPI, figure_axes
from campaign.evaluate.section import seeds_figure
from campaign.quantize.section import quantize_figure


def overlapping_labels(fig) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty texts (tick labels, titles, legend entries, annotations)
    whose boxes intersect, measured with the figure's renderer at its saved size and dpi."""
    from matplotlib.text import Text

    fig.set_dpi(DPI)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)  # lays out ticks and the legend as savefig would
    boxes = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        if t.axes is not None and t in t.axes.get_xticklabels() + t.axes.get_yticklabels():
            if not t.get_window_extent(renderer).width:
                continue
        boxes.append((t.get_text(), t.get_window_extent(renderer)))
    return [
        (a, b)
        for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2)
        if box_a.overlaps(box_b)
    ]


def test_overlap_check_finds_two_labels_on_the_same_spot():
    # The check must be able to fail: two annotations at one point collide.
    fig, (ax,) = figure_axes()
    ax.annotate("run-a/int8_dynamic", (0.5, 0.5))
    ax.annotate("run-b/int8_dynamic", (0.5, 0.5))
    assert ("run-a/int8_dynamic", "run-b/int8_dynamic") in overlapping_labels(fig)


def test_crowded_quantized_variants_are_named_in_a_legend_without_overlap():
    # Six variants of two runs at nearly the same size, latency and quality: names beside the
    # points would lie on top of each other.
    labels = [f"run-{r}5f19a8a426/{v}" for r in "ab" for v in ("fp32", "int8_dynamic", "bf16")]
    points = pd.DataFrame(
        {
            "label": labels,
            "size_bytes": [650_000.0 + i for i in range(6)],
            "latency_ms": [4.0 + i / 100 for i in range(6)],
            "value": [0.231 + i / 1000 for i in range(6)],
        }
    )
    fig = quantize_figure(points, "accuracy")
    assert [t.get_text() for t in fig.legends[0].get_texts()] == labels
    assert overlapping_labels(fig) == []


def test_many_cells_on_the_categorical_axis_and_equal_seeds_do_not_overlap():
    cells = [f"train.lr={lr}, train.lora.rank={r}" for lr in ("0.001", "0.003") for r in (4, 8)]
    cells += ["train.lr=0.01, train.lora.rank=16"]
    per_seed = pd.DataFrame(
        [{"cell": c, "seed": s, "value": 0.5} for c in cells for s in (1, 2, 3)]
    )  # every seed scores alike: labels per dot would stack
    table = pd.DataFrame({"cell": cells, "value": 0.5, "ci_low": 0.4, "ci_high": 0.6})
    floors = pd.DataFrame(
        {"variant": ["floor/majority", "floor/tfidf_logreg"], "value": [0.2, 0.9]}
    )
    fig = seeds_figure(per_seed, table, floors, "accuracy")
    names = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    # The cells named on the categorical axis, one factor a line.
    assert names == [c.replace(", ", "\n") for c in sorted(cells)]
    assert overlapping_labels(fig) == []
    many = [f"train.lr=0.00{i}, train.lora.rank={i}" for i in range(1, 10)]
    per_seed = pd.DataFrame([{"cell": c, "seed": 1, "value": 0.5} for c in many])
    table = pd.DataFrame({"cell": many, "value": 0.5, "ci_low": 0.4, "ci_high": 0.6})
    assert overlapping_labels(seeds_figure(per_seed, table, floors, "accuracy")) == []
