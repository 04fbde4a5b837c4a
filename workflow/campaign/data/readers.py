"""Reading the sources: CSV, JSON Lines and Parquet files into validated records.

How values are read, the same for every format:
- id and group: a string, or an integer written in decimal; label: a string, or a number or boolean
  written as JSON writes it (``3`` -> "3", ``3.0`` -> "3.0", ``true`` -> "true"). CSV cells are
  always strings. Strings are kept exactly; empty ones, and ones of whitespace or invisible format
  characters only (zero-width space, joiners), are errors.
- timestamp: an ISO 8601 string, or a Parquet timestamp/date; converted to UTC and kept to the
  microsecond (finer digits are dropped). A time without an offset is read as UTC.
- CSV: comma-separated, first row is the header, quoted fields may span lines, blank lines are
  skipped. JSONL: one JSON object per line, blank lines skipped. All text must be UTF-8.
Errors name the file (as given in params, or as the glob matched it, relative to the project root)
and the line (CSV, JSONL) or 1-based record number (Parquet).

pandas and pyarrow are imported inside the functions that need them.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_bytes
from campaign.data.conversations import blank
from campaign.data.sources import (
    EXTENSION_FORMATS,
    FORMAT_NAMES,
    MAX_NAMES_SHOWN,
    PARQUET_KINDS,
    RECORD_COLUMNS,
    check_fields,
    check_sources,
    is_conversational,
    source_files,
)

if TYPE_CHECKING:
    import pandas as pd


# ---------------------------------------------------------------------------------------------
# Reading one file: bytes -> [(where, {key: raw value})]


def _where_field(where: str, key: str, column: str) -> str:
    name = f"field {column!r}" if column == key else f"field {column!r} (data.fields.{key})"
    return f"{where}: {name}"


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES_SHOWN])
    more = len(names) - MAX_NAMES_SHOWN
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
            f"{shown}: {kind}, not {FORMAT_NAMES[fmt]} text "
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
        raise CampaignError(f"{shown}: not a readable Parquet file ({first_line(e)})") from None
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
        raise CampaignError(f"{shown}: not a readable Parquet file ({first_line(e)})") from None
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
            "prompt": is_text,
            "response": is_text,
            "messages": is_text or pa.types.is_list(kind) or pa.types.is_large_list(kind),
            "label": is_text or is_number or pa.types.is_boolean(kind),
            "group": is_text or pa.types.is_integer(kind),
            "timestamp": is_text or pa.types.is_timestamp(kind) or pa.types.is_date(kind),
        }[key]
        if not allowed:
            raise CampaignError(
                f"{shown}: column {column!r} (data.fields.{key}) has type {array.type}; "
                f"expected {PARQUET_KINDS[key]}"
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


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# ---------------------------------------------------------------------------------------------
# One record's values -> normalized values


def _check_string(value: str, where: str) -> str:
    if blank(value):
        raise CampaignError(f"{where} is empty (whitespace or invisible characters only)")
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
    "prompt": "a string",
    "response": "a string",
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
    if key in ("id", "group", "label") and isinstance(value, int) and not isinstance(value, bool):
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
    from campaign.data import conversations

    record: dict[str, Any] = {"group": None, "timestamp": None, "messages": None}
    for key, column in mapping:
        at = _where_field(where, key, column)
        if key == "timestamp":
            record[key] = _as_time(raw[key], at)
        elif key == "messages":
            record[key] = conversations.parse_messages(raw[key], at)
        else:
            record[key] = _as_text(raw[key], at, key)
    if "prompt" in record:
        record["messages"] = conversations.from_prompt_response(
            record["prompt"], record["response"]
        )
    if record["messages"] is not None:
        # Duplicates are prompt + response; the label, when named, only stratifies the split.
        record["text"] = conversations.dedup_text(record["messages"])
        record.setdefault("label", conversations.UNSTRATIFIED)
        record["messages"] = conversations.dump_messages(record["messages"])
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


def read_sources(
    sources: list[dict],
    fields: dict,
    root: Path,
    files: list[tuple[int, str]] | None = None,
) -> tuple[pd.DataFrame, list[SourceFile]]:
    """Records and provenance of the given files ((source index, path as shown), from
    `assign_files`), or of every file the sources name when `files` is None."""
    import pandas as pd

    root = Path(root)
    check_sources(sources)
    mapping = check_fields(fields)
    # A conversational dataset's records carry their conversation (JSON) to the split files.
    extra = ("messages",) if is_conversational(mapping) else ()
    columns: dict[str, list] = {name: [] for name in RECORD_COLUMNS + extra}
    first_at: dict[str, str] = {}
    read: list[SourceFile] = []
    chosen = source_files(sources, root) if files is None else files
    for index, shown in chosen:
        source = sources[index]
        fmt = source["format"]
        suffix = Path(shown).suffix.lower()
        if EXTENSION_FORMATS.get(suffix, fmt) != fmt:
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
            for key in ("id", "text", "label", "group", "timestamp", *extra):
                columns[key].append(record[key])
            columns["source"].append(shown)
            columns["licence"].append(source["licence"])
        read.append(SourceFile(shown, fmt, source["licence"], source["origin"], hash_bytes(data)))
    frame = pd.DataFrame(
        {
            name: pd.array(values, dtype="datetime64[us, UTC]" if name == "timestamp" else "str")
            for name, values in columns.items()
        }
    )
    return frame, read


def load_records(
    sources: list[dict],
    fields: dict,
    root: Path,
    files: list[tuple[int, str]] | None = None,
) -> pd.DataFrame:
    """Every record of every source, validated, one row per record in source order.

    sources: params ``data.sources``; fields: ``data.fields`` (column names in the files);
    root: the folder source paths are relative to. Returns columns id, text, label, group,
    source, licence (str; group NA when data.fields.group is null) and timestamp
    (datetime64[us, UTC]; NaT when data.fields.timestamp is null); a conversational dataset adds
    ``messages`` (the conversation as JSON; its text is prompt + response). ``source`` is the
    file's path as shown in messages. Raises CampaignError (one line: file, line or record,
    field) on bad input.
    `files`: read exactly these (a stage passes the inputs the runner hashed); default every file
    the sources name.
    """
    return read_sources(sources, fields, root, files)[0]
