"""Tests for campaign.data.manifest: formats, hashes, summary, diff, and the bad-input corpus."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import blake3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from campaign.core.errors import CampaignError
from campaign.data.manifest import build_manifest, record_hash
from campaign.data.readers import load_records
from campaign.data.sources import RECORD_COLUMNS, expand_sources

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIELDS = {
    "id": "id",
    "text": "text",
    "label": "label",
    "group": "author",
    "timestamp": "created_at",
}

# The same three records, written below as CSV, JSONL and Parquet. Labels are numbers in JSONL and
# Parquet and strings in CSV; times are the same instants with other offsets.
TEXTS = ['Great, "quoted" film\nsecond line', "meh", "café ☕"]
UTC_TIMES = ["2024-03-01T10:00:00Z", "2024-03-02T00:00:00.250000Z", "2024-03-03T00:00:00Z"]


def write_csv(path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["id", "text", "label", "author", "created_at"])
        out.writerow(["r1", TEXTS[0], "3", "ann", "2024-03-01T12:00:00+02:00"])
        out.writerow(["r2", TEXTS[1], "1", "bob", "2024-03-02T00:00:00.25Z"])
        out.writerow(["r3", TEXTS[2], "3", "ann", "2024-03-03T00:00:00"])  # no offset: UTC


def write_jsonl(path: Path) -> None:
    rows = [
        {"id": "r1", "text": TEXTS[0], "label": 3, "author": "ann", "created_at": UTC_TIMES[0]},
        {"id": "r2", "text": TEXTS[1], "label": 1, "author": "bob", "created_at": UTC_TIMES[1]},
        {"id": "r3", "text": TEXTS[2], "label": 3, "author": "ann", "created_at": "2024-03-03"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_parquet(path: Path) -> None:
    plus2 = timezone(timedelta(hours=2))
    times = [
        datetime(2024, 3, 1, 12, tzinfo=plus2),
        datetime(2024, 3, 2, 2, 0, 0, 250000, tzinfo=plus2),
        datetime(2024, 3, 3, 2, tzinfo=plus2),
    ]
    table = pa.table(
        {
            "id": ["r1", "r2", "r3"],
            "text": TEXTS,
            "label": pa.array([3, 1, 3], pa.int64()),
            "author": ["ann", "bob", "ann"],
            "created_at": pa.array(times, pa.timestamp("ns", tz="+02:00")),
        }
    )
    pq.write_table(table, path)


WRITERS = {"csv": write_csv, "jsonl": write_jsonl, "parquet": write_parquet}


def source(path: str, fmt: str, licence: str = "CC0-1.0") -> dict:
    return {"path": path, "format": fmt, "licence": licence, "origin": "written by the test"}


def spec_for(sources: list[dict], previous: str | None = None, fields: dict = FIELDS) -> dict:
    return {"sources": sources, "fields": dict(fields), "previous_manifest": previous}


def outputs_in(folder: Path) -> dict[str, Path]:
    return {
        "manifest": folder / "manifest.parquet",
        "summary": folder / "summary.json",
        "diff": folder / "diff.json",
    }


def build(root: Path, spec: dict, name: str = "out") -> dict[str, Path]:
    outputs = outputs_in(root / name)
    build_manifest(spec, outputs, root)
    return outputs


def write_records_jsonl(path: Path, records: list[tuple[str, str, str]]) -> None:
    """records: (id, text, label); author and created_at fixed."""
    lines = [
        json.dumps(
            {"id": i, "text": t, "label": lab, "author": "a", "created_at": "2024-01-01T00:00:00Z"}
        )
        for i, t, lab in records
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Imports and file selection


def test_module_import_is_light():
    # The Snakefile imports expand_sources while it builds the DAG.
    code = (
        "import sys, campaign.data.manifest; "
        "print(sorted(m for m in ('pandas', 'pyarrow', 'numpy') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_expand_sources_sorts_glob_matches_and_keeps_source_order(tmp_path):
    raw = tmp_path / "data" / "raw"
    raw.mkdir(parents=True)
    for name in ["b.csv", "a.csv", "c.txt", "z.jsonl"]:
        (raw / name).write_text("x\n")
    (raw / "d.csv").mkdir()  # a folder the glob matches is not a file
    sources = [source("data/raw/z.jsonl", "jsonl"), source("data/raw/*.csv", "csv")]
    files = expand_sources(sources, tmp_path)
    assert files == [raw / "z.jsonl", raw / "a.csv", raw / "b.csv"]
    assert expand_sources(sources, tmp_path) == files


def test_expand_sources_with_relative_root_gives_relative_paths(tmp_path, monkeypatch):
    (tmp_path / "a.csv").write_text("x\n")
    monkeypatch.chdir(tmp_path)
    assert expand_sources([source("*.csv", "csv")], Path(".")) == [Path("a.csv")]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("data/raw/x*.csv", "data.sources[0].path: no file matches 'data/raw/x*.csv'"),
        ("data/raw/missing.csv", "data.sources[0].path: no file matches 'data/raw/missing.csv'"),
        ("data/raw", "data.sources[0].path: 'data/raw' is a folder, not a file"),
    ],
)
def test_expand_sources_errors(tmp_path, path, message):
    (tmp_path / "data" / "raw").mkdir(parents=True)
    (tmp_path / "data" / "raw" / "a.csv").write_text("x\n")
    with pytest.raises(CampaignError) as error:
        expand_sources([source(path, "csv")], tmp_path)
    assert str(error.value) == message


def test_expand_sources_rejects_a_file_named_twice(tmp_path):
    (tmp_path / "a.csv").write_text("x\n")
    with pytest.raises(CampaignError, match=r"data.sources\[1\].path: 'a.csv' is also named by"):
        expand_sources([source("a.csv", "csv"), source("*.csv", "csv")], tmp_path)


# ---------------------------------------------------------------------------------------------
# Records and hashes


def test_load_records_columns_and_types(tmp_path):
    write_csv(tmp_path / "good.csv")
    frame = load_records([source("good.csv", "csv")], FIELDS, tmp_path)
    assert tuple(frame.columns) == RECORD_COLUMNS
    assert frame["id"].tolist() == ["r1", "r2", "r3"]
    assert frame["text"].tolist() == TEXTS
    assert frame["label"].tolist() == ["3", "1", "3"]  # kept as strings
    assert frame["group"].tolist() == ["ann", "bob", "ann"]
    assert frame["source"].tolist() == ["good.csv"] * 3
    assert frame["licence"].tolist() == ["CC0-1.0"] * 3
    assert str(frame["timestamp"].dtype) == "datetime64[us, UTC]"
    assert frame["timestamp"].tolist()[1] == datetime(2024, 3, 2, 0, 0, 0, 250000, tzinfo=UTC)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_every_format_reads_the_same_records(tmp_path, fmt):
    WRITERS[fmt](tmp_path / f"good.{fmt}")
    frame = load_records([source(f"good.{fmt}", fmt)], FIELDS, tmp_path)
    assert frame["label"].tolist() == ["3", "1", "3"]
    assert frame["text"].tolist() == TEXTS
    assert [t.isoformat() for t in frame["timestamp"]] == [
        "2024-03-01T10:00:00+00:00",
        "2024-03-02T00:00:00.250000+00:00",
        "2024-03-03T00:00:00+00:00",
    ]


def test_numbers_and_booleans_are_written_as_json_writes_them(tmp_path):
    rows = [
        {"id": 7, "text": "a", "label": 3.0, "author": 12, "created_at": "2024-01-01"},
        {"id": "8", "text": "b", "label": True, "author": "x", "created_at": "2024-01-01"},
    ]
    (tmp_path / "v.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    frame = load_records([source("v.jsonl", "jsonl")], FIELDS, tmp_path)
    assert frame["id"].tolist() == ["7", "8"]
    assert frame["label"].tolist() == ["3.0", "true"]
    assert frame["group"].tolist() == ["12", "x"]


def test_equal_records_give_equal_manifests_across_formats(tmp_path):
    tables, summaries = {}, {}
    for fmt, write in WRITERS.items():
        write(tmp_path / f"good.{fmt}")
        outputs = build(tmp_path, spec_for([source(f"good.{fmt}", fmt)]), name=f"out-{fmt}")
        tables[fmt] = pq.read_table(outputs["manifest"]).drop_columns(["source"]).to_pylist()
        summaries[fmt] = json.loads(outputs["summary"].read_text())
    assert tables["csv"] == tables["jsonl"] == tables["parquet"]
    hashes = {s["dataset_hash"] for s in summaries.values()}
    assert len(hashes) == 1


def test_content_hash_is_blake3_of_the_documented_canonical_json(tmp_path):
    write_jsonl(tmp_path / "good.jsonl")
    outputs = build(tmp_path, spec_for([source("good.jsonl", "jsonl")]))
    rows = pq.read_table(outputs["manifest"]).to_pylist()
    by_hand = blake3.blake3(
        b'{"group":"bob","label":"1","text":"meh","timestamp":"2024-03-02T00:00:00.250000Z"}'
    ).hexdigest()
    assert rows[1]["content_hash"] == by_hand
    assert record_hash("meh", "1", "bob", "2024-03-02T00:00:00.250000Z") == by_hand


def test_manifest_columns(tmp_path):
    write_jsonl(tmp_path / "good.jsonl")
    outputs = build(tmp_path, spec_for([source("good.jsonl", "jsonl")]))
    table = pq.read_table(outputs["manifest"])
    assert table.column_names == [
        "id",
        "content_hash",
        "source",
        "licence",
        "label",
        "group",
        "timestamp",
    ]
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert table.schema.metadata[b"hash_algorithm"] == b"blake3"
    assert table.column("id").to_pylist() == ["r1", "r2", "r3"]
    assert table.column("label").to_pylist() == ["3", "1", "3"]


def test_outputs_are_byte_deterministic(tmp_path):
    write_csv(tmp_path / "a.csv")
    write_records_jsonl(tmp_path / "b.jsonl", [("b1", "one", "x"), ("b2", "two", "y")])
    spec = spec_for([source("a.csv", "csv"), source("b.jsonl", "jsonl", "MIT")])
    first = build(tmp_path, spec, name="first")
    second = build(tmp_path, spec, name="second")
    again = build(tmp_path, spec, name="first")  # rewrite in place
    for key in ("manifest", "summary", "diff"):
        assert first[key].read_bytes() == second[key].read_bytes() == again[key].read_bytes()
    # atomic writes leave no temporary files behind
    assert sorted(p.name for p in (tmp_path / "first").iterdir()) == [
        "diff.json",
        "manifest.parquet",
        "summary.json",
    ]


def test_summary_counts_by_hand(tmp_path):
    write_jsonl(tmp_path / "good.jsonl")
    write_records_jsonl(tmp_path / "more.jsonl", [("m1", "extra", "3")])
    spec = spec_for([source("good.jsonl", "jsonl"), source("more.jsonl", "jsonl", "MIT")])
    summary = json.loads(build(tmp_path, spec)["summary"].read_text())
    assert summary["hash_algorithm"] == "blake3"
    assert summary["records"] == 4
    assert summary["per_label"] == {"1": 1, "3": 3}
    assert summary["per_source"] == {"good.jsonl": 3, "more.jsonl": 1}
    assert summary["per_licence"] == {"CC0-1.0": 3, "MIT": 1}
    assert summary["groups"] == 3  # ann, bob, a
    assert summary["timestamp_range"] == {
        "min": "2024-01-01T00:00:00Z",
        "max": "2024-03-03T00:00:00Z",
    }
    assert [f["path"] for f in summary["files"]] == ["good.jsonl", "more.jsonl"]
    rows = pq.read_table(tmp_path / "out" / "manifest.parquet").to_pylist()
    pairs = sorted([r["id"], r["content_hash"]] for r in rows)
    text = json.dumps(pairs, separators=(",", ":"))
    assert summary["dataset_hash"] == blake3.blake3(text.encode()).hexdigest()


def test_dataset_hash_ignores_record_order(tmp_path):
    write_records_jsonl(tmp_path / "a.jsonl", [("1", "one", "x"), ("2", "two", "y")])
    write_records_jsonl(tmp_path / "b.jsonl", [("2", "two", "y"), ("1", "one", "x")])
    a = json.loads(
        build(tmp_path, spec_for([source("a.jsonl", "jsonl")]), "a")["summary"].read_text()
    )
    b = json.loads(
        build(tmp_path, spec_for([source("b.jsonl", "jsonl")]), "b")["summary"].read_text()
    )
    assert a["dataset_hash"] == b["dataset_hash"]


def test_unmapped_group_and_timestamp(tmp_path):
    (tmp_path / "plain.csv").write_text("id,text,label\n1,hello,pos\n2,bye,neg\n")
    fields = {"id": "id", "text": "text", "label": "label", "group": None, "timestamp": None}
    outputs = build(tmp_path, spec_for([source("plain.csv", "csv")], fields=fields))
    summary = json.loads(outputs["summary"].read_text())
    assert summary["groups"] is None
    assert summary["timestamp_range"] is None
    rows = pq.read_table(outputs["manifest"]).to_pylist()
    assert [(r["group"], r["timestamp"]) for r in rows] == [(None, None), (None, None)]
    assert rows[0]["content_hash"] == record_hash("hello", "pos", None, None)


# ---------------------------------------------------------------------------------------------
# Diff


def test_diff_against_a_previous_manifest(tmp_path):
    write_records_jsonl(
        tmp_path / "v1.jsonl", [("a", "one", "x"), ("b", "two", "x"), ("c", "3", "y")]
    )
    build(tmp_path, spec_for([source("v1.jsonl", "jsonl")]), name="v1")
    # a unchanged, b relabelled, c removed, d added
    write_records_jsonl(
        tmp_path / "v2.jsonl", [("a", "one", "x"), ("b", "two", "y"), ("d", "4", "y")]
    )
    spec = spec_for([source("v2.jsonl", "jsonl")], previous="v1/manifest.parquet")
    diff = json.loads(build(tmp_path, spec, name="v2")["diff"].read_text())
    assert diff["compared"] is True
    assert diff["previous_manifest"] == "v1/manifest.parquet"
    assert diff["added"] == ["d"]
    assert diff["removed"] == ["c"]
    assert diff["changed"] == ["b"]
    assert diff["counts"] == {"added": 1, "removed": 1, "changed": 1, "unchanged": 1}
    v1_summary = json.loads((tmp_path / "v1" / "summary.json").read_text())
    assert diff["previous_dataset_hash"] == v1_summary["dataset_hash"]


def test_diff_against_an_identical_manifest_is_empty(tmp_path):
    write_jsonl(tmp_path / "good.jsonl")
    build(tmp_path, spec_for([source("good.jsonl", "jsonl")]), name="v1")
    spec = spec_for([source("good.jsonl", "jsonl")], previous="v1/manifest.parquet")
    diff = json.loads(build(tmp_path, spec, name="v2")["diff"].read_text())
    assert diff["counts"] == {"added": 0, "removed": 0, "changed": 0, "unchanged": 3}
    assert diff["dataset_hash"] == diff["previous_dataset_hash"]


def test_diff_without_a_previous_manifest(tmp_path):
    write_jsonl(tmp_path / "good.jsonl")
    diff = json.loads(
        build(tmp_path, spec_for([source("good.jsonl", "jsonl")]))["diff"].read_text()
    )
    assert diff["previous_manifest"] is None
    assert diff["compared"] is False
    assert "no earlier manifest" in diff["reason"]


@pytest.mark.parametrize(
    ("previous", "message"),
    [
        ("nowhere.parquet", "data.previous_manifest: file 'nowhere.parquet' not found"),
        ("good.jsonl", "data.previous_manifest: 'good.jsonl' is not a Parquet file"),
        ("other.parquet", "'other.parquet' has no column 'content_hash'"),
    ],
)
def test_bad_previous_manifest(tmp_path, previous, message):
    write_jsonl(tmp_path / "good.jsonl")
    pq.write_table(pa.table({"id": ["r1"]}), tmp_path / "other.parquet")
    spec = spec_for([source("good.jsonl", "jsonl")], previous=previous)
    with pytest.raises(CampaignError, match=message):
        build(tmp_path, spec)
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# Bad input: one file, one problem, one line naming it

# file in tests/fixtures/bad_data -> what the error must say after "bad_data/<file>"
BAD_DATA = {
    "missing_label.jsonl": " line 2: field 'label' is missing",
    "missing_author.jsonl": " line 2: field 'author' (data.fields.group) is missing",
    "no_author_column.csv": ": column 'author' (data.fields.group) not found; "
    "columns are id, text, label, created_at",
    "no_author_column.parquet": ": column 'author' (data.fields.group) not found; "
    "columns are id, text, label, created_at",
    "no_timestamps.jsonl": ": field 'created_at' (data.fields.timestamp) not found in any record",
    "blank_text.jsonl": " line 3: field 'text' is empty",
    "empty_id.csv": " line 3: field 'id' is empty",
    "zero_width_text.csv": " line 3: field 'text' is empty (whitespace or invisible characters",
    "null_label.jsonl": " line 2: field 'label' is null",
    "null_text.parquet": " record 2: field 'text' is null",
    "duplicate_id.csv": " line 4: duplicate id 'r1' (also at bad_data/duplicate_id.csv line 2)",
    "invalid_utf8.jsonl": " line 2: not valid UTF-8 (byte 0xe9",
    "invalid_utf8.csv": " line 3: not valid UTF-8 (byte 0xc3",
    "malformed.jsonl": " line 3: malformed JSON (Expecting ',' delimiter",
    "pretty_printed.jsonl": " line 1: malformed JSON",
    "really_csv.jsonl": " line 1: malformed JSON (Expecting value at column 1)",
    "duplicate_key.jsonl": " line 1: malformed JSON (key 'text' appears twice)",
    "nan_label.jsonl": " line 2: malformed JSON (NaN is not valid JSON)",
    "array_line.jsonl": " line 2: expected a JSON object, got array",
    "ragged.csv": " line 3: 6 fields, but the header has 5",
    "bom_ragged.csv": " line 2: 3 fields, but the header has 5",
    "unclosed_quote.csv": " line 3: malformed CSV (unexpected end of data",
    "duplicate_column.csv": " line 1: column 'text' appears twice in the header",
    "csv_text.parquet": ": not a Parquet file (no PAR1 magic at the start; it looks like text",
    "truncated.parquet": ": truncated or damaged Parquet file (no PAR1 footer)",
    "parquet_bytes.jsonl": ": is a Parquet file, not JSON Lines text",
    "gzipped.jsonl": ": is gzip-compressed, not JSON Lines text",
    "binary.jsonl": ": is binary (it contains NUL bytes), not JSON Lines text",
    "json_array.csv": ": looks like JSON, not CSV",
    "empty.csv": ": file is empty",
    "whitespace_only.jsonl": ": file is empty",
    "header_only.csv": ": has a header but no records",
    "bad_timestamp.jsonl": " line 2: field 'created_at' (data.fields.timestamp): "
    "cannot parse 'last tuesday' as an ISO 8601 time",
    "number_text.jsonl": " line 2: field 'text' must be a string, got number 42",
    "label_object.jsonl": " line 1: field 'label' must be a string, number or boolean, got object",
    "int_label_list.jsonl": " line 1: field 'label' must be a string, number or boolean, got array",
    "bool_id.jsonl": " line 1: field 'id' must be a string or integer, got boolean",
    "int_text.parquet": ": column 'text' (data.fields.text) has type int64; expected strings",
}


def test_bad_data_table_covers_the_corpus():
    assert sorted(BAD_DATA) == sorted(p.name for p in (FIXTURES / "bad_data").iterdir())


def assert_one_line_error(message: str) -> None:
    assert "\n" not in message
    assert "Traceback" not in message
    assert str(FIXTURES) not in message and str(REPO) not in message


@pytest.mark.parametrize("name", sorted(BAD_DATA))
def test_bad_data_raises_one_line_naming_the_place(tmp_path, name):
    fmt = Path(name).suffix.lstrip(".")
    outputs = outputs_in(tmp_path / "out")
    with pytest.raises(CampaignError) as error:
        build_manifest(spec_for([source(f"bad_data/{name}", fmt)]), outputs, FIXTURES)
    message = str(error.value)
    assert message.startswith(f"bad_data/{name}{BAD_DATA[name]}"), message
    assert_one_line_error(message)
    assert not any(path.exists() for path in outputs.values())


def test_failed_build_leaves_earlier_outputs_untouched(tmp_path):
    write_jsonl(tmp_path / "good.jsonl")
    outputs = build(tmp_path, spec_for([source("good.jsonl", "jsonl")]))
    before = {key: path.read_bytes() for key, path in outputs.items()}
    (tmp_path / "good.jsonl").write_text('{"id": "r1"\n')
    with pytest.raises(CampaignError, match="malformed JSON"):
        build_manifest(spec_for([source("good.jsonl", "jsonl")]), outputs, tmp_path)
    assert {key: path.read_bytes() for key, path in outputs.items()} == before


def test_duplicate_id_across_sources_names_both_places(tmp_path):
    write_records_jsonl(tmp_path / "a.jsonl", [("1", "one", "x"), ("2", "two", "x")])
    (tmp_path / "b.csv").write_text(
        "id,text,label,author,created_at\n"
        "9,nine,x,a,2024-01-01T00:00:00Z\n"
        "2,deux,x,a,2024-01-01T00:00:00Z\n"
    )
    spec = spec_for([source("a.jsonl", "jsonl"), source("b.csv", "csv")])
    with pytest.raises(CampaignError) as error:
        build(tmp_path, spec)
    assert str(error.value) == "b.csv line 3: duplicate id '2' (also at a.jsonl line 2)"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s["sources"][0].pop("licence"), "data.sources[0].licence: missing; every"),
        (lambda s: s["sources"][0].pop("origin"), "data.sources[0].origin: missing; every"),
        (lambda s: s["sources"][0].update(licence="  "), "data.sources[0].licence: expected a"),
        (lambda s: s["sources"][0].update(format="xml"), "data.sources[0].format: 'xml' is not"),
        (lambda s: s["sources"][0].update(format="csv"), "good.jsonl: the name ends in .jsonl"),
        (lambda s: s["sources"][0].update(extra=1), "data.sources[0].extra: unknown key"),
        (lambda s: s["fields"].pop("group"), "data.fields.group: missing (use null"),
        (lambda s: s["fields"].update(text=None), "data.fields.text: expected a column name"),
        (lambda s: s.pop("previous_manifest"), "data.previous_manifest: missing"),
        (lambda s: s.update(sources=[]), "data.sources: expected a non-empty list"),
    ],
)
def test_bad_params(tmp_path, change, message):
    write_jsonl(tmp_path / "good.jsonl")
    spec = spec_for([source("good.jsonl", "jsonl")])
    change(spec)
    with pytest.raises(CampaignError) as error:
        build(tmp_path, spec)
    assert str(error.value).startswith(message), str(error.value)
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# The repository's own data


def test_demo_data_manifests_with_the_repo_params(tmp_path):
    spec = yaml.safe_load((REPO / "params.yaml").read_text())["data"]
    if not all(path.exists() for s in spec["sources"] for path in [REPO / s["path"]]):
        pytest.skip("data/raw/demo.jsonl not generated yet")
    outputs = outputs_in(tmp_path)
    build_manifest(spec, outputs, REPO)
    summary = json.loads(outputs["summary"].read_text())
    assert summary["records"] == pq.read_metadata(outputs["manifest"]).num_rows > 0
