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
from bayesdp.tables.estimate import Estimate, FullGrid, PlannedStep, combined_widths, noisy
from bayesdp.tables.sums import Moments

# Share of α for the centred sum's bound in a std's interval (the squares' bound takes the rest:
# on data centred in the bounds the mean's term m1² barely moves the variance), and cells of each
# centred moment's range per half on which the bounds are inverted.
FIRST_ALPHA = 0.35
GRID = 128


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
        """E[(x-mid)²] - E[x-mid]² from the noisy parts, and its interval by test inversion on the
        estimator's own error.

        With n̂ = n + N, Ŝ = S + Z_S and Ŷ = Y + Z_Y the released count, centred sum and centred
        squares, m1 = S/n and m2 = Y/n + r²/2 the true centred moments (variance m2 - m1²):
        exactly Ŝ - n̂·m1 = Z_S - m1·N and Ŷ - n̂·(m2 - r²/2) = Z_Y - (m2 - r²/2)·N, whatever n̂
        is. So with probability >= 1 - FIRST_ALPHA·α, |Ŝ - n̂·m1| <= Q_S(|m1|), the exact quantile
        of |Z_S - m1·N| (`combined_widths`, growing with |m1|: Anderson 1955), and with probability
        >= 1 - (1 - FIRST_ALPHA)·α, |Ŷ - n̂·δ| <= Q_Y(|δ|), δ = m2 - r²/2. The interval holds every
        m2 - m1² whose m1 and m2 meet both (`_feasible`, on pieces of their ranges): it covers the
        true variance with probability >= 1 - α (union bound), and its square roots the std."""
        mom = self.moments(exact, index)
        n, s, sq = mom[:, 0], mom[:, 1], mom[:, 2]
        lo, hi = self.bounds
        mid, r = (lo + hi) / 2, (hi - lo) / 2
        n_hat, _ = noisy(step, "count", n, alpha, rng=rng)
        s_hat, _ = noisy(step, "sum", s - n * mid, alpha, rng=rng)
        # Y = Σ((x-mid)² - r²/2) released; E[(x-mid)²] = Y/n + r²/2 (population variance).
        y_hat, _ = noisy(step, "squares", sq - 2 * mid * s + n * mid * mid - n * r * r / 2, alpha, rng=rng)
        n_use = np.maximum(n_hat, 1.0)
        e2 = np.clip(y_hat / n_use + r * r / 2, 0.0, r * r)
        var = np.clip(e2 - np.clip(s_hat / n_use, -r, r) ** 2, 0.0, r * r)
        count = step.parts["count"].mechanism
        q1 = combined_widths(((step.parts["sum"].mechanism, 1.0),), count,
                             tuple(r * k / GRID for k in range(GRID + 1)), FIRST_ALPHA * alpha)
        q2 = combined_widths(((step.parts["squares"].mechanism, 1.0),), count,
                             tuple(r * r / 2 * k / GRID for k in range(GRID + 1)), (1 - FIRST_ALPHA) * alpha)
        a1, b1 = _feasible(s_hat, n_hat, np.linspace(-r, r, 2 * GRID + 1),
                           q1[np.abs(np.arange(-GRID, GRID + 1))])
        a2, b2 = _feasible(y_hat, n_hat, np.linspace(-r * r / 2, r * r / 2, 2 * GRID + 1),
                           q2[np.abs(np.arange(-GRID, GRID + 1))])
        m1, m2 = a1 <= b1, a2 <= b2
        sq_lo = np.where((a1 <= 0) & (b1 >= 0), 0.0, np.minimum(a1 * a1, b1 * b1))
        first_lo = np.where(m1, sq_lo, np.inf).min(axis=1)
        first_hi = np.where(m1, np.maximum(a1 * a1, b1 * b1), -np.inf).max(axis=1)
        second_lo = np.where(m2, a2, np.inf).min(axis=1) + r * r / 2
        second_hi = np.where(m2, b2, -np.inf).max(axis=1) + r * r / 2
        v_lo = np.clip(second_lo - first_hi, 0.0, r * r)
        v_hi = np.clip(second_hi - first_lo, 0.0, r * r)
        none = ~(m1.any(axis=1) & m2.any(axis=1))  # no moments meet both: an event of chance <= α
        return Estimate(np.sqrt(var), np.where(none, 0.0, np.sqrt(v_lo)), np.where(none, r, np.sqrt(v_hi)))

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


def _feasible(released: np.ndarray, n_hat: np.ndarray, edges: np.ndarray, q: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per group and piece [edges[i], edges[i+1]] of moment values m: the range (lo, hi) of the m
    there with |released - n̂·m| <= Q_i, Q_i the larger of q at the piece's two ends (Q grows
    with |m|, so every m meeting |released - n̂·m| <= Q(|m|) is in a range); lo > hi: none."""
    r, n = released[:, None], n_hat[:, None]
    qp = np.maximum(q[:-1], q[1:])[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        one, two = (r - qp) / n, (r + qp) / n
    zero = n == 0
    every = np.abs(r) <= qp
    lo = np.where(zero, np.where(every, -np.inf, np.inf), np.minimum(one, two))
    hi = np.where(zero, np.where(every, np.inf, -np.inf), np.maximum(one, two))
    return np.maximum(lo, edges[:-1][None, :]), np.minimum(hi, edges[1:][None, :])


@constructor
def std(column: str, bounds: Sequence[float] | None = None, *, weight: float = 1.0,
        epsilon: float | None = None) -> Std:
    """Standard deviation of `column` clipped to `bounds`, from noisy centred moments."""
    b = budget(weight, epsilon)
    return Std(check_column(column), bounds=check_bounds(bounds), **b)
