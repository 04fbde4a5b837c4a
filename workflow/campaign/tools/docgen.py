"""What the generated reference pages share: write a page, or with `--check` fail when the page on
disk is not what the code renders (the pages' tests run the check)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.fsutil import atomic_write_text
from campaign.core.params import SCHEMA_PATH

ROOT = SCHEMA_PATH.parents[2]
PARAMS_PATH = ROOT / "params.yaml"


def shown(path: Path) -> str:
    """A path as the user typed it from the project root, where it lies inside the project."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(
    render: Callable[[], str], page: Path, module: str, doc: str, argv: list[str] | None
) -> int:
    """`python -m <module>` rewrites `page` (or --out) from `render()`; `--check` only compares
    (exit 1 when stale, naming the command that rewrites it)."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc)
    parser.add_argument("--check", action="store_true", help="fail when the page is stale")
    parser.add_argument("--out", type=Path, default=page, help=f"the page ({shown(page)})")
    args = parser.parse_args(argv)
    try:
        text = render()
    except CampaignError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    name = shown(args.out)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{name} is out of date: run `python -m {module}`", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, text)
    print(f"wrote {name}")
    return 0
