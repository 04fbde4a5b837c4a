"""An adaptive tiny campaign, run by Snakemake from a finished fixed one: the first look
appends a seed to every cell of the open contrast (with the ids a fixed plan listing that seed
gives), the second stops the cell below the floor and so ends the campaign, the evaluation
decides on the last look's repeated intervals, `campaign status` and the verdict block tell the
looks, the campaign run again from an empty results folder is all store hits, and a kill -9
while an appended run trains resumes that run from its checkpoint to the same result."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from campaign.core.io import cell_id
from campaign.evaluate import read_decisions
from campaign.evaluate.look_words import read_looks
from campaign.plan import plan_runs, run_id
from conftest import (
    campaign,
    copy_finished,
    events,
    kill_9_mid_training,
    result_hashes,
    session_project,
    snakemake,
)

ADAPTIVE = {"enabled": True, "max_looks": 3, "max_seeds": 4}


def make_adaptive(project: Path) -> dict:
    """The project's params with ablation.adaptive on (3 looks, at most 4 seeds); returned."""
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params["ablation"]["adaptive"] = dict(ADAPTIVE)
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return params


@pytest.fixture(scope="session")
def finished_adaptive(finished_campaign, tmp_path_factory) -> Path:
    """The finished tiny campaign made adaptive and run to its end, once per session: read it,
    never change it. Its `done` file holds how many store events the fixed campaign had (the
    adaptive run's are those after). Under pytest-xdist the workers share it (a lock)."""

    def build(project: Path) -> str:
        copy_finished(finished_campaign, project)
        make_adaptive(project)
        n_events = len(events(project))
        snakemake(project, timeout=1500)
        return f"{n_events}\n"

    return session_project(tmp_path_factory, "finished_adaptive", build)


def adaptive_events(project: Path) -> list[dict]:
    """The store events of the adaptive run of finished_adaptive (after the fixed campaign's)."""
    return events(project)[int((project.parent / "done").read_text()) :]


@pytest.mark.slow(minutes=3)  # builds the session's adaptive campaign (finished_adaptive)
def test_adaptive_campaign_appends_seeds_to_the_open_contrast(finished_adaptive):
    params = yaml.safe_load((finished_adaptive / "params.yaml").read_text())
    looks = finished_adaptive / "results" / "adaptive"
    first = json.loads((looks / "look_1.json").read_text())
    last = json.loads((looks / "look_2.json").read_text())
    # The tiny cells cannot be told apart at 2 seeds: the contrast is open, every cell gets its
    # third seed, with the id a fixed plan with seeds [1, 2, 3] gives that cell and seed.
    assert {r["status"] for r in first["rows"]} == {"open"} and not first["final"]
    fixed = {**params, "ablation": {**params["ablation"], "seeds": [1, 2, 3]}}
    third = {r.run_id for r in plan_runs(fixed) if r.seed == 3}
    assert set(first["appended"]) == third and len(third) == len(first["seeds"])
    assert first["seeds"] == dict.fromkeys(first["seeds"], 3)
    # Look 2: the tiny model is far below TF-IDF + logistic regression; the non-control cell
    # stops (below the floor; the control never stops, every contrast needs it), so its
    # questions stop and the campaign ends a look before the last planned one.
    control = cell_id(dict(plan_runs(fixed)[0].cell))
    assert [c for c in last["stopped"]] == [c for c in last["seeds"] if c != control]
    assert all(why.startswith("below the floor") for why in last["stopped"].values())
    assert {r["status"] for r in last["rows"]} == {"stopped"}
    assert last["final"] and last["look"] == 2 and last["appended"] == []
    assert last["runs"] == first["runs"]
    new = adaptive_events(finished_adaptive)
    trained = [e["event"] for e in new if e["stage"] == "train" and e["event"] != "commit"]
    assert trained == ["miss", "miss"]  # the two appended runs; the plan's 4 were there
    # The evaluation decides the effect on the looks' repeated intervals (intersected).
    decisions = read_decisions(finished_adaptive / "results/evaluation/decisions.json")
    main = decisions.of_kind("main")
    rows = [next(r for r in look["rows"] if r["kind"] == "main") for look in (first, last)]
    low, high = max(r["rci_low"] for r in rows), min(r["rci_high"] for r in rows)
    assert [(d.adj_low, d.adj_high) for d in main] == [(low, high)]
    status = campaign(finished_adaptive, "status", check=False).stdout
    assert "Adaptive looks:" in status
    # The budget, the index and status count the last look's runs: the 2 appended ones too,
    # not the 2 candidates (seed 4) no look asked for.
    # (Snakemake's summary marks the plan's 4 training jobs stale here, and does not list the
    # appended ones: their job records say they are trained.)
    told = next(line for line in status.splitlines() if line.startswith("adaptive:"))
    assert told.startswith(
        "adaptive: look 2 (the last) asks for 6 runs (2 appended by the looks): "
    ), status
    trained = int(told.split(": ")[2].split(" trained")[0])
    stale = int(told.split(" stale")[0].rsplit(" ", 1)[1]) if " stale" in told else 0
    assert trained >= 2 and trained + stale == 6 and told.endswith("0 running, 0 to do"), told
    results = finished_adaptive / "results"
    summary = (results / "budget" / "summary.txt").read_text()
    assert (
        "Adaptive campaign, last look (2) taken: the kept plan is the 6 run(s) it lists (2 "
        "appended by the looks); 2 adaptive run(s) (" in summary
    )
    forecast = pd.read_parquet(results / "budget" / "forecast.parquet").set_index("run")
    assert sorted(forecast.index) == sorted(last["runs"])
    assert forecast["kept"].all() and forecast["finished"].all()
    index = pd.read_parquet(results / "index.parquet")
    runs = index[index["kind"] == "run"].set_index("run")
    looked = runs["added_at_look"]
    assert sorted(looked.index) == sorted(last["runs"])
    assert looked[first["appended"]].tolist() == [1, 1]
    assert looked.drop(first["appended"]).isna().all()
    # (Run again from no results, every stage is a store hit: on the kill test's recovered
    # campaign, the reference's bytes; test_kill_9_during_an_appended_run_...)


LOOKS_LINE = re.compile(
    r"^Looks: (\d+) of (\d+) taken; (\d+) seeds? added, (\d+) cells? stopped; (\d+) runs "
    r"against the fixed design's (\d+) \(every cell at the most seeds\)$"
)
AFTER_LOOKS = (
    "After the looks: effects, interactions and cells against the control decided on "
    "repeated confidence intervals (O'Brien-Fleming), a cell against the floor tested "
    "Bonferroni over the {k} planned looks"
)


def verdict_lines(path: Path) -> list[str]:
    """The verdict block opening a summary.txt, or the report's '## Verdict' items (summary.md),
    stripped."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        md = text.splitlines()
        start = md.index("## Verdict")
        end = next(i for i in range(start + 1, len(md)) if md[i].startswith("## "))
        return [x.removeprefix("- ").strip() for x in md[start + 1 : end] if x.strip()]
    head = text.partition("\n\n")[0].splitlines()
    assert head[0].startswith("Verdict ("), f"{path} does not open with the verdict"
    return [x.strip() for x in head]


SUMMARIES = ("evaluation/summary.txt", "budget/summary.txt", "report/summary.md")


# Seconds once the session's adaptive campaign is there: no minutes, so that it starts after the
# long tests (one of which builds that campaign) instead of waiting on it.
@pytest.mark.slow
def test_the_verdict_block_tells_the_looks_with_the_look_records_numbers(
    finished_adaptive, finished_campaign
):
    looks = read_looks(finished_adaptive / "results" / "adaptive")
    last = looks[-1]
    stopped = {cell for look in looks for cell in look["stopped"]}
    recorded = (
        len(looks),
        last["max_looks"],
        sum(len(look["appended"]) for look in looks),
        len(stopped),
        len(last["runs"]),
        last["fixed"]["runs"],
    )
    # By hand: 2 looks of 3; look 1 added the third seed of both cells, look 2 stopped the one
    # below the floor; 4 + 2 = 6 runs against 2 cells x 4 seeds = 8.
    assert recorded == (2, 3, 2, 1, 6, 8)
    for name in SUMMARIES:
        block = verdict_lines(finished_adaptive / "results" / name)
        assert len(block) <= 12, (name, block)
        (said,) = [x for x in block if x.startswith("Looks: ")]
        assert tuple(int(x) for x in LOOKS_LINE.match(said).groups()) == recorded, said
        assert AFTER_LOOKS.format(k=last["max_looks"]) in block
        # A fixed campaign's block says nothing of looks.
        fixed = verdict_lines(finished_campaign / "results" / name)
        assert not [x for x in fixed if x.startswith(("Looks: ", "After the looks: "))]


def trained_keys(project: Path) -> dict[str, str]:
    """The store key of every training entry in a project's store, by run id."""
    keys = {}
    for entry in sorted((project / ".campaign" / "store").iterdir()):
        meta = json.loads((entry / "entry.json").read_text(encoding="utf-8"))
        if meta["stage"] == "train":
            keys[run_id(meta["spec"])] = entry.name
    return keys


@pytest.mark.slow(minutes=3)
def test_kill_9_during_an_appended_run_resumes_it_from_its_checkpoint_to_the_same_result(
    tmp_path, finished_campaign, finished_adaptive
):
    # The session's adaptive campaign is the uninterrupted reference. This one starts where it
    # started (the finished fixed campaign, made adaptive) with the reference's store entries
    # but one appended run's training: look 1, the appended runs' specs and the other appended
    # run's training are store hits, that one run trains here (20 steps, a checkpoint every 5),
    # and everything after it is a store hit only where its inputs are the reference's bytes.
    reference = finished_adaptive
    looks = read_looks(reference / "results" / "adaptive")
    appended = looks[0]["appended"]
    keys = trained_keys(reference)
    assert sorted(keys) == sorted(looks[-1]["runs"])  # the plan's 4 and the 2 appended
    cold = appended[-1]
    killed = copy_finished(finished_campaign, tmp_path / "killed")
    make_adaptive(killed)
    source, dest = reference / ".campaign" / "store", killed / ".campaign" / "store"
    for entry in sorted(source.iterdir()):
        if not (dest / entry.name).exists() and entry.name != keys[cold]:
            shutil.copytree(entry, dest / entry.name, symlinks=True)

    n_events = len(events(killed))  # the fixed campaign's
    # Kill while the appended run trains: right after its first checkpoint lands (the helper
    # makes sure it had not finished).
    caught = kill_9_mid_training(killed, runs=[cold])
    run, key, saved = caught.run, caught.key, caught.steps
    assert saved, "the killed run's checkpoint survives in its work folder"
    assert (run, key) == (cold, keys[cold])  # the reference's key: same spec, same inputs
    before = events(killed)
    done = {e["key"] for e in before if e["event"] in ("hit", "commit")}
    killed_run = before[n_events:]
    assert "look" in {e["stage"] for e in killed_run if e["event"] == "hit"}  # look 1
    assert key not in done

    # The recovery command from README.md.
    snakemake(killed, "--unlock")
    snakemake(killed, timeout=900)
    after = events(killed)[len(before) :]
    missed = [e for e in after if e["event"] == "miss"]
    assert not {e["key"] for e in missed} & done, "a finished stage was computed again"
    # Only the killed run trains, resumed from its newest checkpoint (the project's promise: a
    # killed run continues, byte for byte).
    assert {e["key"] for e in missed if e["stage"] == "train"} == {key}
    log = (killed / "logs" / "train" / f"{run}.log").read_text(encoding="utf-8")
    assert f"train: resumed from step {saved[-1]}" in log
    # What reads the runs' weights and predictions (look 2, the quantized variants, the
    # evaluation) is a store hit: its inputs are the uninterrupted run's bytes. (The budget,
    # the report and the index read the runs' timings: this campaign's own.)
    for stage in ("look", "quantize", "evaluate"):
        ran = [e["event"] for e in after if e["stage"] == stage]
        assert "miss" not in ran, (stage, ran)
    assert "evaluate" in {e["stage"] for e in after}
    assert read_looks(killed / "results/adaptive") == looks
    assert result_hashes(killed, timed=False) == result_hashes(reference, timed=False)

    # Run again from no results (the recovered campaign, the reference's bytes and looks):
    # every stage, the looks and the appended runs too, a store hit.
    shutil.rmtree(killed / "results")
    n_events = len(events(killed))
    snakemake(killed, timeout=900)
    again = events(killed)[n_events:]
    assert [e for e in again if e["event"] != "hit"] == []
    assert sum(e["stage"] == "train" for e in again) == 6
    assert sum(e["stage"] == "look" for e in again) == 2
