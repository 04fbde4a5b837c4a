"""A params file written from the project's params.yaml as a template: the values `campaign init`
chose set in place, every section, key and comment of the template kept, so the file a user edits
reads like the one the project documents."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import yaml

# ------------------------------------------------------------------ writing YAML from the template
_TOP = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):")


def _sections(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """(head lines, {section: its lines}); a section's own comment lines above it belong to it."""
    lines = text.splitlines()
    starts = []
    for i, line in enumerate(lines):
        m = _TOP.match(line)
        if m:
            j = i
            while j > 0 and lines[j - 1].startswith("#"):
                j -= 1
            starts.append((j, m.group(1)))
    head = lines[: starts[0][0]] if starts else lines
    out = {}
    for k, (start, key) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        out[key] = lines[start:end]
    return head, out


class _Dumper(yaml.SafeDumper):
    """Floats as the template writes them (3.0e-4, not 0.0003), and indented block lists."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):
        return super().increase_indent(flow, False)


def _float(dumper: yaml.SafeDumper, value: float):
    text = repr(value)
    if value and math.isfinite(value) and abs(value) < 1.0e-2:
        mantissa, exponent = f"{value:e}".split("e")
        mantissa = mantissa.rstrip("0")
        mantissa += "0" if mantissa.endswith(".") else ""
        scientific = f"{mantissa}e{int(exponent)}"
        text = scientific if float(scientific) == value else text
    return dumper.represent_scalar("tag:yaml.org,2002:float", text)


def _dump(value: Any, flow: bool) -> str:
    """YAML of value: all in flow style, or blocks with their innermost lists in flow style."""
    records = isinstance(value, list) and all(isinstance(v, dict) for v in value)
    text = yaml.dump(
        value,
        Dumper=_Dumper,
        default_flow_style=True if flow else (False if records else None),
        width=10_000 if flow else 96,
        sort_keys=False,
    )
    return text.removesuffix("...\n").strip("\n")


def flow(value: Any) -> str:
    return _dump(value, flow=True)


def _nested(value: Any) -> bool:
    """A value to write in block style (its innermost lists in flow style): a list of
    mappings, or a mapping holding a list or mapping."""
    if isinstance(value, list):
        return any(isinstance(v, dict) for v in value)
    return isinstance(value, dict) and any(isinstance(v, dict | list) and v for v in value.values())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _find(lines: list[str], path: list[str]) -> tuple[int, int, int] | None:
    """(first line, end, indent) of the key at `path` (keys below the section line, which is
    lines[0] at indent 0) with its block, or None if it is not written in block style. Comment
    lines after the block belong to the next key and are not in it."""
    start, depth = 0, 0
    end = len(lines)
    for part in path:
        key = re.compile(rf"^(\s+){re.escape(part)}:(\s|$)")
        found = None
        for i in range(start + 1, end):
            m = key.match(lines[i])
            if m and _indent(lines[i]) > depth:
                found = i
                break
        if found is None:
            return None
        depth = _indent(lines[found])
        start = found
        end = found + 1
        while end < len(lines) and (
            not lines[end].strip()
            or lines[end].lstrip().startswith("#")
            or _indent(lines[end]) > depth
        ):
            end += 1
        while end - 1 > start and (
            not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")
        ):
            end -= 1  # comments after the block belong to the next key
    return start, end, depth


# A key the written params no longer have (`campaign init` drops what the task does not read).
REMOVED = object()


def _set(lines: list[str], path: list[str], value: Any, note: str | None = None) -> bool:
    """Replace the value of `path` (keys below the section line) by `value` in flow style,
    keeping the key's trailing comment; `value` REMOVED drops the key, leaving `note` as a
    comment in its place when given. False if the key is not written in block style."""
    found = _find(lines, path)
    if found is None:
        return False
    start, end, depth = found
    if value is REMOVED:
        lines[start:end] = [] if note is None else [" " * depth + "# " + note]
        return True
    line = lines[start]
    head = line[: line.index(":") + 1]
    if _nested(value):
        pad = " " * (depth + 2)
        block = [pad + row for row in _dump(value, flow=False).splitlines()]
        lines[start:end] = [head, *block]
        return True
    text = f"{head} {flow(value)}"
    m = re.search(r"\s+#\s.*$", line)
    # The key's comment stays, at its column; a comment on null ("or {...}") says what the
    # value now is, so it goes.
    if m and end == start + 1 and yaml.safe_load(line[len(head) : m.start()] or "null") is not None:
        column = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
        text = text.ljust(column - 1) + " " + m.group(0).strip()
    lines[start:end] = [text]
    return True


def _append(lines: list[str], path: list[str], value: Any) -> bool:
    """Add a key the template's section lacks (directly below the section line) after the
    section's last line, in flow style; False for a deeper key."""
    if len(path) != 1 or _find(lines, path) is not None:
        return False
    end = len(lines)
    while end > 1 and not lines[end - 1].strip():
        end -= 1
    lines.insert(end, f"  {path[0]}: {flow(value)}")
    return True


def _leaves(new: Any, old: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    """The (path, value) pairs where `new` differs from `old`, as deep as both are mappings;
    a key of `old` that `new` lacks is (path, REMOVED); a key of a section that `old` lacks is
    (path, value) after the others (written at the section's end)."""
    if isinstance(new, dict) and isinstance(old, dict) and (not path or new.keys() <= old.keys()):
        out = []
        for k in old:
            out += _leaves(new[k], old[k], [*path, k]) if k in new else [([*path, k], REMOVED)]
        return out + [([k], new[k]) for k in new if k not in old]
    return [] if new == old else [(path, new)]


def render(
    template_text: str,
    template: dict,
    params: dict,
    model_text: Callable[[dict], list[str]],
    notes: dict[str, str] | None = None,
) -> str:
    """params as YAML: the template's text with the changed values set in place (its comments
    kept), the model section by model_text; a key params dropped leaves its `notes` entry
    (by dotted key) as a comment, or nothing. A section whose text cannot be edited so is
    written whole, without comments."""
    notes = notes or {}
    head, sections = _sections(template_text)
    out = list(head)
    for key, value in params.items():
        if key == "model":
            out += model_text(value)
            continue
        lines = list(sections.get(key, []))
        edited = bool(lines) and template.get(key) is not None
        if edited:
            for path, leaf in _leaves(value, template[key], []):
                note = notes.get(".".join([key, *path]))
                if not path or not (_set(lines, path, leaf, note) or _append(lines, path, leaf)):
                    edited = False
                    break
        if edited:
            try:
                edited = yaml.safe_load("\n".join(lines)) == {key: value}
            except yaml.YAMLError:
                edited = False
        if not edited:
            lines = [*_dump({key: value}, flow=False).splitlines(), ""]
        out += lines
    return "\n".join(out).rstrip("\n") + "\n"


_Dumper.add_representer(float, _float)
