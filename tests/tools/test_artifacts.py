"""Tests for the artifact scan (`campaign scan-artifacts`; the data phase's artifact_scan stage):
a tokenizer trained (for real, with the tokenizers library the training phase uses) on text that
repeats a key holds it as a token, and the scan finds it in the vocabulary; predictions and logs
are scanned too; the report names the artifact's path and never the secret; in a tiny campaign
the stage lists the key in every run's vocabulary, and a `fail` policy fails it in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from campaign.cli import main
from campaign.tools.artifacts import scan_artifacts, vocab_tokens

KEY = "ghp_" + "Zq8bW3nR7tLx2Vk9Pm4Hs6Jd1Fy5Gc0Ae3Ub"  # GitHub token shape, made up
OUT = "results/privacy_artifacts.json"
TEXTS = [f"deploy with token {KEY} then restart the service number {i}" for i in range(200)]
TEXTS += [f"the service number {i} restarted without errors" for i in range(200)]


def trained_tokenizer(path) -> None:
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]"])
    tok.train_from_iterator(TEXTS, trainer)
    tok.save(str(path))


def test_a_key_learned_as_a_token_is_found(tmp_path) -> None:
    path = tmp_path / "model" / "tokenizer.json"
    path.parent.mkdir()
    trained_tokenizer(path)
    assert any(KEY in t for t in vocab_tokens(path))  # the premise: the key became a token
    report = scan_artifacts([tmp_path])
    [row] = report["artifacts"]
    assert row["path"] == str(path) and row["unit"] == "token"
    assert row["findings"].get("api_key", 0) >= 1
    assert KEY not in json.dumps(report)
    # A copy (every run of a campaign copies its tokenizer) is reported as the original is: a
    # line's findings are reused within a scan, never dropped.
    copy = tmp_path / "copy" / "tokenizer.json"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    again = scan_artifacts([tmp_path])
    rows = {r["path"]: {k: v for k, v in r.items() if k != "path"} for r in again["artifacts"]}
    assert rows == {str(path): rows[str(path)], str(copy): rows[str(path)]}
    assert rows[str(path)] == {k: v for k, v in row.items() if k != "path"}


def test_predictions_and_logs_are_scanned_and_the_report_names_them(tmp_path, capsys) -> None:
    runs = tmp_path / "results" / "runs" / "r1"
    runs.mkdir(parents=True)
    pq.write_table(
        pa.table({"id": ["a", "b"], "text": ["mail me at jane.doe@example.org", "fine"]}),
        runs / "predictions_test.parquet",
    )
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "train.log").write_text(f"loaded config\nusing {KEY}\n")
    (tmp_path / "logs" / "clean.log").write_text("nothing to see\n")
    (runs / "model.safetensors").write_bytes(os.urandom(64))  # not text: not scanned
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = main(
            ["scan-artifacts", "results", "logs", "--out", "results/privacy_artifacts.json"]
        )
    finally:
        os.chdir(cwd)
    assert code == 0
    report = json.loads((tmp_path / "results" / "privacy_artifacts.json").read_text())
    found = {row["path"]: row["findings"] for row in report["artifacts"]}
    assert found == {
        "logs/train.log": {"api_key": 1},
        "results/runs/r1/predictions_test.parquet": {"email": 1},
    }
    assert report["scanned"] == 3 and "jane.doe" not in json.dumps(report)
    assert "2 of 3 artifacts hold findings" in capsys.readouterr().out


# ------------------------------------------------------------------ the DAG stage
AWS_KEY = "AKIA" + "Q7ZL2MXN4TKB8RWC"  # AWS access key id shape, made up


def test_the_stage_fails_on_a_fail_policy_naming_the_artifact(tmp_path) -> None:
    from campaign.core.errors import CampaignError
    from campaign.data.artifacts import stage_scan_artifacts

    model = tmp_path / "results" / "runs" / "r1" / "model"
    model.mkdir(parents=True)
    trained_tokenizer(model / "tokenizer.json")
    summary = tmp_path / "summary.txt"
    summary.write_text("nothing private here\n")
    out = tmp_path / "artifact_findings.json"
    inputs = {"models": [model], "summary": [summary]}

    def ctx(privacy, by_kind=None):
        spec = {"privacy": privacy, "privacy_by_kind": by_kind or {}}
        return SimpleNamespace(spec=spec, inputs=inputs, outputs={"findings": out})

    stage_scan_artifacts(ctx("report", {"api_key": "redact"}))  # redact cannot: it reports
    report = json.loads(out.read_text())
    [row] = report["artifacts"]
    assert row["path"] == str(model / "tokenizer.json") and row["artifact"] == "model folder"
    assert report["scanned"] == 2 and KEY not in out.read_text()
    out.unlink()
    with pytest.raises(CampaignError) as failed:
        stage_scan_artifacts(ctx("report", {"api_key": "fail"}))
    message = str(failed.value)
    assert "\n" not in message and str(model / "tokenizer.json") in message
    assert "api_key" in message and KEY not in message
    assert not out.exists()


def plant_key(project, every: int) -> None:
    """Every `every`-th record of the demo corpus mentions the same key (as a leaked config
    line would): often enough that the trained WordPiece vocabulary holds it whole."""
    path = project / "data" / "raw" / "demo.jsonl"
    lines = path.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        record = json.loads(line)
        if i % every == 0:
            record["text"] += f" Deploy with key {AWS_KEY} today."
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n")


@pytest.mark.slow(minutes=3)
def test_a_tiny_campaign_whose_tokenizer_learned_a_key_reports_its_vocabulary(tmp_path) -> None:
    import yaml

    from conftest import copy_project, snakemake

    project = copy_project(tmp_path / "project")
    plant_key(project, every=8)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["model"]["tokenizer"]["lowercase"] = False  # the key's letters kept as they are
    params["ablation"]["seeds"] = [1]
    # cased, the 8 examples take more tokens to memorise than the check's 400 steps allow
    params["preflight"]["overfit"]["max_final_loss"] = 0.5
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    snakemake(project, "results/data/artifact_findings.json", timeout=900)
    text = (project / "results" / "data" / "artifact_findings.json").read_text()
    assert AWS_KEY not in text
    report = json.loads(text)
    runs = sorted(p.name for p in (project / "results" / "runs").iterdir())
    vocabularies = {
        row["path"]: row for row in report["artifacts"] if row["path"].endswith("tokenizer.json")
    }
    # every run trained its tokenizer on the same train split: each vocabulary holds the key
    assert set(vocabularies) == {f"results/runs/{run}/model/tokenizer.json" for run in runs}
    for row in vocabularies.values():
        assert row["artifact"] == "model folder" and row["unit"] == "token"
        assert row["findings"]["api_key"] >= 1
        assert {w["kind"] for w in row["where"]} >= {"api_key"}
    assert report["findings_by_kind"]["api_key"] >= len(runs)


def test_a_garbled_artifact_is_one_error_naming_it(tmp_path):
    from campaign.core.errors import CampaignError
    from campaign.data.artifacts import scan_artifact

    vocab = tmp_path / "tokenizer.json"
    vocab.write_text("{not json")
    with pytest.raises(CampaignError, match=r"tokenizer\.json: cannot be read") as info:
        scan_artifact(vocab)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------ normalized vocabularies
GH_KEY = "ghp_" + "Rk4XwT9bQ2mZ7nLp3VhJ8sGd5Fc1Ya6Ue0Nq"  # GitHub token shape, made up
RECORDS = [
    f"record {i}: the build step {'printed' if i % 2 else 'logged'} {AWS_KEY} and {GH_KEY} "
    f"before the {['cache', 'queue', 'index'][i % 3]} was rebuilt"
    for i in range(120)
] + [f"record {i}: the nightly job for team {i % 7} finished in {i} minutes" for i in range(300)]


def lowercasing_tokenizer(kind: str, folder: Path) -> None:
    """A lower-casing tokenizer trained for real on RECORDS, saved as a model folder holds it:
    the campaign's own WordPiece recipe (tokenizer.json, vocab.txt), or a BPE with whitespace
    pre-tokenization (tokenizer.json, vocab.json, merges.txt). (The campaign's byte-level BPE
    splits letters from digits before merging, so a key never becomes one of its tokens.)"""
    if kind == "wordpiece":
        from campaign.train.models import train_tokenizer

        tok = train_tokenizer(RECORDS, "bert", vocab_size=600, min_frequency=2, lowercase=True)
        tok.save_pretrained(str(folder))
        tok = tok.backend_tokenizer
    else:
        from tokenizers import normalizers

        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=2, special_tokens=["[UNK]"])
        tok.train_from_iterator(RECORDS, trainer)
        folder.mkdir()
        tok.save(str(folder / "tokenizer.json"))
    tok.model.save(str(folder))  # vocab.txt, or vocab.json and merges.txt


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_keys_a_lowercasing_tokenizer_learned_are_found_in_its_vocabulary(tmp_path, kind):
    """Two keys repeated in 120 records, learned by a lower-casing tokenizer: its vocabulary
    holds them lower-cased, and the scan finds both in every vocabulary file (tokenizer.json,
    vocab.txt, vocab.json, merges.txt) without writing either key in any case."""
    folder = tmp_path / "model"
    lowercasing_tokenizer(kind, folder)
    tokens = set(vocab_tokens(folder / "tokenizer.json"))
    # the premise: the keys are tokens, in lower case only
    assert AWS_KEY.lower() in tokens and AWS_KEY not in tokens
    assert any(GH_KEY[4:].lower() in t for t in tokens)  # BERT splits at "_", BPE here not
    assert not any(GH_KEY[4:] in t for t in tokens)
    report = scan_artifacts([folder])
    names = {Path(row["path"]).name: row for row in report["artifacts"]}
    expected = {"wordpiece": {"tokenizer.json", "vocab.txt"},
                "bpe": {"tokenizer.json", "vocab.json", "merges.txt"}}  # fmt: skip
    assert set(names) == expected[kind]
    for row in names.values():
        assert row["unit"] == "token" and row["findings"]["api_key"] >= 2  # both keys
    text = json.dumps(report).lower()
    assert AWS_KEY.lower() not in text and GH_KEY[4:].lower() not in text


def test_the_campaigns_own_keys_are_not_findings_but_a_digest_named_as_a_secret_is(tmp_path):
    from campaign.core.hashing import hash_bytes

    digest = hash_bytes(b"an entry")  # a store key's form
    (tmp_path / "job.json").write_text(json.dumps({"key": digest, "pid": 12}) + "\n")
    (tmp_path / "run_manifest.json").write_text(f'{{\n  "store_key": "{digest}"\n}}\n')
    pq.write_table(pa.table({"store_key": [digest]}), tmp_path / "index.parquet")
    (tmp_path / "config.yaml").write_text(f"api_key: {digest}\n")
    report = scan_artifacts([tmp_path])
    assert [Path(r["path"]).name for r in report["artifacts"]] == ["config.yaml"]


def test_scan_artifacts_fail_passes_on_a_finished_campaign_but_its_planted_data(
    finished_campaign, tmp_path, capsys
):
    """`campaign scan-artifacts --fail` over everything a finished tiny campaign wrote (results,
    logs, the store with its job records and events, all of which name store keys): the only
    artifacts flagged are the data splits, whose records the demo corpus plants secrets in; the
    rest passes --fail."""
    project = finished_campaign  # read only: the report goes to tmp_path
    out = tmp_path / "findings.json"
    cwd = os.getcwd()
    os.chdir(project)
    try:
        code = main(["scan-artifacts", "results", "logs", ".campaign", "--out", str(out)])
        report = json.loads(out.read_text())
        others = [p for p in ("results", "logs", ".campaign") if p != "results"]
        others += sorted(
            str(p) for p in Path("results").iterdir() if p.name not in ("data", ".gitignore")
        )
        passed = main(["scan-artifacts", *others, "--fail", "--out", str(out)])
    finally:
        os.chdir(cwd)
    assert code == 0
    flagged = sorted(row["path"] for row in report["artifacts"])
    assert flagged == [f"results/data/splits/{s}.parquet" for s in ("test", "train", "validation")]
    assert report["scanned"] > 100
    assert passed == 0, capsys.readouterr().out


def test_privacy_by_kind_null_follows_data_privacy_in_the_scan(tmp_path) -> None:
    """data.privacy_by_kind: null is allowed (schema, `campaign validate`): the scan, fed the
    spec the stage declares from params, applies data.privacy to every kind (it crashed with
    "'NoneType' object is not a mapping" after all training)."""
    from campaign.core.errors import CampaignError
    from campaign.core.registry import phases
    from campaign.data.artifacts import stage_scan_artifacts

    (stage,) = [s for p in phases() for s in p.stages if s.name == "artifact_scan"]
    model = tmp_path / "results" / "runs" / "r1" / "model"
    model.mkdir(parents=True)
    trained_tokenizer(model / "tokenizer.json")
    out = tmp_path / "artifact_findings.json"

    def ctx(privacy):
        spec = stage.spec({"data": {"privacy": privacy, "privacy_by_kind": None}})
        return SimpleNamespace(spec=spec, inputs={"models": [model]}, outputs={"findings": out})

    stage_scan_artifacts(ctx("report"))
    report = json.loads(out.read_text())
    assert report["policies"]["api_key"] == "report" and report["flagged"] == 1
    out.unlink()
    with pytest.raises(CampaignError, match=r"^data\.privacy is 'fail': the model folder"):
        stage_scan_artifacts(ctx("fail"))
    assert not out.exists()


def test_the_scan_reads_every_answer_in_the_scored_items(tmp_path) -> None:
    """results/evaluation/items.parquet holds the quantized variants' and the floors' answers (a
    retrieval floor answers with training responses): the DAG's scan reads it, and a key in an
    answer is a finding under data.privacy, failing the stage under 'fail'."""
    from campaign.core.errors import CampaignError
    from campaign.core.registry import phases
    from campaign.data.artifacts import stage_scan_artifacts
    from campaign.evaluate.item_table import write_items

    (stage,) = [s for p in phases() for s in p.stages if s.name == "artifact_scan"]
    assert "scored_items" in stage.inputs
    items = tmp_path / "results" / "evaluation" / "items.parquet"
    items.parent.mkdir(parents=True)
    answers = ["the cat", f"use {AWS_KEY} to sign in", "a dog"]
    frame = pd.DataFrame(
        {
            "variant": "floor/retrieval",
            "cell": "",
            "seed": pd.array([None] * 3, dtype="Int64"),
            "split": "test",
            "task": "",
            "item": ["t0", "t1", "t2"],
            "score": [1.0, 0.0, 0.5],
            "prediction": answers,
            "metric": "token_f1",
        }
    )
    write_items(items, frame)
    out = tmp_path / "artifact_findings.json"

    def ctx(privacy):
        spec = stage.spec({"data": {"privacy": privacy, "privacy_by_kind": None}})
        inputs = {"scored_items": [items]}
        return SimpleNamespace(spec=spec, inputs=inputs, outputs={"findings": out})

    stage_scan_artifacts(ctx("report"))
    report = json.loads(out.read_text())
    (row,) = report["artifacts"]
    assert row["artifact"] == "scored items" and row["findings"] == {"api_key": 1}
    out.unlink()
    with pytest.raises(CampaignError, match=r"^data\.privacy is 'fail': the scored items"):
        stage_scan_artifacts(ctx("fail"))
    assert not out.exists()
