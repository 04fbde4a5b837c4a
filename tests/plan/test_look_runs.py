"""The campaign's runs from the plan table and the looks (campaign.plan.look_runs): a fixed
campaign's kept runs; an adaptive one's latest look's runs, what each look appended, the
candidates no look asked for, and where the campaign stands; bad records fail in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaign.core.errors import CampaignError
from campaign.plan.look_runs import campaign_runs, look_files

# a, b: the plan's kept runs; c: cut by max_runs; a3 b3 a4 b4: what a look may append.
PLAN = [("a", "main", True), ("b", "main", True), ("c", "main", False)] + [
    (r, "adaptive", False) for r in ("a3", "b3", "a4", "b4")
]


def write_plan(root: Path, rows=PLAN) -> Path:
    lines = ["run\tseed\ttier\tkept"]
    lines += [f"{r}\t1\t{tier}\t{str(kept).lower()}" for r, tier, kept in rows]
    (root / "runs.tsv").write_text("\n".join(lines) + "\n")
    return root / "runs.tsv"


def write_looks(root: Path, *looks: tuple[list, list, bool]) -> list[Path]:
    """One look_<j>.json per (runs, appended, final), numbered from 1."""
    folder = root / "adaptive"
    folder.mkdir(exist_ok=True)
    paths = []
    for j, (runs, appended, final) in enumerate(looks, start=1):
        rec = {"look": j, "runs": runs, "appended": appended, "final": final, "max_looks": 3}
        (folder / f"look_{j}.json").write_text(json.dumps(rec))
        paths.append(folder / f"look_{j}.json")
    return paths


LOOK_1 = (["a", "b", "a3", "b3"], ["a3", "b3"], False)
LOOK_2 = (["a", "b", "a3", "b3", "a4"], ["a4"], False)
LOOK_3 = (["a", "b", "a3", "b3", "a4"], [], True)


def test_a_fixed_campaign_has_the_kept_runs(tmp_path):
    plan = write_plan(tmp_path, PLAN[:3])
    got = campaign_runs(plan)
    assert (got.runs, got.final, got.adaptive, got.not_asked) == (("a", "b"), True, False, ())
    assert got.state() == ""


def test_the_last_look_lists_the_campaigns_runs(tmp_path):
    plan = write_plan(tmp_path)
    paths = write_looks(tmp_path, LOOK_1, LOOK_2, LOOK_3)
    got = campaign_runs(plan, reversed(paths))  # the order given does not matter
    assert got.runs == ("a", "b", "a3", "b3", "a4")
    assert got.appended == {"a3": 1, "b3": 1, "a4": 2}
    assert got.not_asked == ("b4",)  # c is cut by the plan, not an adaptive candidate
    assert (got.looks, got.final) == (3, True)
    assert got.state() == "adaptive: the last look (3 of at most 3) is taken"
    assert look_files(tmp_path / "adaptive") == paths


def test_between_looks_the_latest_look_asks_and_more_may_come(tmp_path):
    plan = write_plan(tmp_path)
    got = campaign_runs(plan, write_looks(tmp_path, LOOK_1))
    assert (got.runs, got.not_asked, got.final) == (tuple(LOOK_1[0]), ("a4", "b4"), False)
    assert got.state() == (
        "adaptive: between looks (1 of at most 3 taken); a later look may append up to 2 more "
        "run(s)"
    )
    before = campaign_runs(plan)
    assert (before.runs, before.final, before.looks) == (("a", "b"), False, 0)
    assert before.state() == "adaptive: before the first look (the plan's kept runs so far)"


def test_bad_look_records_fail_in_one_line(tmp_path):
    plan = write_plan(tmp_path)
    paths = write_looks(tmp_path, LOOK_1, LOOK_3, LOOK_2)
    with pytest.raises(CampaignError, match=r"look_3.json: look 3 follows the final look 2"):
        campaign_runs(plan, paths)
    paths = write_looks(tmp_path, LOOK_1, LOOK_2)
    with pytest.raises(CampaignError, match=r"look_2.json: look 2 given without look 1"):
        campaign_runs(plan, paths[1:])
    paths = write_looks(tmp_path, (["a", "b", "z9"], ["z9"], False))
    with pytest.raises(CampaignError, match=r"look_1.json: run z9 is not in the plan table"):
        campaign_runs(plan, paths)
    paths = write_looks(tmp_path, LOOK_1, (["a", "b"], [], True))
    with pytest.raises(CampaignError, match=r"look_2.json: run a3 of the look before is not"):
        campaign_runs(plan, paths)
    (tmp_path / "adaptive" / "look_1.json").write_text('{"look": 1, "runs": []}')
    with pytest.raises(CampaignError, match=r"look_1.json.*final"):
        campaign_runs(plan, paths[:1])
