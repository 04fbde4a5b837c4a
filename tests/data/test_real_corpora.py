"""Splits on real public text: the Debian package changelogs installed on this machine
(scripts/corpora/debian_changelogs.py shapes them; skipped with the reason when too few are
installed). Boilerplate entries chain most packages into one leak unit: ``unite`` must refuse
it in one line, ``drop`` must give a usable split (sizes and labels within tolerance, every
label in train, no duplicate across splits)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_split import CFG, SEED, cfg

from campaign.core.errors import CampaignError
from campaign.data import audit as auditing
from campaign.data import split
from campaign.data.readers import load_records
from campaign.data.salt import find_salt

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "corpora" / "debian_changelogs.py"
FIELDS = {
    "id": "id",
    "text": "text",
    "label": "label",
    "group": "author",
    "timestamp": "created_at",
}


@pytest.fixture(scope="module")
def changelogs(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpora") / "changelogs.jsonl"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--min-sources", "100"],
        capture_output=True,
        text=True,
    )
    if done.returncode == 3:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stderr
    source = {"path": str(out), "format": "jsonl", "licence": "various", "origin": "Debian"}
    return load_records([source], FIELDS, out.parent)


def drop_cfg(**changes) -> dict:
    return cfg(dedup={**CFG["dedup"], "policy": "drop"}, **changes)


def test_unite_refuses_the_giant_unit(changelogs) -> None:
    with pytest.raises(CampaignError) as caught:
        split.make_splits(changelogs, cfg(), seed=SEED)
    message = str(caught.value)
    print(message)
    assert "\n" not in message and message.startswith("split: unit ")
    assert "more than an evaluation split can hold" in message
    assert "largest groups: " in message and "split.dedup.policy: drop" in message


def test_drop_gives_a_usable_split(changelogs) -> None:
    choice = find_salt(changelogs, drop_cfg(salt="changelogs"), seed=SEED, tries=2000)
    assignments, audit = split.make_splits(changelogs, drop_cfg(salt=choice.salt), seed=SEED)
    print("\n" + auditing.audit_table(audit))
    auditing.check_audit(audit, CFG["audit"])
    n = len(changelogs) - audit["dedup"]["dropped"]["records"]
    for name, target in CFG["fractions"].items():
        share = int((assignments["split"] == name).sum()) / n
        assert abs(share - target) <= CFG["size_tolerance"], name
    assert set(assignments[assignments["split"] == "train"]["label"]) == set(changelogs["label"])
    assert audit["leaks"]["leaking_pairs"] == 0
    assert audit["leaks"]["groups_in_several_splits"] == 0
    assert audit["dedup"]["dropped"]["records"] < 0.05 * len(changelogs)
