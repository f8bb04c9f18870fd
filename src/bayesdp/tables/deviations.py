"""The standard deviation per group of a column clipped to public bounds (`std`), from noisy
centred moments."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bayesdp.noise import Rng
from bayesdp.tables.accuracy import Accuracy, bound
from bayesdp.tables.aggregates import Noisy, budget, check_bounds, check_column, constructor
from bayesdp.tables.engines.base import ExactAggregates
from bayesdp.tables.estimate import Estimate, FullGrid, PlannedStep, noisy, ratio_range
from bayesdp.tables.sums import Moments


@dataclass(frozen=True)
class Std(Moments):
    """Population standard deviation of the clipped values: a count, a sum and a sum of squares,
    each centred on the middle of the bounds, a third of the budget each."""

    kind: ClassVar[str] = "std"
    noisy: ClassVar[tuple[Noisy, ...]] = (Noisy("count", 1 / 3, integer=True), Noisy("sum", 1 / 3),
                                          Noisy("squares", 1 / 3))

    def sensitivity(self, part: str, max_rows: int) -> float:
        """With |x - mid| <= r: a count moves by max_rows, Σ(x - mid) by max_rows·r, and the
        centred squares (x - mid)² - r²/2 in [-r²/2, r²/2] by max_rows·r²/2."""
        m = float(max_rows)
        r = (self.bounds[1] - self.bounds[0]) / 2
        if part == "count":
            return m
        if part == "sum":
            return m * r
        return m * r * r / 2

    def estimate(self, step: PlannedStep, exact: ExactAggregates, index: np.ndarray, alpha: float, *,
                 rng: Rng, full_grid: FullGrid | None) -> Estimate:
        """E[(x-mid)²] - E[x-mid]² from the noisy parts, each interval at α/3, and its interval by
        interval arithmetic; a group whose count is not clear of its noise gets [0, r]."""
        mom = self.moments(exact, index)
        n, s, sq = mom[:, 0], mom[:, 1], mom[:, 2]
        a = alpha / len(self.noisy)
        lo, hi = self.bounds
        mid, r = (lo + hi) / 2, (hi - lo) / 2
        n_hat, wn = noisy(step, "count", n, a, rng=rng)
        s_hat, ws = noisy(step, "sum", s - n * mid, a, rng=rng)
        n_lo, n_hi = np.maximum(n_hat - wn, 1.0), np.maximum(n_hat + wn, 1.0)
        unknown = n_hat - wn < 1.0
        n_use = np.maximum(n_hat, 1.0)
        e1_lo, e1_hi = ratio_range(s_hat - ws, s_hat + ws, n_lo, n_hi)
        e1_lo, e1_hi = np.clip(e1_lo, -r, r), np.clip(e1_hi, -r, r)
        # Y = Σ((x-mid)² - r²/2) released; E[(x-mid)²] = Y/n + r²/2 (population variance).
        y_hat, wy = noisy(step, "squares", sq - 2 * mid * s + n * mid * mid - n * r * r / 2, a, rng=rng)
        e2 = np.clip(y_hat / n_use + r * r / 2, 0.0, r * r)
        var = np.clip(e2 - np.clip(s_hat / n_use, -r, r) ** 2, 0.0, r * r)
        e2_lo, e2_hi = ratio_range(y_hat - wy, y_hat + wy, n_lo, n_hi)
        e2_lo, e2_hi = np.clip(e2_lo + r * r / 2, 0, r * r), np.clip(e2_hi + r * r / 2, 0, r * r)
        sq_lo = np.where((e1_lo <= 0) & (e1_hi >= 0), 0.0, np.minimum(e1_lo**2, e1_hi**2))
        sq_hi = np.maximum(e1_lo**2, e1_hi**2)
        v_lo, v_hi = np.clip(e2_lo - sq_hi, 0, r * r), np.clip(e2_hi - sq_lo, 0, r * r)
        return Estimate(np.sqrt(var), np.where(unknown, 0.0, np.sqrt(v_lo)),
                        np.where(unknown, r, np.sqrt(v_hi)))

    def value_range(self) -> tuple[float, float]:
        return 0.0, (self.bounds[1] - self.bounds[0]) / 2

    def half_width(self, step: PlannedStep, alpha: float, n: int) -> float:
        """An upper bound on the interval's half-width for a group of n values (public only)."""
        a = alpha / len(self.noisy)
        w = {p: float(part.mechanism.interval(a)) for p, part in step.parts.items()}
        r = (self.bounds[1] - self.bounds[0]) / 2
        return float(min(r, math.sqrt((w["squares"] + r * r * w["count"] + 2 * r * w["sum"])
                                      / max(n - w["count"], 1.0))))

    def accuracy(self, step: PlannedStep, alpha: float, n: int, *, rng: Rng | None) -> Accuracy:
        return bound(self.half_width(step, alpha, n))

    def warning(self, name: str, step: PlannedStep, n: int) -> str | None:
        return self.wide(name, n, self.half_width(step, 0.05, n))


@constructor
def std(column: str, bounds: Sequence[float] | None = None, *, weight: float = 1.0,
        epsilon: float | None = None) -> Std:
    """Standard deviation of `column` clipped to `bounds`, from noisy centred moments."""
    b = budget(weight, epsilon)
    return Std(check_column(column), bounds=check_bounds(bounds), **b)
