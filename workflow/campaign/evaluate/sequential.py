"""Group-sequential looks of an adaptive campaign: alpha-spending boundaries, repeated confidence
intervals, and the interim look that says which questions are still open, how many seeds to add
and which cells stop. Pure functions; the estimates are the evaluate phase's own (crossed seed x
item model, campaign.evaluate.questions.contrast_row) and the decisions its policy's
(campaign.evaluate.decide.effect, what_would_decide), read at the look's boundary instead of the
fixed design's quantile.

Boundaries. A contrast's estimate at look j has variance V_j; seeds are only ever added and the
items are the same at every look, so Cov(est_i, est_j) = V_j for i < j (the item part is shared,
the seed mean at look j contains look i's seeds): the canonical joint distribution of group-
sequential theory with information I_j = 1 / V_j, corr(Z_i, Z_j) = sqrt(I_i / I_j). V_j follows
the seeds x items model, V(s) = (seed part + seed x item residual) * s + items' part, with
s = sum_c w_c^2 / k_c: the residual shrinks with the seeds too (taking it as fixed put look 1 of
2 -> 4 -> 8 seeds at information 0.43 of the last instead of 0.36, tests/evaluate/
test_sequential.py). Each look records the boundary it used; the next keeps the earlier ones
as recorded and solves its own conditional on them (the earlier looks' variance parts were
estimated on fewer seeds: recomputing their boundaries would re-decide them). Alpha is
spent by the Lan-DeMets O'Brien-Fleming-type function, alpha / 2 on each side (the convention
of DeMets and Lan 1994 and gsDesign's two-sided designs: 4.877, 3.357, 2.680, 2.290, 2.031 at
five equal looks, alpha 0.05)

    alpha(t) = 2 * (2 - 2 Phi(z_{1 - alpha / 4} / sqrt(t))),   t = look / max_looks

so the spending follows the planned maximum number of looks, whatever the seeds added. The
critical value c_j solves P(|Z_i| < c_i for i < j, |Z_j| >= c_j) = alpha(t_j) - alpha(t_{j-1})
under H0, computed by recursive numerical integration of the sub-density of the Brownian score
process on a grid (Armitage, McPherson and Rowe 1969; Jennison and Turnbull 2000, ch. 19):
deterministic, no table. The look with t = 1 (the last planned look) spends what is left; a
campaign that stops before it keeps the intervals of the look it stopped at (conservative).

Repeated confidence intervals (Jennison and Turnbull 1989): est_j +/- c_j * se_j hold the true
contrast at every look at once with probability >= 1 - alpha, so a decision read off them at any
look, however the looks were chosen to stop or add seeds, keeps its error rate; the campaign's
final intervals are the RCIs of its last look. With a seed level measured on few runs the z
boundary is carried to a t quantile at the same tail probability (the "significance level"
approach) on the estimate's Satterthwaite df, at most the seed level's error df (interval_df:
the Satterthwaite df estimated on few seed df is largest where the seed part came out low).
Families are split by Bonferroni as in the fixed design (decide.adjusted_level): alpha / m per
contrast, m = the family's size.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats
from scipy.special import ndtr

from campaign.evaluate import decide, questions

# An open question is sized on the interim seed spread only once that rests on this many error
# df (chi-square relative sd sqrt(2 / df): 32 % at 20); before, its cells head for max_seeds.
# Sized on a spread from 2 df, the campaigns whose spread came out low got few seeds and kept
# the low spread in their last interval: 5.5 % adopted at a true gain of min_useful_effect
# against the one-sided 2.5 % (benchmarks/bench_adaptive.py); at 20 df, within Monte Carlo error.
SIZING_MIN_DF = 20
GRID_POINTS = 241  # odd, Simpson's rule over each look's continuation region (see the tests)
SQRT_2PI = math.sqrt(2 * math.pi)
# A question is closed when its repeated interval clears the useful size or rules it out;
# "adopt (smaller than useful)" still asks whether the gain is useful, so it stays open.
CLOSED = (decide.ADOPT, decide.REJECT)


def obf_spent(t: float, alpha: float) -> float:
    """Two-sided alpha spent by information time `t` in [0, 1]: O'Brien-Fleming-type spending
    of alpha / 2 on each side, 2 * (2 - 2 Phi(z_{1 - alpha / 4} / sqrt(t)))."""
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    return float(4 * stats.norm.sf(stats.norm.isf(alpha / 4) / math.sqrt(t)))


def _density_step(grid, density, dw, new_grid, sd):
    """The sub-density on `new_grid` of W + N(0, sd^2), W's sub-density `density` on `grid`."""
    u = (new_grid[:, None] - grid[None, :]) / sd
    return (np.exp(-0.5 * u * u) / (sd * SQRT_2PI)) @ (density * dw)


def _weights(n: int, width: float) -> np.ndarray:
    """Simpson weights of n (odd) equally spaced points over `width`."""
    h = width / (n - 1)
    w = np.full(n, 2.0)
    w[1::2] = 4.0
    w[[0, -1]] = 1.0
    return w * h / 3


def boundaries(
    fractions: Sequence[float],
    alpha: float,
    times: Sequence[float] | None = None,
    earlier: Sequence[float] | None = None,
) -> list[float]:
    """Two-sided z critical values c_1..c_J at looks whose information relative to the last
    given look is `fractions: (J,)` (increasing, the last 1). Alpha spent at look j:
    obf_spent(times[j]) - obf_spent(times[j - 1]); `times: (J,)` the looks' spending times
    (default j / J: every look planned); a look at time 1 spends what is left.

    earlier: (J - 1,) the boundaries the earlier looks used, as they recorded them (inf: that
    look could not cross): they are kept, and c_J alone is solved, conditional on them, for
    this look's share of alpha under the joint law that `fractions` (estimated now) gives. The
    earlier looks are then never re-decided on boundaries they did not use. Fractions are
    rounded to 0.001 (the boundary moves by less than 1e-3), so repeated looks reuse one
    computation."""
    fractions = [float(f) / float(fractions[-1]) for f in fractions]
    times = [(j + 1) / len(fractions) for j in range(len(fractions))] if times is None else times
    if len(times) != len(fractions):
        raise ValueError(f"{len(fractions)} information fractions, {len(times)} times")
    if any(b <= a for a, b in zip(fractions, fractions[1:], strict=False)):
        raise ValueError(f"information fractions must increase: {fractions}")
    if any(b <= a for a, b in zip(times, times[1:], strict=False)) or not 0 < times[-1] <= 1:
        raise ValueError(f"spending times must increase within (0, 1]: {list(times)}")
    rounded = [round(f, 3) for f in fractions]
    for j in range(len(rounded) - 2, -1, -1):  # rounding must not merge two looks
        rounded[j] = min(rounded[j], rounded[j + 1] - 0.001)
    if rounded[0] <= 0:
        rounded = fractions
    prior: tuple = ()
    if earlier is not None:
        if len(earlier) != len(fractions) - 1:
            raise ValueError(f"{len(earlier)} earlier boundaries for {len(fractions)} looks")
        prior = tuple(math.inf if c is None else round(float(c), 9) for c in earlier)
    key = (tuple(rounded), round(float(alpha), 12), tuple(round(float(t), 12) for t in times))
    return list(_boundaries(*key, prior))


def _excess(c, grid, mass, sd, sqrt_t, target) -> float:
    """P(exit at this look beyond +/- c, having continued so far) - target: `mass` the
    sub-density times the quadrature weights at the last look's `grid`, `sd` the increment's."""
    b = c * sqrt_t
    return float(np.sum(mass * (ndtr((grid - b) / sd) + ndtr((-b - grid) / sd)))) - target


@functools.lru_cache(maxsize=65536)
def _boundaries(info: tuple, alpha: float, times: tuple, prior: tuple = ()) -> tuple:
    out: list[float] = []
    spent = 0.0
    grid = density = dw = None
    for j, t in enumerate(info):
        target = obf_spent(times[j], alpha) - spent
        spent += target
        if j < len(prior):
            out.append(prior[j])
        elif j == 0:
            out.append(float(stats.norm.isf(target / 2)) if target > 0 else math.inf)
        else:
            args = (grid, density * dw, math.sqrt(t - info[j - 1]), math.sqrt(t), target)
            if target <= 0 or _excess(50.0, *args) >= 0:
                out.append(math.inf)
            else:
                out.append(float(optimize.brentq(_excess, 1e-6, 50.0, args=args, xtol=1e-10)))
        if j == len(info) - 1:
            break
        b = (out[-1] if math.isfinite(out[-1]) else 12.0) * math.sqrt(t)
        new_grid = np.linspace(-b, b, GRID_POINTS)
        new_dw = _weights(GRID_POINTS, 2 * b)
        if j == 0:
            density = np.exp(-0.5 * new_grid**2 / t) / math.sqrt(t) / SQRT_2PI
        else:
            density = _density_step(grid, density, dw, new_grid, math.sqrt(t - info[j - 1]))
        grid, dw = new_grid, new_dw
    return tuple(out)


def interval_df(row: Mapping) -> float:
    """The df a repeated interval reads its quantile on: the row's Satterthwaite df, at most the
    seed level's error df (`seed_df`) where that is measured. The Satterthwaite df of a positive
    sum of mean squares lies between its smallest component's df and their sum; estimated on the
    look's own parts it is largest exactly where the few-df seed part came out low, so the
    interval is then too narrow twice, and at an early look's boundary the quantile is far out
    (one-sided 1e-4 at the first of 3 looks: t 70 on 2 df, 3.8 on 300). The smallest
    component's df (as Welch's min(n1 - 1, n2 - 1)) is the conservative end: one cell at a true
    gain of exactly min_useful_effect, 3 looks, 2 -> 12 seeds, 3,000 items, was adopted 3.15 %
    (0.5 % at the first look, whose share is 0.01 %) and is 2.65 % (one-sided nominal 2.5 %,
    4,000 replications, benchmarks/bench_adaptive.py)."""
    df = float(row["df"])
    seed_df = row.get("seed_df", 0)
    return min(df, float(seed_df)) if seed_df and seed_df > 0 else df


def repeated_interval(row: Mapping, z: float, lo: float, hi: float) -> tuple[float, float]:
    """The repeated confidence interval of a contrast row (estimate, se, df, seed_df) at
    boundary z, on interval_df(row), clipped to the contrast's range [lo, hi]."""
    if not math.isfinite(z):
        return lo, hi
    tail = float(stats.norm.sf(z))
    df = interval_df(row)
    q = float(stats.norm.isf(tail) if not math.isfinite(df) else stats.t.isf(tail, df))
    return max(lo, row["estimate"] - q * row["se"]), min(hi, row["estimate"] + q * row["se"])


@dataclass(frozen=True)
class Question:
    """One contrast a look decides on. `weights: {cell: w}`; kind main | cell (decided against
    min_useful_effect) or interaction (reported, never given seeds)."""

    name: str
    kind: str
    weights: Mapping


@dataclass
class LookResult:
    """What a look found and what it asks for.

    rows: one dict per question: name, kind, estimate, se, df, boundary (z), of_look,
      boundaries ([[look, z], ...] every analysed look's, as used: the next look keeps them),
      alpha_spent (cumulative, of the question's family alpha), spending_time (look /
      max_looks), info_fraction (information now over that at max_seeds per cell), rci_low,
      rci_high, decision (decide.effect on the RCI), status (open | decided | stopped |
      over budget | items), seeds_target (per cell, or None), reason.
    stopped: {cell: reason}: cells that get no more seeds.
    stop_rows: one dict per stop contrast tested (a cell not yet stopped against the best cell,
      or against the floor): name ("<cell> - <best cell or floor>"), cell, against, estimate,
      boundary, of_look, boundaries, alpha_spent, spending_time, info_fraction (as in rows),
      rci_high, stops (whether it stopped the cell). The next look keeps its boundaries as
      the questions' are kept; a new best cell is a new contrast, solved afresh.
    seeds: {cell: total seeds after the look}; add_runs / add_hours: what that costs.
    open_cost_hours: {question: hours} of open questions that did not fit the budget or runs.
    """

    look: int
    final: bool
    rows: list[dict] = field(default_factory=list)
    stopped: dict = field(default_factory=dict)
    stop_rows: list = field(default_factory=list)
    seeds: dict = field(default_factory=dict)
    add_runs: int = 0
    add_hours: float = 0.0
    open_cost_hours: dict = field(default_factory=dict)


def analysed_looks(seed_history: Sequence[Mapping], weights: Mapping) -> list[tuple[int, float]]:
    """(look, s) of the looks at which a contrast had new seeds: s = sum_c w_c^2 / k_c, the
    seed part's factor, strictly falling; a look where none of its cells had a run yet, or none
    gained a seed, tests nothing new (its statistic is the last one's) and spends nothing."""
    out: list[tuple[int, float]] = []
    for j, counts in enumerate(seed_history, start=1):
        if not all(counts.get(c, 0) > 0 for c in weights):
            continue
        s = sum(w * w / counts[c] for c, w in weights.items())
        if not out or s < out[-1][1] * (1 - 1e-12):
            out.append((j, s))
    return out


def seed_and_item_parts(row: Mapping) -> tuple[float, float]:
    """(the variance more seeds shrink, the variance they do not) of a contrast row at its
    seeds: var_seeds + var_residual and var_items - var_residual. The row's var_items (the
    items' spread of the mean-over-seeds difference) holds the seed x item residual
    sum_c w_c^2 / k_c * MS_res / n, which more seeds shrink as 1 / k as well (at 2 seeds it is
    most of var_items). With the seed level not measured (one seed): (nan, var_items)."""
    if not math.isfinite(row["var_seeds"]):
        return row["var_seeds"], row["var_items"]
    residual = min(max(float(row.get("var_residual", 0.0)), 0.0), row["var_items"])
    return row["var_seeds"] + residual, row["var_items"] - residual


def variances(ss: Sequence[float], row: Mapping) -> list[float]:
    """The estimate's variance at seed factors `ss` (s = sum_c w_c^2 / k_c; the row's own
    seeds have ss[-1]) under the crossed seeds x items model and the row's variance parts:
    V(s) = (var_seeds + var_residual) * s / s_row + (var_items - var_residual), the items being
    the same at every look."""
    by_seeds, by_items = seed_and_item_parts(row)
    by_seeds = by_seeds if math.isfinite(by_seeds) else 0.0
    return [by_items + by_seeds * si / ss[-1] for si in ss]


def fractions(ss: Sequence[float], row: Mapping) -> list[float]:
    """Information at each analysed look relative to the last, as the boundaries take it: the
    seeds' share s_last / s_i, the smallest the crossed model allows (every variance part
    shrinking with seeds). The estimated fraction V_last / V_i (`variances`) is larger by the
    items' part, but that part's split rests on a few seed df, and a fraction taken too large
    (looks taken as more correlated than they are) lowers the later boundaries below what
    alpha allows; one taken too small only widens them. `row` is kept for the record."""
    del row
    if len(set(ss)) < len(ss) or not all(x > 0 for x in ss):
        return [float(i + 1) / len(ss) for i in range(len(ss))]  # nothing to go by: by look
    return [ss[-1] / x for x in ss]


def _family_sizes(questions_: Sequence[Question]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for q in questions_:
        fam = "main" if q.kind in ("main", "interaction") else q.kind
        sizes[fam] = sizes.get(fam, 0) + 1
    return sizes


def _family(kind: str) -> str:
    return "main" if kind in ("main", "interaction") else kind


def interim_look(
    design: Mapping,
    questions_: Sequence[Question],
    control,
    seed_history: Sequence[Mapping],
    settings: Mapping,
    hours_per_run: Mapping,
    spent: Mapping,
    floor=None,
    decided: Mapping | None = None,
    earlier: Mapping | None = None,
    stopped: Mapping | None = None,
    earlier_stops: Mapping | None = None,
) -> LookResult:
    """The look after the runs of `design: {cell: Y (k_c, n_items)}` (seeds in the order run).

    seed_history: one {cell: seeds} per look so far, this one last (its length is the look's
      number); settings: min_useful_effect, confidence, power, max_looks, max_seeds (per cell),
      budget_hours (None: no cap), max_runs; hours_per_run: {cell: projected hours of one run};
      spent: {hours, runs} of the campaign so far; floor: None or (key, Y (1, n_items)) of the best
      floor (no seed spread); decided: {question: decision} from earlier looks (kept: a question
      decided at a look stays decided); earlier: {question: [[look, z], ...]} the boundaries
      the earlier looks recorded (their rows' `boundaries`): kept, this look's boundary is
      solved conditional on them (None: the first look, or recomputed from the start);
      stopped: {cell: reason} the earlier looks stopped (kept: a stopped cell gets no seed again);
      earlier_stops: {stop contrast: [[look, z], ...]} the boundaries the earlier looks recorded
      for their stop contrasts (their stop_rows' `boundaries`): kept like `earlier`.
    A question is decided when its repeated interval clears or rules out min_useful_effect
    (decide.effect); an open one asks for the seeds per cell that would decide it with
    probability `power` at a gap of at least min_useful_effect (decide.what_would_decide; an
    estimate on the useful size itself would ask for unbounded seeds; max_seeds while the seed
    spread rests on fewer than SIZING_MIN_DF error df), spread over the looks left, capped at
    max_seeds and given only where its cost fits what is left of budget_hours and max_runs
    (cheapest first). A cell other than the control stops when its upper repeated bound
    against the best cell is below -min_useful_effect, or against the floor below 0.
    """
    look = _Look(design, questions_, control, seed_history, settings, earlier or {})
    look.out.stopped.update(stopped or {})
    look.stop_cells(floor, earlier_stops or {})
    wants = [w for q in questions_ if (w := look.question(q, dict(decided or {}))) is not None]
    look.allocate(wants, hours_per_run, spent)
    return look.out


class _Look:
    """One interim look's context: the design, the seeds so far, the settings."""

    def __init__(self, design, questions_, control, seed_history, settings, earlier) -> None:
        self.look = len(seed_history)
        self.max_looks = int(settings["max_looks"])
        if self.look < 1 or self.look > self.max_looks:
            raise ValueError(f"look {self.look} outside 1..{self.max_looks}")
        self.design, self.control, self.history = design, control, seed_history
        self.settings, self.earlier = settings, earlier
        self.level = float(settings["confidence"])
        self.useful = float(settings["min_useful_effect"])
        self.alpha = 1 - self.level
        self.sizes = _family_sizes(questions_)
        self.out = LookResult(self.look, self.look == self.max_looks)
        self.seeds_now = {c: int(np.asarray(y).shape[0]) for c, y in design.items()}

    def at_boundary(
        self, weights: Mapping, fam_alpha: float, fixed=frozenset(), data=None, stored=None
    ):
        """(row, z, RCI, look it is of, record): the repeated interval at the contrast's last
        analysed look (this one when its cells gained seeds). `stored`: [[look, z], ...] the
        boundaries the earlier looks recorded for this contrast: kept as they were, and this
        look's solved conditional on them. record: {boundaries (every analysed look's, this
        one's last), alpha_spent (by this look, of fam_alpha), spending_time, info_fraction
        (the information now over the information at max_seeds in every cell)}."""
        data = self.design if data is None else data
        row = questions.contrast_row(data, dict(weights), self.level, fixed, None)
        varying = {c: w for c, w in weights.items() if c not in fixed}
        looks = analysed_looks(self.history, varying) or [(self.look, 1.0)]
        times = [j / self.max_looks for j, _ in looks]
        ss = [x for _, x in looks]
        known = {int(j): math.inf if z is None else float(z) for j, z in (stored or [])}
        if all(j in known for j, _ in looks):  # nothing new since the look that recorded it
            zs = [known[j] for j, _ in looks]
        else:
            prior = [known.get(j) for j, _ in looks[:-1]]
            earlier = prior if all(z is not None for z in prior) else None
            zs = boundaries(fractions(ss, row), fam_alpha, times, earlier)
        z = zs[-1]
        s_max = sum(w * w for w in varying.values()) / int(self.settings["max_seeds"])
        v_max, v_now = variances([min(s_max, ss[-1]), ss[-1]], row)
        record = {
            "boundaries": [
                [j, zj if math.isfinite(zj) else None] for (j, _), zj in zip(looks, zs, strict=True)
            ],
            "alpha_spent": obf_spent(times[-1], fam_alpha),
            "spending_time": times[-1],
            "info_fraction": v_max / v_now if v_now > 0 else math.nan,
        }
        lo, hi = row["_range"]
        return row, z, repeated_interval(row, z, lo, hi), looks[-1][0], record

    def stop_cells(self, floor, earlier: Mapping) -> None:
        """Cells that stop: clearly worse than the best cell, or below the floor. Each stop
        contrast's boundaries are kept from the look that recorded them (`earlier`: {name:
        [[look, z], ...]}) and recorded in out.stop_rows for the next look."""
        design, useful, stopped = self.design, self.useful, self.out.stopped
        means = {c: float(np.asarray(y).mean()) for c, y in design.items()}
        best = max(means, key=lambda c: (means[c], str(c)))
        others = [c for c in design if c != best and c != self.control]
        for c in others:
            if c in stopped:
                continue
            high = self.stop_contrast(
                c, best, self.alpha / max(1, len(others)), earlier, frozenset(), design
            )
            if high < -useful:
                bar = f"{100 * useful:g} point{'' if 100 * useful == 1 else 's'}"
                stopped[c] = (
                    f"below the best cell by more than {bar} (upper end {100 * high:+.1f} points)"
                )
                self.out.stop_rows[-1]["stops"] = True
        if floor is None:
            return
        key, y_floor = floor
        with_floor = {**design, key: np.asarray(y_floor, dtype=np.float64)}
        for c in design:
            if c == self.control or c in stopped:
                continue
            high = self.stop_contrast(
                c, key, self.alpha / max(1, len(design)), earlier, frozenset([key]), with_floor
            )
            if high < 0:
                stopped[c] = f"below the floor (upper end {100 * high:+.1f} points)"
                self.out.stop_rows[-1]["stops"] = True

    def stop_contrast(self, cell, against, alpha, earlier: Mapping, fixed, data) -> float:
        """The upper repeated bound of `cell` minus `against` at family alpha `alpha`, its
        boundaries kept from `earlier` (by the contrast's name); its row into out.stop_rows."""
        name = f"{cell} - {against}"
        row, z, (_, high), of_look, record = self.at_boundary(
            {cell: 1.0, against: -1.0}, alpha, fixed, data, earlier.get(name)
        )
        self.out.stop_rows.append(
            {
                "name": name,
                "cell": cell,
                "against": against,
                "estimate": row["estimate"],
                "boundary": z,
                "of_look": of_look,
                **record,
                "rci_high": high,
                "stops": False,
            }
        )
        return high

    def question(self, q: Question, decided: Mapping) -> tuple | None:
        """Question q's row at this look (into out.rows); (cost, row, {cell: seeds}) when it
        asks for seeds."""
        fam_alpha = self.alpha / self.sizes[_family(q.kind)]
        row, z, (low, high), of_look, record = self.at_boundary(
            q.weights, fam_alpha, stored=self.earlier.get(q.name)
        )
        n_seeds = min(self.seeds_now[c] for c in q.weights)
        if q.kind == "interaction":
            decision = "interaction" if low > 0 or high < 0 else "no interaction shown"
        else:
            decision = decide.effect(low, high, n_seeds, self.useful)
        r = {
            "name": q.name,
            "kind": q.kind,
            "estimate": row["estimate"],
            "se": row["se"],
            "df": interval_df(row),  # the one its repeated interval is read on
            "boundary": z,
            "of_look": of_look,
            **record,
            "rci_low": low,
            "rci_high": high,
            "decision": decision,
            "n_seeds": n_seeds,
            "seeds_target": None,
            "reason": "",
        }
        self.out.rows.append(r)
        halted = [c for c in q.weights if c in self.out.stopped]
        if decided.get(q.name) in CLOSED:
            r["decision"], r["status"] = decided[q.name], "decided"
            r["reason"] = "decided at an earlier look"
        elif q.kind == "interaction":
            r["status"], r["reason"] = "decided", "interactions are reported, not given seeds"
        elif decision in CLOSED:
            r["status"], r["reason"] = "decided", "the repeated interval decides it"
        elif halted:
            r["status"] = "stopped"
            r["reason"] = f"cell {halted[0]} stopped: {self.out.stopped[halted[0]]}"
        elif self.out.final:
            r["status"], r["reason"] = "open", "the last planned look"
        else:
            return self.seeds_wanted(q, row, r, n_seeds)
        return None

    def seeds_wanted(self, q: Question, row: Mapping, r: dict, n_seeds: int) -> tuple | None:
        """An open question's (row, {cell: seeds}) towards its seeds-needed, spread over the
        looks left; None (and the row says why) when seeds would not do."""
        useful, family = self.useful, self.sizes[_family(q.kind)]
        # The gap to min_useful_effect at least min_useful_effect: the alternatives 0 and 2x.
        gap = max(abs(row["estimate"] - useful), useful)
        wanted = decide.what_would_decide(
            useful + math.copysign(gap, row["estimate"] - useful),
            row["var_seeds"],
            row["var_items"],
            n_seeds,
            row["n_items"],
            decide.adjusted_level(self.level, family),
            float(self.settings["power"]),
            useful,
            row.get("seed_df", 0),
            row.get("var_residual", 0.0),
            bound_z=0.0,  # sized on the gap above (at least min_useful_effect), not the estimate
        )
        need = wanted["seeds_needed"]
        if need is None:
            r["status"] = "items"
            r["reason"] = "seeds alone cannot decide it: more evaluation items would"
            return None
        # Seeds needed at or under those run (the fixed design's sizing) while the repeated
        # interval stays open (few seed df, an early boundary): one more seed per cell.
        cap = int(self.settings["max_seeds"])
        need = min(max(int(need), n_seeds + 1), cap)
        if row.get("seed_df", 0) < SIZING_MIN_DF:  # the spread is not yet a size to go by
            need = cap
        r["seeds_target"] = need
        left = max(self.max_looks - self.look, 1)  # looks to come that may add (not the last)
        targets = {}
        for c in q.weights:
            k = self.seeds_now[c]
            if need > k:
                targets[c] = min(need, k + math.ceil((need - k) / left))
        if not targets:
            r["status"], r["reason"] = "open", f"at the cap of {cap} seeds"
            return None
        return r, targets

    def allocate(self, wants: list, hours_per_run: Mapping, spent: Mapping) -> None:
        """Seeds to the open questions, cheapest first, within what is left of budget_hours and
        max_runs; a cell two questions share counts once."""
        out = self.out
        plan = dict(self.seeds_now)
        budget = self.settings.get("budget_hours")
        hours_left = math.inf if budget is None else float(budget) - float(spent["hours"])
        runs_left = int(self.settings["max_runs"]) - int(spent["runs"])

        def cost(want) -> tuple:
            r, targets = want
            hours = sum((t - plan[c]) * float(hours_per_run[c]) for c, t in targets.items())
            return hours, r["name"]

        for r, targets in sorted(wants, key=cost):
            extra = {c: t for c, t in targets.items() if t > plan[c]}
            hours = sum((t - plan[c]) * float(hours_per_run[c]) for c, t in extra.items())
            runs = sum(t - plan[c] for c, t in extra.items())
            if hours <= hours_left + 1e-12 and runs <= runs_left:
                plan.update(extra)
                hours_left -= hours
                runs_left -= runs
                out.add_hours += hours
                out.add_runs += runs
                r["status"] = "open"
                r["reason"] = f"adds seeds towards {r['seeds_target']} per cell"
            else:
                r["status"] = "over budget"
                r["reason"] = f"{runs} runs, {hours:.2f} h do not fit what is left"
                out.open_cost_hours[r["name"]] = hours
        out.seeds = plan
