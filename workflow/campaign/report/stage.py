"""The report stage: reads a finished campaign's tables and writes one HTML page (every figure
embedded as a PNG data URI, so the file stands alone), the same sections in Markdown (linking the
figures written beside it, figures/<section>.png), each figure as its own PNG (for
`snakemake --report`), and the training curves as CSV tables (for `dvc plots show`).

Sections: the ones the phases declare (`Phase.report`), in their order: the verdict (the budget
summary's opening block, with every phase's findings), data, leakage audit, preflight and memory
fit, training curves, ablation effects, seed spread and the reference floor, quantization
trade-off, budget and recommended offer, forecast vs actual, decisions.
"""

from __future__ import annotations

import base64
import html
import math
import numbers
import re
from dataclasses import replace

import numpy as np
import pandas as pd

from campaign.core.errors import CampaignError
from campaign.core.figures import png_bytes
from campaign.core.io import resolve
from campaign.core.stage import Section
from campaign.report.render import ReportInputs
from campaign.train import read_curves

FIGURE_DIR = "figures"  # the Markdown links figures/<section>.png: the rule writes them there


def build_sections(ctx) -> tuple[list[Section], pd.DataFrame]:
    """Every phase's sections (ReportSection), in report order, rendered from the stage's
    inputs with the declared key and title; and the training curves."""
    from campaign.core.registry import phases
    from campaign.report import findings_of, sections_of

    inputs = ReportInputs(ctx.inputs, findings_of(phases()))
    sections = []
    for declared in sections_of(phases()):
        section = resolve(declared.render)(inputs)
        if section is not None:  # None: nothing of it in this campaign (a fixed one's looks)
            sections.append(replace(section, key=declared.key, title=declared.title))
    return sections, read_curves(inputs.paths("run_metrics"))


def render_figure(section: Section) -> bytes:
    """The section's figure as PNG bytes, drawn with matplotlib's own defaults: a user's
    matplotlibrc (font size, style) is not in the stage's key, so it must not reach the bytes."""
    import matplotlib

    draw, args = section.figure
    with matplotlib.rc_context():
        matplotlib.rcdefaults()  # the backend is left as it is (plots use Agg)
        return png_bytes(draw(*args))


# A text cell longer than this shows its start and its full length (a 10,000-character prediction
# in every cell buried the table); the full text stays in the table the phase wrote.
CELL_CHARS = 300


def cell_text(value) -> str:
    """One table cell: numbers to 4 significant digits, missing values as '-', a text past
    CELL_CHARS cut with its length ("… (10,005 characters)"); escaping comes after, per page."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "-"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        value = float(value)
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.3g}"
        return f"{value:,.4g}" if abs(value) >= 1000 else f"{value:.4g}"
    if isinstance(value, numbers.Integral) and abs(value) >= 10_000:
        return f"{value:,}"
    text = str(value)
    if len(text) > CELL_CHARS:
        return f"{text[:CELL_CHARS]}… ({len(text):,} characters)"
    return text


def _rows(frame: pd.DataFrame) -> list[list[str]]:
    return [[cell_text(v) for v in row] for row in frame.astype(object).itertuples(index=False)]


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1000px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{border-bottom:2px solid #264653}h2{margin-top:2em;color:#264653;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.85em}
th,td{border:1px solid #ddd;padding:.25em .55em;text-align:right}
th{background:#f3f5f7}td:first-child,th:first-child{text-align:left}
caption{text-align:left;font-weight:600;padding:.3em 0}
img{max-width:100%;border:1px solid #eee}pre{background:#f6f8fa;padding:.8em;overflow-x:auto;
font-size:.85em}nav a{margin-right:1em}
"""


def render_html(title: str, sections: list[Section], figures: dict[str, bytes]) -> str:
    e = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        "<nav>" + "".join(f'<a href="#{s.key}">{e(s.title)}</a>' for s in sections) + "</nav>",
    ]
    for s in sections:
        out.append(f'<section id="{s.key}"><h2>{e(s.title)}</h2>')
        if s.key == "verdict" and s.lines:  # a short block read at a glance: one list
            out.append(f"<p>{e(s.lines[0])}</p><ul>")
            out += [f"<li>{e(line)}</li>" for line in s.lines[1:]]
            out.append("</ul>")
        else:
            out += [f"<p>{e(line)}</p>" for line in s.lines]
        if s.key in figures:
            data = base64.b64encode(figures[s.key]).decode("ascii")
            out.append(f'<img alt="{e(s.title)}" src="data:image/png;base64,{data}">')
        if s.pre:
            out.append(f"<pre>{e(s.pre.rstrip())}</pre>")
        for caption, frame in s.tables:
            out.append(f"<table><caption>{e(caption)}</caption><thead><tr>")
            out += [f"<th>{e(str(c))}</th>" for c in frame.columns]
            out.append("</tr></thead><tbody>")
            for row in _rows(frame):
                out.append("<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>")
            out.append("</tbody></table>")
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# What makes Markdown (CommonMark, GitHub's) markup inside a line, escaped where it would: code,
# emphasis, strikethrough, table cells; an underscore at a word's edge (`max_quality_loss` makes
# no emphasis); a bracket that opens a link, image or reference (`](`, `][`, `]:`: a plain
# interval like [87.1, 93.5] stays as it is); `<` that starts a tag or autolink (not `p < 0.05`);
# `&` that starts an entity.
_MD_SPECIAL = re.compile(
    r"([\\`*~|]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|\](?=[(\[:])|<(?=[A-Za-z/!?])|&(?=#?\w+;))"
)
# ...and at the start of a line: a heading, a list item, a quote, a rule.
_MD_LINE_START = re.compile(r"^(\s*)([#+=-]|\d+(?=[.)]))")


def md_text(text: str, cell: bool = False) -> str:
    """`text` (from the data: labels, ids, file names, a source's origin) as Markdown that shows
    it as it is: every character that would make markup backslash-escaped, on one line; a
    table `cell` starts no block, so its first character needs no escape. The HTML page escapes
    the same text with html.escape."""
    escaped = _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines()))
    if cell:
        return escaped
    # "1." -> "1\.": a backslash escapes punctuation only, so it goes after the digits.
    return _MD_LINE_START.sub(
        lambda m: m[1] + (m[2] + "\\" if m[2][0].isdigit() else "\\" + m[2]), escaped
    )


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(md_text(c, cell=True) for c in cells) + " |"


def _fence(block: str) -> str:
    """A code fence longer than any run of backticks in the block, so the block cannot end it."""
    longest = max((len(run) for run in re.findall(r"`+", block)), default=0)
    return "`" * max(3, longest + 1)


def render_markdown(title: str, sections: list[Section], figures: dict[str, str]) -> str:
    """figures: {section key: relative link}. Every text is escaped (md_text); a preformatted
    block is fenced."""
    out = [f"# {md_text(title)}", ""]
    for s in sections:
        out += [f"## {md_text(s.title)}", ""]
        out += [f"- {md_text(line)}" for line in s.lines] + [""]
        if s.key in figures:
            out += [f"![{md_text(s.title)}]({figures[s.key]})", ""]
        if s.pre:
            fence = _fence(s.pre)
            out += [fence, s.pre.rstrip(), fence, ""]
        for caption, frame in s.tables:
            out += [f"**{md_text(caption)}**", ""]
            out.append(_md_row([str(c) for c in frame.columns]))
            out.append("|" + "---|" * len(frame.columns))
            out += [_md_row(row) for row in _rows(frame)]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def stage_report(ctx) -> None:
    sections, curves = build_sections(ctx)
    figures = {}
    for s in sections:
        if s.figure is None:
            continue
        name = f"fig_{s.key}"
        if name not in ctx.outputs:
            raise CampaignError(f"report: no output declared for the figure '{name}'")
        figures[s.key] = render_figure(s)
    title = f"Campaign report: {ctx.spec['campaign']}"
    # Render everything before writing anything: a failure leaves no output behind.
    page = render_html(title, sections, figures)
    links = {key: f"{FIGURE_DIR}/{key}.png" for key in figures}
    markdown = render_markdown(title, sections, links)
    for key, data in figures.items():
        ctx.outputs[f"fig_{key}"].write_bytes(data)
    ctx.outputs["html"].write_text(page, encoding="utf-8")
    ctx.outputs["markdown"].write_text(markdown, encoding="utf-8")
    train = curves[curves["split"] == "train"][["run", "step", "loss"]]
    val = curves[curves["split"] == "validation"]
    judged = "generated" in val.columns and val["generated"].notna().any()
    # a generation run's judged curve (model.generation.eval_items) beside its loss
    val = val[["run", "step", "loss", "accuracy", *(["generated"] if judged else [])]]
    train.to_csv(ctx.outputs["train_curves"], index=False, float_format="%.6g")
    val.to_csv(ctx.outputs["validation_curves"], index=False, float_format="%.6g")
