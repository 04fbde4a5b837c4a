"""Exact assignment of leak units to splits (``split.assign: solve``): an integer program that
meets ``split.fractions`` within ``split.size_tolerance`` and every label's share within
``split.stratify_tolerance``, keeps every label in train, keeps earlier units where they were,
and proves it when no assignment can.

Why a program and not more salts. With few large units (patients per hospital, books,
speakers, repositories) the assignments that pass are a tiny fraction of all of them, and a
salted hash draws each unit independently: 2,000 salts miss them. Whether one exists is a
0/1 question over (n_units, n_splits) variables that HiGHS (``scipy.optimize.milp``) answers
exactly, and when the answer is no, its proof is the user's answer: the best deviations any
split of these units can reach.

The program. x[u, s] in {0, 1}, sum_s x[u, s] = 1; N_s = sum_u n_u x[u, s] and
N_sL = sum_u n_uL x[u, s] (records of label L in split s); N = sum_u n_u and p_L the overall
share of L. Hard constraints, exactly the audit's checks (a share within t of p_L is
|N_sL - p_L N_s| <= t N_s, linear because N_s > 0)::

    ceil((f_s - size_tol) N) <= N_s <= floor((f_s + size_tol) N),  N_s >= 1
    (p_L - stratify_tol) N_s <= N_sL <= (p_L + stratify_tol) N_s
    N_train,L >= 1 for every label

The relaxation bounds nothing here (units split fractionally balance every label exactly), so
the programs are feasibility programs: "is there a split within these tolerances?", answered
found, none (proved) or undecided (node limit). Each is guided: its objective is the share of
the records placed off a known split, with a relative gap of 1, so HiGHS ends at its first
integer point, found from a relaxation that sits at the known split. The first program's
guide is the split of the salt search's best salt (among ``split.salt`` and ``GUIDE_SALTS``
more, passing ones first): when that passes it is the answer at once, so solve never ends
worse than the salt search; later programs are guided by the best split so far. On 1,000
units x 50 labels a guided first program takes a few seconds, unguided ~20 s. Everything is
built from that question:

- the split: the first program with the configured tolerances;
- then smaller deviations (``split.solve.improve_steps``): bisection on one bound b for both
  deviations (the salt search's score, max(label, size)): is there a split with labels and
  sizes within min(b, tolerance)? A found split lowers the score to its own, a proof of none
  raises the proved lower end (in the audit: no split within the tolerances has both below
  it; with earlier units, no such split that keeps them as the program did, ``proved_for``);
- stability: previous units are constants in the first program (their records in the rows'
  right-hand sides); when that has no solution, one program minimizes the records of earlier
  units that move, and the improvement keeps at most that many moved: a unit moves only when
  the tolerances cannot be met otherwise, and the split stage lists it (``rebalanced``);
- infeasible (``diagnose``): the smallest label deviation with sizes within tolerance and
  the smallest size deviation with labels within tolerance, each by bisection from a split
  that meets the other tolerance alone and the tolerance that failed, to ``BISECTION_STEP``:
  "the smallest label deviation is 0.155 (none reaches 0.154)" is a found split and a proof.

Determinism. HiGHS runs with presolve on, one thread, a fixed random seed and a node limit
(``split.solve.node_limit``, a deterministic amount of work): the same units and settings
give the same split on every machine. The time limit (``split.solve.time_limit_s``) only
guards the stage: when it is hit the split stage fails and says so, since an answer cut by
wall time would depend on the machine's speed.
"""

from __future__ import annotations

import math
import re
import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from campaign.core.errors import CampaignError

# Margin (records) on the rows when a found split misses the audit's float comparison at a
# boundary (HiGHS accepts rows violated by up to 1e-6): solved again with it.
ROW_MARGIN = 1e-6
BISECTION_STEP = 1e-3  # the label-deviation bound is proved to this resolution
# scipy passes options it does not know to HiGHS verbatim (with a warning we silence).
HIGHS_FIXED = {"threads": 1, "random_seed": 0}
# The first program is guided by the best of this many salts (the salt search's own split).
GUIDE_SALTS = 2000
EXACT_GAP = 1e-4  # the fewest-moves program: optimal (to HiGHS's default gap)
FIRST_POINT_GAP = 1.0  # guided programs: a relative gap of 1 ends at the first integer point
# HighsModelStatus.kSolutionLimit: the node limit reached. scipy has no status for it (4,
# "not recognized", with the HiGHS number in the message) and returns no node count.
HIGHS_NODE_LIMIT = 16


@dataclass(frozen=True)
class SolveSettings:
    """``split.solve``: time_limit_s guards the stage (hit: it fails); node_limit bounds each
    program's work deterministically; max_units: above it the stage falls back to the hash;
    improve_steps: bisection programs that lower the deviation once a passing split is
    found."""

    time_limit_s: float = 120.0
    node_limit: int = 500
    max_units: int = 1000
    improve_steps: int = 1


@dataclass(frozen=True)
class Solution:
    """split: (n_units,) index into the split names of each unit; deviations as the audit
    computes them (before ``drop`` removes copies); moved: (n_units,) earlier units placed
    elsewhere."""

    split: np.ndarray
    label_deviation: float
    size_deviation: float
    # No split within the tolerances scores below it (max(label, size) deviation), proved;
    # with earlier units, only among the splits that keep them (proved_for says which).
    proved_lower: float
    moved: np.ndarray
    nodes: int
    seconds: float
    solves: int = 1
    proved_for: str = ""  # "" (any split) or what proved_lower assumes of earlier units
    # Earlier units moved: True when the fewest-moves program ended optimal, False when the
    # node limit cut it (a valid split, its moves not proved fewest); None when none had to.
    fewest_moves_proved: bool | None = None


@dataclass
class Problem:
    """counts: (n_units, n_labels) records per unit and label; target: (n_splits,) fractions
    in split-name order; train: index of train; previous: (n_units,) split index or -1;
    guide: (n_units,) split index (the salt's hash split) the programs are guided toward."""

    counts: np.ndarray
    target: np.ndarray
    train: int
    stratify_tolerance: float
    size_tolerance: float
    previous: np.ndarray | None = None
    margin: float = 0.0  # records; ROW_MARGIN after a boundary miss
    guide: np.ndarray | None = None  # (n_units,) split index the first program starts from
    sizes: np.ndarray = field(init=False)
    total: float = field(init=False)
    overall: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.counts = np.asarray(self.counts, dtype=np.float64)
        self.sizes = self.counts.sum(axis=1)  # (n_units,)
        self.total = float(self.sizes.sum())
        self.overall = self.counts.sum(axis=0) / self.total  # (n_labels,)


def deviations(problem: Problem, split: np.ndarray) -> tuple[float, float]:
    """(max label deviation, max size deviation) of an assignment, as the audit computes
    them: |share of a label in a split - its overall share|, |share of records - fraction|."""
    n_splits = len(problem.target)
    per = np.zeros((n_splits, problem.counts.shape[1]))
    np.add.at(per, split, problem.counts)
    sizes = per.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(sizes[:, None] > 0, per / sizes[:, None], 0.0)
    label = float(np.abs(shares - problem.overall).max())
    size = float(np.abs(sizes / problem.total - problem.target).max())
    return label, size


class _Model:
    """The program's variables and rows: x (n_free * n_splits, binary, index u * S + s, u a
    free unit), N_s (S), N_sL (S * K), z (1, unused by the feasibility programs); rows as
    sparse triplets. fixed: earlier units are constants (their records counted in the rows'
    right-hand sides), not variables: smaller programs, and no presolve of fixed binaries."""

    def __init__(self, p: Problem, fixed: bool = False):
        self.p = p
        n_units, self.K = p.counts.shape
        self.S = len(p.target)
        if fixed and p.previous is not None:
            self.free = np.flatnonzero(p.previous < 0)
            self.held = np.flatnonzero(p.previous >= 0)
        else:
            self.free = np.arange(n_units)
            self.held = np.zeros(0, dtype=np.int64)
        self.U = len(self.free)
        self.n_x = self.U * self.S
        self.i_ns = self.n_x
        self.i_nsl = self.i_ns + self.S
        self.i_z = self.i_nsl + self.S * self.K
        self.n_var = self.i_z + 1
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.lb = np.zeros(self.n_var)
        self.ub = np.ones(self.n_var)
        self.ub[self.i_ns :] = np.inf
        self._base()

    def ns(self, s):
        return self.i_ns + s

    def nsl(self, s, k):
        return self.i_nsl + s * self.K + k

    def row(self, cols, vals, lo: float, hi: float) -> None:
        r = len(self.lo)
        cols = np.asarray(cols, dtype=np.int64)
        self.rows.append(np.full(len(cols), r, dtype=np.int64))
        self.cols.append(cols)
        self.vals.append(np.asarray(vals, dtype=np.float64))
        self.lo.append(lo)
        self.hi.append(hi)

    def _base(self) -> None:
        p, S = self.p, self.S
        counts, sizes = p.counts[self.free], p.sizes[self.free]
        held_in = np.zeros((S, self.K))  # records of the fixed units per split and label
        if len(self.held):
            np.add.at(held_in, p.previous[self.held], p.counts[self.held])
        local = np.arange(self.U)
        for u in range(self.U):  # each free unit in exactly one split
            self.row(u * S + np.arange(S), np.ones(S), 1.0, 1.0)
        for s in range(S):  # N_s and N_sL: the free units placed in s, plus the fixed ones
            base = float(held_in[s].sum())
            self.row(np.r_[self.ns(s), local * S + s], np.r_[1.0, -sizes], base, base)
            for k in range(self.K):
                has = np.flatnonzero(counts[:, k])
                base = float(held_in[s, k])
                self.row(
                    np.r_[self.nsl(s, k), has * S + s], np.r_[1.0, -counts[has, k]], base, base
                )
                self.ub[self.nsl(s, k)] = p.counts[:, k].sum()
            self.lb[self.ns(s)] = 1.0  # no split empty
            self.ub[self.ns(s)] = p.total
        for k in range(self.K):  # every label in train
            if p.counts[:, k].sum() > 0:
                self.lb[self.nsl(p.train, k)] = 1.0

    def sizes_within(self, tolerance: float) -> None:
        N = self.p.total
        for s, f in enumerate(self.p.target):
            slack = self.p.margin or -1e-9
            self.lb[self.ns(s)] = max(1.0, math.ceil((f - tolerance) * N + slack))
            self.ub[self.ns(s)] = min(N, math.floor((f + tolerance) * N - slack))

    def labels_within(self, tolerance: float) -> None:
        for s in range(self.S):
            for k, share in enumerate(self.p.overall):
                if share + tolerance < 1.0:
                    hi = share + tolerance
                    self.row([self.nsl(s, k), self.ns(s)], [1.0, -hi], -np.inf, -self.p.margin)
                if share - tolerance > 0.0:
                    lo = share - tolerance
                    self.row([self.nsl(s, k), self.ns(s)], [1.0, -lo], self.p.margin, np.inf)

    def limit_moves(self, max_moved: float | None) -> np.ndarray:
        """(n_var,) objective: minus the records of earlier units kept in place (minimizing it
        minimizes the records that move); with max_moved, a row allowing at most that many."""
        prev = self.p.previous
        old = np.flatnonzero(prev >= 0)
        kept = old * self.S + prev[old]
        c = np.zeros(self.n_var)
        c[kept] = -self.p.sizes[old]
        if max_moved is not None:
            floor = self.p.sizes[old].sum() - max_moved - 0.5
            self.row(kept, self.p.sizes[old], floor, np.inf)
        return c

    def guide(self, toward: np.ndarray) -> np.ndarray:
        """(n_var,) objective: the share of the records placed off ``toward`` ((n_units,)
        split index), so the relaxation sits at that split and HiGHS's first integer point
        lies near it."""
        cost = np.repeat((self.p.sizes[self.free] / self.p.total)[:, None], self.S, axis=1)
        cost[np.arange(self.U), toward[self.free]] = 0.0
        c = np.zeros(self.n_var)
        c[: self.n_x] = cost.ravel()
        return c

    def solve(self, c: np.ndarray, settings: SolveSettings, time_left: float, gap: float):
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import csr_array

        A = csr_array(
            (np.concatenate(self.vals), (np.concatenate(self.rows), np.concatenate(self.cols))),
            shape=(len(self.lo), self.n_var),
        )
        integrality = np.zeros(self.n_var)
        integrality[: self.n_x] = 1
        options = {
            "presolve": True,
            "node_limit": int(settings.node_limit),
            "time_limit": max(1.0, float(time_left)),
            "mip_rel_gap": gap,
            **HIGHS_FIXED,
        }
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="Unrecognized options", category=RuntimeWarning
            )
            return milp(
                c,
                integrality=integrality,
                bounds=Bounds(self.lb, self.ub),
                constraints=LinearConstraint(A, np.array(self.lo), np.array(self.hi)),
                options=options,
            )


class _Clock:
    """The stage's time guard across several programs; raises when it is spent."""

    def __init__(self, settings: SolveSettings):
        self.settings = settings
        self.start = time.perf_counter()
        self.nodes = 0
        self.solves = 0

    def left(self) -> float:
        return self.settings.time_limit_s - (time.perf_counter() - self.start)

    def run(self, model: _Model, c: np.ndarray, gap: float = FIRST_POINT_GAP):
        left = self.left()
        if left <= 0:
            self._timeout()
        res = model.solve(c, self.settings, left, gap)
        self.solves += 1
        self.nodes += int(res.mip_node_count or 0)
        if res.status == 1:  # time (HiGHS reports its node limit as a solution limit: 4)
            self._timeout()
        return res

    def _timeout(self):
        raise CampaignError(
            f"split.solve.time_limit_s: HiGHS reached the time limit of "
            f"{self.settings.time_limit_s:g} s after {self.nodes:,} nodes in {self.solves} "
            "program(s), before it finished; an answer cut by wall time would depend on this "
            "machine's speed, so none is used: raise split.solve.time_limit_s, or lower "
            "split.solve.node_limit (a node limit stops at the same point on every machine)"
        )


def _assignment(model: _Model, res) -> np.ndarray:
    """(n_units,) split of every unit: the fixed ones where they were, the free ones as x."""
    out = np.zeros(len(model.p.sizes), dtype=np.int64)
    if len(model.held):
        out[model.held] = model.p.previous[model.held]
    x = np.asarray(res.x[: model.n_x]).reshape(model.U, model.S)
    out[model.free] = np.argmax(x, axis=1)
    return out


@dataclass(frozen=True)
class _Found:
    """One program's answer: 'found' (split: (n_units,)), 'none' (proved) or 'undecided'
    (the node limit came first)."""

    state: str
    split: np.ndarray | None = None
    optimal: bool = False  # HiGHS ended optimal (within the gap), not at the node limit


def _find(
    p: Problem,
    clock: _Clock,
    label_tol: float | None,
    size_tol: float | None,
    *,
    fixed: bool = False,
    max_moved: float | None = None,
    fewest_moves: bool = False,
    toward: np.ndarray | None = None,
) -> _Found:
    """A split with labels within label_tol and sizes within size_tol (None: unconstrained),
    every label in train; fixed: earlier units stay; max_moved: at most that many records of
    earlier units move; fewest_moves: minimize them (optimal unless the node limit cuts it:
    ``optimal``); else the first integer point HiGHS reaches guided toward ``toward``
    (default ``p.guide``)."""
    m = _Model(p, fixed)
    if size_tol is not None:
        m.sizes_within(size_tol)
    if label_tol is not None:
        m.labels_within(label_tol)
    guide = toward if toward is not None else p.guide
    c, gap = (m.guide(guide), FIRST_POINT_GAP) if guide is not None else (np.zeros(m.n_var), 0)
    if max_moved is not None or fewest_moves:
        moves = m.limit_moves(max_moved)
        if fewest_moves:
            c, gap = moves, EXACT_GAP
    res = clock.run(m, c, gap)
    if res.x is not None and res.status in (0, 4):  # optimal, or the best within the node limit
        return _Found("found", _assignment(m, res), optimal=res.status == 0)
    if res.status == 2:
        return _Found("none")
    if not _node_limit_reached(res, clock.settings):
        raise CampaignError(f"split.solve: HiGHS failed ({res.message}); use split.assign: hash")
    return _Found("undecided")


def _node_limit_reached(res, settings: SolveSettings) -> bool:
    """Whether HiGHS stopped at ``split.solve.node_limit`` (scipy reports it as status 4)."""
    highs = re.search(r"HiGHS Status (\d+)", res.message or "")
    if highs is not None and int(highs[1]) == HIGHS_NODE_LIMIT:
        return True
    return (res.mip_node_count or 0) >= settings.node_limit


def _undecided(clock: _Clock, what: str) -> CampaignError:
    return CampaignError(
        f"split.solve.node_limit: HiGHS neither found a split {what} within "
        f"{clock.settings.node_limit:,} nodes nor proved that none exists; raise "
        "split.solve.node_limit (and split.solve.time_limit_s)"
    )


def _score(p: Problem, split: np.ndarray) -> float:
    return max(deviations(p, split))


def _improve(p: Problem, clock: _Clock, split: np.ndarray, steps: int, **where) -> tuple:
    """Bisection on one bound for both deviations (the salt search's score, max(label, size)):
    ``steps`` feasibility programs, each asking for a split within the middle of (proved lower
    end, current score); a found split lowers the score to its own, a proof of none raises the
    lower end, the node limit stops the search. Returns (split, lower end proved)."""
    lo = 0.0
    for _ in range(steps):
        hi = _score(p, split)
        if hi - lo <= BISECTION_STEP:
            break
        mid = (lo + hi) / 2
        tols = (min(mid, p.stratify_tolerance), min(mid, p.size_tolerance))
        got = _find(p, clock, *tols, toward=split, **where)
        if got.state == "found" and _score(p, got.split) < hi:
            split = got.split
        elif got.state == "none":
            lo = mid
        else:
            break
    return split, lo


def solve(
    p: Problem, settings: SolveSettings, names: list[str], labels: list[str] | None = None
) -> Solution:
    """The assignment of the module docstring; CampaignError (one line) when none exists
    (with ``diagnose``'s proved best deviations), when the node limit leaves it undecided, or
    when the time limit is hit."""
    clock = _Clock(settings)
    prev = p.previous
    has_old = prev is not None and bool((prev >= 0).any())
    tol = (p.stratify_tolerance, p.size_tolerance)
    where: dict = {}
    proved_for = ""
    fewest: bool | None = None
    got = _find(p, clock, *tol, fixed=has_old)
    if got.state == "undecided":
        raise _undecided(clock, "with the earlier units in place" if has_old else "")
    if got.state == "none" and has_old:
        # Some earlier units must move: the fewest records, then the best deviation.
        got = _find(p, clock, *tol, fewest_moves=True)
        if got.state == "undecided":
            raise _undecided(clock, "that moves the fewest earlier units")
        if got.state == "found":
            old = prev >= 0
            where = {"max_moved": float(p.sizes[old & (got.split != prev)].sum())}
            proved_for = f"at most {where['max_moved']:g} records of earlier units moved"
            fewest = got.optimal
    elif has_old:
        where = {"fixed": True}
        proved_for = f"the {int((prev >= 0).sum()):,} earlier units in place"
    if got.state == "none":
        raise CampaignError(diagnose(p, settings, names, clock, labels))
    x, lower = _improve(p, clock, got.split, settings.improve_steps, **where)
    label, size = deviations(p, x)
    if (label > p.stratify_tolerance or size > p.size_tolerance) and not p.margin:
        return solve(replace(p, margin=ROW_MARGIN), settings, names, labels)
    moved = (prev >= 0) & (x != prev) if has_old else np.zeros(len(x), dtype=bool)
    return Solution(
        split=x,
        label_deviation=label,
        size_deviation=size,
        proved_lower=lower,
        moved=moved,
        nodes=clock.nodes,
        seconds=time.perf_counter() - clock.start,
        solves=clock.solves,
        proved_for=proved_for,
        fewest_moves_proved=fewest,
    )


def _few_units(p: Problem, names: list[str], labels: list[str]) -> list[str]:
    """Labels more common than the tolerance that lie in fewer units than there are splits:
    some split lacks them, off by their whole share."""
    out = []
    in_units = (p.counts > 0).sum(axis=0)
    for k, label in enumerate(labels):
        if in_units[k] < len(names) and p.overall[k] > p.stratify_tolerance:
            out.append(
                f"label {label!r} ({p.overall[k]:.1%} of the records) lies in {in_units[k]} "
                f"unit(s), fewer than the {len(names)} splits"
            )
    return out


def _narrow(p: Problem, clock: _Clock, which: int, start: np.ndarray, lo: float) -> tuple:
    """(proved lower end, reached upper end) of the smallest deviation ``which`` (0: label,
    1: size) with the other within its tolerance: bisection from a split that meets the other
    (start) and a tolerance known to fail (lo)."""
    hi = deviations(p, start)[which]
    while hi - lo > BISECTION_STEP:
        mid = (lo + hi) / 2
        tols = (mid, p.size_tolerance) if which == 0 else (p.stratify_tolerance, mid)
        got = _find(p, clock, *tols)
        if got.state == "found":
            hi = min(hi, deviations(p, got.split)[which])
        elif got.state == "none":
            lo = mid
        else:
            raise _undecided(clock, f"with a deviation <= {mid:.4f}")
    return lo, hi


def best_deviation(p: Problem, clock: _Clock, which: int) -> tuple[float, float] | None:
    """The smallest label (which=0) or size (1) deviation of any split whose other deviation is
    within its tolerance, with every label in train, as (proved lower end, reached); None when
    the other tolerance alone cannot be met (proved). Called when both together fail."""
    other = (None, p.size_tolerance) if which == 0 else (p.stratify_tolerance, None)
    got = _find(p, clock, *other)
    if got.state == "none":
        return None
    if got.state == "undecided":
        raise _undecided(clock, "within one tolerance alone")
    lo = p.stratify_tolerance if which == 0 else p.size_tolerance
    return _narrow(p, clock, which, got.split, lo)


def _up(value: float) -> str:
    """A tolerance to suggest: value rounded up to 3 decimals."""
    return f"{math.ceil(value * 1000 - 1e-9) / 1000:g}"


def _down(value: float) -> str:
    """A proved lower end, rounded down to 4 decimals (still proved)."""
    return f"{math.floor(value * 10000 + 1e-9) / 10000:.4f}"


def diagnose(
    p: Problem,
    settings: SolveSettings,
    names: list[str],
    clock: _Clock | None = None,
    labels: list[str] | None = None,
) -> str:
    """One line: no assignment meets the tolerances (proved), the best deviations that can be
    reached, and what would make it feasible."""
    clock = clock or _Clock(settings)
    labels = labels or [f"#{k}" for k in range(p.counts.shape[1])]
    label = best_deviation(p, clock, 0)
    size = best_deviation(p, clock, 1)
    parts, fixes = [], []
    if label is None:
        parts.append(
            f"no split of these units has sizes within split.size_tolerance {p.size_tolerance} "
            "with every label in train"
        )
    else:
        lo, hi = label
        parts.append(
            f"with sizes within split.size_tolerance {p.size_tolerance} the smallest label "
            f"deviation is {hi:.4f} (none reaches {_down(lo)})"
        )
        fixes.append(f"split.stratify_tolerance >= {_up(hi)}")
    if size is None:
        parts.append(
            f"no split sizes at all let every label be within split.stratify_tolerance "
            f"{p.stratify_tolerance}"
        )
    else:
        lo, hi = size
        parts.append(
            f"with labels within split.stratify_tolerance {p.stratify_tolerance} the smallest "
            f"size deviation is {hi:.4f} (none reaches {_down(lo)})"
        )
        fixes.append(f"split.size_tolerance >= {_up(hi)}")
    few = _few_units(p, names, labels)
    if few:
        fixes.append("more units for " + "; ".join(few))
    if not fixes:
        fixes.append("more or smaller units (a finer data.fields.group)")
    return (
        f"split: no assignment of the {p.counts.shape[0]:,} units meets the tolerances (proved "
        f"by HiGHS): {'; '.join(parts)}; make it feasible with {' or '.join(fixes)}"
    )
