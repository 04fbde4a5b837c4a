"""Which runs a campaign has: the plan table's kept runs, or, in an adaptive campaign, the runs
its latest look lists (results/adaptive/look_<j>.json `runs`: the kept runs and those the looks
appended). The one reader the budget, the index and `campaign status` ask; the look records are
campaign.evaluate.looks' (`runs`, `appended`, `final` keep their meaning there).

An adaptive campaign's plan table lists every run a look may append (tier "adaptive", kept
false); those no look has asked for are `not_asked`: not the campaign's, and not the rest of it.
Before the last look (`final` false) a later look may still append some of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.io import read_json, read_plan

ADAPTIVE_TIER = "adaptive"
LOOK_KEYS = ("look", "final", "runs", "appended")


@dataclass(frozen=True)
class CampaignRuns:
    """runs: the campaign's runs in order (the plan's kept ones, then the appended ones in the
    order the looks asked for them); appended: {run: the look that appended it}; not_asked:
    the adaptive candidates no look asked for, in plan order; looks: the looks taken; final:
    whether `runs` is the campaign's last word (a fixed campaign, or the last look taken)."""

    runs: tuple[str, ...]
    appended: dict[str, int] = field(default_factory=dict)
    not_asked: tuple[str, ...] = ()
    looks: int = 0
    final: bool = True
    adaptive: bool = False
    max_looks: int | None = None

    def state(self) -> str:
        """The campaign's place in words: '' for a fixed campaign."""
        if not self.adaptive:
            return ""
        of = f" of at most {self.max_looks}" if self.max_looks else ""
        if self.final:
            return f"adaptive: the last look ({self.looks}{of}) is taken"
        if self.looks == 0:
            return "adaptive: before the first look (the plan's kept runs so far)"
        return (
            f"adaptive: between looks ({self.looks}{of} taken); a later look may append up to "
            f"{len(self.not_asked)} more run(s)"
        )


def look_files(folder: str | Path) -> list[Path]:
    """The look records in `folder` (results/adaptive), in look order; [] when none."""
    found = Path(folder).glob("look_*.json")
    numbered = []
    for p in found:
        number = p.stem.partition("_")[2]
        if number.isdigit():
            numbered.append((int(number), p))
    return [p for _, p in sorted(numbered)]


def campaign_runs(plan_path: str | Path, look_paths: Iterable[str | Path] = ()) -> CampaignRuns:
    """The campaign's runs from the plan table and the look records given (every look so far,
    in any order). A look numbered out of sequence, a look after the final one, or a run no row
    of the plan table has is one error naming the file."""
    table = read_plan(plan_path, ("run", "tier"))
    kept = table.kept()
    candidates = [r["run"] for r in table.rows if r["tier"] == ADAPTIVE_TIER]
    planned = {r["run"] for r in table.rows}
    records = sorted(
        ((read_json(p, LOOK_KEYS), Path(p)) for p in look_paths), key=lambda x: x[0]["look"]
    )
    if not records and not candidates:
        return CampaignRuns(tuple(kept))
    runs, appended, final = list(kept), {}, False
    for j, (rec, path) in enumerate(records, start=1):
        if rec["look"] != j:
            raise CampaignError(f"{path}: look {rec['look']} given without look {j}")
        if final:
            raise CampaignError(f"{path}: look {j} follows the final look {j - 1}")
        unknown = [r for r in rec["runs"] if r not in planned]
        if unknown:
            raise CampaignError(f"{path}: run {unknown[0]} is not in the plan table {plan_path}")
        missing = [r for r in runs if r not in rec["runs"]]
        if missing:
            raise CampaignError(f"{path}: run {missing[0]} of the look before is not listed")
        runs = list(rec["runs"])
        appended |= dict.fromkeys((r for r in rec["appended"] if r not in appended), j)
        final = bool(rec["final"])
    asked = set(runs)
    return CampaignRuns(
        tuple(runs),
        appended,
        tuple(r for r in candidates if r not in asked),
        len(records),
        final,
        adaptive=True,
        max_looks=records[-1][0].get("max_looks") if records else None,
    )
