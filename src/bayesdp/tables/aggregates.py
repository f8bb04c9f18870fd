"""What an aggregation is: a pure description, validated when built, that owns how it is released.

Each kind is one class in one module (`counts`, `sums`, `means`, `deviations`, `quantiles`,
`histograms`) with its constructor (`bdp.count()`, `bdp.sum(...)`, ...). A kind states its noisy
parts and their share of its budget (`noisy`), each part's sensitivity, what it asks of the
engine (`needs`), its estimate and interval from the exact bounded aggregates (`estimate`), the
values it can take (`value_range`, for the consistency clamp), its expected accuracy (`accuracy`)
and its output columns (`columns`). The plan, the query and the release only call these, so a
new aggregate is one class (and its constructor, registered with `constructor` for the spec
format of `bayesdp release`).

Every `column` is a column name or a row-local SQL expression over the table's columns
(`"price * qty"`, `"\"union\" = 'yes'"`; quote names that are SQL keywords), which
`Grouped.agg` checks with `bayesdp.expressions.row_expression` and the engine computes per row.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from bayesdp.errors import DataError, InvalidParameter, check_positive, invalid
from bayesdp.mechanisms.base import check_in_range
from bayesdp.noise import Rng
from bayesdp.tables.accuracy import Accuracy
from bayesdp.tables.engines.base import Bins, Cells, ExactAggregates, Measure
from bayesdp.tables.estimate import Estimate, FullGrid, PlannedStep

if TYPE_CHECKING:
    from bayesdp.expressions import RowExpression
    from bayesdp.tables.engines.base import Engine

# Clipping bounds stay within ±1e100, so sensitivities (up to (hi - lo)²/8 per row for a standard
# deviation) and the estimates built from them stay finite.
BOUNDS_RANGE = (-1e100, 1e100)


@dataclass(frozen=True)
class Noisy:
    """One noisy part of an aggregate: its name and its share of the aggregate's budget.

    `integer`: a count, released with discrete noise when its sensitivity is an integer;
    `select`: a choice among candidates, released by the exponential mechanism."""

    name: str
    fraction: float
    integer: bool = False
    select: bool = False


@dataclass(frozen=True, kw_only=True)
class Aggregate(ABC):
    """One aggregation of a release (see the module).

    `weight` (default 1) sets its share of the release's budget; `epsilon` fixes its ε
    directly (Laplace noise only); the remaining budget goes to the others by weight.
    """

    weight: float = 1.0
    epsilon: float | None = None

    kind: ClassVar[str]  # its constructor's name, and its name in a spec
    noisy: ClassVar[tuple[Noisy, ...]]
    branch_rule: ClassVar[str] = ""  # with several `branches`: what decides a group's branch

    @property
    def branches(self) -> tuple[tuple[str, ...], ...]:
        """The sets of parts one group may use (each spends the aggregate's whole budget)."""
        return (tuple(p.name for p in self.noisy),)

    @abstractmethod
    def sensitivity(self, part: str, max_rows: int) -> float:
        """Largest change of one group's `part` when one unit (<= max_rows rows there) is
        added or removed."""

    def reads(self) -> str | None:
        """The column or row expression it aggregates (None: it counts rows or units)."""
        return None

    def refusal(self, engine: Engine, value: str | RowExpression, name: str) -> DataError | None:
        """The error for a value of a type it cannot take, beyond not being numeric (which
        `Grouped.agg` refuses for all); None when it fits."""
        return None

    def needs(self, step: PlannedStep, alpha: float) -> tuple[Measure | Cells | Bins, ...]:
        """What the engine must aggregate per group for it, beyond the units and rows."""
        return ()

    @abstractmethod
    def estimate(self, step: PlannedStep, exact: ExactAggregates, index: np.ndarray, alpha: float, *,
                 rng: Rng, full_grid: FullGrid | None) -> Estimate:
        """The noisy value and interval for the groups at `index` (-1: a group without data),
        before the clamp to `value_range` (`estimate.estimate` applies it)."""

    @abstractmethod
    def value_range(self) -> tuple[float, float]:
        """The values it can take: estimates and intervals are clamped to them."""

    @abstractmethod
    def accuracy(self, step: PlannedStep, alpha: float, n: int, *, rng: Rng | None) -> Accuracy:
        """Expected interval half-width and absolute error at n values, from public parameters."""

    def warning(self, name: str, step: PlannedStep, n: int) -> str | None:
        """A warning when, at n values per group, it carries (almost) no signal."""
        return None

    def columns(self, name: str, est: Estimate) -> dict[str, np.ndarray]:
        """Its output columns in a release's table."""
        return triple(name, est)

    @abstractmethod
    def describe(self) -> str: ...

    def arguments(self) -> dict[str, Any]:
        """Its constructor's arguments other than the budget's, in the spec format."""
        return {}

    def spec(self) -> dict[str, Any]:
        """Itself in the spec format of `bayesdp release`: `CONSTRUCTORS[kind](**rest)` rebuilds it."""
        item: dict[str, Any] = {"kind": self.kind, **self.arguments()}
        if self.weight != 1.0:
            item["weight"] = self.weight
        if self.epsilon is not None:
            item["epsilon"] = self.epsilon
        return item


@dataclass(frozen=True)
class Clipped(Aggregate, ABC):
    """An aggregate of one column's values clipped to public bounds."""

    column: str
    bounds: tuple[float, float] = field(kw_only=True)

    def reads(self) -> str:
        return self.column

    def describe(self) -> str:
        return f"{self.kind}({self.column!r}, bounds=({self.bounds[0]:g}, {self.bounds[1]:g}))"

    def arguments(self) -> dict[str, Any]:
        return {"column": self.column, "bounds": list(self.bounds)}

    def wide(self, name: str, n: int, half_width: float) -> str | None:
        """The warning for a half-width as wide as the bounds at n values per group."""
        if half_width < (self.bounds[1] - self.bounds[0]) / 2:
            return None
        return (f"{name}: at {n:,} values per group the noise is as wide as the bounds "
                f"(epsilon too small for a useful {self.kind})")


def triple(name: str, est: Estimate) -> dict[str, np.ndarray]:
    """NAME, NAME_low, NAME_high: a value and its interval."""
    return {name: est.value, f"{name}_low": est.low, f"{name}_high": est.high}


# The constructors by kind, for the spec format (`bayesdp release`, the service).
CONSTRUCTORS: dict[str, Callable[..., Aggregate]] = {}
F = TypeVar("F", bound=Callable[..., Aggregate])


def constructor(fn: F) -> F:
    """Register a kind's constructor under its name."""
    CONSTRUCTORS[fn.__name__] = fn
    return fn


def check_bounds(bounds: Any) -> tuple[float, float]:
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


def check_column(column: Any) -> str:
    if not isinstance(column, str) or not column:
        raise invalid("column", column, "a column name (non-empty string)")
    return column


def budget(weight: Any, epsilon: Any) -> dict[str, Any]:
    """The checked `weight=` and `epsilon=` of a constructor."""
    return {"weight": check_positive("weight", weight),
            "epsilon": None if epsilon is None else check_positive("epsilon", epsilon)}
