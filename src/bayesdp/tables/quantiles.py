"""A quantile per group: the exponential mechanism over a grid with the closed-rank utility, and an
interval certified by noisy ranks.

The true q-quantile of a group's n values is `numpy.quantile(x, q, method="inverted_cdf")`: the
smallest value v with #{x <= v} >= q·n. Values are clipped to the bounds [lo, hi] and rounded to
the grid lo + j·w, j = 0..cells (`grid_cells`); rounding is monotone, so the grid quantile is the
true quantile rounded to the grid, at most w/2 away.

The value. Every grid value j is a candidate output. Its base measure (`value_spacing`) is fixed by
the public bounds, so it does not depend on the data: 1, plus 2^l for each dyadic level l up to the
grid's top whose multiples j lies on (lo + j·w an integer, a half, ...). Under the counting measure
alone the ~2^21 empty values between two tied integers outweighed the tie by e^14.5, so at user
level (noise scales ∝ max_rows) a tie was drawn exactly only if q·n lay more than 14.5 noise scales
inside its block; with the dyadic levels an integer weighs about as much as the empty values around
it, and a tie is drawn exactly once q·n lies a few scales inside. The utility theorem's
log(μ(all)/μ(best)) grows by at most log(top + 2), about 3.3 noise scales of rank error at worst
(McSherry & Talwar 2007, Thm 8). Its utility is the
closed-rank utility (the exponential mechanism for the median of Smith 2011, with each grid value
its own candidate so that ties keep their rank interval; Drechsler et al. 2022, "Non-parametric
differentially private confidence intervals for the median", treat the ranks of tied data alike):

    u(j) = -dist(t, [B(j), A(j)]),  B(j) = #{values < j}, A(j) = #{values <= j}, t = q·n + c,

c a public constant. The value holding rank t (B < t <= A) scores 0, so a value shared by many
rows, an integer age say, is drawn exactly. Empty grid values between two occupied ones share one
utility and form a run; a draw picks a run with probability ∝ μ(run)·exp(u/scale), then a grid
value inside it ∝ μ (`pick`; McSherry & Talwar 2007, exponential mechanism with base measure μ).

Sensitivity (add/remove of one unit with k <= m rows in the group, m = max_rows): B(j) grows by
k1 and A(j) by k2 with 0 <= k1 <= k2 <= k (a row below j is at or below j), t by q·k. Then
B - t moves by k1 - q·k ∈ [-q·k, (1-q)·k] and t - A by q·k - k2 ∈ [-(1-q)·k, q·k]; u = -max(B - t,
t - A, 0) is a maximum of terms each moving by at most max(q, 1-q)·m, so |Δu| <= m·max(q, 1-q)
(`Quantile.sensitivity`). The mechanism's scale 2Δu/ε makes each draw ε-DP (McSherry & Talwar 2007,
Thm 6) whatever the candidate set, because the base measure is data independent.

The interval (Drechsler et al. 2022: exponential-mechanism draws for the ends, here with a noisy
rank check). Two more draws aim s ranks below and above t (`rank_margin`), giving candidates L and
H. Their base measure counts only every 2^bits-th grid value (`candidate_spacing`, about 2^16
candidates, integers among them when the grid is dyadic): still fixed by the bounds, so the same
proof holds, and a tied value then competes with 2^-bits as many empty values around it, so the
candidate lands on the tie instead of past it. Between two integers there are still 2^16/(hi - lo)
candidates, ln(8191) = 9 noise scales of weight at bounds 0..10: a high end aimed fewer scales
inside the median's tie landed in the empty values just below it, failed its check and fell back
to the far candidate two integers away (vocabulary scores 0-10 in carData GSSvocab at ε = 0.5:
[4, 6.x] for [4, 5] in over half the releases). So when integers are grid values and the bounds
span at least INTEGER_STEPS of them, each integer weighs as much as the candidates between two
integers, one more data-independent level.

A noisy rank certifies each candidate: L <= v exactly when B(L) < q·n, so D̃ = B(L) - q·n + Z,
with Z the noise of a Laplace (or Gaussian) mechanism of sensitivity m·max(q, 1-q) (the same
argument as above), keeps L when D̃ + h < 0, h the noise's one-sided threshold at
(1 - FAR_ALPHA)·α/2. A wrong L is kept only if Z < -h, probability <= (1 - FAR_ALPHA)·α/2 whatever
the draw (it is independent of Z); the same holds for H with A(H) >= q·n.

Clustered data. A draw can land up to scale·ln(μ(all)/μ(best)) ranks past its aim, and where the
rows sit in bursts (timestamps under bounds spanning decades) the empty stretch after a burst
outweighs the burst's few grid values by that much: the candidate lands past q·n and fails its
check (99% of intervals had an end at a bound on 50 hour-long bursts of 100,000 timestamps,
bench/quantile_coverage.py). So each end has a second, far candidate, drawn on the whole grid
(every value weighing 1, so a burst's values are candidates) and aimed `far_margin` ranks from
q·n, which adds scale·ln(cells + 1) to the margin; its own noisy rank checks it at FAR_ALPHA·α/2.
An end is the first candidate if its check keeps it, else the far one if its check keeps it,
else the bound. A wrong end needs a wrong candidate kept: probability <= (1 - FAR_ALPHA)·α/2 +
FAR_ALPHA·α/2 = α/2 per end (union bound). So the interval [L - w/2, H + w/2] (half a grid cell
for the rounding) covers v with probability >= 1 - α; `estimate.consistent` then clamps it to
the bounds and widens it to hold the estimate (post-processing).

Privacy: the four candidate draws have data-independent base measures and the four rank checks
are Laplace (or Gaussian) mechanisms of the sensitivity above; each is run and charged whatever
the others give, so the aggregate's guarantee is the sequential composition of its nine parts,
whose budget shares add up to 1 (`Quantile.noisy`; Dwork & Roth 2014, Thm 3.14).

Cost: each first candidate draw and each of their rank checks takes NEAR = 0.0875 of the
aggregate's budget, each far draw and check FAR = 0.025, the value the rest, 0.55; the value's
rank error grows by 1/0.55 against a point that takes the whole budget. The interval spans about
±`rank_margin` ranks around q·n: at q = 1/2, one row per unit and α = 0.05, about 60/ε ranks (ε the
aggregate's, per group).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from itertools import pairwise
from typing import ClassVar

import numpy as np
from numba import njit

from bayesdp.errors import check_open_unit
from bayesdp.noise import Rng, bernoulli_exp
from bayesdp.tables.accuracy import Accuracy, bound
from bayesdp.tables.aggregates import Clipped, Noisy, budget, check_bounds, check_column, constructor
from bayesdp.tables.engines.base import FULL_GRID, Bins, Cells, CellWindow, ExactAggregates, Measure
from bayesdp.tables.estimate import Estimate, FullGrid, PlannedStep

# A quantile's grid has at most this many cells between the bounds (Smith 2011 on the grid).
QUANTILE_CELLS = 1 << 24
# Past a window reaching this many noise scales beyond every aim, each grid value has at most
# e^-36 of the weight of the aim's own value, so with 2^24 values a draw lands outside (and the
# whole grid is read) with probability below 4e-9.
WINDOW_SCALES = 36.0
# Noise scales (the candidate draw's plus the rank check's) between a candidate's aim and the
# check's threshold: on continuous data a candidate fails its check, and its end falls back to the
# bound, with probability about 1.5% (measured in bench/quantile_coverage.py).
CHECK_SCALES = 2.5

# Shares of a quantile's budget of each first candidate draw and its rank check, and of each far
# candidate draw and its check; the value gets the rest. FAR_ALPHA: the far checks' share of α.
NEAR = 0.0875
FAR = 0.025
FAR_ALPHA = 0.1
ENDS = ("low", "high", "low_far", "high_far")

# The interval's candidates are the grid values on a grid of at most about 2^16 cells (a coarser
# dyadic grid when the quantile's is dyadic): see the module.
CANDIDATE_CELLS_LOG2 = 16
# Integers weigh more among the interval's candidates only when the bounds span at least this many:
# with fewer, the integers are mostly the bounds themselves, and each would hold a large share of
# the candidates' mass (1/(2·INTEGER_STEPS) at most here) and pull a small group's ends onto it.
INTEGER_STEPS = 8

# A draw's first round of proposals expects this many to be kept (it then misses with probability
# about e^-4); later rounds double, up to MAX_ROUND proposals per group.
FIRST_ROUND_DRAWS = 4.0
MAX_ROUND = 1 << 16

# Window cells of the groups whose draws run together (see `chunks`).
CHUNK_CELLS = 1 << 15

# (bits, origin[, top[, floor]]): the candidates are the grid values j with j + origin a multiple of
# 2^bits; with top, j weighs 2^(l - bits) for each level l in bits..top (only bits and floor..top
# with floor) with 2^l dividing j + origin (`run_mass`).
Spacing = tuple[int, int] | tuple[int, int, int] | tuple[int, int, int, int]
# The far candidates' base measure: every grid value, weighing 1.
FINE: Spacing = (0, 0)


def grid_cells(lo: float, hi: float) -> int:
    """Cells of the grid over [lo, hi]: the width is the power of two 2^e >= (hi-lo)/2^24 when it
    divides hi - lo, so integers and binary fractions inside integer bounds are grid values, a tied
    value is released exactly; otherwise 2^24 cells."""
    step = 2.0 ** math.ceil(math.log2((hi - lo) / QUANTILE_CELLS))
    cells = (hi - lo) / step
    exact = cells == math.floor(cells) and lo / step == math.floor(lo / step)
    return int(cells) if exact else QUANTILE_CELLS


def candidate_spacing(lo: float, hi: float, cells: int) -> Spacing:
    """The interval candidates' spacing: every 2^bits-th grid value, bits leaving about 2^16 of
    them, counted from lo's index on the dyadic grid (so integers stay candidates) or from lo.
    When integers are grid values and the bounds span at least INTEGER_STEPS of them, each integer
    also weighs as much as the candidates between two integers (the one level `unit`), so a tied
    integer holds its own against the empty values beside it (see the module). No other level
    weighs more: a round value near q·n would pull a candidate past q·n and fail its check (at
    user level, 70% of the ends on continuous data with every dyadic level)."""
    bits = max(cells.bit_length() - 1 - CANDIDATE_CELLS_LOG2, 0)
    origin = value_spacing(lo, hi, cells)[1]
    unit = -math.log2((hi - lo) / cells)  # an integer is a multiple of 2^unit on the dyadic grid
    on_grid = unit == math.floor(unit) and (lo * 2.0**unit) == origin
    if on_grid and bits < unit and hi - lo >= INTEGER_STEPS:
        return bits, origin, int(unit), int(unit)
    return bits, origin


def value_spacing(lo: float, hi: float, cells: int) -> Spacing:
    """The value draw's base measure: every grid value, each weighing 2^l more for each dyadic
    level l up to the grid's top whose multiples it lies on (integers, halves, ... weigh most)."""
    k = lo / ((hi - lo) / cells)
    origin = int(k) if k == math.floor(k) and abs(k) < 2**53 else 0
    return 0, origin, max(abs(origin), abs(origin + cells)).bit_length()


def total_mass(cells: int, spacing: Spacing) -> int:
    """The base measure of the whole grid 0..cells."""
    bits, origin, top, floor = levels(spacing)
    one = np.zeros(1, dtype=np.int64)
    return int(_masses(one, one + cells + 1, origin, bits, top, floor)[0])


def rank_margin(step: PlannedStep, alpha: float) -> float:
    """Ranks between q·n and the aims of the interval's first candidate draws: the rank check's
    one-sided threshold at (1 - FAR_ALPHA)·α/2 plus CHECK_SCALES noise scales of the draw and the
    check."""
    return _margin(step, "low", (1 - FAR_ALPHA) * alpha)


def far_margin(step: PlannedStep, alpha: float) -> float:
    """Ranks between q·n and the aims of the far candidate draws: their check's one-sided threshold
    at FAR_ALPHA·α/2 and CHECK_SCALES noise scales, plus scale·ln(cells + 1), the most a draw on
    the whole grid can land past its aim in likelihood (its base measure is cells + 1 values)."""
    cells = grid_cells(*step.aggregate.value_range())
    return _margin(step, "low_far", FAR_ALPHA * alpha) + step.parts["low_far"].scale * math.log(cells + 1)


def _margin(step: PlannedStep, part: str, alpha: float) -> float:
    check = step.parts[f"{part}_rank"]
    return float(check.mechanism.interval(alpha)) + CHECK_SCALES * (step.parts[part].scale + check.scale)


def cells_of(step: PlannedStep, alpha: float) -> Cells:
    """The grid a quantile's draws need: the window around q·n holds the aims q·n and
    q·n ± rank_margin with WINDOW_SCALES noise scales beyond each."""
    agg = step.aggregate
    assert isinstance(agg, Quantile)
    scale = max(step.parts[p].scale for p in ("value", "low", "high"))
    margin = max(rank_margin(step, alpha) + WINDOW_SCALES * scale,
                 far_margin(step, alpha) + WINDOW_SCALES * step.parts["low_far"].scale)
    lo, hi = agg.bounds
    return Cells(agg.column, lo, hi, grid_cells(lo, hi), agg.q, margin)


@dataclass(frozen=True)
class Runs:
    """Groups' grid values 0..cells in runs of equal utility, each group's in grid order.

    Run i holds the `size[i]` values from `first[i]` (none for an empty run, which is never drawn);
    group k's runs are offsets[k]..offsets[k+1].
    An exact run (inside the window, or with no values beyond its ends) has [B, A] = [rank_lo,
    rank_hi] at each of its values: an occupied value is a run of one, an empty stretch has
    rank_lo == rank_hi. The stretches before and after the window are inexact: each value's [B, A]
    lies within [rank_lo, rank_hi].
    """

    first: np.ndarray
    size: np.ndarray
    rank_lo: np.ndarray
    rank_hi: np.ndarray
    exact: np.ndarray
    offsets: np.ndarray

    def groups(self) -> np.ndarray:
        """The group of each run."""
        return np.repeat(np.arange(self.offsets.size - 1), np.diff(self.offsets))

    def at(self, group: np.ndarray, j: np.ndarray) -> np.ndarray:
        """The run holding grid value j[i] of group group[i]."""
        span = int(self.first[-1] + self.size[-1]) + 1  # every group's runs cover 0..cells
        key = self.groups() * span + self.first
        found: np.ndarray = np.searchsorted(key, group * span + j, side="right") - 1
        return found


def window_runs(cells: int, win: CellWindow, index: np.ndarray) -> Runs:
    """The runs in `win` of the groups at `index` (-1: a group without values, one run of rank 0),
    all groups in one pass."""
    g = np.asarray(index, dtype=np.int64)
    some = g >= 0
    gs = np.where(some, g, 0)
    lo = np.where(some, np.searchsorted(win.group, gs), 0)
    k = np.where(some, np.searchsorted(win.group, gs + 1), 0) - lo
    start = np.where(some, win.start[gs], 0)
    end = np.minimum(np.where(some, win.stop[gs], cells + 1), cells + 1)
    n = np.where(some, win.n[gs], 0).astype(np.float64)
    below = np.where(some, win.below[gs], 0).astype(np.float64)
    # The window's cells of each group in turn, and the values at or below each (cum).
    offsets = np.concatenate(([0], np.cumsum(k)))
    owner = np.repeat(np.arange(g.size), k)
    pos = np.arange(offsets[-1]) - offsets[owner]
    take = lo[owner] + pos
    c, cnt = win.cell[take], win.count[take].astype(np.float64)
    total = np.concatenate(([0.0], np.cumsum(cnt)))
    cum = below[owner] + total[1:] - total[offsets[owner]]
    top = below + total[offsets[1:]] - total[offsets[:-1]]
    # Per group, in grid order: stretch before, gap, value, gap, ..., value, gap, stretch after.
    before = 2 * offsets[:-1] + 3 * np.arange(g.size)
    after = before + 2 * k + 2
    value = before[owner] + 2 + 2 * pos
    slots = int(2 * offsets[-1] + 3 * g.size)
    first, size = np.empty(slots, np.int64), np.empty(slots, np.int64)
    rank_lo, rank_hi, exact = np.empty(slots), np.empty(slots), np.ones(slots, dtype=bool)
    first[before], size[before], rank_lo[before], rank_hi[before] = 0, start, 0.0, below
    exact[before] = below == 0
    first[after], size[after], rank_lo[after], rank_hi[after] = end, cells + 1 - end, top, n
    exact[after] = top == n
    first[value], size[value], rank_lo[value], rank_hi[value] = c, 1, cum - cnt, cum
    # A gap runs from the value before it (or the window's start) to the next slot's first value.
    gaps = np.concatenate((before + 1, value + 1))
    first[gaps] = np.concatenate((start, c + 1))
    rank_lo[gaps] = rank_hi[gaps] = np.concatenate((below, cum))
    size[gaps] = first[gaps + 1] - first[gaps]
    # Empty runs stay: they hold no candidate, and `at` finds the non-empty run at the same first.
    return Runs(first, size, rank_lo, rank_hi, exact, np.append(before, slots))


def group_runs(cells: int, win: CellWindow, g: int) -> Runs:
    """Group g's runs in `win` (g = -1: a group without values, one run of rank 0)."""
    return window_runs(cells, win, np.array([g]))


def distance(lo: np.ndarray, hi: np.ndarray, aim: np.ndarray | float) -> np.ndarray:
    """dist(aim, [lo, hi]) for runs' rank ranges: -u exactly for an exact run, at most -u
    otherwise."""
    d: np.ndarray = np.maximum(np.maximum(lo - aim, aim - hi), 0.0)
    return d


def levels(spacing: Spacing) -> tuple[int, int, int, int]:
    """(bits, origin, top, floor) of a spacing: its levels are bits and floor..top; a spacing
    without `top` has the one level bits, one without `floor` every level bits..top."""
    bits = spacing[0]
    top = spacing[2] if len(spacing) >= 3 else bits
    return bits, spacing[1], top, (spacing[3] if len(spacing) == 4 else bits + 1)


@njit(cache=True, nogil=True)
def _masses(first: np.ndarray, size: np.ndarray, origin: int, bits: int, top: int,
            floor: int) -> np.ndarray:
    """`run_mass` per run, compiled: the levels' counts of multiples in [a, a + size), a = first +
    origin, each run at once (a loop of numpy passes over the levels took seconds on 10^6 runs)."""
    mass = np.zeros(first.size, np.int64)
    for i in range(first.size):
        a = first[i] + origin
        level = bits
        while level <= top:
            mass[i] += (((a + size[i] - 1) >> level) - ((a - 1) >> level)) << (level - bits)
            level = _next_level(level, bits, floor)
    return mass


@njit(cache=True, nogil=True)
def _next_level(level: int, bits: int, floor: int) -> int:
    """The level after `level`: bits, then floor, floor + 1, ... (`levels`)."""
    return max(level + 1, floor) if level == bits else level + 1


@njit(cache=True, nogil=True)
def _picks(first: np.ndarray, size: np.ndarray, r: np.ndarray, origin: int, bits: int,
           top: int, floor: int) -> np.ndarray:
    """`pick` per run, compiled."""
    out = np.empty(first.size, np.int64)
    for i in range(first.size):
        a, left = first[i] + origin, r[i]
        level = bits
        while level <= top:
            low = ((a - 1) >> level) + 1  # the run's first multiple of 2^level, in units of it
            weight = ((((a + size[i] - 1) >> level) + 1 - low) << (level - bits))
            if left < weight:
                out[i] = ((low + (left >> (level - bits))) << level) - origin
                break
            left -= weight
            level = _next_level(level, bits, floor)
    return out


def run_mass(runs: Runs, spacing: Spacing) -> np.ndarray:
    """Per run, the base measure of its grid values: j weighs 2^(l - bits) for each of the
    spacing's levels l (`levels`) with j + origin a multiple of 2^l (one level: the candidates'
    count)."""
    bits, origin, top, floor = levels(spacing)
    mass: np.ndarray = _masses(runs.first.astype(np.int64), runs.size.astype(np.int64), origin, bits, top,
                               floor)
    return mass


def pick(first: np.ndarray, size: np.ndarray, r: np.ndarray, spacing: Spacing) -> np.ndarray:
    """The grid value that r in [0, mass) of the run (first, size) points to, level by level in
    the order `run_mass` adds them: uniform r picks each value with probability ∝ its weight."""
    bits, origin, top, floor = levels(spacing)
    out: np.ndarray = _picks(first.astype(np.int64), size.astype(np.int64), np.asarray(r, np.int64),
                             origin, bits, top, floor)
    return out


def run_scores(runs: Runs, aim: np.ndarray | float, scale: float, spacing: Spacing = (0, 0)) -> np.ndarray:
    """Scores scale·log(mass) + u of the runs: choosing run i with probability ∝ exp(score_i/scale),
    then one of its candidates uniformly, draws candidate j with probability ∝ exp(u(j)/scale) (see
    module); -inf for a run without candidates."""
    return _scores(run_mass(runs, spacing), runs.rank_lo, runs.rank_hi, aim, scale)


def _scores(mass: np.ndarray, lo: np.ndarray, hi: np.ndarray, aim: np.ndarray | float,
            scale: float) -> np.ndarray:
    with np.errstate(divide="ignore"):
        score: np.ndarray = scale * np.log(mass.astype(np.float64)) - distance(lo, hi, aim)
    return score


@dataclass(frozen=True)
class Candidates:
    """The runs of a `Runs` holding candidates on a spacing (`run_mass` > 0; every group has
    some): their positions, groups and masses; per group their number and the first's place."""

    mass: np.ndarray
    live: np.ndarray
    owner: np.ndarray
    m: np.ndarray
    start: np.ndarray

    @classmethod
    def of(cls, runs: Runs, spacing: Spacing, groups: int) -> Candidates:
        mass = run_mass(runs, spacing)
        live = np.flatnonzero(mass > 0)
        owner = runs.groups()[live]
        m = np.bincount(owner, minlength=groups)
        return cls(mass, live, owner, m, np.concatenate(([0], np.cumsum(m)[:-1])))


def draws(step: PlannedStep, part: str, runs: Runs, aim: np.ndarray, whole: Callable[[], Runs],
          spacing: Spacing = (0, 0), *, rng: Rng, candidates: Candidates | None = None) -> np.ndarray:
    """One candidate grid value per group of `runs`, aimed at rank aim[k] (q·n plus a public
    constant; see the module), all groups at once.

    Each group runs a rejection sampler over its runs with candidates (the first proposal kept
    wins; rounds of proposals double): `Envelope` proposes each run with a known probability and
    keeps it with its weight e^-gap over the envelope's. A stretch outside the window is proposed
    with its best utility, so a value j there is kept with probability exp(-(d(j) - d_min)/scale), d(j) its
    distance on the whole grid (`whole()`: the same groups' runs on it): rejection sampling, exact
    whatever the window (von Neumann 1951); a group whose value is refused draws again. `candidates`:
    the runs' `Candidates.of(runs, spacing)`, when draws on the same spacing share it.
    """
    scale = step.parts[part].mechanism.scale
    cand = Candidates.of(runs, spacing, aim.size) if candidates is None else candidates
    mass, owner, m, start = cand.mass, cand.owner, cand.m, cand.start
    scores = _scores(mass[cand.live], runs.rank_lo[cand.live], runs.rank_hi[cand.live], aim[owner], scale)
    gaps = (np.maximum.reduceat(scores, start)[owner] - scores) / scale
    out = np.empty(aim.size, dtype=np.int64)
    envelope = Envelope.of(gaps, owner, m)
    pending, size = np.arange(aim.size), envelope.first_round()
    while pending.size:
        proposer = np.repeat(pending, size[pending])
        proposal, gamma = envelope.propose(proposer, start, rng)
        accepted = np.flatnonzero(bernoulli_exp(gamma, rng))
        group, first = np.unique(proposer[accepted], return_index=True)  # the first kept per group
        i = cand.live[proposal[accepted[first]]]
        j = pick(runs.first[i], runs.size[i], rng.integers(0, mass[i]), spacing)
        ok = runs.exact[i].copy()
        if not ok.all():
            grid, out_of = whole(), np.flatnonzero(~ok)
            on = grid.at(group[out_of], j[out_of])
            aims, here = aim[group[out_of]], i[out_of]
            excess = (distance(grid.rank_lo[on], grid.rank_hi[on], aims)
                      - distance(runs.rank_lo[here], runs.rank_hi[here], aims))
            ok[out_of] = bernoulli_exp(excess / scale, rng)
        out[group[ok]] = j[ok]
        pending = np.setdiff1d(pending, group[ok], assume_unique=True)
        size[pending] = np.minimum(2 * size[pending], MAX_ROUND)
    return out


@dataclass(frozen=True)
class Envelope:
    """Proposals for the runs of several groups, each run i of weight w_i = e^-gap_i <= 1 (a
    group's best run has gap 0): with probability 1/2 uniform among the group's a runs with
    gap <= G = log(1 + m), else uniform among all its m runs, so run i is proposed with
    q_i = [gap_i <= G]/(2a) + 1/(2m). Against the envelope M·q with M = 2am/(a + m), a near run is
    kept with probability w_i and a far one with w_i·(a + m)/a = e^-(gap_i - log(1 + m/a)) <= 1
    (as G >= log(1 + m/a)): rejection sampling draws run i with probability ∝ w_i exactly (von
    Neumann 1951), with M/Σw (about 2a/Σw) proposals per draw instead of m/Σw for uniform
    proposals. Arrays are per run (`gaps`, `near`: the near runs' positions, group by group) or
    per group (`m`, `a`, `first`: the first near run's place in `near`, `bound`: G, `shift`:
    log(1 + m/a))."""

    gaps: np.ndarray
    near: np.ndarray
    m: np.ndarray
    a: np.ndarray
    first: np.ndarray
    bound: np.ndarray
    shift: np.ndarray
    weight: np.ndarray  # per group: Σ w over the near runs (only to size the rounds)

    @classmethod
    def of(cls, gaps: np.ndarray, owner: np.ndarray, m: np.ndarray) -> Envelope:
        """The envelope of runs with `gaps`, run k of group owner[k], m runs per group."""
        bound = np.log1p(m.astype(np.float64))
        near = np.flatnonzero(gaps <= bound[owner])
        a = np.bincount(owner[near], minlength=m.size)
        first = np.concatenate(([0], np.cumsum(a)[:-1]))
        shift = np.log1p(m / np.maximum(a, 1))
        weight = np.bincount(owner[near], np.exp(-gaps[near]), minlength=m.size)
        return cls(gaps, near, m, a, first, bound, shift, weight)

    def first_round(self) -> np.ndarray:
        """Proposals per group in the first round: FIRST_ROUND_DRAWS expected acceptances."""
        a, m = self.a.astype(np.float64), self.m.astype(np.float64)
        ratio = 2 * a * m / np.maximum(a + m, 1) / np.maximum(self.weight, 1e-300)
        size: np.ndarray = np.clip(np.ceil(FIRST_ROUND_DRAWS * ratio), 1, MAX_ROUND).astype(np.int64)
        return size

    def propose(self, proposer: np.ndarray, start: np.ndarray, rng: Rng) -> tuple[np.ndarray, np.ndarray]:
        """One proposal per entry of `proposer` (a group): the run's position, and the γ it is
        kept with, P = e^-γ."""
        near_branch = rng.integers(0, 2, proposer.size).astype(bool)
        r = rng.integers(0, np.where(near_branch, self.a[proposer], self.m[proposer]))
        proposal = start[proposer] + r
        proposal[near_branch] = self.near[self.first[proposer[near_branch]] + r[near_branch]]
        gap = self.gaps[proposal]
        gamma = np.maximum(gap - np.where(gap > self.bound[proposer], self.shift[proposer], 0.0), 0.0)
        return proposal, gamma


def closed_ranks(runs: Runs, j: np.ndarray, whole: Callable[[], Runs]) -> tuple[np.ndarray, np.ndarray]:
    """(B(j), A(j)) per group: the values below grid value j[k] of group k and at or below it."""
    group = np.arange(j.size)
    i = runs.at(group, j)
    low, high = runs.rank_lo[i], runs.rank_hi[i]
    out_of = np.flatnonzero(~runs.exact[i])
    if out_of.size:
        grid = whole()
        on = grid.at(out_of, j[out_of])
        low[out_of], high[out_of] = grid.rank_lo[on], grid.rank_hi[on]
    return low, high


def chunks(win: CellWindow, index: np.ndarray) -> list[slice]:
    """Consecutive slices of `index` whose groups hold about CHUNK_CELLS window cells together:
    the draws run on arrays that stay in the CPU cache, a few Python steps for all groups."""
    g = np.maximum(index, 0)
    k = np.where(index >= 0, np.searchsorted(win.group, g + 1) - np.searchsorted(win.group, g), 0)
    ends = np.searchsorted(np.cumsum(k + 3), np.arange(1, 1 + (int(k.sum()) + 3 * k.size) // CHUNK_CELLS)
                           * CHUNK_CELLS)
    bounds = np.unique(np.concatenate(([0], ends + 1, [index.size])).clip(0, index.size))
    return [slice(int(a), int(b)) for a, b in pairwise(bounds)]


def quantile_draws(step: PlannedStep, win: CellWindow, spec: Cells, index: np.ndarray, alpha: float,
                   full_grid: FullGrid, *, rng: Rng) -> Estimate:
    """The value and its interval at level 1 - α for the groups at `index` (-1: no data).

    `full_grid(cells)` reads the whole grid, needed only when a draw lands outside its window or a
    candidate's rank lies there.
    """
    agg = step.aggregate
    assert isinstance(agg, Quantile)
    lo, hi = agg.bounds
    q, width = agg.q, (hi - lo) / spec.cells
    if not index.size:
        return Estimate(np.empty(0), np.empty(0), np.empty(0))
    spacing, measure = candidate_spacing(lo, hi, spec.cells), value_spacing(lo, hi, spec.cells)
    s, far = rank_margin(step, alpha), far_margin(step, alpha)

    @cache
    def whole_window() -> CellWindow:  # read at most once per aggregate, only if a draw needs it
        return full_grid(replace(spec, margin=FULL_GRID))

    if not win.n.size:  # no group kept a row (all at -1): the arrays read at 0 need one entry
        win = replace(win, **{k: np.zeros(1, np.int64) for k in ("n", "start", "stop", "below")})
    t = np.where(index >= 0, q * win.n[np.maximum(index, 0)].astype(np.float64), 0.0)
    value = np.empty(index.size)
    j, d = ({p: np.empty(index.size) for p in ENDS} for _ in range(2))
    for part in chunks(win, index):
        sub, aim = index[part], t[part]
        runs = window_runs(spec.cells, win, sub)
        whole = cache(lambda sub=sub: window_runs(spec.cells, whole_window(), sub))
        value[part] = draws(step, "value", runs, aim, whole, measure, rng=rng)
        # Candidates s (and far) ranks below and above t, each kept only if its noisy rank
        # certifies it.
        both = Candidates.of(runs, spacing, sub.size)
        for p, side, shift, on in (("low", 0, -s, spacing), ("high", 1, s, spacing),
                                   ("low_far", 0, -far, FINE), ("high_far", 1, far, FINE)):
            j[p][part] = draws(step, p, runs, aim + shift, whole, on, rng=rng,
                               candidates=both if on is spacing else None)
            d[p][part] = closed_ranks(runs, j[p][part].astype(np.int64), whole)[side] - aim
    keep = {}
    for p in ENDS:
        check = step.parts[f"{p}_rank"].mechanism
        h = float(check.interval(alpha * (FAR_ALPHA if p.endswith("far") else 1 - FAR_ALPHA)))
        noisy = np.asarray(check.release(d[p], rng=rng))
        keep[p] = noisy + h < 0 if p.startswith("low") else noisy - h >= 0
    low = np.where(keep["low"], j["low"], np.where(keep["low_far"], j["low_far"], np.nan))
    high = np.where(keep["high"], j["high"], np.where(keep["high_far"], j["high_far"], np.nan))
    return Estimate(lo + value * width, np.where(np.isnan(low), lo, lo + (low - 0.5) * width),
                    np.where(np.isnan(high), hi, lo + (high + 0.5) * width))


@dataclass(frozen=True)
class Quantile(Clipped):
    """The q-quantile of the clipped values (see the module): a value drawn by the exponential
    mechanism over the grid, and an interval certified by noisy ranks."""

    q: float = field(kw_only=True)
    kind: ClassVar[str] = "quantile"
    noisy: ClassVar[tuple[Noisy, ...]] = (
        Noisy("value", 1 - 4 * NEAR - 4 * FAR, select=True),
        *(Noisy(p, FAR if p.endswith("far") else NEAR, select=True) for p in ENDS),
        *(Noisy(f"{p}_rank", FAR if p.endswith("far") else NEAR) for p in ENDS))

    def sensitivity(self, part: str, max_rows: int) -> float:
        """Every part moves by at most max_rows·max(q, 1 - q) (see the module; McSherry & Talwar
        2007, Def. of Δu; Smith 2011)."""
        return float(max_rows) * max(self.q, 1 - self.q)

    def needs(self, step: PlannedStep, alpha: float) -> tuple[Measure | Cells | Bins, ...]:
        return (cells_of(step, alpha),)

    def estimate(self, step: PlannedStep, exact: ExactAggregates, index: np.ndarray, alpha: float, *,
                 rng: Rng, full_grid: FullGrid | None) -> Estimate:
        assert full_grid is not None, "quantiles need the engine's full grid"
        spec = cells_of(step, alpha)
        return quantile_draws(step, exact.cells[spec], spec, index, alpha, full_grid, rng=rng)

    def value_range(self) -> tuple[float, float]:
        return self.bounds

    def accuracy(self, step: PlannedStep, alpha: float, n: int, *, rng: Rng | None) -> Accuracy:
        """An upper bound in quantile levels on how far an interval end lies from q·n when its
        first candidate is kept (else it is the far candidate or the bound): rank_margin, plus
        how far past its aim a candidate draw lands, at most scale·ln(2M/α) ranks with
        probability 1 - α/2 when a candidate holds the aim's rank (u = 0) among candidates of
        total mass M, each at least 1 (McSherry & Talwar 2007,
        Thm 8). The typical reach is rank_margin plus a noise scale or two
        (bench/quantile_coverage.py)."""
        lo, hi = self.bounds
        cells = grid_cells(lo, hi)
        m = total_mass(cells, candidate_spacing(lo, hi, cells))
        past = max(step.parts[p].scale for p in ("low", "high")) * math.log(2 * m / alpha)
        return bound(float(min(1.0, (rank_margin(step, alpha) + past) / n)))

    def describe(self) -> str:
        lo, hi = self.bounds
        return f"quantile({self.column!r}, {self.q:g}, bounds=({lo:g}, {hi:g}))"

    def arguments(self) -> dict[str, object]:
        return {**super().arguments(), "q": self.q}


@constructor
def quantile(column: str, q: float = 0.5, bounds: Sequence[float] | None = None, *,
             weight: float = 1.0, epsilon: float | None = None) -> Quantile:
    """The q-quantile of `column` clipped to `bounds`, by the exponential mechanism (Smith 2011)."""
    b = budget(weight, epsilon)
    return Quantile(check_column(column), bounds=check_bounds(bounds), q=check_open_unit("q", q), **b)
