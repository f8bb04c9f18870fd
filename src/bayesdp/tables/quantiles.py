"""A quantile per group: the exponential mechanism over a grid with the closed-rank utility, and an
interval certified by noisy ranks.

The true q-quantile of a group's n values is `numpy.quantile(x, q, method="inverted_cdf")`: the
smallest value v with #{x <= v} >= q·n. Values are clipped to the bounds [lo, hi] and rounded to
the grid lo + j·w, j = 0..cells (`grid_cells`); rounding is monotone, so the grid quantile is the
true quantile rounded to the grid, at most w/2 away.

The value. Every grid value j is a candidate output with base measure 1 (counting measure on the
grid, fixed by the public bounds, so it does not depend on the data). Its utility is the
closed-rank utility (the exponential mechanism for the median of Smith 2011, with each grid value
its own candidate so that ties keep their rank interval; Drechsler et al. 2022, "Non-parametric
differentially private confidence intervals for the median", treat the ranks of tied data alike):

    u(j) = -dist(t, [B(j), A(j)]),  B(j) = #{values < j}, A(j) = #{values <= j}, t = q·n + c,

c a public constant. The value holding rank t (B < t <= A) scores 0, so a value shared by many
rows, an integer age say, is drawn exactly. Empty grid values between two occupied ones share one
utility and form a run; a draw picks a run with probability ∝ size·exp(u/scale), then a grid
value uniformly inside it (McSherry & Talwar 2007, exponential mechanism with base measure μ).

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
candidate lands on the tie instead of past it.

A noisy rank certifies each candidate: L <= v exactly when B(L) < q·n, so D̃ = B(L) - q·n + Z,
with Z the noise of a Laplace (or Gaussian) mechanism of sensitivity m·max(q, 1-q) (the same
argument as above), keeps L when D̃ + h < 0, h the noise's two-sided 1 - α half-width; otherwise
the lower end is lo. A wrong L is kept only if Z < -h, probability <= α/2 whatever the draw (it is
independent of Z); the same holds for H with A(H) >= q·n. So the interval [L - w/2, H + w/2] (half
a grid cell for the rounding) covers v with probability >= 1 - α; `estimate.consistent` then
clamps it to the bounds and widens it to hold the estimate (post-processing).

Cost: the value gets 0.65 of the aggregate's budget, each candidate draw and each rank check
0.0875 (`Quantile.noisy`); the value's rank error grows by 1/0.65 against a point that takes the
whole budget. The interval spans about ±`rank_margin` ranks around q·n: at q = 1/2, one row per
unit and α = 0.05, about 60/ε ranks (ε the aggregate's, per group).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, partial
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from bayesdp.errors import check_open_unit
from bayesdp.noise import Rng, bernoulli_exp
from bayesdp.tables.accuracy import Accuracy, bound
from bayesdp.tables.aggregates import Clipped, Noisy, budget, check_bounds, check_column, constructor
from bayesdp.tables.engines.base import FULL_GRID, Bins, Cells, CellWindow, ExactAggregates, Measure
from bayesdp.tables.estimate import Estimate, FullGrid

if TYPE_CHECKING:
    from bayesdp.tables.plan import Step

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

# The interval's candidates are the grid values on a grid of at most about 2^16 cells (a coarser
# dyadic grid when the quantile's is dyadic): see the module.
CANDIDATE_CELLS_LOG2 = 16

# (bits, origin): the candidates are the grid values j with j + origin a multiple of 2^bits.
Spacing = tuple[int, int]


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
    them, counted from lo's index on the dyadic grid (so integers stay candidates) or from lo."""
    bits = max(cells.bit_length() - 1 - CANDIDATE_CELLS_LOG2, 0)
    k = lo / ((hi - lo) / cells)
    return bits, (int(k) if k == math.floor(k) and abs(k) < 2**53 else 0)


def rank_margin(step: Step, alpha: float) -> float:
    """Ranks between q·n and the aims of the interval's candidate draws: the rank check's one-sided
    threshold at α/2 plus CHECK_SCALES noise scales of the draw and the check."""
    check = step.parts["low_rank"]
    return float(check.mechanism.interval(alpha)) + CHECK_SCALES * (step.parts["low"].scale + check.scale)


def cells_of(step: Step, alpha: float) -> Cells:
    """The grid a quantile's draws need: the window around q·n holds the aims q·n and
    q·n ± rank_margin with WINDOW_SCALES noise scales beyond each."""
    agg = step.aggregate
    assert isinstance(agg, Quantile)
    scale = max(step.parts[p].scale for p in ("value", "low", "high"))
    margin = rank_margin(step, alpha) + WINDOW_SCALES * scale
    lo, hi = agg.bounds
    return Cells(agg.column, lo, hi, grid_cells(lo, hi), agg.q, margin)


@dataclass(frozen=True)
class Runs:
    """A group's grid values 0..cells in runs of equal utility, in grid order.

    Run i holds the `size[i]` values from `first[i]`. An exact run (inside the window, or with no
    values beyond its ends) has [B, A] = [rank_lo, rank_hi] at each of its values: an occupied value
    is a run of one, an empty stretch has rank_lo == rank_hi. The stretches before and after the
    window are inexact: each value's [B, A] lies within [rank_lo, rank_hi].
    """

    first: np.ndarray
    size: np.ndarray
    rank_lo: np.ndarray
    rank_hi: np.ndarray
    exact: np.ndarray

    def at(self, j: int) -> int:
        """The run holding grid value j."""
        return int(np.searchsorted(self.first, j, side="right")) - 1


def group_runs(cells: int, win: CellWindow, g: int) -> Runs:
    """Group g's runs in `win` (g = -1: a group without values, one run of rank 0)."""
    if g < 0:
        one = np.ones(1, dtype=bool)
        return Runs(np.zeros(1, np.int64), np.array([cells + 1]), np.zeros(1), np.zeros(1), one)
    first, stop = np.searchsorted(win.group, [g, g + 1])
    c, cnt = win.cell[first:stop], win.count[first:stop].astype(np.float64)
    start, end = int(win.start[g]), min(int(win.stop[g]), cells + 1)
    n, below = float(win.n[g]), float(win.below[g])
    cum = below + np.concatenate(([0.0], np.cumsum(cnt)))
    k = c.size
    # In grid order: stretch before, gap, value, gap, ..., value, gap, stretch after.
    starts = np.empty(2 * k + 1, np.int64)
    sizes = np.empty(2 * k + 1, np.int64)
    lo_r, hi_r = np.empty(2 * k + 1), np.empty(2 * k + 1)
    starts[0::2], sizes[0::2] = np.concatenate(([start], c + 1)), np.concatenate((c, [end])) - \
        np.concatenate(([start], c + 1))
    lo_r[0::2] = hi_r[0::2] = cum
    starts[1::2], sizes[1::2], lo_r[1::2], hi_r[1::2] = c, 1, cum[:-1], cum[1:]
    first_r = np.concatenate(([0], starts, [end]))
    size_r = np.concatenate(([start], sizes, [cells + 1 - end]))
    rank_lo = np.concatenate(([0.0], lo_r, cum[-1:]))
    rank_hi = np.concatenate(([below], hi_r, [n]))
    exact = np.concatenate(([below == 0], np.ones(2 * k + 1, dtype=bool), [cum[-1] == n]))
    keep = size_r > 0
    return Runs(first_r[keep], size_r[keep], rank_lo[keep], rank_hi[keep], exact[keep])


def distance(runs: Runs, aim: float) -> np.ndarray:
    """dist(aim, [rank_lo, rank_hi]) per run: -u exactly for an exact run, at most -u otherwise."""
    d: np.ndarray = np.maximum(np.maximum(runs.rank_lo - aim, aim - runs.rank_hi), 0.0)
    return d


def run_mass(runs: Runs, spacing: Spacing) -> np.ndarray:
    """Per run, how many of its grid values j are candidates: j + origin a multiple of 2^bits."""
    bits, origin = spacing
    a = runs.first + origin
    mass: np.ndarray = ((a + runs.size - 1) >> bits) - ((a - 1) >> bits)
    return mass


def run_scores(runs: Runs, aim: float, scale: float, spacing: Spacing = (0, 0)) -> np.ndarray:
    """Scores scale·log(mass) + u of the runs: choosing run i with probability ∝ exp(score_i/scale),
    then one of its candidates uniformly, draws candidate j with probability ∝ exp(u(j)/scale) (see
    module); -inf for a run without candidates."""
    mass = run_mass(runs, spacing).astype(np.float64)
    with np.errstate(divide="ignore"):
        score: np.ndarray = scale * np.log(mass) - distance(runs, aim)
    return score


def draw(step: Step, part: str, runs: Runs, aim: float, whole: Callable[[], Runs],
         spacing: Spacing = (0, 0), *, rng: Rng) -> int:
    """One candidate grid value aimed at rank `aim` (q·n plus a public constant; see the module).

    A stretch outside the window is proposed with its best utility, so a value j there is kept
    with probability exp(-(d(j) - d_min)/scale), d(j) its distance on the whole grid: rejection
    sampling, exact whatever the window (von Neumann 1951).
    """
    mech = step.parts[part].mechanism
    scores = run_scores(runs, aim, mech.scale, spacing)
    some = np.flatnonzero(np.isfinite(scores))
    bits, origin = spacing
    while True:
        i = int(some[mech.select_index(scores[some], rng=rng)])
        first = ((int(runs.first[i]) + origin - 1) >> bits) + 1
        j = ((first + int(rng.integers(0, run_mass(runs, spacing)[i]))) << bits) - origin
        if runs.exact[i]:
            return j
        grid = whole()
        excess = float(distance(grid, aim)[grid.at(j)] - distance(runs, aim)[i])
        if bernoulli_exp(np.array([excess / mech.scale]), rng=rng)[0]:
            return j


def closed_rank(runs: Runs, j: int, whole: Callable[[], Runs]) -> tuple[float, float]:
    """(B(j), A(j)): the values below grid value j and at or below it."""
    i = runs.at(j)
    if not runs.exact[i]:
        runs = whole()
        i = runs.at(j)
    return float(runs.rank_lo[i]), float(runs.rank_hi[i])


def quantile_draws(step: Step, win: CellWindow, spec: Cells, index: np.ndarray, alpha: float,
                   full_grid: FullGrid, *, rng: Rng) -> Estimate:
    """The value and its interval at level 1 - α for the groups at `index` (-1: no data).

    `full_grid(cells)` reads the whole grid, needed only when a draw lands outside its window or a
    candidate's rank lies there.
    """
    agg = step.aggregate
    assert isinstance(agg, Quantile)
    lo, hi = agg.bounds
    q, width = agg.q, (hi - lo) / spec.cells
    spacing = candidate_spacing(lo, hi, spec.cells)
    s = rank_margin(step, alpha)
    low_check, high_check = step.parts["low_rank"].mechanism, step.parts["high_rank"].mechanism
    w_low, w_high = float(low_check.interval(alpha)), float(high_check.interval(alpha))

    @cache
    def whole_window() -> CellWindow:  # read at most once per aggregate, only if a draw needs it
        return full_grid(replace(spec, margin=FULL_GRID))

    value, j_low, j_high, d_low, d_high = (np.empty(index.size) for _ in range(5))
    for k, g in enumerate(index):
        runs = group_runs(spec.cells, win, int(g))
        t = q * float(win.n[g]) if g >= 0 else 0.0
        whole = cache(partial(lambda g: group_runs(spec.cells, whole_window(), g), int(g)))
        value[k] = draw(step, "value", runs, t, whole, rng=rng)
        # Candidates s ranks below and above t, each kept only if its noisy rank certifies it.
        j_low[k] = draw(step, "low", runs, t - s, whole, spacing, rng=rng)
        j_high[k] = draw(step, "high", runs, t + s, whole, spacing, rng=rng)
        d_low[k] = closed_rank(runs, int(j_low[k]), whole)[0] - t
        d_high[k] = closed_rank(runs, int(j_high[k]), whole)[1] - t
    keep_low = np.asarray(low_check.release(d_low, rng=rng)) + w_low < 0
    keep_high = np.asarray(high_check.release(d_high, rng=rng)) - w_high >= 0
    return Estimate(lo + value * width, np.where(keep_low, lo + (j_low - 0.5) * width, lo),
                         np.where(keep_high, lo + (j_high + 0.5) * width, hi))


@dataclass(frozen=True)
class Quantile(Clipped):
    """The q-quantile of the clipped values (see the module): a value drawn by the exponential
    mechanism over the grid, and an interval certified by noisy ranks."""

    q: float = field(kw_only=True)
    kind: ClassVar[str] = "quantile"
    noisy: ClassVar[tuple[Noisy, ...]] = (
        Noisy("value", 0.65, select=True), Noisy("low", 0.0875, select=True),
        Noisy("high", 0.0875, select=True), Noisy("low_rank", 0.0875), Noisy("high_rank", 0.0875))

    def sensitivity(self, part: str, max_rows: int) -> float:
        """Every part moves by at most max_rows·max(q, 1 - q) (see the module; McSherry & Talwar
        2007, Def. of Δu; Smith 2011)."""
        return float(max_rows) * max(self.q, 1 - self.q)

    def needs(self, step: Step, alpha: float) -> tuple[Measure | Cells | Bins, ...]:
        return (cells_of(step, alpha),)

    def estimate(self, step: Step, exact: ExactAggregates, index: np.ndarray, alpha: float, *,
                 rng: Rng, full_grid: FullGrid | None) -> Estimate:
        assert full_grid is not None, "quantiles need the engine's full grid"
        spec = cells_of(step, alpha)
        return quantile_draws(step, exact.cells[spec], spec, index, alpha, full_grid, rng=rng)

    def value_range(self) -> tuple[float, float]:
        return self.bounds

    def accuracy(self, step: Step, alpha: float, n: int, *, rng: Rng | None) -> Accuracy:
        """An upper bound in quantile levels: the interval spans about ±rank_margin ranks."""
        return bound(float(min(1.0, rank_margin(step, alpha) / n)))

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
