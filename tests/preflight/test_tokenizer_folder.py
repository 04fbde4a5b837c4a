"""A pretrained model folder without a usable tokenizer is refused in one line by `campaign init`,
`campaign validate` and the preflight (transformers would build a tokenizer of its five special
tokens that reads every word as [UNK], and every check passed); the tokenization check fails when
the share of unknown tokens on the train sample is over preflight.max_unknown_token_share."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from trainkit import tiny_spec, write_splits

from campaign.cli import main
from campaign.core.errors import CampaignError
from campaign.preflight import bench, tokenizer_problem
from campaign.preflight import report as preflight_report
from campaign.tasks.label_preflight import unknown_share
from campaign.train import load_tokenizer
from conftest import FIXTURES, REPO

MINILM = REPO / "models" / "all-MiniLM-L6-v2"
NO_TOKENIZER = "has no tokenizer files (tokenizer.json, vocab.txt, vocab.json, a SentencePiece"


@pytest.fixture()
def bare(tmp_path) -> Path:
    """The MiniLM folder with its weights and config only (its tokenizer files left out)."""
    folder = tmp_path / "bare-model"
    folder.mkdir()
    shutil.copy(MINILM / "config.json", folder)
    (folder / "model.safetensors").symlink_to(MINILM / "model.safetensors")
    return folder


def test_the_shipped_model_has_a_usable_tokenizer_and_a_bare_folder_has_none(bare):
    assert tokenizer_problem(MINILM) is None
    assert tokenizer_problem(bare).startswith(NO_TOKENIZER)


@pytest.mark.parametrize(
    "name", ["spm.model", "sentencepiece.model", "spm_char.model", "spiece.model"]
)
def test_a_folder_with_any_sentencepiece_model_is_accepted(bare, name):
    """DeBERTa-v2/v3 save spm.model, M2M100 sentencepiece.model, SpeechT5 spm_char.model: each
    is a tokenizer transformers loads; what it makes of the data is the unknown-share check's."""
    (bare / name).write_bytes(b"\n\x0e\n\x05<unk>")
    assert tokenizer_problem(bare) is None


def test_a_byte_level_tokenizer_without_vocabulary_files_is_accepted(bare):
    """ByT5's tokenizer is its tokenizer_config.json alone (bytes are its vocabulary): the folder
    is accepted, and transformers loads the same tokenizer the train stage will use."""
    from transformers import ByT5Tokenizer

    ByT5Tokenizer().save_pretrained(bare)
    assert not any((bare / n).exists() for n in ("tokenizer.json", "vocab.txt", "vocab.json"))
    assert tokenizer_problem(bare) is None
    tok = load_tokenizer(bare, "sequence_classification")
    assert tok("héllo")["input_ids"][:-1] == [b + 3 for b in "héllo".encode()]


def test_the_train_stage_does_not_import_the_folder_checks():
    """Every module a stage imports is in its code version: the tokenizer folder check and the
    free-disk measurement live where only the stages that use them import them, so adding them
    changed no train job's key (its checkpoint and store entry stay reusable)."""
    from campaign.core.code import import_closure
    from campaign.core.registry import get_stage

    train = set().union(*(import_closure(m) for m in get_stage("train").code_modules))
    assert "campaign.train.stage" in train
    assert "campaign.preflight.tokenizer_folder" not in train
    assert "campaign.core.diskspace" not in train
    plan = set().union(*(import_closure(m) for m in get_stage("plan_table").code_modules))
    assert "campaign.core.diskspace" in plan


def test_another_models_vocabulary_is_refused(bare):
    """A vocab.txt of 6 tokens beside a model that embeds 30522: not this model's tokenizer."""
    (bare / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    assert tokenizer_problem(bare) == (
        "has a tokenizer of 6 tokens for a model that embeds 30522: it is not this model's "
        "tokenizer"
    )


def test_init_refuses_a_model_folder_without_a_tokenizer(bare, tmp_path, capsys):
    out = tmp_path / "params.yaml"
    argv = ["init", "--data", "data/raw/demo.jsonl", "--licence", "CC0-1.0", "--id-column", "id"]
    argv += ["--text-column", "text", "--label-column", "label", "--group-column", "author"]
    assert main([*argv, "--model", str(bare), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: --model {bare}: {tokenizer_problem(bare)}"
    assert not out.exists()


def test_validate_refuses_a_model_folder_without_a_tokenizer(bare, tmp_path, capsys):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["model"]["source"] = str(bare)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    assert main(["validate", "--params", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {path}: model.source: {bare} {tokenizer_problem(bare)}"


def preflight_cfg() -> dict:
    return copy.deepcopy(yaml.safe_load((FIXTURES / "tiny_params.yaml").read_text())["preflight"])


def pretrained_spec(folder: Path) -> dict:
    spec = tiny_spec(max_steps=4, max_length=32)
    spec["model"] = {
        "task": "sequence_classification",
        "source": str(folder),
        "tokenizer": {"source": "model"},
    }
    return spec


def test_the_preflight_refuses_a_model_folder_without_a_tokenizer(bare, tmp_path):
    inputs = write_splits(tmp_path / "splits", n_train=32, n_eval=8)
    inputs["base_model"] = [bare]
    with pytest.raises(CampaignError) as info:
        preflight_report.run_preflight(
            pretrained_spec(bare), inputs, preflight_cfg(), tmp_path / "work", REPO
        )
    assert str(info.value) == f"model.source: {bare} {tokenizer_problem(bare)}"
    assert not (tmp_path / "work").exists()  # refused before any check ran


def save_small_vocabulary_bert(folder: Path) -> Path:
    """A tiny BERT whose WordPiece vocabulary knows a few words and no single letters: most
    words of the demo reviews are [UNK]. Its embeddings match its vocabulary (a consistent
    folder), so only the tokenization check can tell."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    folder.mkdir()
    words = ["the", "a", "and", "is", "it", "this", "of", "to", "was", "i", "."]
    (folder / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])
    )
    tok = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_a_tokenizer_that_does_not_know_the_text_fails_the_tokenization_check(tmp_path):
    folder = save_small_vocabulary_bert(tmp_path / "small-vocab")
    inputs = write_splits(tmp_path / "splits", n_train=32, n_eval=8)
    inputs["base_model"] = [folder]
    cfg = preflight_cfg()
    cfg["sample"] = {"train_examples": 32, "validation_examples": 8}
    report = preflight_report.run_preflight(
        pretrained_spec(folder), inputs, cfg, tmp_path / "work", REPO, only=("tokenization",),
        hooks=bench.Hooks(device=torch.device("cpu")),
    )  # fmt: skip
    check = report["tokenization"]
    share = check["details"]["unknown_token_share"]
    assert not check["passed"] and not report["passed"]
    assert share > 0.3
    assert f"{share:.1%} of the train sample's tokens are unknown ([UNK])" in check["summary"]
    assert "over preflight.max_unknown_token_share 0.05" in check["summary"]
    # The same texts through the shipped model's tokenizer: almost nothing unknown.
    texts = list(pd.read_parquet(inputs["train"][0])["text"])
    assert unknown_share(load_tokenizer(MINILM, "sequence_classification"), texts) < 0.01
    assert unknown_share(load_tokenizer(folder, "sequence_classification"), texts) == share
