"""Where phase code names a task: every string literal outside campaign/tasks/ and core/tasks.py
that is a task's name (model.task's values) or a task's scoring kind, docstrings and comments
aside. Phases call the task's module (core.tasks.module_of) instead; the few places left are
listed with `python -m campaign.tools.task_branches` and counted by a test.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from campaign.core.tasks import TASKS

PACKAGE_DIR = Path(__file__).resolve().parents[1]
WORKFLOW_DIR = PACKAGE_DIR.parent
# Where task names belong: the task modules and the table of tasks.
OWN = (PACKAGE_DIR / "tasks", PACKAGE_DIR / "core" / "tasks.py")


def task_words() -> set[str]:
    """Every task's name and scoring kind."""
    return {t.name for t in TASKS.values()} | {t.scoring for t in TASKS.values()}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def python_hits(path: Path, words: set[str]) -> list[int]:
    """Line numbers of the task-name literals in a Python module (docstrings aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in words
        and id(node) not in skip
    )


def rule_hits(path: Path, words: set[str]) -> list[int]:
    """Line numbers of quoted task names in a Snakemake file (comments aside)."""
    names = "|".join(map(re.escape, sorted(words)))
    pattern = re.compile(rf"""["']({names})["']""")
    return [
        n
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line.split("#", 1)[0])
    ]


def branches() -> list[tuple[str, int]]:
    """(file relative to workflow/, line) of every task-name literal in phase code."""
    words = task_words()
    out = []
    for path in sorted(WORKFLOW_DIR.rglob("*")):
        if any(path == own or own in path.parents for own in OWN) or "__pycache__" in path.parts:
            continue
        if path.suffix == ".py":
            hits = python_hits(path, words)
        elif path.suffix == ".smk" or path.name == "Snakefile":
            hits = rule_hits(path, words)
        else:
            continue
        out += [(str(path.relative_to(WORKFLOW_DIR)), n) for n in hits]
    return out


def main() -> int:
    found = branches()
    for file, line in found:
        print(f"workflow/{file}:{line}")
    print(f"{len(found)} task-name literals outside campaign/tasks/ and core/tasks.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
