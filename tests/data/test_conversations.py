"""Conversational datasets (the generation task): prompt/response columns or a messages column
read into one canonical conversation per record, malformed ones refused naming file and line,
duplicates found on prompt + response, the split balanced on sizes unless a label is named."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from campaign.core.errors import CampaignError
from campaign.data import conversations as conv
from campaign.data import split
from campaign.data.readers import load_records
from campaign.data.sources import check_fields
from campaign.tools.demo_data import generate_corpus

REPO = Path(__file__).resolve().parents[2]

SEED = 7
SPLIT = {
    "method": "group_hash",
    "fractions": {"train": 0.8, "validation": 0.1, "test": 0.1},
    "salt": "talk",
    "stratify_tolerance": 0.05,
    "size_tolerance": 0.1,
    "temporal_cutoff": None,
    "dedup": {"policy": "unite", "near": {"threshold": 0.5, "num_perm": 128, "shingle_size": 3}},
    "audit": {
        "max_group_overlap": 0,
        "max_cross_split_duplicates": 0,
        "allow_label_conflicts": True,
    },
    "previous": None,
}
TALK_FIELDS = {"id": "id", "text": None, "label": None, "group": None, "timestamp": None}


def _source(path: str, fmt: str) -> list[dict]:
    return [{"path": path, "format": fmt, "licence": "CC0-1.0", "origin": "test"}]


def _pairs(n: int) -> list[dict]:
    """Prompt/response records on the demo corpus's texts: the prompt asks for the gist of a
    text, the response is its first words and its author (one answer per prompt)."""
    return [
        {
            "id": r["id"],
            "prompt": f"Give the gist of: {r['text']}",
            "response": f"{' '.join(r['text'].split()[:4])} (by {r['author']})",
            "topic": r["label"],
            "author": r["author"],
        }
        for r in generate_corpus(SEED, max(n, 40))[:n]
    ]


def _write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_messages_and_prompt_response_read_to_the_same_records(tmp_path):
    rows = _pairs(3)
    _write_jsonl(tmp_path / "pairs.jsonl", rows)
    talk = [
        {"id": r["id"], "messages": conv.from_prompt_response(r["prompt"], r["response"])}
        for r in rows
    ]
    _write_jsonl(tmp_path / "talk.jsonl", talk)
    pairs = load_records(
        _source("pairs.jsonl", "jsonl"),
        {**TALK_FIELDS, "prompt": "prompt", "response": "response"},
        tmp_path,
    )
    chats = load_records(
        _source("talk.jsonl", "jsonl"), {**TALK_FIELDS, "messages": "messages"}, tmp_path
    )
    assert pairs["messages"].tolist() == chats["messages"].tolist()
    assert pairs["text"].tolist() == [f"{r['prompt']}\n{r['response']}" for r in rows]
    assert set(pairs["label"]) == {conv.UNSTRATIFIED}
    first = json.loads(pairs["messages"][0])
    assert conv.reference(first) == rows[0]["response"]


def test_a_bad_conversation_names_the_file_line_and_field(tmp_path):
    good = {"id": "a", "messages": conv.from_prompt_response("q?", "yes")}
    bad = {"id": "b", "messages": [{"role": "user", "content": "q?"}]}
    _write_jsonl(tmp_path / "talk.jsonl", [good, bad])
    with pytest.raises(CampaignError) as e:
        load_records(
            _source("talk.jsonl", "jsonl"), {**TALK_FIELDS, "messages": "messages"}, tmp_path
        )
    assert str(e.value).startswith("talk.jsonl line 2: field 'messages': ")
    assert "last message is the user's" in str(e.value)
    (tmp_path / "pairs.csv").write_text("id,prompt,response\n1,q?,\n")
    with pytest.raises(CampaignError, match=r"pairs.csv line 2: field 'response'.* is empty"):
        load_records(
            _source("pairs.csv", "csv"),
            {**TALK_FIELDS, "prompt": "prompt", "response": "response"},
            tmp_path,
        )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"messages": "m", "prompt": "p"}, r"messages and prompt named"),
        ({"prompt": "p"}, r"data.fields: prompt named"),
        ({"messages": "m", "text": "t"}, r"data.fields.text: null for a conversational dataset"),
        ({"messages": "m", "answer": "a"}, r"data.fields.answer: unknown key"),
    ],
)
def test_field_mappings_that_cannot_make_a_conversation_are_refused(fields, message):
    with pytest.raises(CampaignError, match=message):
        check_fields({**TALK_FIELDS, **fields})


def _conversations(tmp_path, rows, label=None) -> pd.DataFrame:
    _write_jsonl(tmp_path / "pairs.jsonl", rows)
    fields = {**TALK_FIELDS, "prompt": "prompt", "response": "response", "label": label}
    fields["group"] = "author"  # group-aware: one author's records stay in one split
    return load_records(_source("pairs.jsonl", "jsonl"), fields, tmp_path)


def test_the_split_keeps_copies_of_a_pair_together_and_balances_sizes_only(tmp_path):
    rows = _pairs(200)
    # the same pair again, and the same prompt with another answer
    copy = {**rows[5], "id": "copy-of-5"}
    other = {**rows[9], "id": "other-answer-9", "response": "Something else entirely, at length."}
    records = _conversations(tmp_path, [*rows, copy, other])
    assignments, audit = split.make_splits(records, SPLIT, seed=SEED)
    where = dict(zip(assignments["id"], assignments["split"], strict=True))
    assert where["copy-of-5"] == where[rows[5]["id"]]
    unit = dict(zip(assignments["id"], assignments["unit"], strict=True))
    assert unit["copy-of-5"] == unit[rows[5]["id"]]
    # one stratum: no label share to keep, so no label can make the split fail
    assert set(assignments["label"]) == {conv.UNSTRATIFIED}
    assert audit["labels"]["max_deviation"]["value"] == 0
    # the conversation travels to the split file, redaction or not
    by_id = dict(zip(assignments["id"], assignments["messages"], strict=True))
    assert conv.reference(json.loads(by_id["other-answer-9"])) == other["response"]


def test_a_named_label_column_stratifies_a_conversational_split(tmp_path):
    records = _conversations(tmp_path, _pairs(200), label="topic")
    assert len(set(records["label"])) > 1
    _, audit = split.make_splits(records, {**SPLIT, "stratify_tolerance": 1.0}, seed=SEED)
    assert audit["labels"]["max_deviation"]["value"] > 0  # the topics' shares are measured


def test_redact_masks_a_secret_inside_the_conversation_too(tmp_path):
    rows = _pairs(2)
    rows[1]["response"] = "Write to jane.doe@example.org for the details."
    records = _conversations(tmp_path, rows)
    kept = split.redact_messages({"default": "report"}, records)
    assert kept == records["messages"].tolist()
    masked = split.redact_messages({"default": "redact"}, records)
    assert masked[0] == records["messages"][0]
    answer = conv.reference(json.loads(masked[1]))
    assert "jane.doe@example.org" not in answer and answer.startswith("Write to ")


STATUS = """Package: adduser
Status: install ok installed
Priority: important
Section: admin
Architecture: all
Version: 3.134
Description: add and remove users and groups
 This package includes the 'adduser' and 'deluser' commands for creating
 and removing users.
 .
 Adding users with 'adduser' is much easier than adding them manually.

Package: libfoo1
Source: foo (1.2-1)
Priority: optional
Section: libs
Architecture: amd64
Version: 1.2-1+b1
Description: foo library
 Short.
"""


def test_the_debian_description_corpora_read_as_conversations(tmp_path):
    """scripts/corpora/debian_descriptions.py on a two-stanza status file: a summary task (a
    description too short to summarize is left out) and an extraction task whose answer is JSON
    taken from the stanza; both load as conversations grouped by source package."""
    import importlib.util

    from campaign.tasks.generation.text_scores import json_fields

    path = REPO / "scripts" / "corpora" / "debian_descriptions.py"
    spec = importlib.util.spec_from_file_location("debian_descriptions", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    (tmp_path / "status").write_text(STATUS)
    for task, n in (("describe", 1), ("extract", 2)):
        assert (
            script.main(
                [
                    str(tmp_path / f"{task}.jsonl"),
                    "--task",
                    task,
                    "--status",
                    str(tmp_path / "status"),
                    "--min-records",
                    "1",
                ]
            )
            == 0
        )
        fields = {**TALK_FIELDS, "prompt": "prompt", "response": "response", "group": "source"}
        records = load_records(_source(f"{task}.jsonl", "jsonl"), fields, tmp_path)
        assert len(records) == n
    assert records["group"].tolist() == ["adduser", "foo"]
    answer = conv.reference(json.loads(records["messages"][1]))
    truth = (
        '{"architecture": "amd64", "package": "libfoo1", "priority": "optional", "section": "libs"}'
    )
    assert json_fields(answer, truth) == 1.0
    # The version is in the prompt, not asked for.
    assert "Version: 1.2-1+b1" in json.loads(records["messages"][1])[0]["content"]
    assert (
        script.main(
            [
                str(tmp_path / "x.jsonl"),
                "--task",
                "describe",
                "--status",
                str(tmp_path / "status"),
                "--min-records",
                "5",
            ]
        )
        == 3
    )
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [{"role": "user", "content": "q?"}, {"role": "assistant", "content": "\u200b\u200d"}],
            r"messages\[1\].content is empty \(whitespace or invisible characters only\)",
        ),
        (
            [
                {"role": "assistant", "content": "Hello."},
                {"role": "user", "content": "q?"},
                {"role": "assistant", "content": "yes"},
            ],
            r"messages\[0\] is the assistant's; the conversation must open with the user's",
        ),
        (
            [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "q?"},
                {"role": "user", "content": "again?"},
                {"role": "assistant", "content": "yes"},
            ],
            r"messages\[2\] is the user's after the user's; turns must alternate",
        ),
        (
            [
                {"role": "user", "content": "q?"},
                {"role": "assistant", "content": "yes"},
                {"role": "assistant", "content": "no"},
            ],
            r"messages\[2\] is the assistant's after the assistant's; turns must alternate",
        ),
    ],
)
def test_a_conversation_out_of_turn_or_with_an_invisible_turn_is_refused(
    tmp_path, messages, message
):
    """A blank answer teaches the model to say nothing; a conversation the assistant opens, or
    two turns of one role in a row, is not the shape chat templates (and the model) expect. Each
    is refused in one line naming file, line and turn, like a blank `response` column."""
    good = {"id": "a", "messages": conv.from_prompt_response("q?", "yes")}
    _write_jsonl(tmp_path / "talk.jsonl", [good, {"id": "b", "messages": messages}])
    with pytest.raises(CampaignError, match=message) as e:
        load_records(
            _source("talk.jsonl", "jsonl"), {**TALK_FIELDS, "messages": "messages"}, tmp_path
        )
    assert str(e.value).startswith("talk.jsonl line 2: field 'messages': messages[")
    assert "\n" not in str(e.value)


def test_a_system_turn_first_is_accepted():
    talk = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "q?"},
        {"role": "assistant", "content": "yes"},
        {"role": "user", "content": "and?"},
        {"role": "assistant", "content": "no"},
    ]
    assert conv.parse_messages(talk, "here") == talk
