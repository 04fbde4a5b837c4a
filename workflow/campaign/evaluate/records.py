"""decisions.json as typed records: the one module that builds it and the one that reads it.

What the evaluation decides crosses into the budget, the report, the index, tracking and the
findings as these records, never as a dict read key by key: a reader that asks for a field the
evaluation does not write fails here, at one place, instead of quietly reading None. The keys
of decisions.json are the records' field names (campaign.evaluate.decide's docstring lists
them), so files written before these records read back unchanged.

Policy (which cell is kept, when the floor is kept instead, which questions are open) is
decide.py's; wording is words.py's; this module gathers the comparison rows into records,
asks decide for each choice and words for each sentence, and writes and reads the file.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.fsutil import atomic_write_text
from campaign.core.io import read_json
from campaign.evaluate import decide


@dataclass(frozen=True)
class Level:
    """A level with its interval (`interval_over`: what the interval resamples, when known)."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    interval_over: str | None = None


@dataclass(frozen=True)
class Decision:
    """One main effect or quantized variant on the decision split (decide's docstring: the
    meaning of each field); `words`: its line in summary.txt."""

    kind: str
    subject: str
    decision: str
    reference: str | None = None
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_holm: float | None = None
    n_seeds: int | None = None
    adj_low: float | None = None
    adj_high: float | None = None
    dominant: str | None = None
    seeds_needed: int | None = None
    items_needed: int | None = None
    seeds_needed_low: int | None = None
    seeds_needed_high: int | None = None
    items_note: str | None = None
    seeds_note: str | None = None
    stopped_by_look: str | None = None
    intervals_disagree: bool | None = None
    interval_note: str | None = None
    words: str | None = None
    cell_id: str | None = None
    # quantized variants: the tail guard (comparison.collapse_guard)
    n_items: int | None = None
    collapsed: int | None = None
    collapse_low: float | None = None
    collapse_high: float | None = None
    collapse_items: int | None = None

    @property
    def open(self) -> bool:
        """Left undecided on the decision split (a question with a price)."""
        return self.decision in decide.OPEN


@dataclass(frozen=True)
class KeptCell:
    """The trained cell the verdict keeps (decide.kept_cell) and why (`kept_as`): its level on
    the split it was chosen on (`value`, ...), on each split (`by_split`), and on the other
    (`reported`: the headline, free of the choice's winner's curse)."""

    cell: str
    kept_as: str | None = None
    cell_id: str | None = None
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    interval_over: str | None = None
    chosen_on: str | None = None
    reported_on: str | None = None
    reported: Level = field(default_factory=Level)
    by_split: dict[str, Level] = field(default_factory=dict)
    representative_run: str | None = None
    runs: tuple[str, ...] = ()
    # the cells `reported`'s interval holds for at once (Bonferroni over the cells the keep
    # chose among); None: the cell's own interval (one cell)
    reported_cells: int | None = None


@dataclass(frozen=True)
class FloorLevel:
    """The best floor's level on the decision split."""

    name: str
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class FloorComparison:
    """The kept cell against the best floor on the decision split, and (while it is not shown
    above the floor) what would decide it."""

    floor: str
    decision: str
    cell: str | None = None
    split: str | None = None
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n_seeds: int | None = None
    dominant: str | None = None
    seeds_needed: int | None = None
    items_needed: int | None = None
    items_note: str | None = None
    seeds_note: str | None = None


@dataclass(frozen=True)
class FloorFlag:
    """A cell not shown above the floor (below_floor: a finding to act on)."""

    cell: str
    floor: str
    verdict: str
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    cell_id: str | None = None


@dataclass(frozen=True)
class Unprovable:
    """A quantized variant whose items cannot show max_quality_loss, and the items that could."""

    subject: str
    smallest_provable_loss: float | None = None
    items_needed: int | None = None


@dataclass(frozen=True)
class OpenQuestion:
    """A question the verdict leaves open and what would close it. The evaluation gives the
    seeds or items; the budget fills `extra_runs` and `cost` (priced)."""

    subject: str
    kind: str
    decision: str
    n_seeds: int | None = None
    seeds_needed: int | None = None
    seeds_needed_low: int | None = None
    seeds_needed_high: int | None = None
    dominant: str | None = None
    stopped: str | None = None
    items_needed: int | None = None
    items_note: str | None = None
    seeds_note: str | None = None
    extra_runs: int | None = None
    cost: float | None = None

    def priced(self, seeds_needed, extra_runs, cost, items_needed) -> OpenQuestion:
        """This question with the budget's price of its seeds."""
        return replace(
            self,
            seeds_needed=seeds_needed,
            extra_runs=extra_runs,
            cost=cost,
            items_needed=items_needed or self.items_needed,
        )


@dataclass(frozen=True)
class Quality:
    """The kept option's level on the split it was not chosen on."""

    split: str | None = None
    metric: str | None = None
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class Verdict:
    """The option to keep: `kind` "cell" (the kept cell) or "floor" (the kept cell is below the
    best floor by the test, or not shown above it); `line`/`lines`: its words; `open`: the
    questions left open, the one that decides what to keep first."""

    keep: str | None = None
    kind: str | None = None
    line: str = ""
    lines: tuple[str, ...] = ()
    quality: Quality | None = None
    against_floor: FloorComparison | None = None
    open: tuple[OpenQuestion, ...] = ()


@dataclass(frozen=True)
class Skipped:
    variant: str
    reason: str | None = None


@dataclass(frozen=True)
class Decisions:
    """decisions.json (decide's docstring: every key)."""

    decide_on: str
    metric: str
    confidence: float | None = None
    min_useful_effect: float | None = None
    max_quality_loss: float | None = None
    note: str | None = None
    best_cell: KeptCell | None = None
    floor: FloorLevel | None = None
    verdict: Verdict | None = None
    decisions: tuple[Decision, ...] = ()
    no_decision_possible: tuple[Unprovable, ...] = ()
    below_floor: tuple[FloorFlag, ...] = ()
    lines: tuple[str, ...] = ()
    skipped_variants: tuple[Skipped, ...] = ()
    adaptive_looks: tuple[str, ...] | None = None
    adaptive: dict | None = None  # look_words.look_summary's numbers, as the looks give them

    def of_kind(self, kind: str) -> list[Decision]:
        return [d for d in self.decisions if d.kind == kind]

    @property
    def open_questions(self) -> tuple[OpenQuestion, ...]:
        if self.verdict is not None:
            return self.verdict.open
        # An evaluation written before the verdict: its open main effects and variants.
        return _open_questions(list(self.decisions), None, self.no_decision_possible)

    @property
    def floor_question(self) -> OpenQuestion | None:
        """The open question that decides what to keep: the kept cell not shown above the
        floor (the verdict then keeps the floor); None otherwise."""
        return next((q for q in self.open_questions if q.kind == "floor"), None)

    def adopted_variants(self) -> list[str]:
        """Quantized variants of the kept cell's runs that the evaluation adopted."""
        return [d.subject for d in self._adopted()]

    def _adopted(self) -> list[Decision]:
        runs = set(self.best_cell.runs) if self.best_cell is not None else set()
        return [
            d
            for d in self.of_kind("quantized")
            if d.reference in runs and d.decision == decide.ADOPT
        ]

    def adopted_with_guard(self) -> list[str]:
        """The adopted variants, each with its tail guard in words (words.collapse_words)."""
        from campaign.evaluate import words

        return [
            d.subject if d.collapsed is None else f"{d.subject} ({words.collapse_words(d)})"
            for d in self._adopted()
        ]


# ------------------------------------------------------------------------- the verdict block
# The values the verdict block (words.verdict_block) is worded from. The evaluation gathers them
# from its decisions (evaluation_verdict, below) and the budget adds its costs and prices
# (budget/words.verdict_values): two phases fill one record, so a field either leaves out or
# misspells fails where it is made, not as a None in the middle of the block.


@dataclass(frozen=True)
class KeepOption:
    """What the block names first: a cell, one of its runs, a quantized variant of a run (`name`
    "run/variant") or a floor (`kind`), with its quality and interval on VerdictBlock.split."""

    kind: str
    name: str
    cell: str | None = None
    quality: float | None = None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Cost:
    """The kept option's cost (money amounts): to train, to serve `predictions` at `offer`."""

    train: float
    serve: float
    total: float
    predictions: int
    offer: str


@dataclass(frozen=True)
class VerdictBlock:
    """The verdict block's values: where the option was chosen (`decided_on`) and where its
    quality is measured (`split`, `metric`); `keep` (None: nothing was scored); the kept cell
    against the floor; an adaptive campaign's looks (look_words.look_summary) or None; `also`:
    cheaper adopted candidates not priced here; `cost` or where the costs are (`costs_at`);
    `ship`: the file a user would ship; the open questions (priced by the budget, or
    `price_at` says where their prices are); `findings`: lines to act on."""

    decided_on: str
    split: str
    metric: str
    keep: KeepOption | None = None
    against_floor: FloorComparison | None = None
    looks: dict | None = None
    also: tuple[str, ...] = ()
    cost: Cost | None = None
    costs_at: str | None = None
    ship: str | None = None
    open: tuple[OpenQuestion, ...] = ()
    price_at: str | None = None
    findings: tuple[str, ...] = ()


# ------------------------------------------------------------------------------ reading
# Nested records: {record type: {field: the record type of its value, or (list, type)}}.
_NESTED: dict[type, dict[str, object]] = {
    Decisions: {
        "best_cell": KeptCell,
        "floor": FloorLevel,
        "verdict": Verdict,
        "decisions": (list, Decision),
        "no_decision_possible": (list, Unprovable),
        "below_floor": (list, FloorFlag),
        "lines": (list, None),
        "skipped_variants": (list, Skipped),
        "adaptive_looks": (list, None),
    },
    KeptCell: {"reported": Level, "by_split": (dict, Level), "runs": (list, None)},
    Verdict: {
        "quality": Quality,
        "against_floor": FloorComparison,
        "lines": (list, None),
        "open": (list, OpenQuestion),
    },
}


def _record(cls: type, data, where: str):
    if data is None:
        return None
    if not isinstance(data, dict):
        raise CampaignError(f"{where}: expected an object")
    nested = _NESTED.get(cls, {})
    values = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value, how = data[f.name], nested.get(f.name)
        at = f"{where}.{f.name}"
        if isinstance(how, type):
            value = _record(how, value, at)
        elif isinstance(how, tuple) and value is not None:
            container, inner = how
            if container is dict:
                value = {k: _record(inner, v, f"{at}.{k}") for k, v in value.items()}
            else:
                if not isinstance(value, list):
                    raise CampaignError(f"{at}: expected a list")
                value = tuple(
                    v if inner is None else _record(inner, v, f"{at}[{i}]")
                    for i, v in enumerate(value)
                )
        values[f.name] = value
    missing = [
        f.name
        for f in fields(cls)
        if f.name not in values and f.default is MISSING and f.default_factory is MISSING
    ]
    if missing:
        raise CampaignError(f"{where}: expected a key '{missing[0]}'")
    return cls(**values)


def decisions_from_dict(data: dict, where: str = "decisions.json") -> Decisions:
    """The records of a decisions.json object (`where` names it in an error). Keys the records
    do not know are ignored; a missing optional key reads as its default (files written before
    a key was added)."""
    d = _record(Decisions, data, where)
    if d.verdict is not None and "open" not in data["verdict"]:
        # Written before the verdict listed its open questions: the same rule, from the file.
        found = _open_questions(list(d.decisions), d.verdict.against_floor, d.no_decision_possible)
        d = replace(d, verdict=replace(d.verdict, open=found))
    return d


def read_decisions(path: str | Path) -> Decisions:
    """decisions.json's records; a malformed file is one error naming the file and the key."""
    return decisions_from_dict(read_json(path, ("decide_on", "metric")), str(path))


# ------------------------------------------------------------------------------ writing
def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):  # a numpy scalar
        return _clean(value.item())
    return value


def record_dict(record) -> dict:
    """The JSON object of a record (decisions.json's for Decisions; non-finite numbers as
    null)."""
    return _clean(asdict(record))


def to_text(d: Decisions) -> str:
    return json.dumps(record_dict(d), indent=2, sort_keys=True) + "\n"


def write_decisions(path: str | Path, d: Decisions) -> None:
    atomic_write_text(Path(path), to_text(d))


# ----------------------------------------------------------------------------- building
def build(
    spec: dict,
    comparison_rows: list[dict],
    metric_rows: list[dict],
    best_floor: str | None,
    control: str | None = None,
    skipped: dict | None = None,
    looks: list[dict] = (),
) -> Decisions:
    """decisions.json's records from the decided comparison rows (questions.public rows, both
    splits) and metrics.parquet's rows. control: the control cell's name (kept unless a cell is
    shown better: decide.kept_cell); skipped: {variant: reason} of quantized variants not
    scored; looks: an adaptive campaign's look records (their lines and numbers)."""
    from campaign.evaluate import words
    from campaign.evaluate.look_words import look_lines, look_summary

    s = spec["evaluation"]
    split, metric = s["decide_on"], s["metric"]
    other = next(x for x in ("validation", "test") if x != split)
    on = [r for r in comparison_rows if r["split"] == split]
    kept = _kept_cell(metric_rows, on, split, metric, other, control)
    floor_of = {
        r["split"]: r for r in metric_rows if r["variant"] == best_floor and r["metric"] == metric
    }
    listed = [_decision(r, words.decision_line(r, split, metric, s)) for r in on
              if r["kind"] in ("main", "quantized")]  # fmt: skip
    vs_floor = [r for r in on if r["kind"] == "floor"]
    flagged = [r for r in vs_floor if r["decision"] != decide.ABOVE]
    unprovable = tuple(
        Unprovable(r["subject"], r["smallest_provable_loss"], r["items_to_prove"])
        for r in on
        if r["kind"] == "quantized" and r["decision"] == decide.TOO_FEW_ITEMS
    )
    verdict = _verdict(kept, vs_floor, floor_of, best_floor, split, other, metric)
    verdict = replace(verdict, open=_open_questions(listed, verdict.against_floor, unprovable))
    note = words.decide_note(split, other, metric)
    return Decisions(
        decide_on=split,
        metric=metric,
        confidence=s["confidence"],
        min_useful_effect=s["min_useful_effect"],
        max_quality_loss=s["max_quality_loss"],
        note=note,
        best_cell=kept,
        floor=None if best_floor is None else FloorLevel(best_floor, *_levels(floor_of[split])),
        verdict=verdict,
        decisions=tuple(listed),
        no_decision_possible=unprovable,
        below_floor=tuple(
            FloorFlag(
                r["subject"],
                r["reference"],
                r["decision"],
                r["estimate"],
                r["ci_low"],
                r["ci_high"],
                r.get("cell_id"),
            )  # fmt: skip
            for r in flagged
        ),
        lines=(
            *verdict.lines,
            "",
            note,
            *(d.words for d in listed),
            *(words.floor_line(r) for r in flagged),
        ),  # fmt: skip
        skipped_variants=tuple(Skipped(n, why) for n, why in sorted((skipped or {}).items())),
        adaptive_looks=tuple(look_lines(looks)) if looks else None,
        adaptive=look_summary(looks) if looks else None,
    )


def _levels(row: dict) -> tuple:
    return row["value"], row["ci_low"], row["ci_high"]


def _decision(row: dict, words: str) -> Decision:
    """A comparison row's decision record: the fields decisions.json keeps of it."""
    keep = {f.name for f in fields(Decision)} - {"words"}
    if row["kind"] != "quantized":  # the tail guard is a quantized variant's
        keep -= {"n_items", "collapsed", "collapse_low", "collapse_high", "collapse_items"}
    return Decision(**{k: row.get(k) for k in keep}, words=words)


def _kept_cell(metric_rows, on, split, metric, other, control) -> KeptCell | None:
    """The kept cell (decide.kept_cell's policy on the cells against the control) with its
    levels on both splits and its representative run (decide.representative)."""
    cells = {r["cell"]: r for r in metric_rows if r["kind"] == "cell" and r["split"] == split}
    names = {r["cell_id"]: name for name, r in cells.items()}
    against = {
        names[r["cell_id"]]: (r["decision"], r["estimate"])
        for r in on
        if r["kind"] == "cell" and r.get("cell_id") in names
    }
    kept = decide.kept_cell(control, against, {c: r["value"] for c, r in cells.items()})
    if kept is None:
        return None
    (name, how), row = kept, cells[kept[0]]
    by_split = {
        r["split"]: Level(*_levels(r), r["interval_over"])
        for r in metric_rows
        if r["kind"] == "cell" and r["cell"] == name
    }
    run_values = {
        r["variant"]: r["value"]
        for r in metric_rows
        if r["kind"] == "run" and r["split"] == split and r["metric"] == metric
        and r["cell"] == name
    }  # fmt: skip
    reported = by_split.get(other, Level())
    reported = Level(reported.value, reported.ci_low, reported.ci_high)
    if len(cells) > 1:  # the keep chose among the cells (the control too, off the data)
        reported = _selected(reported, metric_rows, name, other, len(cells))
    return KeptCell(
        cell=name,
        kept_as=how,
        cell_id=row.get("cell_id"),
        value=row["value"],
        ci_low=row["ci_low"],
        ci_high=row["ci_high"],
        interval_over=row["interval_over"],
        chosen_on=split,
        reported_on=other,
        reported=reported,
        reported_cells=len(cells) if reported.interval_over else None,
        by_split=by_split,
        representative_run=decide.representative(run_values) if run_values else None,
        runs=tuple(sorted(run_values)),
    )


def _selected(level: Level, metric_rows, name: str, other: str, cells: int) -> Level:
    """The kept cell's headline when the keep chose among `cells`: its interval on `other` for
    every cell at once (Bonferroni; the cell rows' sel_low, sel_high). The other split re-scores
    the same runs, so the seed luck that made a cell the largest carries over (its own interval
    missed from below in 6-8 % of campaigns, bench_stats); an interval that holds for every cell
    holds for whichever the data picked. Without those ends: `level` as it is."""
    row = next(
        (r for r in metric_rows if r["kind"] == "cell" and r["cell"] == name
         and r["split"] == other and r.get("sel_low") is not None),
        None,
    )  # fmt: skip
    if row is None or level.value is None:
        return level
    return Level(level.value, row["sel_low"], row["sel_high"], f"{SELECTED_OVER}: {cells} cells")


# How the headline of a cell kept for its value is labelled (_selected).
SELECTED_OVER = "every cell at once (Bonferroni over the cells the keep chose among)"


def _verdict(kept, vs_floor, floor_of, best_floor, split, other, metric) -> Verdict:
    """The option to keep (decide.keeps_floor: the floor when the kept cell is below it or not
    shown above it), its quality on `other`, the kept cell against the floor; its words from
    words.verdict_lines."""
    from campaign.evaluate import words

    def quality(row: dict | None) -> Quality:
        return Quality(other, metric, *(_levels(row) if row else (None, None, None)))

    floor_other = floor_of.get(other)
    if kept is None:
        lines = words.verdict_lines(None, None, best_floor, floor_other, split, other, metric)
        return Verdict(
            keep=best_floor,
            kind="floor" if best_floor else None,
            line=lines[0],
            lines=tuple(lines),
            quality=quality(floor_other) if best_floor else None,
        )
    mine = next((r for r in vs_floor if r["subject"] == kept.cell), None)
    against = None
    if mine is not None:
        against = FloorComparison(
            floor=best_floor, decision=mine["decision"], cell=kept.cell, split=split,
            estimate=mine.get("estimate"), ci_low=mine.get("ci_low"),
            ci_high=mine.get("ci_high"), n_seeds=mine.get("n_seeds"),
            dominant=mine.get("dominant"), seeds_needed=mine.get("seeds_needed"),
            items_needed=mine.get("items_needed"), items_note=mine.get("items_note"),
            seeds_note=mine.get("seeds_note"),
        )  # fmt: skip
    floor = against is not None and decide.keeps_floor(against.decision)
    lines = words.verdict_lines(kept, against, best_floor, floor_other, split, other, metric)
    return Verdict(
        keep=best_floor if floor else kept.cell,
        kind="floor" if floor else "cell",
        line=lines[0],
        lines=tuple(lines),
        quality=quality(floor_other if floor else asdict(kept.reported)),
        against_floor=against,
    )


def _open_questions(
    listed: list[Decision], against: FloorComparison | None, unprovable: tuple[Unprovable, ...]
) -> tuple[OpenQuestion, ...]:
    """The questions the verdict leaves open, with what would decide each: first the kept cell
    not shown above the floor (it decides what to keep: more seeds of that cell), then each main
    effect and quantized variant not decided (decide.OPEN). A main effect a look stopped a cell
    of is not priced in seeds (no look adds any); a quantized variant's seeds do not apply."""
    out = []
    if against is not None and against.decision == decide.NOT_SHOWN:
        out.append(
            OpenQuestion(
                subject=f"{against.cell} against {against.floor}", kind="floor",
                decision=against.decision, n_seeds=against.n_seeds,
                seeds_needed=against.seeds_needed, dominant=against.dominant,
                items_needed=against.items_needed, items_note=against.items_note,
                seeds_note=against.seeds_note,
            )
        )  # fmt: skip
    items = {u.subject: u.items_needed for u in unprovable}
    for d in listed:
        if d.kind not in ("main", "quantized") or not d.open:
            continue
        priced = d.kind == "main" and not d.stopped_by_look
        out.append(
            OpenQuestion(
                subject=d.subject, kind=d.kind, decision=d.decision, n_seeds=d.n_seeds,
                seeds_needed=d.seeds_needed if priced else None,
                seeds_needed_low=d.seeds_needed_low if priced else None,
                seeds_needed_high=d.seeds_needed_high if priced else None,
                dominant=d.dominant, stopped=d.stopped_by_look,
                items_needed=items.get(d.subject, d.items_needed), items_note=d.items_note,
                seeds_note=d.seeds_note if priced else None,
            )
        )  # fmt: skip
    return tuple(out)


def evaluation_verdict(
    decisions, findings: list[str], costs_at: str, price_at: str | None = None
) -> VerdictBlock:
    """The verdict block's values as the evaluation knows them (`decisions`: Decisions):
    the option to keep among the
    cells and the floor, no costs (the budget runs later: `costs_at` and `price_at` say where
    the costs and the open questions' prices are)."""
    verdict = decisions.verdict
    quality = verdict.quality if verdict is not None else None
    keep = None
    if verdict is not None and verdict.keep is not None:
        keep = KeepOption(
            kind=verdict.kind,
            name=verdict.keep,
            cell=verdict.keep,
            quality=quality.value if quality else None,
            low=quality.ci_low if quality else None,
            high=quality.ci_high if quality else None,
        )
    cell = verdict is not None and verdict.kind == "cell"
    return VerdictBlock(
        decided_on=decisions.decide_on,
        split=(quality.split if quality else None) or decisions.decide_on,
        metric=decisions.metric,
        keep=keep,
        against_floor=verdict.against_floor if verdict is not None else None,
        looks=decisions.adaptive,
        also=tuple(decisions.adopted_with_guard()) if cell else (),
        costs_at=costs_at,
        open=tuple(decisions.open_questions),
        price_at=price_at,
        findings=tuple(findings),
    )
