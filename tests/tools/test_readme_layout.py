"""README.md is in the order people work (what it is, the two commands, a first campaign, change
and rerun, where next) and the layout map in docs/development.md is true."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
DEVELOPMENT = (REPO / "docs" / "development.md").read_text(encoding="utf-8")

ORDER = (
    "Two commands on a fresh machine",
    "Your first own campaign",
    "Change one thing and rerun",
    "Where next",
    "Development",
)


def test_sections_in_the_order_people_work():
    tops = re.findall(r"^## (.+)$", re.sub(r"```.*?```", "", README, flags=re.S), flags=re.M)
    assert tops == list(ORDER), tops


def test_resume_is_under_change_and_rerun():
    rerun = README.split("\n## Change one thing and rerun\n", 1)[1].split("\n## ", 1)[0]
    assert "\n### Resume after a crash or `kill -9`\n" in rerun
    assert "snakemake --unlock && snakemake" in rerun


def layout_map() -> list[tuple[str, str]]:
    """(path, comment) of each line of the map's code block."""
    block = DEVELOPMENT.split("\n## Layout\n", 1)[1].split("```", 2)[1]
    rows = []
    for line in block.splitlines():
        if line.strip() and not line.startswith(" "):
            path, _, comment = line.partition("#")
            rows.append((path.strip(), comment.strip()))
    return rows


def expand(path: str) -> list[str]:
    """`a/{b,c}.smk` -> [a/b.smk, a/c.smk]."""
    m = re.search(r"\{([^}]*)\}", path)
    if not m:
        return [path]
    return [path[: m.start()] + alt + path[m.end() :] for alt in m.group(1).split(",")]


def test_every_path_in_the_layout_map_exists():
    missing = [p for path, _ in layout_map() for p in expand(path) if not (REPO / p).exists()]
    assert missing == []


def test_every_phase_package_and_rule_file_is_in_the_map():
    listed = {p.rstrip("/") for path, _ in layout_map() for p in expand(path)}
    package = REPO / "workflow" / "campaign"
    folders = {
        f"workflow/campaign/{d.name}" for d in package.iterdir() if (d / "__init__.py").exists()
    }
    rules = {f"workflow/rules/{f.name}" for f in (REPO / "workflow" / "rules").glob("*.smk")}
    assert sorted((folders | rules) - listed) == []


def test_the_modules_a_folder_line_names_exist():
    """A folder's comment names its modules (after a colon, or alone): each must be a module or
    a subfolder there, so a module moved or gone shows here."""
    wrong = []
    for path, comment in layout_map():
        folder = REPO / path
        if not path.startswith("workflow/campaign/") or not folder.is_dir():
            continue
        names = comment.split(":", 1)[-1]
        for part in names.split(";")[0].split(","):
            name = part.strip().split(" ")[0]
            if name and not ((folder / f"{name}.py").exists() or (folder / name).is_dir()):
                wrong.append(f"{path}: {name}")
    assert wrong == []
