"""The preflight checks, a registry: one module per check, named after it.

A check module defines `ORDER` (its place in the report), `run(bench) -> Result` and, if its
details deserve more than the summary line, `describe(details) -> list[str]` for the text report;
`ALONE = True` when it times something and must run with no other check beside it.
A new check is a new module here (and, if it has settings, a key in the `preflight` schema); the
names `preflight.blocking` accepts come from this folder.
"""

from __future__ import annotations

from types import ModuleType

from campaign.core.registry import discover, member_names


def names() -> list[str]:
    """Check names, from the module files (imports nothing)."""
    return member_names(__name__)


def load() -> dict[str, ModuleType]:
    """{name: module} for every check, in report order."""
    found = discover(__name__)
    return dict(sorted(found.items(), key=lambda item: (item[1].ORDER, item[0])))
