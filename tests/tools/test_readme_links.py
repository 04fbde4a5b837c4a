"""The README, CHANGELOG and docs/ link to files and headings that exist: a moved section or a
renamed page breaks a test, not a newcomer's first click."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [
    "README.md",
    "CHANGELOG.md",
    *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {anchor(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_anchor_matches_github_for_code_and_punctuation():
    assert anchor("Resume after a crash or `kill -9`") == "resume-after-a-crash-or-kill--9"
    assert anchor("Statistics: decisions you can act on") == "statistics-decisions-you-can-act-on"
    assert anchor("`data`") == "data"


@pytest.mark.parametrize("name", PAGES)
def test_every_relative_link_reaches_a_file_and_heading(name):
    page = REPO / name
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # an external address
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target} (no file)")
        elif fragment and fragment not in anchors(linked):
            broken.append(f"{target} (no heading)")
    assert broken == [], f"{name}: broken links"
