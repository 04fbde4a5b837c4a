"""Load params.yaml and check it against the one schema, with one-line errors naming the key."""

from __future__ import annotations

import difflib
import functools
import math
from pathlib import Path
from typing import Any

import yaml

from campaign.core.errors import CampaignError

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "params.schema.yaml"

_TYPE_WORDS = {
    "number": "a number",
    "integer": "an integer",
    "string": "a string",
    "array": "a list",
    "object": "a mapping",
    "boolean": "true or false",
    "null": "null",
}


def _factor_levels_schema(value_schema: dict) -> dict:
    return {"type": "array", "minItems": 1, "uniqueItems": True, "items": value_schema}


def _factors_schema(schema: dict) -> dict:
    """Derive ablation.factors from train and model.config: each key → a list of its values."""
    props = schema["properties"]
    train = props["train"]["properties"]
    model_config = props["model"]["properties"]["config"]["properties"]

    def levels(properties: dict) -> dict:
        return {
            "type": "object",
            "additionalProperties": False,
            "properties": {k: _factor_levels_schema(v) for k, v in properties.items()},
        }

    config_levels = levels({k: v for k, v in model_config.items() if k != "architecture"})
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "train": levels(train),
            "model": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"config": config_levels},
            },
        },
    }


# Keys no ablation factor may vary, and why: their levels would be one run under several cells.
NOT_FACTORS = {
    "model.generation.metric": (
        "the metric scores what the runs generate and is in no run id, so its levels would "
        "train identical runs; changing model.generation.metric rescores only (set it and "
        "rerun: the evaluation alone reruns)"
    ),
}


def _factor_paths(node: Any, prefix: str = "") -> list[str]:
    """The dotted keys a factors mapping varies: `{model: {generation: {metric: [..]}}}` ->
    ["model.generation.metric"] (a mapping is followed down to its lists of levels)."""
    if not isinstance(node, dict):
        return [prefix]
    return [p for k, v in node.items() for p in _factor_paths(v, f"{prefix}.{k}" if prefix else k)]


def _check_not_factors(params: dict, source: str) -> None:
    """A factor (or an explicit cell) over a key of NOT_FACTORS: one line saying why, before
    the schema's "unknown key" (which names the key but not the reason)."""
    ablation = params.get("ablation")
    if not isinstance(ablation, dict):
        return
    found = []
    factors = ablation.get("factors")
    if isinstance(factors, dict):
        found += [(f"ablation.factors.{p}", p) for p in _factor_paths(factors)]
    explicit = ablation.get("explicit")
    cells = explicit.get("cells") if isinstance(explicit, dict) else None
    for i, cell in enumerate(cells if isinstance(cells, list) else []):
        if isinstance(cell, dict):
            found += [(f"ablation.explicit.cells[{i}].{k}", str(k)) for k in cell]
    for where, key in found:
        if key in NOT_FACTORS:
            raise CampaignError(f"{source}: {where}: {NOT_FACTORS[key]}")


REGISTRY_KEY = "x-registry"  # in the schema: the value is a member of this registry package


def _fill_registries(node: Any) -> None:
    """Replace each `x-registry: <package>` with the enum of that registry's member names, so a
    new check, design or variant is one module and no schema edit."""
    from campaign.core.registry import member_names

    if isinstance(node, dict):
        package = node.pop(REGISTRY_KEY, None)
        if package is not None:
            node["enum"] = member_names(package)
        for value in node.values():
            _fill_registries(value)
    elif isinstance(node, list):
        for value in node:
            _fill_registries(value)


@functools.cache
def load_schema() -> dict:
    """The params schema with ablation.factors derived from the keys it may vary, and the names
    of registry members (checks, designs, variants) from their folders."""
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema = yaml.safe_load(f)
    schema["properties"]["ablation"]["properties"]["factors"] = _factors_schema(schema)
    _fill_registries(schema)
    return schema


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string '{shown}'"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _expected_type(schema: dict) -> str:
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    words = [_TYPE_WORDS.get(t, t) for t in types]
    text = " or ".join(words)
    if types == ["array"] and isinstance(schema.get("items"), dict):
        item = schema["items"]
        if "type" in item and isinstance(item["type"], str):
            text = "a list of " + {
                "number": "numbers",
                "integer": "integers",
                "string": "strings",
            }.get(item["type"], _TYPE_WORDS.get(item["type"], item["type"]))
        elif "enum" in item:
            text = "a list of values from " + ", ".join(map(str, item["enum"]))
    return text


def _yaml_number(text: str) -> bool:
    """Whether PyYAML reads `text`, written plain, as a number."""
    try:
        read = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(read, (int, float)) and not isinstance(read, bool)


def _yaml_float_form(text: str) -> str:
    """`text` written so that PyYAML (YAML 1.1) reads it as a float: an exponent needs a decimal
    point in the mantissa and a sign (1e5 and 1.0e5 are text, 1.0e+5 is a number)."""
    mantissa, e, exponent = text.lower().partition("e")
    if e:
        mantissa = mantissa if "." in mantissa else mantissa + ".0"
        exponent = exponent if exponent[:1] in "+-" and exponent else "+" + exponent
        candidate = f"{mantissa}e{exponent}"
        if _yaml_number(candidate):
            return candidate
    return repr(float(text))


def _number_text_hint(value: Any, quoted: bool | None = None) -> str:
    """Why a number came as text, and the fix. PyYAML (YAML 1.1) reads an exponent without a
    decimal point or without a sign (1e-4, 1.0e5) as text: the fix is the form it reads as a
    float. Quotes are named only when the value was quoted (`quoted`; None when the source text
    is unknown, then a value that PyYAML would read as a number when plain must have been).
    "" when the value does not look like a number."""
    if not isinstance(value, str):
        return ""
    try:
        if not math.isfinite(float(value)):
            return ""
    except ValueError:
        return ""
    text = value.strip()
    plain_number = _yaml_number(text)
    if quoted is None:
        quoted = plain_number
    if plain_number:
        return f" (a number in quotes is text: write {text} without the quotes)"
    form = _yaml_float_form(text)
    why = "YAML reads an exponent without a decimal point and a sign as text"
    if quoted:
        return f" (a number in quotes is text, and {why}: write {form} without the quotes)"
    return f" ({why}: write {form})"


def _quoted_at(text: str | None, path) -> bool | None:
    """Whether the scalar at `path` in the YAML `text` was written in quotes; None when unknown
    (no text, or the path is not found)."""
    if text is None:
        return None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            node = node.value[part] if part < len(node.value) else None
        else:
            node = None
        if node is None:
            return None
    return isinstance(node, yaml.ScalarNode) and node.style in ("'", '"')


def _non_finite(node: Any, path: tuple = ()) -> tuple[tuple, float] | None:
    """The first NaN or infinity in params (document order), with its key path. JSON Schema's
    bounds cannot refuse NaN (every comparison with it is false: `.nan` passes `minimum: 0`), and
    no key of a campaign means anything with an infinite value, so one walk covers every
    numeric key, factor levels included."""
    if isinstance(node, float) and not math.isfinite(node):
        return path, node
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, value in items:
        found = _non_finite(value, (*path, key))
        if found is not None:
            return found
    return None


def key_path(parts) -> str:
    """`data.sources[0].licence` from ("data", "sources", 0, "licence")."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def format_error(error, text: str | None = None) -> str:
    """One line: `<key path>: <what was expected>; got <what was found>`. `text`: the YAML the
    params were read from, to tell a quoted value from a plain one."""
    path = key_path(error.absolute_path)
    where = path or "params"
    kind = error.validator
    value = error.instance
    schema = error.schema
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        unknown = sorted(set(value) - set(allowed))
        key = unknown[0]
        hint = difflib.get_close_matches(key, allowed, n=1)
        full = f"{path}.{key}" if path else key
        tail = f"; did you mean '{hint[0]}'?" if hint else ""
        return f"{full}: unknown key (allowed: {', '.join(allowed)}){tail}"
    if kind == "required":
        missing = [k for k in error.validator_value if k not in value][0]
        full = f"{path}.{missing}" if path else missing
        return f"{full}: missing required key"
    if kind == "type":
        return f"{where}: expected {_expected_type(schema)}; got {_describe(value)}" + (
            _number_text_hint(value, _quoted_at(text, error.absolute_path))
        )
    if kind == "enum":
        options = ", ".join(str(o) for o in error.validator_value)
        return f"{where}: expected one of {options}; got {_describe(value)}"
    if kind in _SAID:
        said = _SAID[kind].format(bound=error.validator_value, value=value, got=_describe(value))
        return f"{where}: {said}"
    return f"{where}: {error.message}"


# What the validators that judge the value alone say after the key path: `bound` is the
# schema's value for the validator, `value` the value found, `got` the value described.
_SAID = {
    "minimum": "must be >= {bound}; got {value}",
    "exclusiveMinimum": "must be > {bound}; got {value}",
    "maximum": "must be <= {bound}; got {value}",
    "exclusiveMaximum": "must be < {bound}; got {value}",
    "minItems": "must list at least {bound} item(s)",
    "uniqueItems": "values must be unique; got {value}",
    "minLength": "must not be empty",
    "pattern": "must match {bound}; got {got}",
}


def validate(params: Any, source: str = "params", text: str | None = None) -> dict:
    """Check params against the schema and the cross-key rules; return them unchanged. `text`:
    the YAML they were read from, if any (an error's hint then knows what was quoted).

    Raises CampaignError naming the first offending key (in document order of the key path).
    """
    if not isinstance(params, dict):
        raise CampaignError(f"{source}: expected a mapping of sections; got {_describe(params)}")
    non_finite = _non_finite(params)
    if non_finite is not None:
        path, value = non_finite
        word = "NaN" if math.isnan(value) else "an infinity"
        raise CampaignError(f"{source}: {key_path(path)}: expected a finite number; got {word}")
    fingerprint = _validated_fingerprint(params)
    if fingerprint is not None and fingerprint in _load_validated():
        return params
    _check_not_factors(params, source)
    import jsonschema

    validator = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(params), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        # The deepest error on the first path is the most specific one.
        first_path = [str(p) for p in errors[0].absolute_path]
        same = [e for e in errors if [str(p) for p in e.absolute_path] == first_path]
        raise CampaignError(f"{source}: {format_error(same[0], text)}")
    _check_phases(params, source)
    if fingerprint is not None:
        _remember_validated(fingerprint)
    return params


# Validation imports jsonschema and builds the plan: about a quarter of a second that every
# `snakemake` start and every `campaign` command would pay again for the same file. A params file
# that passed is remembered by the BLAKE3 of its content, the schema's bytes and the syntax trees
# of every module of the package (phase checks and registry members included), so any change to
# one of them validates again. Only passes are remembered; they live next to Python's bytecode.
_VALIDATED_PATH = Path(__file__).resolve().parents[1] / "__pycache__" / "campaign-params.json"
_VALIDATED_KEEP = 64


def _validated_fingerprint(params: dict) -> str | None:
    from campaign.core.code import module_hashes_of, package_modules
    from campaign.core.hashing import canonical_json, hash_bytes, hash_value

    try:
        text = canonical_json(params)
    except (TypeError, ValueError):  # a value JSON cannot hold (a date YAML made): no cache
        return None
    return hash_value(
        {
            "params": hash_bytes(text.encode("utf-8")),
            "schema": hash_bytes(SCHEMA_PATH.read_bytes()),
            "code": module_hashes_of(package_modules()),
        }
    )


def _load_validated() -> list[str]:
    import json

    try:
        value = json.loads(_VALIDATED_PATH.read_text(encoding="utf-8"))
        return value if isinstance(value, list) else []
    except (OSError, ValueError):
        return []


def _remember_validated(fingerprint: str) -> None:
    import contextlib
    import json

    from campaign.core.fsutil import atomic_write_text

    known = [k for k in _load_validated() if k != fingerprint][-(_VALIDATED_KEEP - 1) :]
    with contextlib.suppress(OSError):  # a read-only install validates every time
        atomic_write_text(_VALIDATED_PATH, json.dumps([*known, fingerprint]), mode=0o644)


def _check_phases(params: dict, source: str) -> None:
    """Each phase's rules that the schema cannot state, in DAG order."""
    from campaign.core.registry import phases

    for phase in phases():
        if phase.check_params is None:
            continue
        try:
            phase.check_params(params)
        except CampaignError as e:
            raise CampaignError(f"{source}: {e}") from None


def load_params(path: str | Path = "params.yaml") -> dict:
    """Read and validate a params file. Errors name the file and the key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CampaignError(f"{path}: params file not found") from None
    except UnicodeDecodeError as e:
        raise CampaignError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        params = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CampaignError(f"{path}{where}: not valid YAML ({problem})") from None
    return validate(params, source=str(path), text=text)


def get_key(params: dict, dotted: str) -> Any:
    node = params
    for part in dotted.split("."):
        node = node[part]
    return node
