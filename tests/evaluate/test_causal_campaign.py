"""End to end: a tiny causal_lm campaign through real Snakemake; its runs' and quantized
variants' predictions carry each item's response NLL and token count, and the evaluation
reports perplexity with an interval on validation and test."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import copy_project, snakemake

pytestmark = pytest.mark.slow(minutes=5)


def causal_project(dest: Path) -> Path:
    project = copy_project(dest)
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params["model"]["task"] = "causal_lm"
    params["model"]["config"]["architecture"] = "gpt2"
    params["ablation"]["seeds"] = [1]
    params["preflight"]["overfit"]["steps"] = 100
    params["preflight"]["overfit"]["max_final_loss"] = 5.0
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return project


def test_causal_lm_campaign_reports_perplexity(tmp_path):
    project = causal_project(tmp_path / "project")
    snakemake(project, "results/evaluation/metrics.parquet", timeout=900)
    metrics = pd.read_parquet(project / "results/evaluation/metrics.parquet")
    ppl = metrics[metrics.metric == "perplexity"]
    runs = sorted(p.name for p in (project / "results/runs").iterdir())
    assert len(runs) == 2
    quantized = sorted(v for v in metrics.variant if "/" in v and not v.startswith("floor/"))
    assert quantized, "the quantized variant was not evaluated"
    for split in ("validation", "test"):
        rows = ppl[ppl.split == split].set_index("variant")
        assert set(runs) | set(quantized) <= set(rows.index), split
        assert (rows.ci_low <= rows.value).all() and (rows.value <= rows.ci_high).all()
        assert not any(v.startswith("floor/") for v in rows.index)  # no LM: no perplexity
        assert (metrics[(metrics.split == split) & (metrics.metric == "exact_match")].size) > 0
        for run in runs:
            pred = pd.read_parquet(project / f"results/runs/{run}/predictions_{split}.parquet")
            assert (pred.tokens > 0).all() and (pred.nll > 0).all()
            # the reported value is the ratio of the file's sums, not a mean of ratios
            expected = math.exp(pred.nll.sum() / pred.tokens.sum())
            assert rows.loc[run, "value"] == pytest.approx(expected, rel=1e-12)
