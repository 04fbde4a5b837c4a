"""Data manifest: one content hash per record, the dataset hash, a summary, and a diff against
an earlier manifest.

Content hash of a record: BLAKE3 over the canonical JSON (sorted keys, no whitespace, UTF-8) of
``{"group": g, "label": l, "text": t, "timestamp": ts}``: text and label as strings, g a string or
null (null when ``data.fields.group`` is null), ts the UTC time as ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``
or null (null when ``data.fields.timestamp`` is null). Id, source and licence are not hashed, so the
same record hashes the same from CSV, JSONL or Parquet, and an edited or relabelled record changes.
Dataset hash: BLAKE3 over the canonical JSON of the ``[id, content_hash]`` pairs sorted by id.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.core.errors import CampaignError
from campaign.core.fsutil import atomic_write_bytes
from campaign.core.hashing import ALGORITHM, hash_value
from campaign.data.readers import SourceFile, first_line, read_sources
from campaign.data.sources import MANIFEST_COLUMNS, assign_files, check_spec

if TYPE_CHECKING:
    import pandas as pd


# ---------------------------------------------------------------------------------------------
# Hashes


def timestamp_text(value: datetime) -> str:
    """A time as UTC ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` (microseconds only when not zero)."""
    t = value.astimezone(UTC)
    text = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    return text + (f".{t.microsecond:06d}" if t.microsecond else "") + "Z"


def record_hash(text: str, label: str, group: str | None, timestamp: str | None) -> str:
    """Content hash of one record; timestamp as written by `timestamp_text`."""
    return hash_value({"text": text, "label": label, "group": group, "timestamp": timestamp})


def content_hashes(records: pd.DataFrame) -> list[str]:
    """One content hash per row of a `load_records` frame, in row order."""
    import pandas as pd

    # A conversation's content is its messages (roles and turns), not only its joined text.
    texts = records["messages"] if "messages" in records else records["text"]
    return [
        record_hash(
            text,
            label,
            None if pd.isna(group) else group,
            None if pd.isna(ts) else timestamp_text(ts),
        )
        for text, label, group, ts in zip(
            texts, records["label"], records["group"], records["timestamp"], strict=True
        )
    ]


def dataset_hash(ids: list[str], hashes: list[str]) -> str:
    """Hash of a whole dataset: of its (id, content_hash) pairs sorted by id; order-free."""
    return hash_value(sorted([i, h] for i, h in zip(ids, hashes, strict=True)))


# ---------------------------------------------------------------------------------------------
# Outputs


def _manifest_bytes(records: pd.DataFrame, hashes: list[str]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("id", pa.string()),
            ("content_hash", pa.string()),
            ("source", pa.string()),
            ("licence", pa.string()),
            ("label", pa.string()),
            ("group", pa.string()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
        ],
        metadata={b"hash_algorithm": ALGORITHM.encode()},
    )
    arrays = [
        pa.array(hashes, pa.string())
        if name == "content_hash"
        else pa.Array.from_pandas(records[name], type=schema.field(name).type)
        for name in MANIFEST_COLUMNS
    ]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def _summary(
    records: pd.DataFrame, hashes: list[str], files: list[SourceFile], fields: dict
) -> dict:
    timestamps = records["timestamp"].dropna()
    return {
        "hash_algorithm": ALGORITHM,
        "content_hash_of": "canonical JSON of {group, label, text, timestamp}"
        + (" (text: the messages as JSON)" if "messages" in records else ""),
        "dataset_hash": dataset_hash(records["id"].tolist(), hashes),
        "records": len(records),
        "per_label": dict(Counter(records["label"].tolist())),
        "per_source": dict(Counter(records["source"].tolist())),
        "per_licence": dict(Counter(records["licence"].tolist())),
        "groups": None if fields["group"] is None else int(records["group"].nunique()),
        "timestamp_range": None
        if timestamps.empty
        else {"min": timestamp_text(timestamps.min()), "max": timestamp_text(timestamps.max())},
        "fields": dict(fields),
        "files": [
            {
                "path": f.path,
                "format": f.format,
                "licence": f.licence,
                "origin": f.origin,
                "file_hash": f.file_hash,
            }
            for f in files
        ],
    }


def _read_previous(shown: str, root: Path) -> dict[str, str]:
    """id -> content hash of an earlier manifest."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = "data.previous_manifest"
    full = Path(root) / shown
    if not full.is_file():
        raise CampaignError(f"{key}: file {shown!r} not found")
    try:
        data = full.read_bytes()
    except OSError as e:
        raise CampaignError(f"{key}: cannot read {shown!r} ({e.strerror})") from None
    if data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise CampaignError(f"{key}: {shown!r} is not a Parquet file")
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        names = parquet.schema_arrow.names
        for column in ("id", "content_hash"):
            if column not in names:
                raise CampaignError(
                    f"{key}: {shown!r} has no column {column!r}; is it a manifest from this stage?"
                )
        table = parquet.read(columns=["id", "content_hash"])
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CampaignError(f"{key}: {shown!r} is not readable ({first_line(e)})") from None
    ids = table.column("id").to_pylist()
    previous = dict(zip(ids, table.column("content_hash").to_pylist(), strict=True))
    if len(previous) != len(ids):
        raise CampaignError(
            f"{key}: {shown!r} has duplicate ids; is it a manifest from this stage?"
        )
    return previous


def _diff(
    previous_path: str | None,
    previous: dict[str, str] | None,
    ids: list[str],
    hashes: list[str],
) -> dict:
    current = dict(zip(ids, hashes, strict=True))
    if previous is None:
        return {
            "hash_algorithm": ALGORITHM,
            "previous_manifest": None,
            "compared": False,
            "reason": "data.previous_manifest is null: no earlier manifest to compare with",
            "dataset_hash": dataset_hash(ids, hashes),
        }
    added = sorted(current.keys() - previous.keys())
    removed = sorted(previous.keys() - current.keys())
    common = current.keys() & previous.keys()
    changed = sorted(i for i in common if current[i] != previous[i])
    return {
        "hash_algorithm": ALGORITHM,
        "previous_manifest": previous_path,
        "compared": True,
        "dataset_hash": dataset_hash(ids, hashes),
        "previous_dataset_hash": dataset_hash(list(previous), list(previous.values())),
        "counts": {
            "added": len(added),
            "removed": len(removed),
            "changed": len(changed),
            "unchanged": len(common) - len(changed),
        },
        "added": added,
        "removed": removed,
        "changed": changed,
    }


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def build_manifest(
    spec: dict,
    outputs: dict[str, Path],
    root: Path,
    files: list[str | Path] | None = None,
    previous_file: str | Path | None = None,
) -> None:
    """Read and validate the data named by params ``data`` (spec) and write three files:

    - ``outputs["manifest"]``: Parquet, one row per record in source order: id, content_hash,
      source, licence, label, group, timestamp (UTC, microseconds);
    - ``outputs["summary"]``: JSON: hash algorithm, dataset hash, record count, counts per label,
      source file and licence, number of groups, timestamp range, field mapping, files read;
    - ``outputs["diff"]``: JSON: ids added, removed and changed (same id, other content hash)
      since ``spec["previous_manifest"]``, or a note that there was none to compare with.

    Source paths and previous_manifest are relative to root; output paths are used as given.
    `files` and `previous_file`: the files to read (what the runner hashed), by default the ones
    the params name.
    Every check runs before anything is written, so bad input leaves no output; each output is
    written atomically, and equal input gives byte-equal output (no times, sorted keys).
    """
    root = Path(root)
    check_spec(spec)
    chosen = None if files is None else assign_files(spec["sources"], files)
    records, read = read_sources(spec["sources"], spec["fields"], root, chosen)
    hashes = content_hashes(records)
    previous_path = spec["previous_manifest"]
    if previous_path is None:
        previous = None
    else:
        previous = _read_previous(previous_path if previous_file is None else previous_file, root)
    ids = records["id"].tolist()
    contents = {
        "manifest": _manifest_bytes(records, hashes),
        "summary": _json_bytes(_summary(records, hashes, read, spec["fields"])),
        "diff": _json_bytes(_diff(previous_path, previous, ids, hashes)),
    }
    targets = {name: Path(outputs[name]) for name in contents}
    for name, data in contents.items():
        atomic_write_bytes(targets[name], data)


def stage(ctx) -> None:
    """The manifest stage as run by campaign.core.runner: it reads exactly the inputs the runner
    hashed (the sources' files, the earlier manifest)."""
    previous = ctx.inputs.get("previous") or [None]
    build_manifest(ctx.spec, ctx.outputs, ctx.root, ctx.inputs["sources"], previous[0])
