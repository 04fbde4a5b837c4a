"""The report of a finished tiny campaign, built by Snakemake: the HTML page holds every section
and every figure as a real PNG of a sensible size, the Markdown links the figures beside it,
`snakemake --report` carries the figures with their captions, `dvc plots show` renders the
curves, and a garbled input stops the stage with one line and no output."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import yaml

from campaign.core.registry import get_stage
from conftest import BIN, campaign, copy_finished, run, snakemake

# The report's figures: one per section that declares one (Phase.report), named after it.
FIGURES = [name.removeprefix("fig_") for name in get_stage("report").outputs if "fig_" in name]
SECTIONS = [
    "Verdict",
    "Data",
    "Leakage audit",
    "Preflight and memory fit",
    "Training curves",
    "Ablation effects",
    "Seed spread and the reference floor",
    "Quantization trade-off",
    "Budget and recommended offer",
    "Forecast vs actual",
    "Decisions",
]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


class Page(HTMLParser):
    """The h2 headings and the img sources of an HTML page."""

    def __init__(self):
        super().__init__()
        self.headings, self.images, self._in_h2 = [], [], False

    def handle_starttag(self, tag, attrs):
        if tag == "h2":
            self._in_h2 = True
            self.headings.append("")
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False

    def handle_data(self, data):
        if self._in_h2:
            self.headings[-1] += data


@pytest.fixture(scope="module")
def finished(finished_campaign, tmp_path_factory) -> Path:
    """This module's copy of the session's finished tiny campaign (conftest.finished_campaign)."""
    return copy_finished(finished_campaign, tmp_path_factory.mktemp("report") / "project")


@pytest.mark.slow
def test_the_html_page_holds_every_section_and_figure(finished):
    out = finished / "results" / "report"
    page = Page()
    page.feed((out / "index.html").read_text(encoding="utf-8"))
    assert page.headings == SECTIONS
    assert len(page.images) == len(FIGURES)
    prefix = "data:image/png;base64,"
    for src in page.images:
        # Self-contained: every image is embedded, none points at a file or the network.
        assert src.startswith(prefix), src[:60]
        data = base64.b64decode(src[len(prefix) :])
        width, height = png_size(data)
        assert len(data) > 5000 and 200 <= width <= 4000 and 150 <= height <= 4000
    # The embedded images are the figure files Snakemake's report shows.
    embedded = {base64.b64decode(src[len(prefix) :]) for src in page.images}
    assert embedded == {(out / "figures" / f"{name}.png").read_bytes() for name in FIGURES}
    text = (out / "index.html").read_text(encoding="utf-8")
    # The numbers come from the campaign's files: the naive split's leak, the recommendation.
    audit = json.loads((finished / "results/data/leakage_audit.json").read_text())
    naive = audit["naive_split"]["leaks"]["leaking_pairs"]
    assert f"would have leaked {naive:,} pairs" in text
    assert "Recommended offer" in text and "Best cell: " in text


@pytest.mark.slow
def test_the_markdown_summary_has_the_same_sections_and_links_the_figures(finished):
    out = finished / "results" / "report"
    md = (out / "summary.md").read_text(encoding="utf-8")
    headings = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert headings == SECTIONS
    links = [line.split("](")[1].rstrip(")") for line in md.splitlines() if line.startswith("![")]
    assert len(links) == len(FIGURES)
    for link in links:
        assert (out / link).is_file(), link
    curves = (out / "train_curves.csv").read_text().splitlines()
    assert curves[0] == "run,step,loss" and len(curves) > 10


@pytest.mark.slow
def test_snakemake_report_carries_the_figures_with_captions(finished):
    snakemake(finished, "--report", "report.zip", "results/report/index.html")
    with zipfile.ZipFile(finished / "report.zip") as z:
        names = z.namelist()
        pngs = sorted(Path(n).name for n in names if n.endswith(".png"))
        html = z.read(next(n for n in names if n.endswith("report.html"))).decode()
    assert pngs == sorted(f"{name}.png" for name in FIGURES)
    caption = (Path(__file__).parents[2] / "workflow/report/leakage.rst").read_text()
    assert " ".join(caption.split()[:6]) in " ".join(html.split())


@pytest.mark.slow
def test_dvc_plots_show_renders_the_curves_and_the_forecast(finished, tmp_path, monkeypatch):
    for name in ("DVC_GLOBAL_CONFIG_DIR", "DVC_SYSTEM_CONFIG_DIR"):
        (tmp_path / name).mkdir()
        monkeypatch.setenv(name, str(tmp_path / name))
    run([str(BIN / "dvc"), "plots", "show", "-o", str(tmp_path / "plots")], finished)
    html = (tmp_path / "plots" / "index.html").read_text()
    for plot in dvc_plot_titles():
        assert f"vegaEmbed('#{re.sub(r'[^A-Za-z0-9]', '_', plot)}'" in html, plot
    # Every row of the tables is a point: the validation curves' accuracies, and the forecast's
    # finished runs (each with its projected and calibrated hours).
    out = finished / "results"
    validation = (out / "report" / "validation_curves.csv").read_text().splitlines()[1:]
    assert len(re.findall(r'"accuracy": ?"?[0-9.]+', html)) == len(validation) > 0
    forecast = pd.read_csv(out / "budget" / "forecast.csv")
    finished_runs = int(forecast["actual_hours"].notna().sum())
    assert len(re.findall(r'"actual_hours": ?"?[0-9.]+', html)) == 2 * finished_runs > 0


def dvc_plot_titles() -> list[str]:
    dvc = yaml.safe_load((Path(__file__).parents[2] / "dvc.yaml").read_text())
    return [next(iter(p)) for p in dvc["plots"]]


@pytest.mark.slow
def test_a_garbled_input_stops_the_stage_with_one_line_and_no_output(finished, tmp_path):
    results = finished / "results"
    garbled = tmp_path / "comparisons.parquet"
    garbled.write_bytes(b"PAR1 this is not a parquet table")
    inputs = {
        "manifest": results / "data/manifest.parquet",
        "privacy": results / "data/privacy_report.json",
        "artifact_findings": results / "data/artifact_findings.json",
        "leakage_audit": results / "data/leakage_audit.json",
        "preflight_report": results / "preflight/report.json",
        "preflight_measurements": results / "preflight/measurements.json",
        "comparisons": garbled,
        "eval_metrics": results / "evaluation/metrics.parquet",
        "decisions": results / "evaluation/decisions.json",
        "errors": results / "evaluation/errors",
        "variants": results / "quantize/variants.parquet",
        "jobs": results / "budget/jobs.parquet",
        "plans": results / "budget/plans.parquet",
        "forecast": results / "budget/forecast.parquet",
        "budget_summary": results / "budget/summary.txt",
        **{
            f"split_{s}": results / f"data/splits/{s}.parquet"
            for s in ("train", "validation", "test")
        },
    }
    out = tmp_path / "out"
    argv = [str(BIN / "python"), "-m", "campaign", "report", "--params", "params.yaml"]
    for name, path in inputs.items():
        argv += ["--in", f"{name}={path}"]
    for path in sorted(results.glob("runs/*/metrics.parquet")):
        argv += ["--in", f"run_metrics={path}"]
        argv += ["--in", f"run_models={path.parent / 'model'}"]
        argv += ["--in", f"run_specs={path.parent / 'spec.json'}"]
    argv += ["--out", f"html={out}/index.html", "--out", f"markdown={out}/summary.md"]
    argv += ["--out", f"train_curves={out}/t.csv", "--out", f"validation_curves={out}/v.csv"]
    argv += [a for name in FIGURES for a in ("--out", f"fig_{name}={out}/{name}.png")]
    env = dict(os.environ, PYTHONPATH=str(finished / "workflow"))
    proc = subprocess.run(argv, cwd=finished, env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {garbled}: not a readable Parquet table"), lines[0]
    assert not out.exists() or not any(out.iterdir()), "partial output left behind"


@pytest.mark.slow
def test_the_report_reproduces_bit_for_bit(finished):
    log = (finished / "logs" / "report" / "report.log").read_text()
    key = re.search(r"report: committed ([0-9a-f]+)", log).group(1)
    out = campaign(finished, "reproduce", key, timeout=600)
    assert "reproduced bit for bit" in out.stdout
