"""`campaign init --task generation`: a params file for a prompt/response (or messages) dataset
that validates, with max_length sized on the formatted conversations and max_new_tokens on the
responses; refusals in one line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from campaign.core.defaults import GENERATION_DEFAULTS
from campaign.core.errors import CampaignError
from campaign.core.params import validate
from campaign.data import conversations as conv
from campaign.tools import init as init_tool
from campaign.tools.demo_data import generate_corpus

REPO = Path(__file__).resolve().parents[2]


def _args(*argv: str):
    parser = argparse.ArgumentParser()
    init_tool.add_parser(parser.add_subparsers())
    return parser.parse_args(["init", *argv])


def _data(tmp_path, messages: bool):
    rows = []
    for r in generate_corpus(7, 120):
        prompt, response = f"Give the gist of: {r['text']}", " ".join(r["text"].split()[:6])
        row = {"doc": r["id"], "who": r["author"]}
        if messages:
            row["talk"] = conv.from_prompt_response(prompt, response)
        else:
            row.update(q=prompt, a=response)
        rows.append(row)
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


@pytest.mark.parametrize("messages", [False, True])
def test_init_writes_a_generation_campaign_that_validates(tmp_path, messages, capsys):
    data, rows = _data(tmp_path, messages)
    talk = ("--messages-column", "talk") if messages else ("--prompt-column", "q")
    talk += () if messages else ("--response-column", "a")
    out = tmp_path / "mine.yaml"
    base = ("--data", str(data), "--id-column", "doc", "--group-column", "who")
    args = _args(*base, *talk, "--task", "generation", "--model", "from_config",
                 "--licence", "CC0-1.0", "--out", str(out))  # fmt: skip
    assert init_tool.init(args) == 0
    written = yaml.safe_load(out.read_text())
    validate(written)
    # the task's floors; the ONNX variant (no KV cache to generate with) is left out, and said
    assert written["evaluation"]["floor"] == ["retrieval", "zero_shot", "few_shot"]
    assert written["evaluation"]["few_shot"] == {"k": 3, "choose": "nearest"}
    assert written["quantization"]["variants"] == ["fp32", "int8_dynamic"]
    said = capsys.readouterr().out
    assert "variants not proposed for generation: onnx_int8_dynamic:" in said
    # the quantile it says is the one it used: no more answers cut than training allows
    assert "(the 98% quantile of token lengths)" in said
    fields = written["data"]["fields"]
    assert fields["text"] is None and fields["label"] is None
    assert (
        (fields["messages"] == "talk")
        if messages
        else (fields["prompt"], fields["response"]) == ("q", "a")
    )
    model = written["model"]
    assert model["task"] == "generation" and model["chat_template"] == "none"
    assert model["config"]["architecture"] == "llama"
    assert model["config"]["num_key_value_heads"] == 2
    assert model["tokenizer"]["lowercase"] is False
    # max_length holds the formatted prompt + response, not the prompt alone
    prompts = [
        len(r["talk"][0]["content"].split()) if messages else len(r["q"].split()) for r in rows
    ]
    assert written["train"]["max_length"] > max(prompts)
    assert written["train"]["max_length"] % init_tool.LENGTH_STEP == 0
    assert model["generation"]["max_new_tokens"] >= 8 + 1
    assert model["generation"]["metric"] == GENERATION_DEFAULTS["metric"]
    assert "decided on token_f1" in said


def test_generation_flags_are_checked_in_one_line(tmp_path):
    data, _ = _data(tmp_path, messages=False)
    base = ("--data", str(data), "--id-column", "doc", "--model", "from_config",
            "--licence", "CC0-1.0", "--out", str(tmp_path / "x.yaml"))  # fmt: skip
    with pytest.raises(CampaignError, match=r"--task generation: name --messages-column"):
        init_tool.init(_args(*base, "--task", "generation", "--prompt-column", "q"))
    with pytest.raises(CampaignError, match=r"--text-column: required for --task"):
        init_tool.init(_args(*base, "--label-column", "who"))
    assert not (tmp_path / "x.yaml").exists()


def test_max_length_for_generation_cuts_no_more_answers_than_training_allows():
    """On the Debian descriptions with SmolLM2's template, the 95th percentile cut 4.9 % of the
    answers, more than the 2 % training accepts: generation sizes on 1 - max_truncated_share."""
    lengths = list(range(1, 1001))  # one conversation of each length
    share = GENERATION_DEFAULTS["max_truncated_share"]
    chosen = init_tool.choose_max_length(lengths, 10**6, 1.0 - share)
    assert sum(n > chosen for n in lengths) / len(lengths) <= share
    assert init_tool.choose_max_length(lengths, 10**6) < chosen  # the label tasks' 95 %


def test_init_keeps_the_evaluation_section_s_comments_for_a_generation_campaign(tmp_path):
    """The evaluation section has no metric key for generated text (model.generation.metric
    decides): the written file drops that key in place, with a comment saying where the metric
    went, and keeps every comment of the template's section instead of a bare dump."""
    from campaign.tools.init import DROPPED_NOTES

    data, _ = _data(tmp_path, messages=False)
    out = tmp_path / "mine.yaml"
    args = _args("--data", str(data), "--id-column", "doc", "--group-column", "who",
                 "--prompt-column", "q", "--response-column", "a", "--task", "generation",
                 "--model", "from_config", "--licence", "CC0-1.0", "--out", str(out))  # fmt: skip
    assert init_tool.init(args) == 0
    text = out.read_text()
    written = yaml.safe_load(text)
    validate(written)
    assert "metric" not in written["evaluation"]
    section = text[text.index("\nevaluation:") : text.index("\nbudget:")]
    template = (REPO / "params.yaml").read_text()
    kept = template[template.index("\nevaluation:") : template.index("\nbudget:")]
    comments = [ln.split("#", 1)[1].strip() for ln in kept.splitlines() if "#" in ln]
    comments = [c for c in comments if c != "or macro_f1"]  # the label metric's own comment
    assert len(comments) >= 6
    for comment in comments:
        assert comment in section, comment
    assert f"# {DROPPED_NOTES['evaluation.metric']}" in section
    # the comment lines above the section stay with it
    above = kept_above(template)
    assert above and text[: text.index("\nevaluation:")].endswith(above)


def kept_above(template: str) -> str:
    """The comment lines right above `evaluation:` in the template."""
    lines = template[: template.index("\nevaluation:")].splitlines()
    above = []
    while lines and lines[-1].startswith("#"):
        above.insert(0, lines.pop())
    return "\n".join(above)


def _short_rows(tmp_path) -> tuple[Path, list[list[dict]]]:
    """60 small prompt/response rows (a few dozen words each): too few texts for the
    tokenizer a from_config run trains to learn whole words, so it cuts them much finer than
    a whitespace count guesses."""
    data, rows = _data(tmp_path, messages=False)
    lines = data.read_text().splitlines()[:60]
    data.write_text("\n".join(lines) + "\n")
    return data, [conv.from_prompt_response(r["q"], r["a"]) for r in rows[:60]]


def test_from_config_lengths_are_sized_with_the_tokenizer_the_run_trains(tmp_path):
    """`init --task generation --model from_config` wrote train.max_length 112 where the run's
    tokenizer (byte-level BPE trained on the split) makes examples of up to 126 tokens: 3 % of
    the answers cut, over the 2 % training accepts, so its own preflight failed. The length is
    now measured with the tokenizers the run trains, the run's and the preflight sample's."""
    from campaign.tasks.generation import chat as gen
    from campaign.train import models

    data, talks = _short_rows(tmp_path)
    out = tmp_path / "mine.yaml"
    args = _args("--data", str(data), "--id-column", "doc", "--group-column", "who",
                 "--prompt-column", "q", "--response-column", "a", "--task", "generation",
                 "--model", "from_config", "--licence", "CC0-1.0", "--out", str(out))  # fmt: skip
    assert init_tool.init(args) == 0
    written = yaml.safe_load(out.read_text())
    max_length, allowed = written["train"]["max_length"], GENERATION_DEFAULTS["max_truncated_share"]
    texts = [conv.dedup_text(t) for t in talks]
    for n in (48, len(talks)):  # a preflight sample's tokenizer and one of the whole split
        tok = models.make_tokenizer(written["model"], texts[:n], None)
        lengths = [gen.full_length(tok, gen.PLAIN_TEMPLATE, t) for t in talks[:n]]
        assert sum(x > max_length for x in lengths) / n <= allowed, (max_length, max(lengths))
        answers = [gen.response_length(tok, t) for t in talks]
        assert written["model"]["generation"]["max_new_tokens"] >= max(answers)


def test_paths_inside_the_project_are_written_relative_to_it(tmp_path, monkeypatch):
    """A project that is not the package's folder (an installed `campaign`): the data file and
    the model folder given relative to it are written relative to it, not as this machine's
    absolute paths; a file outside it stays absolute."""
    from trainkit import save_tiny_base, write_splits

    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    data, _ = _short_rows(project / "data")
    outside, _ = _data(tmp_path, messages=False)
    save_tiny_base(project / "models" / "base", write_splits(tmp_path / "splits", 40, 8))
    monkeypatch.chdir(project)
    common = ("--id-column", "doc", "--group-column", "who", "--licence", "CC0-1.0", "--force")
    talk = ("--prompt-column", "q", "--response-column", "a", "--task", "generation")
    args = _args("--data", "data/mine.jsonl", *common, *talk, "--model", "from_config",
                 "--out", "params.yaml")  # fmt: skip
    assert init_tool.init(args) == 0
    written = yaml.safe_load((project / "params.yaml").read_text())
    assert written["data"]["sources"][0]["path"] == "data/mine.jsonl"
    labels = ("--text-column", "q", "--label-column", "who")
    args = _args("--data", "./data/../data/mine.jsonl", *common, *labels, "--model",
                 "models/base", "--no-lora", "--out", "labels.yaml")  # fmt: skip
    assert init_tool.init(args) == 0
    written = yaml.safe_load((project / "labels.yaml").read_text())
    assert written["data"]["sources"][0]["path"] == "data/mine.jsonl"
    assert written["model"]["source"] == "models/base"
    args = _args("--data", str(outside), *common, *talk, "--model", "from_config",
                 "--out", "outside.yaml")  # fmt: skip
    assert init_tool.init(args) == 0
    written = yaml.safe_load((project / "outside.yaml").read_text())
    assert written["data"]["sources"][0]["path"] == str(outside.resolve())
    assert data.is_file()
