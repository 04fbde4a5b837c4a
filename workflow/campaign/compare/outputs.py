"""What `campaign compare` writes into --out: summary.txt (the verdict block first, as the
evaluate stage writes it), decisions.json (the typed records of each scope), comparisons,
metrics and changed items as Parquet, advice.csv (what would decide each open question), and
report.md / report.html (the report phase's renderers and escaping).

Everything is written into a temporary folder beside --out and renamed into place at the end:
a refusal or a crash leaves no partial output, and a previous compare's folder stays whole
until the new one replaces it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from campaign.compare.report import advice_rows, summary_lines, write_report
from campaign.core.errors import CampaignError
from campaign.evaluate import decisions_from_dict, record_dict

MARK = "compare"  # decisions.json's key that marks a folder compare wrote (safe to replace)


def summary_text(scopes, primary: str | None, assumed: list[str]) -> str:
    """summary.txt: the primary scope's verdict first (the pooled one, or the only task), the
    assumptions, then every other scope (each task; Holm ran across the tasks' questions)."""
    first = [s for s in scopes if s.name == primary]
    rest = sorted((s for s in scopes if s.name != primary), key=lambda s: s.name)
    out = []
    for s in first:
        out += [*summary_lines(s), ""]
    if not first:
        out += [
            f"No single verdict: {len(rest)} tasks and no pooled decision (--pool items names "
            "its weighting); each task's verdict follows",
            "",
        ]
    if assumed:
        out += ["Assumed:", *(f"  {a}" for a in assumed), ""]
    for s in rest:
        out += [f"== task {s.name} (Holm across the {len(rest)} tasks) ==", *summary_lines(s), ""]
    return "\n".join(out).rstrip() + "\n"


def decisions_dict(scopes, meta: dict) -> dict:
    return {MARK: meta, "scopes": {s.name: record_dict(s.decisions) for s in scopes}}


def read_compare(path: Path) -> tuple[dict, dict]:
    """decisions.json of a compare: (its description, {scope: Decisions}) (the records' reader)."""
    data = json.loads(Path(path).read_text())
    if MARK not in data or "scopes" not in data:
        raise CampaignError(
            f"{path}: not a compare's decisions.json (expected keys compare, scopes)"
        )
    scopes = {k: decisions_from_dict(v, f"{path}: scopes.{k}") for k, v in data["scopes"].items()}
    return data[MARK], scopes


def write_all(out: Path, scopes, primary, assumed: list[str], meta: dict) -> None:
    """Every output into `out`, atomically (a temporary folder renamed into place)."""
    import pandas as pd

    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not _ours(out))):
        raise CampaignError(
            f"{out}: exists and is not a folder compare wrote; choose a new --out folder"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "summary.txt").write_text(summary_text(scopes, primary, assumed))
        (tmp / "decisions.json").write_text(
            json.dumps(decisions_dict(scopes, meta), indent=2, sort_keys=True) + "\n"
        )
        for name, key in (("comparisons", "comparisons"), ("metrics", "metrics"),
                          ("changes", "changes")):  # fmt: skip
            frame = pd.DataFrame([{"scope": s.name, **r} for s in scopes for r in getattr(s, key)])
            frame.to_parquet(tmp / f"{name}.parquet", index=False)
        pd.DataFrame(advice_rows(scopes)).to_csv(tmp / "advice.csv", index=False)
        write_report(tmp, scopes, primary, assumed, meta)
        _swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _ours(out: Path) -> bool:
    try:
        return MARK in json.loads((out / "decisions.json").read_text())
    except (OSError, ValueError):
        return False


def _swap(tmp: Path, out: Path) -> None:
    """Rename the finished folder into place; an older compare's folder goes only after."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
    tmp.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
