"""Which files the `data.sources` of params name, and the checks of that section and of
`data.fields`. Light (standard library only): the Snakefile expands the sources when it builds
the DAG."""

from __future__ import annotations

import os
import re
from glob import glob
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.core.errors import CampaignError

if TYPE_CHECKING:
    pass


FORMATS = ("csv", "jsonl", "parquet")
SOURCE_KEYS = ("path", "format", "licence", "origin")
FIELD_KEYS = ("id", "text", "label", "group", "timestamp")
OPTIONAL_FIELDS = ("group", "timestamp")
# A conversational dataset (the generation task, campaign/tasks/generation/chat.py) names either a
# `messages` column or `prompt` and `response` columns; its text is then null (the text that
# duplicate detection compares is prompt + response) and its label optional (a column to
# stratify the split on; without it the split balances sizes only).
CONVERSATION_FIELDS = ("messages", "prompt", "response")
RECORD_COLUMNS = ("id", "text", "label", "group", "timestamp", "source", "licence")
MANIFEST_COLUMNS = ("id", "content_hash", "source", "licence", "label", "group", "timestamp")

# A file whose name ends in one of these must be declared with that format.
EXTENSION_FORMATS = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
FORMAT_NAMES = {"csv": "CSV", "jsonl": "JSON Lines", "parquet": "Parquet"}
PARQUET_KINDS = {
    "id": "strings or integers",
    "text": "strings",
    "prompt": "strings",
    "response": "strings",
    "messages": "JSON strings or lists of {role, content} structs",
    "label": "strings, numbers or booleans",
    "group": "strings or integers",
    "timestamp": "timestamps, dates or ISO 8601 strings",
}
_MISSING_WHY = {
    "licence": "; every source must state its licence",
    "origin": "; every source must say where its data came from",
}
_GLOB_CHARS = re.compile(r"[*?[]")
MAX_NAMES_SHOWN = 20


# ---------------------------------------------------------------------------------------------
# Params checks (the schema enforces these too; a stage may be called without it)


def check_sources(sources: Any) -> None:
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


def check_fields(fields: Any) -> list[tuple[str, str]]:
    """The mapped fields as (key, column) pairs in FIELD_KEYS then CONVERSATION_FIELDS order,
    unmapped optional ones left out."""
    known = FIELD_KEYS + CONVERSATION_FIELDS
    if not isinstance(fields, dict):
        raise CampaignError(f"data.fields: expected a mapping with {', '.join(FIELD_KEYS)}")
    for key in fields:
        if key not in known:
            raise CampaignError(f"data.fields.{key}: unknown key; expected {', '.join(known)}")
    talk = sorted(k for k in CONVERSATION_FIELDS if fields.get(k) is not None)
    optional = OPTIONAL_FIELDS
    if talk:
        if talk not in (["messages"], ["prompt", "response"]):
            raise CampaignError(
                f"data.fields: {' and '.join(talk)} named; a conversational dataset names either "
                "messages, or both prompt and response"
            )
        if fields.get("text") is not None:
            raise CampaignError(
                f"data.fields.text: null for a conversational dataset (data.fields."
                f"{talk[0]} is named; duplicates are found on prompt + response)"
            )
        optional = (*OPTIONAL_FIELDS, "text", "label")
    mapping = []
    for key in known:
        if key not in fields:
            if key in CONVERSATION_FIELDS or (talk and key == "text"):
                continue
            hint = " (use null when the data has none)" if key in optional else ""
            raise CampaignError(f"data.fields.{key}: missing{hint}")
        column = fields[key]
        if column is None and (key in optional or key in CONVERSATION_FIELDS):
            continue
        if not isinstance(column, str) or not column:
            raise CampaignError(f"data.fields.{key}: expected a column name, got {column!r}")
        mapping.append((key, column))
    return mapping


def is_conversational(mapping: list[tuple[str, str]]) -> bool:
    return any(key in CONVERSATION_FIELDS for key, _column in mapping)


def check_spec(spec: Any) -> None:
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


def source_files(sources: list[dict], root: Path) -> list[tuple[int, str]]:
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
    return [root / name for _, name in source_files(sources, root)]


def _glob_regex(pattern: str) -> re.Pattern:
    """A regex for a glob pattern with glob's own meaning (`*` and `?` stay within one folder,
    `**` spans folders), to tell which source names a given file without listing the disk."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def assign_files(sources: list[dict], files: list[str | os.PathLike]) -> list[tuple[int, str]]:
    """(source index, file as shown) for each given file: the source whose path or pattern names
    it. The stage reads exactly the files the runner hashed, so it must not list the disk again
    (a file added since would be read without being part of the key)."""
    check_sources(sources)
    out = []
    for file in files:
        shown = Path(file).as_posix()
        name = os.path.normpath(shown)
        owners = [
            i
            for i, source in enumerate(sources)
            if (
                _glob_regex(os.path.normpath(source["path"])).fullmatch(name)
                if _GLOB_CHARS.search(source["path"])
                else os.path.normpath(source["path"]) == name
            )
        ]
        if len(owners) != 1:
            which = "no source" if not owners else f"data.sources{owners}"
            raise CampaignError(f"{shown}: named by {which}; each input file needs one source")
        out.append((owners[0], shown))
    return out


def derive_inputs(spec: dict, root: Path) -> dict[str, list[Path]]:
    """The files a data stage's params name (Stage.derive_inputs): its sources and, for the
    manifest, the earlier manifest to diff against."""
    root = Path(root)
    out = {"sources": expand_sources(spec["sources"], root)}
    if "previous_manifest" in spec:
        previous = spec["previous_manifest"]
        out["previous"] = [root / previous] if previous else []
    return out
