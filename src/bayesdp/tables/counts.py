"""Counts per group: distinct privacy units (`count_units`), kept rows (`count`) and kept rows
where a 0/1 value is 1 (`count_where`)."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bayesdp.noise import Rng
from bayesdp.tables.accuracy import Accuracy, one_noise
from bayesdp.tables.aggregates import Aggregate, Noisy, budget, check_column, constructor
from bayesdp.tables.engines.base import ExactAggregates
from bayesdp.tables.estimate import Estimate, FullGrid, PlannedStep, plus_minus, take
from bayesdp.tables.sums import Sum


@dataclass(frozen=True)
class Counted(Aggregate, ABC):
    """A count per group, released with one discrete noise."""

    noisy: ClassVar[tuple[Noisy, ...]] = (Noisy("count", 1.0, integer=True),)

    @abstractmethod
    def counted(self, exact: ExactAggregates) -> np.ndarray:
        """The exact count of each group."""

    def estimate(self, step: PlannedStep, exact: ExactAggregates, index: np.ndarray, alpha: float, *,
                 rng: Rng, full_grid: FullGrid | None) -> Estimate:
        return plus_minus(step, "count", take(self.counted(exact), index), alpha, rng=rng)

    def value_range(self) -> tuple[float, float]:
        return 0.0, math.inf

    def accuracy(self, step: PlannedStep, alpha: float, n: int, *, rng: Rng | None) -> Accuracy:
        return one_noise(step, alpha)

    def describe(self) -> str:
        return f"{self.kind}()"


@dataclass(frozen=True)
class CountUnits(Counted):
    """Distinct privacy units per group: one unit moves it by 1 in each group it keeps."""

    kind: ClassVar[str] = "count_units"

    def sensitivity(self, part: str, max_rows: int) -> float:
        return 1.0

    def counted(self, exact: ExactAggregates) -> np.ndarray:
        return exact.units


@dataclass(frozen=True)
class Count(Counted):
    """Kept rows per group: one unit moves it by at most max_rows_per_group."""

    kind: ClassVar[str] = "count"

    def sensitivity(self, part: str, max_rows: int) -> float:
        return float(max_rows)

    def counted(self, exact: ExactAggregates) -> np.ndarray:
        return exact.rows


@constructor
def count_units(*, weight: float = 1.0, epsilon: float | None = None) -> CountUnits:
    """Number of distinct privacy units in each group (sensitivity 1 per group a unit keeps)."""
    return CountUnits(**budget(weight, epsilon))


@constructor
def count(*, weight: float = 1.0, epsilon: float | None = None) -> Count:
    """Number of rows in each group after bounding (sensitivity max_rows_per_group)."""
    return Count(**budget(weight, epsilon))


@dataclass(frozen=True)
class CountWhere(Sum):
    """Kept rows per group where a 0/1 value is 1 (SQL's COUNT(x): x not null): the sum of the
    value in bounds (0, 1), released with discrete noise, so the count is an integer (Canonne,
    Kamath & Steinke 2020; one unit moves it by at most max_rows_per_group)."""

    kind: ClassVar[str] = "count_where"
    noisy: ClassVar[tuple[Noisy, ...]] = (Noisy("sum", 1.0, integer=True),)

    def describe(self) -> str:
        return f"count_where({self.column!r})"

    def arguments(self) -> dict[str, str]:
        return {"indicator": self.column}


@constructor
def count_where(indicator: str, *, weight: float = 1.0, epsilon: float | None = None) -> CountWhere:
    """Rows in each group where `indicator` (a column or row expression worth 0 or 1, such as
    `CASE WHEN x IS NOT NULL THEN 1 ELSE 0 END`) is 1, as an integer (sensitivity
    max_rows_per_group)."""
    return CountWhere(check_column(indicator), bounds=(0.0, 1.0), **budget(weight, epsilon))
