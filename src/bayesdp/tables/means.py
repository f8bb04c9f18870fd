"""The mean per group of a column clipped to public bounds (`mean`), and the share of rows where
a condition holds (`share`, the mean of its 0/1 value), in two stages per group."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from bayesdp.errors import DataError
from bayesdp.noise import Rng
from bayesdp.tables.accuracy import Accuracy
from bayesdp.tables.aggregates import Noisy, budget, check_bounds, check_column, constructor
from bayesdp.tables.engines.base import Diagnostics, ExactAggregates
from bayesdp.tables.estimate import (
    Estimate,
    FullGrid,
    PlannedStep,
    combined_width,
    combined_widths,
    estimate,
    noisy,
)
from bayesdp.tables.sums import Moments

if TYPE_CHECKING:
    from bayesdp.expressions import RowExpression
    from bayesdp.tables.engines.base import Engine

# The share of α for each count's bound in a mean's interval (the stage-1 count's, and the averaged
# counts' in the other stage): the count's noise only multiplies μ - c, small, so most of α goes to
# the sum's noise, which sets the width (see `Mean.estimate`).
COUNT_ALPHA = 0.05
# Grid of |μ - mid| over [0, r] on which the second stage's error quantiles are computed, and of
# half-widths over [0, 2r] on which its interval is found (`_inverted`).
DELTAS = 16
TIMES = 512
# A mean's stage-1 count must reach this many of its noise scales for the re-centred second stage:
# below it the first estimate is too rough to centre on (simulated crossover, bench/RESULTS.md).
MEAN_SWITCH = 15.0
# Noise draws a mean's preview figures average over: their relative Monte Carlo error is about
# 1/√4000, under 2%.
SIMULATED = 4000
# Where a mean's preview maximum is simulated: this many of its middle half-widths below the top,
# where an estimate (its spread about twice the middle's there) is clipped at the top with
# probability about e^-6 (Laplace tails), yet its divisor d is 2r to within 6 half-widths.
EDGE_WIDTHS = 6.0
# The simulation reads no data, so a fixed seed leaks nothing; it makes a preview repeatable
# (the same figures twice, on a service and on its client).
SIMULATION_SEED = 15
# Previews' simulated figures kept, by their public parameters (cleared when this many are kept).
ACCURACY_KEPT = 256
_ACCURACY: dict[Any, Accuracy] = {}


@dataclass(frozen=True)
class Mean(Moments):
    """Mean of the clipped values in two stages per group (`estimate`)."""

    kind: ClassVar[str] = "mean"
    squares: ClassVar[bool] = False
    # 0.05 to a count and 0.05 to a sum centred on the middle of the bounds; then 0.9 either to a
    # sum centred on that first estimate (groups whose count is clear of its noise) or to a second
    # count (0.36) and sum (0.54).
    noisy: ClassVar[tuple[Noisy, ...]] = (
        Noisy("count", 0.05, integer=True), Noisy("sum", 0.05), Noisy("centred", 0.9),
        Noisy("count2", 0.36, integer=True), Noisy("sum2", 0.54))
    branch_rule: ClassVar[str] = "its stage-1 count decides"

    @property
    def branches(self) -> tuple[tuple[str, ...], ...]:
        """A group's second stage is one of two."""
        return (("count", "sum", "centred"), ("count", "sum", "count2", "sum2"))

    def sensitivity(self, part: str, max_rows: int) -> float:
        """Counts move by max_rows; so does the centred sum Σ(x - c)/max(c - lo, hi - c); a sum
        centred on the middle of the bounds by max_rows·(hi - lo)/2."""
        m = float(max_rows)
        if part in ("count", "count2", "centred"):
            return m
        return m * ((self.bounds[1] - self.bounds[0]) / 2)

    def estimate(self, step: PlannedStep, exact: ExactAggregates, index: np.ndarray, alpha: float, *,
                 rng: Rng, full_grid: FullGrid | None) -> Estimate:
        """A mean in two stages per group, re-centring the sum on a first private estimate (the
        coarse-then-refined scheme of Karwa & Vadhan 2018, ITCS: a rough private location first).

        Stage 1 releases the count n1 and S1 = Σ(x - mid), so c = mid + S1/n1 (clipped to the
        bounds). A group whose n1 is at least MEAN_SWITCH of its noise scales then releases
        Z = Σ(x - c)/d, d = max(c - lo, hi - c) (one row moves it by at most 1), and its mean is
        c + dZ/n1: the count's noise now multiplies only the small μ - c. Any other group releases
        a second count and mid-centred sum, each averaged with stage 1's by inverse variance, and
        its mean is mid + Ŝ/n̂. Either way a group spends the aggregate's whole budget once
        (`branches`).

        Intervals from the estimator's own error. In the re-centred stage, with n1 = n + N and
        δ = μ - c, the error is exactly v - μ = (d·Z - δ·N)/n1 (Z the centred sum's noise). Off
        the event |N| > w_N (α_c = COUNT_ALPHA·α) and |Z| > h_Z (α - 2α_c), |v - μ|·n1 <=
        d·h_Z + |δ|·w_N with |δ| <= |v - μ| + |v - c|, so |v - μ| <= (A + B|v - c|)/(1 - B),
        A = d·h_Z/n1, B = w_N/n1. The other stage has v - μ = (W_S - δ'·W_N)/n̂, δ' = μ - mid,
        W_S = k_s·S1 + (1 - k_s)·S2 and W_N = k_n·N + (1 - k_n)·N2 the averaged sums' and
        counts' noises. Off N's event, |v - μ|·n̂ <= |W_S - δ'(1 - k_n)·N2| + k_n·w_N·|δ'|, and
        the first term's exact (1 - (α - α_c))-quantile Q(|δ'|) (`small_stage_quantiles`) holds
        whatever δ' is: the interval is every μ meeting that bound (test inversion), which holds
        the true μ unless the event of probability α - α_c happens. The branch depends on stage
        1's count N only: Z, S1, S2 and N2 are independent of it, so a miss needs N's event
        (α_c) or, in its branch, Z's or the other stage's (α - α_c): at most α in all.
        """
        mom = self.moments(exact, index)
        n, s = mom[:, 0], mom[:, 1]
        lo, hi = self.bounds
        mid = (lo + hi) / 2
        a_count = COUNT_ALPHA * alpha
        a_sum = alpha - a_count
        n1, w1 = noisy(step, "count", n, a_count, rng=rng)
        s1, _ = noisy(step, "sum", s - n * mid, a_sum, rng=rng)
        centre = np.clip(mid + s1 / np.maximum(n1, 1.0), lo, hi)
        big = n1 >= MEAN_SWITCH * step.parts["count"].scale
        value, low, high = np.empty(n.size), np.full(n.size, float(lo)), np.full(n.size, float(hi))
        if big.any():
            c, d = centre[big], np.maximum(centre[big] - lo, hi - centre[big])
            z, wz = noisy(step, "centred", (s[big] - n[big] * c) / d, a_sum, rng=rng)
            nb = n1[big]
            value[big] = c + d * z / np.maximum(nb, 1.0)
            low[big], high[big] = _error_interval(value[big], c, d * wz, w1, nb, (lo, hi))
        small = ~big
        if small.any():
            n2, _ = noisy(step, "count2", n[small], a_count, rng=rng)
            s2, _ = noisy(step, "sum2", s[small] - n[small] * mid, a_sum, rng=rng)
            kn, ks = _inverse_variance(step, "count", "count2"), _inverse_variance(step, "sum", "sum2")
            n_hat, s_hat = kn * n1[small] + (1 - kn) * n2, ks * s1[small] + (1 - ks) * s2
            value[small] = mid + s_hat / np.maximum(n_hat, 1.0)
            low[small], high[small] = _inverted(value[small], n_hat, kn * w1,
                                                small_stage_quantiles(step, a_sum), (lo, hi))
        value = np.clip(value, lo, hi)
        return Estimate(value, np.clip(low, lo, hi), np.clip(high, lo, hi))

    def value_range(self) -> tuple[float, float]:
        return self.bounds

    def half_width(self, step: PlannedStep, alpha: float, n: int) -> float:
        """The interval half-width for a group of n values, from public parameters only: at most
        2r·wZ/(n - wn) in the re-centred stage (d <= 2r, v = c), (wS + r·wn)/(n - wn) in the other."""
        lo, hi = self.bounds
        r = (hi - lo) / 2
        count = step.parts["count"].mechanism
        if n >= MEAN_SWITCH * count.scale:
            wz = float(step.parts["centred"].mechanism.interval(alpha * (1 - 2 * COUNT_ALPHA)))
            wn = float(count.interval(alpha * COUNT_ALPHA))
            return float(min(r, 2 * r * wz / max(n - wn, 1.0)))
        wn, ws = second_stage_widths(step, alpha)
        return float(min(r, (ws + r * wn) / max(n - wn, 1.0)))

    def accuracy(self, step: PlannedStep, alpha: float, n: int, *, rng: Rng | None) -> Accuracy:
        """The estimator's own figures on SIMULATED noise draws (no data is read), for a mean in
        the middle of the bounds, and (`_max`) the largest over means at the middle, three
        quarters, EDGE_WIDTHS middle half-widths below the top, and the top. The errors grow
        with the re-centred sum's divisor d = max(c - lo, hi - c), largest as the mean nears a
        bound, until clipping at the bound cuts them: the largest lies just before (a share near
        0 or 1), not at the bound. `rng` drives the simulation (default: seeded with
        SIMULATION_SEED)."""
        if rng is not None:
            return self._accuracy(step, alpha, n, rng)
        # Seeded, so a function of public parameters alone: kept, as previews repeat them.
        key = (self, alpha, n, tuple((k, repr(p.mechanism), p.scale) for k, p in step.parts.items()))
        if key not in _ACCURACY:
            if len(_ACCURACY) >= ACCURACY_KEPT:
                _ACCURACY.clear()
            _ACCURACY[key] = self._accuracy(step, alpha, n, np.random.default_rng(SIMULATION_SEED))
        return _ACCURACY[key]

    def _accuracy(self, step: PlannedStep, alpha: float, n: int, gen: Rng) -> Accuracy:
        lo, hi = self.bounds
        middle = self._simulated(step, alpha, n, (lo + hi) / 2, rng=gen)
        edge = max(hi - EDGE_WIDTHS * middle[0], lo + 0.75 * (hi - lo))
        figures = [middle] + [self._simulated(step, alpha, n, mu, rng=gen)
                              for mu in (lo + 0.75 * (hi - lo), edge, hi)]
        return Accuracy(*middle, max(f[0] for f in figures), max(f[1] for f in figures))

    def _simulated(self, step: PlannedStep, alpha: float, n: int, mu: float, *, rng: Rng
                   ) -> tuple[float, float]:
        """Average half-width and absolute error of the estimator on SIMULATED groups of n values
        with mean mu (the release's own code, fed exact aggregates instead of data)."""
        size = np.full(SIMULATED, float(n))
        moments = np.column_stack([size, size * mu, size * mu * mu])
        exact = ExactAggregates(
            groups=pd.DataFrame(index=pd.RangeIndex(SIMULATED)), units=size.astype(np.int64),
            rows=size.astype(np.int64), moments={self.measure: moments}, cells={},
            bins={}, diagnostics=Diagnostics(0, 0, 0, 0, 0))
        est = estimate(step, exact, np.arange(SIMULATED), alpha, rng=rng)
        return float(np.mean(est.high - est.low) / 2), float(np.mean(np.abs(est.value - mu)))

    def warning(self, name: str, step: PlannedStep, n: int) -> str | None:
        return self.wide(name, n, self.half_width(step, 0.05, n))


@dataclass(frozen=True)
class Share(Mean):
    """The mean of a true/false column or condition: the share of rows where it holds."""

    kind: ClassVar[str] = "share"

    def refusal(self, engine: Engine, value: str | RowExpression, name: str) -> DataError | None:
        if engine.is_boolean(value):
            return None
        return DataError(f"share {name!r}: {self.column!r} is not true/false; give a condition "
                         f"such as \"{self.column} > 0\" (rows where it is null are left out)")

    def describe(self) -> str:
        return f"share({self.column!r})"

    def arguments(self) -> dict[str, str]:
        return {"condition": self.column}


def second_stage_widths(step: PlannedStep, alpha: float) -> tuple[float, float]:
    """Half-widths of a mean's averaged count and sum (second stage), each at COUNT_ALPHA·α and
    the rest: quantiles of the averaged noises (for the public half-width of `Mean.half_width`)."""
    kn, ks = _inverse_variance(step, "count", "count2"), _inverse_variance(step, "sum", "sum2")
    a_count = COUNT_ALPHA * alpha
    parts = step.parts
    return (combined_width(((parts["count"].mechanism, kn), (parts["count2"].mechanism, 1 - kn)), a_count),
            combined_width(((parts["sum"].mechanism, ks), (parts["sum2"].mechanism, 1 - ks)),
                           alpha - a_count))


def small_stage_quantiles(step: PlannedStep, alpha: float) -> np.ndarray:
    """Q(δ_k), k = 0..DELTAS, δ_k = k·r/DELTAS: the (1 - α)-quantile of |W_S - δ_k(1 - k_n)·N2|
    (see `Mean.estimate`), each by `combined_width`. Q grows with |δ| (Anderson 1955: the noises
    are symmetric and unimodal), so Q(δ_(k+1)) bounds Q on [δ_k, δ_(k+1)]."""
    kn, ks = _inverse_variance(step, "count", "count2"), _inverse_variance(step, "sum", "sum2")
    r = (step.aggregate.value_range()[1] - step.aggregate.value_range()[0]) / 2
    parts = step.parts
    sums = ((parts["sum"].mechanism, ks), (parts["sum2"].mechanism, 1 - ks))
    weights = tuple((1 - kn) * r * k / DELTAS for k in range(DELTAS + 1))
    return combined_widths(sums, parts["count2"].mechanism, weights, alpha)


def _inverted(value: np.ndarray, n: np.ndarray, c: float, q: np.ndarray, bounds: tuple[float, float]
              ) -> tuple[np.ndarray, np.ndarray]:
    """v ± t*, t* the largest t with n·t <= Q(|v - mid| + t) + c·(|v - mid| + t) on a grid of t
    over [0, |v - mid| + r], as far as a mean in the bounds can lie from v (every μ = v ± t
    meeting the bound lies within; between grid points t_j <= t <= t_(j+1) it needs n·t_j <= the
    right side at t_(j+1), which is larger). The whole bounds where n < 1."""
    lo, hi = bounds
    mid, r = (lo + hi) / 2, (hi - lo) / 2
    away = np.abs(value - mid)
    t = (away + r)[:, None] * np.linspace(0.0, 1.0, TIMES + 1)[None, :]
    off = np.minimum(away[:, None] + t[:, 1:], r)  # |δ'| <= |v - mid| + t and <= r
    right = q[np.minimum(np.ceil(off / r * DELTAS).astype(np.int64), DELTAS)] + c * off
    meets = n[:, None] * t[:, :-1] <= right
    last = TIMES - 1 - np.argmax(meets[:, ::-1], axis=1)  # meets[:, 0] holds: n·0 <= Q
    half = np.take_along_axis(t, last[:, None] + 1, axis=1)[:, 0]
    known = n >= 1.0
    return np.where(known, value - half, lo), np.where(known, value + half, hi)


def _error_interval(value: np.ndarray, base: np.ndarray | float, a: np.ndarray | float, w_count: float,
                    n: np.ndarray, bounds: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """[v - h, v + h], h = (A + B|v - base|)/(1 - B), A = a/n, B = w_count/n (see
    `Mean.estimate`); the whole bounds where n <= max(w_count, 1), the count too rough to divide by."""
    known = n > max(w_count, 1.0)
    m = np.where(known, n, 1.0)
    b = w_count / m
    half = (a / m + b * np.abs(value - base)) / np.where(known, 1 - b, 1.0)
    return np.where(known, value - half, bounds[0]), np.where(known, value + half, bounds[1])


def _inverse_variance(step: PlannedStep, first: str, second: str) -> float:
    """Weight of `first` in the minimum-variance average of two unbiased estimates whose noise
    is of one family, so variances are in the ratio of squared scales (Aitken 1935)."""
    v1, v2 = step.parts[first].scale ** 2, step.parts[second].scale ** 2
    return v2 / (v1 + v2)


@constructor
def mean(column: str, bounds: Sequence[float] | None = None, *, weight: float = 1.0,
         epsilon: float | None = None) -> Mean:
    """Mean of `column` clipped to `bounds`, in two stages: a rough private mean, then the sum
    re-centred on it (see Mean.estimate)."""
    b = budget(weight, epsilon)
    return Mean(check_column(column), bounds=check_bounds(bounds), **b)


@constructor
def share(condition: str, *, weight: float = 1.0, epsilon: float | None = None) -> Share:
    """The share of rows where `condition` holds (a true/false column or row expression such as
    `"union" = 'yes'`), among the rows where it is not null: the mean of its 0/1 value, with the
    mean's two-stage estimate and interval in [0, 1]."""
    b = budget(weight, epsilon)
    return Share(check_column(condition), bounds=(0.0, 1.0), **b)
