"""The documentation cannot drift from the code: every params key, command flag and run-spec key
the pages show exists; the index links every page; the README stays a landing page; and no user
page reads as a development log. Cheap: the schema, the parser and the source are read, nothing
runs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from campaign.cli import build_parser
from campaign.cli_doc import subcommands
from campaign.core.params import load_schema

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
MAX_README_LINES = 250
# Pages a user reads for how it works: history goes to CHANGELOG.md, measurements to
# docs/development.md (which may say what a measurement was taken against).
USER_PAGES = [README, *sorted(p for p in DOCS.glob("*.md") if p.name != "development.md")]
ALL_PAGES = [README, *sorted(DOCS.glob("*.md"))]
HISTORY = re.compile(
    r"\bissues? #?\d+|\bin progress\b|\bsecond pass\b|\blast pass\b|\bfixed since\b"
    r"|\blast session\b|\bas before\b|\((?:before|now)\)|\(was [-+\d]|\bBefore:|\bformerly\b"
    r"|\bthis release\b|\bwhat changed for\b",
    re.IGNORECASE,
)
FILE_SUFFIX = re.compile(
    r"\.(py|md|ya?ml|json|jsonl|txt|parquet|csv|tsv|smk|lock|html|png|zip|onnx|pt|gguf|"
    r"safetensors|log|db|rst|toml|age|model)$"
)
KEY = re.compile(r"`([a-z][a-z0-9_]*(?:\.[A-Za-z0-9_]+)+)`")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# A command line: at the start of a code span or line, or after a prompt, `-m` or `&&`.
COMMAND = re.compile(r"(?:^\s*|\$ |-m |&& )campaign\s+([a-z][a-z-]*)([^#|;&)]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def rel(page: Path) -> str:
    return str(page.relative_to(REPO))


# ------------------------------------------------------------------ params keys
def schema_has(schema: dict, parts: list[str]) -> bool:
    """Whether the key path `parts` is one the schema takes (an open object takes any rest)."""
    if not parts:
        return True
    for option in schema.get("oneOf", []) + schema.get("anyOf", []):
        if schema_has(option, parts):
            return True
    if schema.get("type") == "array" or "items" in schema:
        return isinstance(schema.get("items"), dict) and schema_has(schema["items"], parts)
    properties = schema.get("properties", {})
    if parts[0] in properties:
        return schema_has(properties[parts[0]], parts[1:])
    extra = schema.get("additionalProperties", not properties and schema.get("type") == "object")
    return bool(extra)


def params_key_exists(schema: dict, key: str) -> bool:
    parts = key.split(".")
    # A factor is a key of train or of model.config.
    if parts[:3] == ["ablation", "factors", "train"] and len(parts) > 3:
        parts = ["train", *parts[3:]]
    elif parts[:3] == ["ablation", "factors", "model"] and len(parts) > 3:
        parts = ["model", "config", *parts[3:]]
    return schema_has(schema, parts)


def is_code_name(key: str) -> bool:
    """`campaign.train.contract` and `split.py` name code or files, not params keys."""
    if FILE_SUFFIX.search(key):
        return True
    parts = key.split(".")
    if parts[0] != "campaign":
        return False
    root = REPO / "workflow" / "campaign"
    return (root / parts[1]).exists() or (root / f"{parts[1]}.py").exists()


def params_keys_shown(text: str, sections: set[str]) -> set[str]:
    return {
        key for key in KEY.findall(text) if key.split(".")[0] in sections and not is_code_name(key)
    }


def missing_params_keys(pages: list[Path]) -> list[str]:
    schema = load_schema()
    sections = set(schema["properties"])
    return [
        f"{rel(page)}: `{key}`"
        for page in pages
        for key in sorted(params_keys_shown(page.read_text(encoding="utf-8"), sections))
        if not params_key_exists(schema, key)
    ]


def test_every_params_key_shown_exists_in_the_schema():
    assert missing_params_keys(ALL_PAGES) == []


def test_a_renamed_key_is_caught():
    schema = load_schema()
    assert params_key_exists(schema, "train.lr")
    assert params_key_exists(schema, "ablation.factors.train.lr")
    assert not params_key_exists(schema, "train.learning_rate")
    assert not params_key_exists(schema, "evaluation.decide_by")


# ------------------------------------------------------------------ command flags
def code_fragments(text: str) -> list[str]:
    """Inline code spans and the lines of fenced blocks: where a command is shown."""
    fragments, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            fragments.append(line)
        else:
            fragments += CODE_SPAN.findall(line)
    return fragments


def wrong_flags(pages: list[Path]) -> list[str]:
    commands = subcommands(build_parser())
    options = {
        name: {s for action in sub._actions for s in action.option_strings}
        for name, sub in commands.items()
    }
    wrong = []
    for page in pages:
        for fragment in code_fragments(page.read_text(encoding="utf-8")):
            for command, rest in COMMAND.findall(fragment):
                if command not in commands:
                    wrong.append(f"{rel(page)}: `campaign {command}` is no command")
                    continue
                wrong += [
                    f"{rel(page)}: `campaign {command} {flag}` is no option"
                    for flag in FLAG.findall(rest)
                    if flag not in options[command]
                ]
    return wrong


def test_every_command_and_flag_shown_exists_in_the_parser():
    assert wrong_flags(ALL_PAGES) == []


# ------------------------------------------------------------------ the run spec
def run_spec_keys() -> set[str]:
    """The keys the run spec holds, read from the source of `campaign.train.command`: those
    `run_spec` returns, and those a caller sets on its result (`body["key"] = ...`); and those
    a task's module adds (its command_fields)."""
    source = REPO / "workflow" / "campaign" / "train" / "command.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    keys: set[str] = set()
    holders: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "run_spec":
            returned = [n.value for n in ast.walk(node) if isinstance(n, ast.Return)]
            keys |= {k.value for k in returned[-1].keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if getattr(node.value.func, "id", None) == "run_spec":
                holders |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and getattr(target.value, "id", None) in holders
                    and isinstance(target.slice, ast.Constant)
                ):
                    keys.add(target.slice.value)
    # and what a task adds to it (TaskModule.command_fields: the dicts it returns)
    for path in (REPO / "workflow" / "campaign" / "tasks").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name == "command_fields":
                for ret in (n.value for n in ast.walk(node) if isinstance(n, ast.Return)):
                    if isinstance(ret, ast.Dict):
                        keys |= {k.value for k in ret.keys if isinstance(k, ast.Constant)}
    assert keys, "no run_spec in campaign/train/command.py"
    return keys


def run_spec_table(page: Path) -> dict[str, str]:
    """{key: its row} of the contract page's run-spec table."""
    section = page.read_text(encoding="utf-8").split("## What the campaign hands over", 1)[1]
    section = section.split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([a-z_]+)` \| (.*)\|$", section, flags=re.M))


def test_the_contract_lists_the_run_spec_the_code_writes():
    table = run_spec_table(DOCS / "trainer-contract.md")
    assert set(table) == run_spec_keys()


def test_the_contracts_task_row_lists_every_task():
    tasks = load_schema()["properties"]["model"]["properties"]["task"]["enum"]
    row = run_spec_table(DOCS / "trainer-contract.md")["task"]
    assert [t for t in tasks if f"`{t}`" not in row] == []


# ------------------------------------------------------------------ the index and the README
def unlinked_pages(index: Path) -> list[str]:
    links = set(re.findall(r"\]\(([^)#\s]+)", index.read_text(encoding="utf-8")))
    pages = sorted(p.name for p in index.parent.glob("*.md") if p != index)
    return [name for name in pages if name not in links]


def test_the_index_links_every_page():
    assert unlinked_pages(DOCS / "README.md") == []


def test_the_readme_is_a_landing_page():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md: {lines} lines (at most {MAX_README_LINES})"


def history_lines(pages: list[Path]) -> list[str]:
    return [
        f"{rel(page)}:{number}: {line.strip()[:80]}"
        for page in pages
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if HISTORY.search(line)
    ]


def test_no_user_page_reads_as_a_development_log():
    assert history_lines(USER_PAGES) == []


@pytest.mark.parametrize(
    "line",
    [
        "### Generation (issue 34)",
        "— in progress",
        "Fixed since: now",
        "(before) 0.39",
        "as before",
    ],
)
def test_the_history_markers_are_caught(line):
    assert HISTORY.search(line)
