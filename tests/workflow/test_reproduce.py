"""`campaign reproduce KEY` passes for every entry of a campaign Snakemake ran, training and
preflight included, from a plain shell; and a stage command typed by hand computes under the
same key as its Snakemake job (same threads, same execution settings)."""

from __future__ import annotations

import json

import pytest

from conftest import campaign

pytestmark = pytest.mark.slow(minutes=4)


def test_every_entry_reproduces_bit_for_bit_and_a_hand_run_is_a_hit(finished_project):
    store = finished_project / ".campaign" / "store"
    entries = {p.name: json.loads((p / "entry.json").read_text()) for p in store.iterdir()}
    stages = sorted(e["stage"] for e in entries.values())
    assert {"manifest", "split", "preflight", "plan_table", "train", "metrics"} <= set(stages)
    assert {"floor", "evaluate", "quantize", "quantize_table", "budget"} <= set(stages)
    for key, entry in sorted(entries.items(), key=lambda kv: kv[1]["stage"]):
        # A unique prefix, as a user types it (a stage that records its key gets all of it).
        out = campaign(finished_project, "reproduce", key[:16], check=False, timeout=600)
        if set(entry["outputs"]) <= set(entry["volatile"]):  # the budget, the variants table
            # Nothing comparable: said so, and not counted as reproduced.
            assert out.returncode == 1 and "nothing to compare" in out.stdout, entry["stage"]
            continue
        assert out.returncode == 0, f"{entry['stage']} {key}\n{out.stdout}\n{out.stderr}"
        assert "reproduced bit for bit" in out.stdout
        if entry["volatile"]:  # timings and host facts: recorded, never compared
            assert "recorded (volatile, not compared)" in out.stdout
        if entry["stage"] == "train":
            assert entry["key_material"]["execution"]["threads"] == 1

    # The training command as a person types it, with the inputs the params do not name.
    run = next(e["spec"] for e in entries.values() if e["stage"] == "train")
    from campaign.plan import run_id

    rid = run_id(run)
    splits = [f"--in={n}=results/data/splits/{n}.parquet" for n in ("train", "validation", "test")]
    outputs = [
        f"--out={n}=hand/{n}"
        for n in (
            "model",
            "metrics",
            "predictions_validation",
            "predictions_test",
            "run_manifest",
            "timings",
        )
    ]
    out = campaign(finished_project, "train", "--run", rid, *splits, *outputs, timeout=300)
    assert "store hit" in out.stdout
    made = finished_project / "results" / "runs" / rid
    assert (finished_project / "hand" / "model" / "model.safetensors").read_bytes() == (
        made / "model" / "model.safetensors"
    ).read_bytes()
