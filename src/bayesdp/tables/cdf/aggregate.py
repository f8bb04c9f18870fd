"""The hierarchical histogram as an aggregate: noisy counts of every node of a b-ary tree over the
bins, per group, made consistent by least squares (`tree`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from bayesdp.errors import check_positive_int, invalid
from bayesdp.noise import Rng
from bayesdp.tables.accuracy import Accuracy, bound
from bayesdp.tables.aggregates import Noisy
from bayesdp.tables.cdf.tree import Tree, half_widths
from bayesdp.tables.engines.base import ExactAggregates
from bayesdp.tables.estimate import Estimate, FullGrid, PlannedStep, take
from bayesdp.tables.histograms import Histogram, histogram

# Qardaji, Yang & Li 2013 ("Understanding hierarchical methods for differentially private
# histograms", VLDB): the branching that minimises the mean variance of range
# queries after least-squares consistency is about 16 whatever the number of bins.
BRANCHING = 16


@dataclass(frozen=True)
class Cdf(Histogram):
    """Noisy counts of each node of a `branching`-ary tree over the bins (values outside the edges
    count in the end bins). Each row falls in one leaf, so in one node per measured level: a unit's
    at most max_rows_per_group rows in a group move the tree's counts by at most depth x
    max_rows_per_group in L1 (Hay et al. 2010: a tree of ℓ levels has sensitivity ℓ), to which
    the noise of every node is scaled (under Gaussian noise this L1 bound also bounds L2)."""

    branching: int = field(kw_only=True, default=BRANCHING)
    kind: ClassVar[str] = "cdf"
    noisy: ClassVar[tuple[Noisy, ...]] = (Noisy("tree", 1.0, integer=True),)

    @cached_property
    def tree(self) -> Tree:
        return Tree(len(self.edges) - 1, self.branching)

    def sensitivity(self, part: str, max_rows: int) -> float:
        return float(self.tree.depth * max_rows)

    def estimate(self, step: PlannedStep, exact: ExactAggregates, index: np.ndarray, alpha: float, *,
                 rng: Rng, full_grid: FullGrid | None) -> Estimate:
        """The consistent bin counts, each ± its half-width (the same for every bin: the padded
        tree is symmetric in its leaves)."""
        leaves = take(exact.bins[self.bins], index).astype(np.int64)
        mech = step.parts["tree"].mechanism
        x = self.tree.consistent(np.asarray(mech.release(self.tree.counts(leaves), rng=rng)))
        w = self.bin_half_width(mech, alpha)
        return Estimate(x, x - w, x + w)

    def bin_half_width(self, mech: Any, alpha: float) -> float:
        norm2, top = self.tree.weights(np.zeros(1), np.ones(1))
        return float(half_widths(mech.family, mech.scale, norm2, top, alpha)[0])

    def value_range(self) -> tuple[float, float]:
        # No clamp: ranges add the consistent counts up, which must stay unbiased.
        return -math.inf, math.inf

    def accuracy(self, step: PlannedStep, alpha: float, n: int, *, rng: Rng | None) -> Accuracy:
        return bound(self.bin_half_width(step.parts["tree"].mechanism, alpha))

    def describe(self) -> str:
        lo, hi = self.edges[0], self.edges[-1]
        return (f"cdf({self.column!r}, {len(self.edges) - 1} bins over [{lo:g}, {hi:g}], "
                f"branching {self.branching})")

    def arguments(self) -> dict[str, Any]:
        return {**super().arguments(), "branching": self.branching}


def cdf(column: str, bins: int | Sequence[float] = 1024, bounds: Sequence[float] | None = None, *,
        branching: int = BRANCHING, weight: float = 1.0, epsilon: float | None = None) -> Cdf:
    """The hierarchical histogram of `column`: `bins` equal bins over `bounds` or explicit edges
    (as `histogram`), in a tree of `branching` in [2, 1024]."""
    b = check_positive_int("branching", branching)
    if not 2 <= b <= 1024:
        raise invalid("branching", branching, "an integer in [2, 1024]")
    h = histogram(column, bins, bounds, weight=weight, epsilon=epsilon)
    return Cdf(h.column, bounds=h.bounds, edges=h.edges, branching=b, weight=h.weight, epsilon=h.epsilon)
