"""Counts per bin and group of a column (`histogram`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from bayesdp.errors import InvalidParameter, check_finite, invalid
from bayesdp.noise import Rng
from bayesdp.tables.accuracy import Accuracy, one_noise
from bayesdp.tables.aggregates import Clipped, Noisy, budget, check_bounds, check_column, constructor
from bayesdp.tables.engines.base import Bins, Cells, ExactAggregates, Measure
from bayesdp.tables.estimate import Estimate, FullGrid, PlannedStep, plus_minus, take

# A histogram's release holds a noisy count per bin and group, three output columns per bin
# (100,000 bins: about 2 s to build its table and 2 s more for the service's JSON, linear in bins).
MAX_BINS = 1_000_000


@dataclass(frozen=True)
class Histogram(Clipped):
    """A noisy count per bin and group; values outside the edges count in the end bins. One unit
    moves each of its group's counts by at most max_rows_per_group, all of them together by as
    much (its rows fall in one bin each)."""

    edges: tuple[float, ...] = field(kw_only=True)
    kind: ClassVar[str] = "histogram"
    noisy: ClassVar[tuple[Noisy, ...]] = (Noisy("counts", 1.0, integer=True),)

    @property
    def bins(self) -> Bins:
        return Bins(self.column, self.edges)

    def sensitivity(self, part: str, max_rows: int) -> float:
        return float(max_rows)

    def needs(self, step: PlannedStep, alpha: float) -> tuple[Measure | Cells | Bins, ...]:
        return (self.bins,)

    def estimate(self, step: PlannedStep, exact: ExactAggregates, index: np.ndarray, alpha: float, *,
                 rng: Rng, full_grid: FullGrid | None) -> Estimate:
        return plus_minus(step, "counts", take(exact.bins[self.bins], index), alpha, rng=rng)

    def value_range(self) -> tuple[float, float]:
        return 0.0, math.inf

    def accuracy(self, step: PlannedStep, alpha: float, n: int, *, rng: Rng | None) -> Accuracy:
        return one_noise(step, alpha)

    def columns(self, name: str, est: Estimate) -> dict[str, np.ndarray]:
        """One triple per bin: NAME[lo, hi), NAME[lo, hi)_low, NAME[lo, hi)_high."""
        cols = {}
        for j, (a, b) in enumerate(itertools.pairwise(self.edges)):
            label = f"{name}[{a:g}, {b:g}{']' if j == len(self.edges) - 2 else ')'}"
            cols[label], cols[f"{label}_low"], cols[f"{label}_high"] = \
                est.value[:, j], est.low[:, j], est.high[:, j]
        return cols

    def describe(self) -> str:
        lo, hi = self.edges[0], self.edges[-1]
        return f"histogram({self.column!r}, {len(self.edges) - 1} bins over [{lo:g}, {hi:g}])"

    def arguments(self) -> dict[str, Any]:
        return {"column": self.column, "bins": list(self.edges)}


@constructor
def histogram(column: str, bins: int | Sequence[float] = 10, bounds: Sequence[float] | None = None,
              *, weight: float = 1.0, epsilon: float | None = None) -> Histogram:
    """Counts of `column` per bin: `bins` equal bins over `bounds`, or explicit increasing edges;
    at most MAX_BINS (1,000,000) bins, each a noisy count in every group."""
    spend = budget(weight, epsilon)
    allowed = f"a number of bins in [1, {MAX_BINS:,}] or a list of increasing edges"
    if isinstance(bins, int) and not isinstance(bins, bool):
        if not 1 <= bins <= MAX_BINS:
            raise invalid("bins", bins, allowed)
        lo, hi = check_bounds(bounds)
        edges = tuple(lo + (hi - lo) * i / bins for i in range(bins + 1))
    else:
        if isinstance(bins, Sequence) and len(bins) > MAX_BINS + 1:  # before reading each edge
            raise invalid("bins", f"{len(bins):,} edges", allowed)
        try:
            edges = tuple(check_finite("bins", e) for e in bins)  # type: ignore[union-attr]
        except TypeError:
            raise invalid("bins", bins, allowed) from None
        if len(edges) > MAX_BINS + 1:
            raise invalid("bins", f"{len(edges):,} edges", allowed)
        if len(edges) < 2 or any(not a < b for a, b in itertools.pairwise(edges)):
            raise invalid("bins", bins, "at least two strictly increasing finite edges")
        if bounds is not None:
            raise InvalidParameter("give either bins as edges or bins as a count with bounds, not both")
    if not all(math.isfinite(e) for e in edges):
        raise invalid("bins", bins, "finite edges")
    return Histogram(check_column(column), bounds=(edges[0], edges[-1]), edges=edges, **spend)
