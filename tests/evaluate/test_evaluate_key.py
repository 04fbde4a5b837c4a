"""The evaluate stage's content key holds the plan table's design (runs, cells, seeds, tiers),
not its projected costs: those come from timings, which differ between identical campaigns."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_evaluate_stage import campaign, settings  # noqa: F401 (campaign is a fixture)

from campaign.core.hashcache import HashCache
from campaign.core.keys import content_key, hash_inputs, resolve_inputs
from campaign.core.registry import get_stage
from campaign.core.runner import run_stage
from campaign.core.store import Store


def key_of(inputs: dict, tmp_path: Path) -> str:
    stage = get_stage("evaluate")
    cache = HashCache(tmp_path / "hashcache.sqlite")
    try:
        resolved = resolve_inputs(stage, settings(), inputs, tmp_path)
        hashes = hash_inputs(resolved, cache, dict(stage.input_views))
    finally:
        cache.close()
    return content_key(stage, settings(), hashes)[0]


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
