"""Render a finished campaign's report and index again with this checkout's package and compare
them byte for byte with the campaign's own: a change to the report, index or findings mechanism
must leave the existing phases' output as it was.

    PYTHONPATH=workflow python scripts/rerender.py PROJECT OUT

PROJECT: a finished campaign (its results/ written by an earlier version); OUT: an empty folder,
which receives the new outputs and a store of their own (so nothing is a store hit). The stages
run as `campaign report` / `campaign index`, with the inputs this package declares, found in
PROJECT's results. Prints one line per output (identical or DIFFERENT) and exits 1 on a
difference.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from campaign.core.io import read_plan
from campaign.core.registry import get_stage, produced
from campaign.core.stage import EachJob, EachRun, From

STAGES = ("report", "index")


def input_paths(project: Path, ref) -> list[str]:
    """The files an input reference names in a finished project: the kept runs' for EachRun,
    every quantize job's found on disk for EachJob."""
    path = produced(ref).path
    if isinstance(ref, From):
        return [path]
    if isinstance(ref, EachRun):
        runs = [
            r["run"] for r in read_plan(project / produced(From("plan_table", "runs")).path).rows
        ]
        return [path.format(run=r) for r in runs if (project / path.format(run=r)).exists()]
    assert isinstance(ref, EachJob)
    found = project.glob(path.format(run="*", variant="*"))
    return sorted(p.relative_to(project).as_posix() for p in found)


def rerender(project: Path, out: Path, stage: str) -> bool:
    declared = get_stage(stage)
    spec = declared.spec(_params(project))
    args = [sys.executable, "-m", "campaign", declared.command, "--spec", json.dumps(spec)]
    args += ["--state-dir", str(out / "state")]
    for name, ref in declared.inputs.items():
        paths = input_paths(project, ref)
        args += ["--in", f"{name}={paths[0] if paths else ''}", *paths[1:]]
    for name, output in declared.outputs.items():
        (out / stage / output.path).parent.mkdir(parents=True, exist_ok=True)
        args += ["--out", f"{name}={out / stage / output.path}"]
    proc = subprocess.run(args, cwd=project, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"{stage}: failed\n{proc.stderr}")
        return False
    same = True
    for output in declared.outputs.values():
        old, new = project / output.path, out / stage / output.path
        equal = old.is_file() and old.read_bytes() == new.read_bytes()
        print(f"{output.path}: {'identical' if equal else 'DIFFERENT'}")
        same &= equal
    return same


def _params(project: Path) -> dict:
    from campaign.core.params import load_params

    return load_params(project / "params.yaml")


def main(argv: list[str]) -> int:
    project, out = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    same = all([rerender(project, out, stage) for stage in STAGES])
    print("all identical" if same else "DIFFERENCES")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
