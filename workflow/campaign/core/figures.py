"""The generic machinery of the report's figures: a figure of fixed size, PNG bytes rendered the
same way every time (no date or software stamp, so the same tables give the same bytes and
`campaign reproduce` can compare them), an empty panel's message, and the palette. Each phase
draws its own figures (its `section.py`) with these.

matplotlib is imported inside the functions: the package's light modules must stay fast to import.
"""

from __future__ import annotations

import io

WIDTH_IN, HEIGHT_IN, DPI = 9.0, 4.6, 100  # 900 x 460 pixels


GOOD, BAD, NEUTRAL, ACCENT = "#2a9d8f", "#e76f51", "#8d99ae", "#264653"


def figure_axes(ncols: int = 1, height_in: float = HEIGHT_IN):
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


def empty_axes(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color=NEUTRAL)
    ax.set_xticks([])
    ax.set_yticks([])


def empty_figure(fig, message: str):
    """`fig` with nothing to draw: `message` on each of its panels; laid out and returned."""
    for ax in fig.axes:
        empty_axes(ax, message)
    fig.tight_layout()
    return fig
