"""`campaign findings`: what a user must act on, printed at the end of every snakemake run."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from campaign.cli import main
from campaign.tools.findings import after_run, findings, findings_block

# decisions.json's keys every evaluation writes (campaign.evaluate.records reads them).
DECIDED = {"decide_on": "validation", "metric": "accuracy"}


def write(root: Path, rel: str, value) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value))


def clean_reports(root: Path) -> None:
    write(
        root,
        "results/data/privacy_report.json",
        {"kinds": {"email": {"findings": 0}}, "n_flagged": 0, "n_records": 10},
    )
    write(
        root,
        "results/data/leakage_audit.json",
        {
            "leaks": {"groups_in_several_splits": 0, "cross_split_exact_pairs": 0},
            "labels": {"within_tolerance": True, "missing_from_train": []},
            "sizes": {"within_tolerance": True},
        },
    )
    write(
        root,
        "results/preflight/report.json",
        {"passed": True, "memory": {"passed": True, "blocking": True}},
    )
    write(root, "results/evaluation/decisions.json", {**DECIDED, "below_floor": []})
    write(root, "results/data/artifact_findings.json", {"scanned": 4, "flagged": 0})


def test_clean_reports_have_nothing_to_act_on(tmp_path):
    clean_reports(tmp_path)
    assert findings(tmp_path) == []
    assert findings_block(tmp_path) == "campaign findings: none to act on"


def test_each_kind_of_finding_is_one_line(tmp_path):
    clean_reports(tmp_path)
    privacy = {
        "kinds": {
            "email": {"findings": 4, "records": 4},
            "api_key": {"findings": 11, "records": 9},
            "iban": {"findings": 0, "records": 0},
        },
        "n_flagged": 13,
        "n_records": 3000,
    }
    write(tmp_path, "results/data/privacy_report.json", privacy)
    artifacts = {"scanned": 9, "flagged": 2, "findings_by_kind": {"email": 3, "api_key": 1}}
    write(tmp_path, "results/data/artifact_findings.json", artifacts)
    audit = {
        "leaks": {
            "groups_in_several_splits": 2,
            "cross_split_exact_pairs": 1,
            "cross_split_near_pairs": 3,
        },
        "labels": {
            "within_tolerance": False,
            "max_deviation": {"label": "music", "split": "test", "value": 0.0712},
            "missing_from_train": ["opera"],
        },
        "sizes": {"within_tolerance": True},
    }
    write(tmp_path, "results/data/leakage_audit.json", audit)
    preflight = {
        "passed": False,
        "memory": {"passed": False, "blocking": True},
        "throughput": {"passed": False, "blocking": False},
        "disk": {"passed": True, "blocking": True},
    }
    write(tmp_path, "results/preflight/report.json", preflight)
    measured = {
        "memory": {"summary": "needs 90 GiB, the card has 80 GiB"},
        "throughput": {"summary": "12 samples/s"},
    }
    write(tmp_path, "results/preflight/measurements.json", measured)
    decisions = {
        **DECIDED,
        "below_floor": [
            {
                "cell": "train.lr=0.001",
                "estimate": -0.7,
                "ci_low": -1.45,
                "ci_high": 0.049,
                "floor": "floor/tfidf_logreg",
                "verdict": "not shown above floor",
            }
        ],
        "skipped_variants": [{"variant": "int4"}],
    }
    write(tmp_path, "results/evaluation/decisions.json", decisions)
    assert findings(tmp_path) == [
        "privacy: 13 of 3000 records hold findings (api_key 11, email 4); see "
        "results/data/privacy_report.json",
        "privacy: 2 of 9 artifacts hold findings (api_key 1, email 3); see "
        "results/data/artifact_findings.json",
        "leakage audit: 2 group(s) are in more than one split",
        "leakage audit: duplicate pairs across splits (exact 1, near 3)",
        "leakage audit: label 'music' off its overall share in test by 0.071 (outside tolerance)",
        "leakage audit: label(s) absent from train: ['opera']",
        "preflight FAILED: memory: needs 90 GiB, the card has 80 GiB",
        "preflight warning: throughput: 12 samples/s",
        "evaluation: train.lr=0.001 not shown above floor (floor/tfidf_logreg: -70.0 points "
        "[-145.0, 4.9])",
        "evaluation: 1 quantized variant(s) skipped; see results/evaluation/decisions.json",
    ]
    assert findings_block(tmp_path).startswith("campaign findings (10 to act on):\n  privacy: 13")


def test_unreadable_report_is_a_line_not_an_error(tmp_path, monkeypatch, capsys):
    clean_reports(tmp_path)
    write(tmp_path, "results/preflight/report.json", "{not json")
    monkeypatch.chdir(tmp_path)
    assert main(["findings"]) == 0
    out = capsys.readouterr().out
    assert "results/preflight/report.json: could not read (CampaignError" in out
    assert "not valid JSON" in out
    # Nothing written yet (a run that failed early): nothing to act on.
    assert main(["findings", "--root", str(tmp_path / "empty")]) == 0
    assert "none to act on" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["/nonexistent/campaign", "exit 3 #"])
def test_after_run_never_raises(command):
    stream = io.StringIO()
    after_run(command, stream=stream)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("campaign findings: failed")


@pytest.mark.slow
def test_snakemake_run_ends_with_the_findings(tiny_project):
    """The data phase of the tiny campaign finds secrets in the demo corpus; the run's own output
    says so at the end, not only the data job's log."""
    from conftest import snakemake

    proc = snakemake(tiny_project, "results/data/leakage_audit.json", timeout=600)
    privacy = json.loads((tiny_project / "results/data/privacy_report.json").read_text())
    assert privacy["n_flagged"] > 0  # the demo corpus plants some
    text = proc.stdout + proc.stderr
    block = text[text.index("campaign findings (") :]
    assert f"privacy: {privacy['n_flagged']} of {privacy['n_records']} records" in block
    # The block comes after the jobs: at the end of the run.
    assert text.rindex("Finished jobid") < text.index("campaign findings (")


def test_a_report_older_than_an_hour_says_how_old(tmp_path):
    """After a failed run, a report it did not rewrite may be about other params: its lines say
    how old it is; fresh reports' lines do not."""
    import os
    import time

    clean_reports(tmp_path)
    decisions = {**DECIDED, "below_floor": [], "skipped_variants": [{"variant": "nf4"}]}
    write(tmp_path, "results/evaluation/decisions.json", decisions)
    [fresh] = findings(tmp_path)
    assert "ago" not in fresh
    old = time.time() - 3 * 86400
    os.utime(tmp_path / "results/evaluation/decisions.json", (old, old))
    [line] = findings(tmp_path)
    assert line == fresh + " (written 3 days ago)"
