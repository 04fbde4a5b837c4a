"""The evaluate stage's content key holds the plan table's design (runs, cells, seeds, tiers),
not its projected costs: those come from timings, which differ between identical campaigns. For
generated text it holds what computes the scores: the version of a library a built-in metric
computes with (rapidfuzz for similarity), and a user metric's module file by content."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from test_evaluate_stage import campaign, settings  # noqa: F401 (campaign is a fixture)

from campaign.core.errors import CampaignError
from campaign.core.hashcache import HashCache
from campaign.core.keys import content_key, hash_inputs, resolve_inputs
from campaign.core.registry import get_stage
from campaign.core.runner import run_stage
from campaign.core.store import Store


def key_of(inputs: dict, tmp_path: Path, spec: dict | None = None) -> str:
    stage = get_stage("evaluate")
    spec = settings() if spec is None else spec
    cache = HashCache(tmp_path / "hashcache.sqlite")
    try:
        resolved = resolve_inputs(stage, spec, inputs, tmp_path)
        hashes = hash_inputs(resolved, cache, dict(stage.input_views))
    finally:
        cache.close()
    return content_key(stage, spec, hashes)[0]


def generation_settings(metric: str) -> dict:
    return {**settings(), "task": "generation", "model": {"generation": {"metric": metric}}}


def edit_plan(path: Path, edit) -> None:
    lines = path.read_text().splitlines()
    header = lines[0].split("\t")
    rows = [dict(zip(header, ln.split("\t"), strict=True)) for ln in lines[1:]]
    for row in rows:
        edit(row)
    path.write_text(
        "\n".join(["\t".join(header), *("\t".join(r[c] for c in header) for r in rows)]) + "\n"
    )


def outputs(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True)
    names = {"metrics": "metrics.parquet", "comparisons": "comparisons.parquet"}
    names |= {"scored_items": "items.parquet"}
    names |= {"decisions": "decisions.json", "errors": "errors", "summary": "summary.txt"}
    return {k: folder / v for k, v in names.items()}


def test_projected_hours_do_not_change_the_key_the_design_does(campaign):  # noqa: F811
    tmp_path, inputs = campaign
    inputs["variants_result"] = []
    runs = inputs["runs"][0]
    before = key_of(inputs, tmp_path)

    def new_hours(row):
        row["projected_hours"] = "0.37"
        row["cumulative_hours"] = "12.5"

    edit_plan(runs, new_hours)
    assert key_of(inputs, tmp_path) == before

    def new_tier(row):
        row["tier"] = "main" if row["run"] == "r-c1" else row["tier"]

    edit_plan(runs, new_tier)  # the control is a fact of the design: it changes the result
    assert key_of(inputs, tmp_path) != before


@pytest.mark.slow
def test_a_rerun_after_new_timings_is_a_store_hit(campaign):  # noqa: F811
    tmp_path, inputs = campaign
    inputs["variants_result"] = []
    store = Store(tmp_path / "state")
    first = run_stage("evaluate", settings(), inputs, outputs(tmp_path / "a"), store, tmp_path)
    assert not first.hit
    edit_plan(inputs["runs"][0], lambda row: row.update(projected_hours="9.9"))
    again = run_stage("evaluate", settings(), inputs, outputs(tmp_path / "b"), store, tmp_path)
    assert again.hit and again.key == first.key
    assert (tmp_path / "b/decisions.json").read_bytes() == (
        tmp_path / "a/decisions.json"
    ).read_bytes()


def test_the_version_of_the_library_a_metric_scores_with_is_in_the_key(campaign, monkeypatch):  # noqa: F811
    tmp_path, inputs = campaign
    inputs["variants_result"] = []
    real = importlib.metadata.version
    keys = {}
    for rapidfuzz in ("3.9.0", "3.10.0"):
        monkeypatch.setattr(
            importlib.metadata,
            "version",
            lambda name, v=rapidfuzz: v if name == "rapidfuzz" else real(name),
        )
        for metric in ("similarity", "token_f1"):
            keys[metric, rapidfuzz] = key_of(inputs, tmp_path, generation_settings(metric))
    # similarity is rapidfuzz's Indel similarity: a new rapidfuzz rescores the same texts
    assert keys["similarity", "3.9.0"] != keys["similarity", "3.10.0"]
    # token F1 is the package's own code: rapidfuzz does not touch it
    assert keys["token_f1", "3.9.0"] == keys["token_f1", "3.10.0"]
    # a label campaign's key is what it was: no scorer library in it
    monkeypatch.setattr(importlib.metadata, "version", real)
    stage = get_stage("evaluate")
    assert stage.key_params(settings()) == settings()


def test_a_user_metric_counts_by_its_module_s_content(campaign, monkeypatch):  # noqa: F811
    tmp_path, inputs = campaign
    inputs["variants_result"] = []
    module = tmp_path / "house_metric_v.py"
    module.write_text("def score(p, r):\n    return float(p == r)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = generation_settings("house_metric_v.score")
    stage = get_stage("evaluate")
    derived = resolve_inputs(stage, spec, inputs, tmp_path)
    assert derived["metric_code"] == [module]
    before = key_of(inputs, tmp_path, spec)
    assert key_of(inputs, tmp_path, spec) == before
    module.write_text("def score(p, r):\n    return float(p.strip() == r.strip())\n")
    assert key_of(inputs, tmp_path, spec) != before  # an edited metric rescores
    # a built-in metric has no module input; a module nobody can find is one line
    assert (
        resolve_inputs(stage, generation_settings("token_f1"), inputs, tmp_path)["metric_code"]
        == []
    )
    with pytest.raises(CampaignError, match=r"model.generation.metric: 'no_such_mod_x.f'"):
        resolve_inputs(stage, generation_settings("no_such_mod_x.f"), inputs, tmp_path)
