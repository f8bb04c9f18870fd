"""The mean per group of a column clipped to public bounds (`mean`), and the share of rows where
a condition holds (`share`, the mean of its 0/1 value), in two stages per group."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd

from bayesdp.errors import DataError
from bayesdp.noise import Rng
from bayesdp.tables.accuracy import Accuracy
from bayesdp.tables.aggregates import Noisy, budget, check_bounds, check_column, constructor
from bayesdp.tables.engines.base import Diagnostics, ExactAggregates
from bayesdp.tables.estimate import Estimate, FullGrid, PlannedStep, estimate, noisy, ratio_range
from bayesdp.tables.sums import Moments

if TYPE_CHECKING:
    from bayesdp.expressions import RowExpression
    from bayesdp.tables.engines.base import Engine

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
        (`branches`). Intervals: interval arithmetic over the parts a group uses, each count and
        sum at α/4 and Z at α/2. The branch depends on stage 1's count only, so a miss needs its
        α/4 event or one of the other parts' (α/2 for Z, 3α/4 for the second stage): at most α
        in all.
        """
        mom = self.moments(exact, index)
        n, s = mom[:, 0], mom[:, 1]
        lo, hi = self.bounds
        mid, r = (lo + hi) / 2, (hi - lo) / 2
        n1, w1 = noisy(step, "count", n, alpha / 4, rng=rng)
        s1, _ = noisy(step, "sum", s - n * mid, alpha / 4, rng=rng)
        centre = np.clip(mid + s1 / np.maximum(n1, 1.0), lo, hi)
        big = n1 >= MEAN_SWITCH * step.parts["count"].scale
        value, low, high = np.empty(n.size), np.full(n.size, float(lo)), np.full(n.size, float(hi))
        if big.any():
            c, d = centre[big], np.maximum(centre[big] - lo, hi - centre[big])
            z, wz = noisy(step, "centred", (s[big] - n[big] * c) / d, alpha / 2, rng=rng)
            nb = n1[big]
            value[big] = c + d * z / np.maximum(nb, 1.0)
            e_lo, e_hi = ratio_range(z - wz, z + wz, np.maximum(nb - w1, 1.0), np.maximum(nb + w1, 1.0))
            known = nb - w1 >= 1.0
            low[big] = np.where(known, c + d * e_lo, lo)
            high[big] = np.where(known, c + d * e_hi, hi)
        small = ~big
        if small.any():
            n2, _ = noisy(step, "count2", n[small], alpha / 4, rng=rng)
            s2, _ = noisy(step, "sum2", s[small] - n[small] * mid, alpha / 4, rng=rng)
            kn, ks = _inverse_variance(step, "count", "count2"), _inverse_variance(step, "sum", "sum2")
            n_hat, s_hat = kn * n1[small] + (1 - kn) * n2, ks * s1[small] + (1 - ks) * s2
            wn, ws = second_stage_widths(step, alpha)
            value[small] = mid + s_hat / np.maximum(n_hat, 1.0)
            e_lo, e_hi = ratio_range(s_hat - ws, s_hat + ws, np.maximum(n_hat - wn, 1.0),
                                     np.maximum(n_hat + wn, 1.0))
            known = n_hat - wn >= 1.0
            low[small] = np.where(known, mid + np.maximum(e_lo, -r), lo)
            high[small] = np.where(known, mid + np.minimum(e_hi, r), hi)
        value = np.clip(value, lo, hi)
        return Estimate(value, np.clip(low, lo, hi), np.clip(high, lo, hi))

    def value_range(self) -> tuple[float, float]:
        return self.bounds

    def half_width(self, step: PlannedStep, alpha: float, n: int) -> float:
        """The interval half-width for a group of n values, from public parameters only: at most
        2r·wZ/(n - wn) in the re-centred stage (d <= 2r, μ = c), (wS + r·wn)/(n - wn) in the other."""
        lo, hi = self.bounds
        r = (hi - lo) / 2
        count = step.parts["count"].mechanism
        if n >= MEAN_SWITCH * count.scale:
            wz = float(step.parts["centred"].mechanism.interval(alpha / 2))
            wn = float(count.interval(alpha / 4))
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
        lo, hi = self.bounds
        gen = np.random.default_rng(SIMULATION_SEED) if rng is None else rng
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
    """Half-widths of a mean's averaged count and sum (second stage): each holds when both of
    its parts' α/4 intervals do."""
    w = {p: float(step.parts[p].mechanism.interval(alpha / 4)) for p in ("count", "count2", "sum", "sum2")}
    kn, ks = _inverse_variance(step, "count", "count2"), _inverse_variance(step, "sum", "sum2")
    return kn * w["count"] + (1 - kn) * w["count2"], ks * w["sum"] + (1 - ks) * w["sum2"]


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
