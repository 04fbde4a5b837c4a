"""Data manifest: read the sources in params `data`, validate every record, and write the manifest
(one content hash per record), a summary, and a diff against an earlier manifest.

Content hash of a record: BLAKE3 over the canonical JSON (sorted keys, no whitespace, UTF-8) of
``{"group": g, "label": l, "text": t, "timestamp": ts}``: text and label as strings, g a string or
null (null when ``data.fields.group`` is null), ts the UTC time as ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``
or null (null when ``data.fields.timestamp`` is null). Id, source and licence are not hashed, so the
same record hashes the same from CSV, JSONL or Parquet, and an edited or relabelled record changes.
Dataset hash: BLAKE3 over the canonical JSON of the ``[id, content_hash]`` pairs sorted by id.

How values are read, the same for every format:
- id and group: a string, or an integer written in decimal; label: a string, or a number or boolean
  written as JSON writes it (``3`` -> "3", ``3.0`` -> "3.0", ``true`` -> "true"). CSV cells are
  always strings. Strings are kept exactly; empty or whitespace-only ones are errors.
- timestamp: an ISO 8601 string, or a Parquet timestamp/date; converted to UTC and kept to the
  microsecond (finer digits are dropped). A time without an offset is read as UTC.
- CSV: comma-separated, first row is the header, quoted fields may span lines, blank lines are
  skipped. JSONL: one JSON object per line, blank lines skipped. All text must be UTF-8.
Errors name the file (as given in params, or as the glob matched it, relative to the project root)
and the line (CSV, JSONL) or 1-based record number (Parquet).

Module-level imports stay light (stdlib only): the Snakefile imports `expand_sources` when it builds
the DAG, so pandas and pyarrow are imported inside the functions that need them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime
from glob import glob
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.errors import CampaignError
from campaign.fsutil import atomic_write_bytes
from campaign.hashing import ALGORITHM, hash_bytes, hash_value

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("csv", "jsonl", "parquet")
SOURCE_KEYS = ("path", "format", "licence", "origin")
FIELD_KEYS = ("id", "text", "label", "group", "timestamp")
OPTIONAL_FIELDS = ("group", "timestamp")
RECORD_COLUMNS = ("id", "text", "label", "group", "timestamp", "source", "licence")
MANIFEST_COLUMNS = ("id", "content_hash", "source", "licence", "label", "group", "timestamp")

# A file whose name ends in one of these must be declared with that format.
_EXTENSION_FORMATS = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_FORMAT_NAMES = {"csv": "CSV", "jsonl": "JSON Lines", "parquet": "Parquet"}
_PARQUET_KINDS = {
    "id": "strings or integers",
    "text": "strings",
    "label": "strings, numbers or booleans",
    "group": "strings or integers",
    "timestamp": "timestamps, dates or ISO 8601 strings",
}
_MISSING_WHY = {
    "licence": "; every source must state its licence",
    "origin": "; every source must say where its data came from",
}
_GLOB_CHARS = re.compile(r"[*?[]")
_MAX_NAMES_SHOWN = 20


# ---------------------------------------------------------------------------------------------
# Params checks (the schema enforces these too; a stage may be called without it)


def _check_sources(sources: Any) -> None:
    if not isinstance(sources, list) or not sources:
        raise CampaignError("data.sources: expected a non-empty list of sources")
    for i, source in enumerate(sources):
        key = f"data.sources[{i}]"
        if not isinstance(source, dict):
            raise CampaignError(f"{key}: expected a mapping with {', '.join(SOURCE_KEYS)}")
        for name in source:
            if name not in SOURCE_KEYS:
                raise CampaignError(f"{key}.{name}: unknown key; expected {', '.join(SOURCE_KEYS)}")
        for name in SOURCE_KEYS:
            value = source.get(name)
            if value is None:
                raise CampaignError(f"{key}.{name}: missing{_MISSING_WHY.get(name, '')}")
            if not isinstance(value, str) or not value.strip():
                raise CampaignError(f"{key}.{name}: expected a non-empty string, got {value!r}")
        if source["format"] not in FORMATS:
            raise CampaignError(
                f"{key}.format: {source['format']!r} is not one of {', '.join(FORMATS)}"
            )


def _check_fields(fields: Any) -> list[tuple[str, str]]:
    """The mapped fields as (key, column) pairs in FIELD_KEYS order, unmapped optional ones left
    out."""
    if not isinstance(fields, dict):
        raise CampaignError(f"data.fields: expected a mapping with {', '.join(FIELD_KEYS)}")
    for key in fields:
        if key not in FIELD_KEYS:
            raise CampaignError(f"data.fields.{key}: unknown key; expected {', '.join(FIELD_KEYS)}")
    mapping = []
    for key in FIELD_KEYS:
        if key not in fields:
            hint = " (use null when the data has none)" if key in OPTIONAL_FIELDS else ""
            raise CampaignError(f"data.fields.{key}: missing{hint}")
        column = fields[key]
        if column is None and key in OPTIONAL_FIELDS:
            continue
        if not isinstance(column, str) or not column:
            raise CampaignError(f"data.fields.{key}: expected a column name, got {column!r}")
        mapping.append((key, column))
    return mapping


def _check_spec(spec: Any) -> None:
    if not isinstance(spec, dict):
        raise CampaignError("data: expected a mapping with sources, fields, previous_manifest")
    for key in ("sources", "fields", "previous_manifest"):
        if key not in spec:
            hint = " (use null for none)" if key == "previous_manifest" else ""
            raise CampaignError(f"data.{key}: missing{hint}")
    previous = spec["previous_manifest"]
    if previous is not None and (not isinstance(previous, str) or not previous.strip()):
        raise CampaignError(f"data.previous_manifest: expected a path or null, got {previous!r}")


# ---------------------------------------------------------------------------------------------
# Which files


def _source_files(sources: list[dict], root: Path) -> list[tuple[int, str]]:
    """(source index, file path as shown to users) for every file, in source order; a glob's
    matches sorted by path. A file named by two sources is an error (its ids would collide)."""
    if not isinstance(sources, list) or not sources:
        raise CampaignError("data.sources: expected a non-empty list of sources")
    named_by: dict[str, int] = {}
    files = []
    for i, source in enumerate(sources):
        pattern = source.get("path") if isinstance(source, dict) else None
        if not isinstance(pattern, str) or not pattern.strip():
            raise CampaignError(f"data.sources[{i}].path: expected a file or glob pattern")
        if _GLOB_CHARS.search(pattern):
            names = sorted(
                Path(match).as_posix()
                for match in glob(pattern, root_dir=root, recursive=True)
                if (root / match).is_file()
            )
        else:
            full = root / pattern
            if full.exists() and not full.is_file():
                raise CampaignError(f"data.sources[{i}].path: {pattern!r} is a folder, not a file")
            names = [pattern] if full.is_file() else []
        if not names:
            raise CampaignError(f"data.sources[{i}].path: no file matches {pattern!r}")
        for name in names:
            same = os.path.normpath(name)
            if same in named_by:
                raise CampaignError(
                    f"data.sources[{i}].path: {name!r} is also named by "
                    f"data.sources[{named_by[same]}]"
                )
            named_by[same] = i
            files.append((i, name))
    return files


def expand_sources(sources: list[dict], root: Path) -> list[Path]:
    """The files the sources name, as ``root / path``: one per plain path, every file a glob
    pattern (``data/raw/*.csv``, ``**`` allowed) matches, sorted by path; sources in params order.

    Raises CampaignError when a file is missing or a pattern matches nothing."""
    root = Path(root)
    return [root / name for _, name in _source_files(sources, root)]


# ---------------------------------------------------------------------------------------------
# Reading one file: bytes -> [(where, {key: raw value})]


def _where_field(where: str, key: str, column: str) -> str:
    name = f"field {column!r}" if column == key else f"field {column!r} (data.fields.{key})"
    return f"{where}: {name}"


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_NAMES_SHOWN])
    more = len(names) - _MAX_NAMES_SHOWN
    return shown + (f", and {more} more" if more > 0 else "") if names else "(none)"


def _sniff(data: bytes) -> str | None:
    """What the first bytes say a file is, when they say something a text file is not."""
    if data[:4] == b"PAR1":
        return "is a Parquet file"
    if data[:2] == b"\x1f\x8b":
        return "is gzip-compressed"
    if data[:4] == b"PK\x03\x04":
        return "is a zip archive"
    if b"\x00" in data[:8192]:
        return "is binary (it contains NUL bytes)"
    return None


def _decode(data: bytes, shown: str, index: int, fmt: str) -> str:
    kind = _sniff(data)
    if kind:
        raise CampaignError(
            f"{shown}: {kind}, not {_FORMAT_NAMES[fmt]} text "
            f"(data.sources[{index}].format is '{fmt}')"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise CampaignError(
            f"{shown} line {line}: not valid UTF-8 (byte 0x{data[e.start]:02x} at byte {column} "
            "of the line)"
        ) from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise CampaignError(f"{shown}: file is empty")
    return text


def _read_csv(text: str, shown: str, index: int, mapping: list[tuple[str, str]]) -> list:
    if text.lstrip()[:1] in ("{", "["):
        raise CampaignError(
            f"{shown}: looks like JSON, not CSV (data.sources[{index}].format is 'csv')"
        )
    limit = csv.field_size_limit()
    csv.field_size_limit(1 << 30)  # the default (128 KiB) is smaller than some documents
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows = []
    last_line = 0  # the line the previous record ended on; a record starts on the next one
    try:
        header: list[str] = []
        while not header:
            header = next(reader)
            last_line = reader.line_num
        seen: set[str] = set()
        for name in header:
            if name in seen:
                raise CampaignError(
                    f"{shown} line {last_line}: column {name!r} appears twice in the header"
                )
            seen.add(name)
        for key, column in mapping:
            if column not in seen:
                raise CampaignError(
                    f"{shown}: column {column!r} (data.fields.{key}) not found; "
                    f"columns are {_names(header)}"
                )
        wanted = [(key, header.index(column)) for key, column in mapping]
        for row in reader:
            line, last_line = last_line + 1, reader.line_num
            if not row:
                continue
            if len(row) != len(header):
                raise CampaignError(
                    f"{shown} line {line}: {len(row)} fields, but the header has {len(header)}"
                )
            rows.append((f"{shown} line {line}", {key: row[k] for key, k in wanted}))
    except csv.Error as e:
        hint = "; is a quote left open?" if "end of data" in str(e) else ""
        raise CampaignError(f"{shown} line {last_line + 1}: malformed CSV ({e}{hint})") from None
    finally:
        csv.field_size_limit(limit)
    if not rows:
        raise CampaignError(f"{shown}: has a header but no records")
    return rows


class _BadJson(ValueError):
    pass


def _object_without_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        raise _BadJson(f"key {next(k for k in keys if keys.count(k) > 1)!r} appears twice")
    return obj


def _reject_constant(name: str) -> Any:
    raise _BadJson(f"{name} is not valid JSON")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _read_jsonl(text: str, shown: str, index: int, mapping: list[tuple[str, str]]) -> list:
    if text.lstrip().startswith("["):
        raise CampaignError(
            f"{shown}: is a JSON array, not JSON Lines (one object per line; "
            f"data.sources[{index}].format is 'jsonl')"
        )
    objects = []
    # Split on \n only: str.splitlines would also split at U+2028 etc. inside JSON strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(
                line,
                object_pairs_hook=_object_without_duplicate_keys,
                parse_constant=_reject_constant,
            )
        except json.JSONDecodeError as e:
            raise CampaignError(
                f"{shown} line {number}: malformed JSON ({e.msg} at column {e.colno})"
            ) from None
        except _BadJson as e:
            raise CampaignError(f"{shown} line {number}: malformed JSON ({e})") from None
        if not isinstance(obj, dict):
            raise CampaignError(
                f"{shown} line {number}: expected a JSON object, got {_json_type(obj)}"
            )
        objects.append((number, obj))
    for key, column in mapping:
        if not any(column in obj for _, obj in objects):
            keys = list(dict.fromkeys(k for _, obj in objects for k in obj))
            raise CampaignError(
                f"{shown}: field {column!r} (data.fields.{key}) not found in any record; "
                f"fields are {_names(keys)}"
            )
    rows = []
    for number, obj in objects:
        values = {}
        for key, column in mapping:
            if column not in obj:
                raise CampaignError(
                    f"{_where_field(f'{shown} line {number}', key, column)} is missing"
                )
            values[key] = obj[column]
        rows.append((f"{shown} line {number}", values))
    return rows


def _read_parquet(data: bytes, shown: str, index: int, mapping: list[tuple[str, str]]) -> list:
    if data[:4] != b"PAR1":
        if _sniff(data):
            what = _sniff(data)
        elif data.lstrip()[:1] in (b"{", b"["):
            what = "looks like JSON"
        else:
            what = "looks like text"
        raise CampaignError(
            f"{shown}: not a Parquet file (no PAR1 magic at the start; it {what}; "
            f"data.sources[{index}].format is 'parquet')"
        )
    if len(data) < 12 or data[-4:] != b"PAR1":
        raise CampaignError(f"{shown}: truncated or damaged Parquet file (no PAR1 footer)")

    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        schema = parquet.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CampaignError(f"{shown}: not a readable Parquet file ({_first_line(e)})") from None
    for key, column in mapping:
        if column not in schema.names:
            raise CampaignError(
                f"{shown}: column {column!r} (data.fields.{key}) not found; "
                f"columns are {_names(schema.names)}"
            )
    columns = list(dict.fromkeys(column for _, column in mapping))
    try:
        table = parquet.read(columns=columns)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CampaignError(f"{shown}: not a readable Parquet file ({_first_line(e)})") from None
    if table.num_rows == 0:
        raise CampaignError(f"{shown}: has no records")
    values = {}
    for key, column in mapping:
        array = table.column(column)
        kind = array.type.value_type if pa.types.is_dictionary(array.type) else array.type
        is_text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
        is_text = is_text or pa.types.is_string_view(kind)
        is_number = pa.types.is_integer(kind) or pa.types.is_floating(kind)
        allowed = {
            "id": is_text or pa.types.is_integer(kind),
            "text": is_text,
            "label": is_text or is_number or pa.types.is_boolean(kind),
            "group": is_text or pa.types.is_integer(kind),
            "timestamp": is_text or pa.types.is_timestamp(kind) or pa.types.is_date(kind),
        }[key]
        if not allowed:
            raise CampaignError(
                f"{shown}: column {column!r} (data.fields.{key}) has type {array.type}; "
                f"expected {_PARQUET_KINDS[key]}"
            )
        if pa.types.is_timestamp(kind):
            # as_py() of a nanosecond timestamp is a pandas Timestamp; drop to microseconds first.
            array = array.cast(pa.timestamp("us", tz=kind.tz), safe=False)
        values[key] = array.to_pylist()
    keys = [key for key, _ in mapping]
    return [
        (f"{shown} record {n}", dict(zip(keys, row, strict=True)))
        for n, row in enumerate(zip(*(values[k] for k in keys), strict=True), start=1)
    ]


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# ---------------------------------------------------------------------------------------------
# One record's values -> normalized values


def _check_string(value: str, where: str) -> str:
    if not value.strip():
        raise CampaignError(f"{where} is empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise CampaignError(
            f"{where} contains an unpaired surrogate (a lone \\uD8xx escape)"
        ) from None
    return value


_KINDS = {
    "id": "a string or integer",
    "group": "a string or integer",
    "text": "a string",
    "label": "a string, number or boolean",
}


def _as_text(value: Any, where: str, key: str) -> str:
    """A string value kept as is, or (where the key allows it) an integer, number or boolean
    written as JSON writes it."""
    if value is None:
        raise CampaignError(f"{where} is null")
    if isinstance(value, str):
        return _check_string(value, where)
    if isinstance(value, float) and math.isnan(value):
        raise CampaignError(f"{where} is null (NaN)")
    if key == "label" and isinstance(value, bool):
        return "true" if value else "false"
    if key != "text" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if key == "label" and isinstance(value, float) and math.isfinite(value):
        return json.dumps(value)
    raise CampaignError(f"{where} must be {_KINDS[key]}, got {_json_type(value)} {value!r}")


def _as_time(value: Any, where: str) -> datetime:
    if value is None:
        raise CampaignError(f"{where} is null")
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise CampaignError(f"{where}: cannot parse {value!r} as an ISO 8601 time") from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    elif not isinstance(value, datetime):
        raise CampaignError(f"{where} must be an ISO 8601 time string, got {value!r}")
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise CampaignError(f"{where}: {value.isoformat()} is out of range in UTC") from None


def _normalize(where: str, raw: dict[str, Any], mapping: list[tuple[str, str]]) -> dict[str, Any]:
    record: dict[str, Any] = {"group": None, "timestamp": None}
    for key, column in mapping:
        at = _where_field(where, key, column)
        if key == "timestamp":
            record[key] = _as_time(raw[key], at)
        else:
            record[key] = _as_text(raw[key], at, key)
    return record


# ---------------------------------------------------------------------------------------------
# All sources -> records


@dataclass(frozen=True)
class SourceFile:
    """One file read for the manifest, for provenance in the summary."""

    path: str
    format: str
    licence: str
    origin: str
    file_hash: str


def _load(sources: list[dict], fields: dict, root: Path) -> tuple[pd.DataFrame, list[SourceFile]]:
    import pandas as pd

    root = Path(root)
    _check_sources(sources)
    mapping = _check_fields(fields)
    columns: dict[str, list] = {name: [] for name in RECORD_COLUMNS}
    first_at: dict[str, str] = {}
    files = []
    for index, shown in _source_files(sources, root):
        source = sources[index]
        fmt = source["format"]
        suffix = Path(shown).suffix.lower()
        if _EXTENSION_FORMATS.get(suffix, fmt) != fmt:
            raise CampaignError(
                f"{shown}: the name ends in {suffix} but data.sources[{index}].format is '{fmt}'"
            )
        try:
            data = (root / shown).read_bytes()
        except OSError as e:
            raise CampaignError(f"{shown}: cannot read ({e.strerror})") from None
        if not data or data.isspace():
            raise CampaignError(f"{shown}: file is empty")
        if fmt == "parquet":
            rows = _read_parquet(data, shown, index, mapping)
        elif fmt == "csv":
            rows = _read_csv(_decode(data, shown, index, fmt), shown, index, mapping)
        else:
            rows = _read_jsonl(_decode(data, shown, index, fmt), shown, index, mapping)
        for where, raw in rows:
            record = _normalize(where, raw, mapping)
            record_id = record["id"]
            if record_id in first_at:
                raise CampaignError(
                    f"{where}: duplicate id {record_id!r} (also at {first_at[record_id]})"
                )
            first_at[record_id] = where
            for key in ("id", "text", "label", "group", "timestamp"):
                columns[key].append(record[key])
            columns["source"].append(shown)
            columns["licence"].append(source["licence"])
        files.append(SourceFile(shown, fmt, source["licence"], source["origin"], hash_bytes(data)))
    frame = pd.DataFrame(
        {
            name: pd.array(values, dtype="datetime64[us, UTC]" if name == "timestamp" else "str")
            for name, values in columns.items()
        }
    )
    return frame, files


def load_records(sources: list[dict], fields: dict, root: Path) -> pd.DataFrame:
    """Every record of every source, validated, one row per record in source order.

    sources: params ``data.sources``; fields: ``data.fields`` (column names in the files);
    root: the folder source paths are relative to. Returns columns id, text, label, group,
    source, licence (str; group NA when data.fields.group is null) and timestamp
    (datetime64[us, UTC]; NaT when data.fields.timestamp is null). ``source`` is the file's path
    as shown in messages. Raises CampaignError (one line: file, line or record, field) on bad input.
    """
    return _load(sources, fields, root)[0]


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

    return [
        record_hash(
            text,
            label,
            None if pd.isna(group) else group,
            None if pd.isna(ts) else timestamp_text(ts),
        )
        for text, label, group, ts in zip(
            records["text"], records["label"], records["group"], records["timestamp"], strict=True
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
        "content_hash_of": "canonical JSON of {group, label, text, timestamp}",
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
        raise CampaignError(f"{key}: {shown!r} is not readable ({_first_line(e)})") from None
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


def build_manifest(spec: dict, outputs: dict[str, Path], root: Path) -> None:
    """Read and validate the data named by params ``data`` (spec) and write three files:

    - ``outputs["manifest"]``: Parquet, one row per record in source order: id, content_hash,
      source, licence, label, group, timestamp (UTC, microseconds);
    - ``outputs["summary"]``: JSON: hash algorithm, dataset hash, record count, counts per label,
      source file and licence, number of groups, timestamp range, field mapping, files read;
    - ``outputs["diff"]``: JSON: ids added, removed and changed (same id, other content hash)
      since ``spec["previous_manifest"]``, or a note that there was none to compare with.

    Source paths and previous_manifest are relative to root; output paths are used as given.
    Every check runs before anything is written, so bad input leaves no output; each output is
    written atomically, and equal input gives byte-equal output (no times, sorted keys).
    """
    root = Path(root)
    _check_spec(spec)
    records, files = _load(spec["sources"], spec["fields"], root)
    hashes = content_hashes(records)
    previous_path = spec["previous_manifest"]
    previous = None if previous_path is None else _read_previous(previous_path, root)
    ids = records["id"].tolist()
    contents = {
        "manifest": _manifest_bytes(records, hashes),
        "summary": _json_bytes(_summary(records, hashes, files, spec["fields"])),
        "diff": _json_bytes(_diff(previous_path, previous, ids, hashes)),
    }
    targets = {name: Path(outputs[name]) for name in contents}
    for name, data in contents.items():
        atomic_write_bytes(targets[name], data)


def stage(ctx) -> None:
    """The manifest stage as run by campaign.runner (inputs are hashed there, read here)."""
    build_manifest(ctx.spec, ctx.outputs, ctx.root)
