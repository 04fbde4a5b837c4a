"""Tests for campaign.tools.artifacts (`campaign scan-artifacts`): a tokenizer trained (for
real, with the tokenizers library the training phase uses) on text that repeats a key holds it
as a token, and the scan finds it in the vocabulary; predictions and logs are scanned too; the
report names the artifact's path and never the secret."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
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
