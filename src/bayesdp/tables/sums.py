"""The sum per group of a column clipped to public bounds (`sum`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bayesdp.noise import Rng
from bayesdp.tables.accuracy import Accuracy, one_noise
from bayesdp.tables.aggregates import Clipped, Noisy, budget, check_bounds, check_column, constructor
from bayesdp.tables.engines.base import Bins, Cells, ExactAggregates, Measure
from bayesdp.tables.estimate import Estimate, FullGrid, PlannedStep, plus_minus, take


@dataclass(frozen=True)
class Moments(Clipped):
    """An aggregate computed from the engine's moments of its clipped column (count, sum, sum
    of squares per group: `Measure`)."""

    # Whether `estimate` reads the sum of squares (an engine skips it when no aggregate does).
    squares: ClassVar[bool] = True

    @property
    def measure(self) -> Measure:
        return Measure(self.column, *self.bounds, squares=self.squares)

    def needs(self, step: PlannedStep, alpha: float) -> tuple[Measure | Cells | Bins, ...]:
        return (self.measure,)

    def moments(self, exact: ExactAggregates, index: np.ndarray) -> np.ndarray:
        """(count, sum, sum of squares) of the groups at `index`, zeros for groups without data."""
        return take(exact.moments[self.measure], index)


@dataclass(frozen=True)
class Sum(Moments):
    """Sum of the clipped values: one unit moves it by at most max_rows·max(|lo|, |hi|)."""

    kind: ClassVar[str] = "sum"
    squares: ClassVar[bool] = False
    noisy: ClassVar[tuple[Noisy, ...]] = (Noisy("sum", 1.0),)

    def sensitivity(self, part: str, max_rows: int) -> float:
        lo, hi = self.bounds
        return float(max_rows) * max(abs(lo), abs(hi))

    def estimate(self, step: PlannedStep, exact: ExactAggregates, index: np.ndarray, alpha: float, *,
                 rng: Rng, full_grid: FullGrid | None) -> Estimate:
        return plus_minus(step, "sum", self.moments(exact, index)[:, 1], alpha, rng=rng)

    def value_range(self) -> tuple[float, float]:
        """n >= 0 values in [lo, hi]: the sum has the sign of its bounds."""
        lo, hi = self.bounds
        return (0.0 if lo >= 0 else -math.inf), (0.0 if hi <= 0 else math.inf)

    def accuracy(self, step: PlannedStep, alpha: float, n: int, *, rng: Rng | None) -> Accuracy:
        return one_noise(step, alpha)


@constructor
def sum(column: str, bounds: Sequence[float] | None = None, *, weight: float = 1.0,
        epsilon: float | None = None) -> Sum:
    """Sum of `column` clipped to `bounds` (sensitivity max(|lo|, |hi|) per row)."""
    b = budget(weight, epsilon)
    return Sum(check_column(column), bounds=check_bounds(bounds), **b)
