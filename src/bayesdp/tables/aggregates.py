"""The aggregations a release can ask for: pure descriptions, validated when built.

Every `column` is a column name or a row-local SQL expression over the table's columns
(`"price * qty"`, `"\"union\" = 'yes'"`; quote names that are SQL keywords), which
`Grouped.agg` checks with `bayesdp.expressions.row_expression` and the engine computes per row.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bayesdp.errors import InvalidParameter, check_finite, check_open_unit, check_positive, invalid
from bayesdp.mechanisms.base import check_in_range

# Each aggregate's budget is split over its noisy parts by these fractions (documented default).
PARTS: dict[str, tuple[tuple[str, float], ...]] = {
    "count_units": (("count", 1.0),),
    "count": (("count", 1.0),),
    "sum": (("sum", 1.0),),
    "histogram": (("counts", 1.0),),
    # mean, in two stages per group (estimate.py): 0.05 to a count and 0.05 to a sum centred on
    # the middle of the bounds; then 0.9 either to a sum centred on that first estimate (groups
    # whose count is clear of its noise) or to a second count (0.36) and sum (0.54).
    "mean": (("count", 0.05), ("sum", 0.05), ("centred", 0.9), ("count2", 0.36), ("sum2", 0.54)),
    "std": (("count", 1 / 3), ("sum", 1 / 3), ("squares", 1 / 3)),
    # quantile (quantiles.py): 0.65 to the released point; 0.0875 to each exponential-mechanism draw
    # of a candidate end of its interval and to each noisy rank certifying a candidate.
    "quantile": (("value", 0.65), ("low", 0.0875), ("high", 0.0875), ("low_rank", 0.0875),
                 ("high_rank", 0.0875)),
}


# Clipping bounds stay within ±1e100, so sensitivities (up to (hi - lo)²/8 per row for a standard
# deviation) and the estimates built from them stay finite.
BOUNDS_RANGE = (-1e100, 1e100)
# A histogram's release holds a noisy count per bin and group, three output columns per bin.
MAX_BINS = 1_000_000


@dataclass(frozen=True)
class Aggregate:
    """One aggregation: its kind, value column, clipping bounds and share of the budget.

    `weight` (default 1) sets its share of the release's budget; `epsilon` fixes its ε
    directly (Laplace noise only); the remaining budget goes to the others by weight.
    """

    kind: str
    column: str | None = None
    bounds: tuple[float, float] | None = None
    q: float | None = None
    edges: tuple[float, ...] | None = None
    weight: float = 1.0
    epsilon: float | None = None
    share: bool = False  # a mean of a true/false column or expression (`share()`)

    @property
    def parts(self) -> tuple[tuple[str, float], ...]:
        return PARTS[self.kind]

    @property
    def branches(self) -> tuple[tuple[str, ...], ...]:
        """The sets of parts one group may use: a mean's second stage is one of two."""
        if self.kind == "mean":
            return (("count", "sum", "centred"), ("count", "sum", "count2", "sum2"))
        return (tuple(name for name, _ in self.parts),)

    def describe(self) -> str:
        if self.kind in ("count_units", "count"):
            return f"{self.kind}()"
        if self.kind == "histogram":
            assert self.edges is not None
            lo, hi = self.edges[0], self.edges[-1]
            return f"histogram({self.column!r}, {len(self.edges) - 1} bins over [{lo:g}, {hi:g}])"
        if self.share:
            return f"share({self.column!r})"
        assert self.bounds is not None
        extra = f", {self.q:g}" if self.q is not None else ""
        return f"{self.kind}({self.column!r}{extra}, bounds=({self.bounds[0]:g}, {self.bounds[1]:g}))"


def _bounds(bounds: Any) -> tuple[float, float]:
    if bounds is None:
        raise InvalidParameter(
            "bounds=None is not allowed: bounds must be (lo, hi), public limits chosen without "
            "looking at the data (values outside are clipped and counted)"
        )
    try:
        lo, hi = bounds
    except (TypeError, ValueError):
        raise invalid("bounds", bounds, "a pair (lo, hi) of finite numbers with lo < hi") from None
    lo = check_in_range("bounds[0]", lo, BOUNDS_RANGE)
    hi = check_in_range("bounds[1]", hi, BOUNDS_RANGE)
    if not lo < hi:
        raise invalid("bounds", bounds, "a pair (lo, hi) of finite numbers with lo < hi")
    return lo, hi


def _column(column: Any) -> str:
    if not isinstance(column, str) or not column:
        raise invalid("column", column, "a column name (non-empty string)")
    return column


def _budget(weight: Any, epsilon: Any) -> tuple[float, float | None]:
    w = check_positive("weight", weight)
    e = None if epsilon is None else check_positive("epsilon", epsilon)
    return w, e


def count_units(*, weight: float = 1.0, epsilon: float | None = None) -> Aggregate:
    """Number of distinct privacy units in each group (sensitivity 1 per group a unit keeps)."""
    return Aggregate("count_units", weight=_budget(weight, epsilon)[0], epsilon=_budget(weight, epsilon)[1])


def count(*, weight: float = 1.0, epsilon: float | None = None) -> Aggregate:
    """Number of rows in each group after bounding (sensitivity max_rows_per_group)."""
    return Aggregate("count", weight=_budget(weight, epsilon)[0], epsilon=_budget(weight, epsilon)[1])


def sum(column: str, bounds: Sequence[float] | None = None, *, weight: float = 1.0,
        epsilon: float | None = None) -> Aggregate:
    """Sum of `column` clipped to `bounds` (sensitivity max(|lo|, |hi|) per row)."""
    w, e = _budget(weight, epsilon)
    return Aggregate("sum", _column(column), _bounds(bounds), weight=w, epsilon=e)


def mean(column: str, bounds: Sequence[float] | None = None, *, weight: float = 1.0,
         epsilon: float | None = None) -> Aggregate:
    """Mean of `column` clipped to `bounds`, in two stages: a rough private mean, then the sum
    re-centred on it (see estimate._mean)."""
    w, e = _budget(weight, epsilon)
    return Aggregate("mean", _column(column), _bounds(bounds), weight=w, epsilon=e)


def share(condition: str, *, weight: float = 1.0, epsilon: float | None = None) -> Aggregate:
    """The share of rows where `condition` holds (a true/false column or row expression such as
    `"union" = 'yes'`), among the rows where it is not null: the mean of its 0/1 value, with the
    mean's two-stage estimate and interval in [0, 1]."""
    w, e = _budget(weight, epsilon)
    return Aggregate("mean", _column(condition), (0.0, 1.0), weight=w, epsilon=e, share=True)


def std(column: str, bounds: Sequence[float] | None = None, *, weight: float = 1.0,
        epsilon: float | None = None) -> Aggregate:
    """Standard deviation of `column` clipped to `bounds`, from noisy centred moments."""
    w, e = _budget(weight, epsilon)
    return Aggregate("std", _column(column), _bounds(bounds), weight=w, epsilon=e)


def quantile(column: str, q: float = 0.5, bounds: Sequence[float] | None = None, *,
             weight: float = 1.0, epsilon: float | None = None) -> Aggregate:
    """The q-quantile of `column` clipped to `bounds`, by the exponential mechanism (Smith 2011)."""
    w, e = _budget(weight, epsilon)
    return Aggregate("quantile", _column(column), _bounds(bounds), q=check_open_unit("q", q),
                     weight=w, epsilon=e)


def histogram(column: str, bins: int | Sequence[float] = 10, bounds: Sequence[float] | None = None,
              *, weight: float = 1.0, epsilon: float | None = None) -> Aggregate:
    """Counts of `column` per bin: `bins` equal bins over `bounds`, or explicit increasing edges;
    at most MAX_BINS (1,000,000) bins, each a noisy count in every group."""
    w, e = _budget(weight, epsilon)
    allowed = f"a number of bins in [1, {MAX_BINS:,}] or a list of increasing edges"
    if isinstance(bins, int) and not isinstance(bins, bool):
        if not 1 <= bins <= MAX_BINS:
            raise invalid("bins", bins, allowed)
        lo, hi = _bounds(bounds)
        edges = tuple(lo + (hi - lo) * i / bins for i in range(bins + 1))
    else:
        try:
            edges = tuple(check_finite("bins", b) for b in bins)  # type: ignore[union-attr]
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
    return Aggregate("histogram", _column(column), (edges[0], edges[-1]), edges=edges, weight=w,
                     epsilon=e)
