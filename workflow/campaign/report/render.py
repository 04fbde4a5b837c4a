"""What every section's renderer is handed: the report stage's inputs by name (ReportInputs),
each file read once. The renderers live with their phase (`<phase>/section.py`, named by the
phase's ReportSection); the report's own, the verdict, is here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.io import read_json, read_table, resolve
from campaign.core.stage import Findings, Section
from campaign.report import sections as s

METRICS_COLUMNS = ("variant", "kind", "cell", "seed", "split", "metric", "value", "ci_low",
                   "ci_high")  # fmt: skip


class ReportInputs:
    """The report stage's inputs by name ({name: [paths]}), each file read once, and the
    phases' findings to word from them."""

    def __init__(self, inputs: Mapping[str, Sequence[Path]], findings: Sequence[Findings] = ()):
        self.inputs = inputs
        self.findings_declared = tuple(findings)
        self._read: dict = {}

    def paths(self, name: str) -> list[Path]:
        return [Path(p) for p in self.inputs.get(name) or []]

    def one(self, name: str) -> Path:
        paths = self.paths(name)
        if len(paths) != 1:
            raise CampaignError(f"report: expected one '{name}' input, got {len(paths)}")
        return paths[0]

    def optional(self, name: str) -> Path | None:
        """The one file of an input the report can do without (none given: None)."""
        return self.one(name) if self.paths(name) else None

    def json(self, name: str, keys: tuple[str, ...] = ()) -> dict:
        if ("json", name) not in self._read:
            self._read["json", name] = read_json(self.one(name))
        data = self._read["json", name]
        for key in keys:
            if key not in data:
                raise CampaignError(f"{self.one(name)}: expected a key '{key}'")
        return data

    def table(self, name: str, columns: tuple[str, ...]):
        if ("table", name) not in self._read:
            self._read["table", name] = read_table(self.one(name), columns)
        frame = self._read["table", name]
        for column in columns:
            if column not in frame.columns:
                raise CampaignError(f"{self.one(name)}: expected a column '{column}'")
        return frame

    def findings(self) -> list[str]:
        """Every phase's findings, worded as `campaign findings` words them, from the files
        the report was given (a findings whose first file it lacks says nothing)."""
        lines = []
        for declared in self.findings_declared:
            names = list(declared.reads)
            if not self.paths(names[0]):
                continue
            reports = [self.json(n) if self.paths(n) else None for n in names]
            lines += resolve(declared.describe)(*reports)
        return lines

    def decisions(self):
        """The evaluation's decisions as records (campaign.evaluate.records, their one reader)."""
        from campaign.evaluate import read_decisions

        return read_decisions(self.one("decisions"))

    def metrics(self):
        return self.table("eval_metrics", METRICS_COLUMNS)


def render_verdict(inputs: ReportInputs) -> Section:
    return s.verdict_section(inputs.one("budget_summary"), inputs.decisions(), inputs.findings())
