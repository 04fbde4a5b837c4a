"""docs/params.md from the params schema: every key, its type, allowed values, whether it is
required, and its description; sections in the order of params.yaml, keys in the schema's.

Run `python -m campaign.tools.params_doc` to rewrite docs/params.md, `--check` to fail when it is
out of date with the schema (tests/tools/test_params_doc.py does). Registry members (checks,
designs, variants) are named by their folder, not listed, so a new member stays one new file.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from campaign.core.defaults import (
    DATA_DEFAULTS,
    GENERATION_DEFAULTS,
    MODEL_DEFAULTS,
    TRAIN_DEFAULTS,
)
from campaign.core.errors import CampaignError
from campaign.core.params import REGISTRY_KEY, SCHEMA_PATH
from campaign.tools.docgen import PARAMS_PATH, ROOT
from campaign.tools.docgen import main as generate
from campaign.tools.docgen import shown as _shown

DOC_PATH = ROOT / "docs" / "params.md"
_SOURCE = "workflow/schemas/params.schema.yaml"


@dataclass(frozen=True)
class Key:
    """One documented key: `path` dotted (`[]` marks a list's items), `node` its schema."""

    path: str
    node: dict
    required: bool


def walk(node: dict, order: Iterable[str] = (), prefix: str = "") -> Iterator[Key]:
    """Every property of an object schema, depth first, objects inside lists included.

    `order` puts this level's keys first in that order (params.yaml's sections); the rest, and
    every deeper level, follow the schema."""
    properties = node.get("properties", {})
    required = set(node.get("required", []))
    first = [k for k in order if k in properties]
    for name in first + [k for k in properties if k not in first]:
        child = properties[name]
        path = f"{prefix}.{name}" if prefix else name
        yield Key(path, child, name in required)
        yield from walk(child, (), path)
        items = child.get("items")
        if isinstance(items, dict) and "properties" in items:
            yield from walk(items, (), f"{path}[]")


def undocumented(schema: dict) -> list[str]:
    """Dotted paths of keys without a description."""
    return [k.path for k in walk(schema) if not str(k.node.get("description", "")).strip()]


def _registry_folder(package: str) -> str:
    return "workflow/" + package.replace(".", "/") + "/"


def _types(node: dict) -> list[str]:
    kind = node.get("type")
    if kind is None:
        return []
    return [kind] if isinstance(kind, str) else list(kind)


def _number(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _bounds(node: dict) -> list[str]:
    out = []
    for word, sign in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ):
        if word in node:
            out.append(f"{sign} {_number(node[word])}")
    if node.get("minLength"):
        out.append("non-empty")
    if "pattern" in node:
        out.append(f"matches `{node['pattern']}`")
    if node.get("minItems"):
        out.append(f"at least {node['minItems']} item{'s' if node['minItems'] > 1 else ''}")
    if node.get("uniqueItems"):
        out.append("no repeats")
    return out


def _enum(values: list) -> str:
    return ", ".join("`null`" if v is None else f"`{_number(v)}`" for v in values)


def _value_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "number", str: "string"}.get(type(value), "any")


def _type_text(node: dict) -> str:
    """What the key holds: `integer`, `number or null`, `list of string`, `mapping`."""
    if "oneOf" in node:
        return " or ".join(_type_text(alt) for alt in node["oneOf"])
    if REGISTRY_KEY in node:
        return "string"
    if "enum" in node:
        return " or ".join(dict.fromkeys(_value_type(v) for v in node["enum"]))
    types = _types(node)
    if "array" in types and isinstance(node.get("items"), dict):
        item = node["items"]
        inner = "mapping" if "properties" in item else _type_text(item)
        types = [f"list of {inner}" if t == "array" else t for t in types]
    words = {"object": "mapping", "boolean": "boolean"}
    return " or ".join(words.get(t, t) for t in types) or "any"


def _allowed_text(node: dict) -> str:
    """Allowed values or range: an enum, a registry folder, bounds, and the same for list items."""
    if "oneOf" in node:
        return "; or ".join(a for a in (_allowed_text(alt) for alt in node["oneOf"]) if a)
    parts = []
    if REGISTRY_KEY in node:
        parts.append(f"a module name in `{_registry_folder(node[REGISTRY_KEY])}`")
    if "enum" in node:
        parts.append(_enum(node["enum"]))
    parts += _bounds(node)
    items = node.get("items")
    if isinstance(items, dict) and "properties" not in items:
        inner = _allowed_text(items)
        if inner:
            parts.append(f"each: {inner}")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


# The tables of keys a params file may leave out, by the dotted path of their section.
DEFAULT_TABLES = {
    "data": DATA_DEFAULTS,
    "train": TRAIN_DEFAULTS,
    "model": MODEL_DEFAULTS,
    "model.generation": GENERATION_DEFAULTS,
}


def _absent(path: str) -> str:
    """ " Absent: <default>" for a key a params file may leave out (core/defaults.py)."""
    section, _, name = path.rpartition(".")
    table = DEFAULT_TABLES.get(section, {})
    if name not in table:
        return ""
    value = table[name]
    # YAML's spelling (1 == True in a dict lookup: test bool first).
    shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else value
    return f" Absent: {shown}"


def _section(key: Key, keys: list[Key]) -> list[str]:
    lines = [f"## `{key.path}`", "", _cell(key.node.get("description", "")), ""]
    lines += [
        "| key | type | allowed | required | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for k in keys:
        required = "yes" if k.required else "no"
        lines.append(
            f"| `{k.path}` | {_cell(_type_text(k.node))} | {_cell(_allowed_text(k.node))} "
            f"| {required} | {_cell(k.node.get('description', '') + _absent(k.path))} |"
        )
    return lines + [""]


def render(schema: dict, params: dict | None) -> str:
    """The Markdown page: one table per section, sections in params.yaml's order (`params`: the
    parsed file, or None for the schema's order)."""
    keys = list(walk(schema, params if isinstance(params, dict) else ()))
    sections = [k for k in keys if "." not in k.path]
    lines = [
        "# params.yaml reference",
        "",
        f"Generated from `{_SOURCE}` by `python -m campaign.tools.params_doc`; do not edit by",
        "hand (a test fails when this page and the schema disagree, or a key has no description).",
        "",
        _cell(schema.get("description", "")),
        "",
        "Keys are dotted paths; `[]` marks each item of a list (`data.sources[].path`). "
        "*required* is whether the key must be written where its parent is; "
        "a type with `null` accepts `null`. "
        "Unknown keys are refused, naming the key (`campaign validate`).",
        "",
        "Sections: " + ", ".join(f"[`{s.path}`](#{s.path})" for s in sections) + ".",
        "",
    ]
    for section in sections:
        inside = [k for k in keys if k.path.startswith(f"{section.path}.")]
        lines += _section(section, inside)
    return "\n".join(lines).rstrip("\n") + "\n"


def _load(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except OSError as e:
        raise CampaignError(f"{_shown(path)}: cannot read ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise CampaignError(f"{_shown(path)}: not valid YAML ({str(e).splitlines()[0]})") from None


def build(schema_path: Path = SCHEMA_PATH, params_path: Path = PARAMS_PATH) -> str:
    """The page for these files; refuses a schema with an undocumented key."""
    schema = _load(schema_path)
    missing = undocumented(schema)
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise CampaignError(
            f"{_shown(schema_path)}: no description for {', '.join(missing[:5])}{more}"
        )
    params = _load(params_path) if params_path.exists() else None
    return render(schema, params if isinstance(params, dict) else None)


def main(argv: list[str] | None = None) -> int:
    return generate(build, DOC_PATH, "campaign.tools.params_doc", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
