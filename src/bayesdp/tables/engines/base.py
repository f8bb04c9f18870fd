"""The engine boundary: what an engine (DuckDB, Spark) must do before any noise is added.

An engine receives a `BoundingRequest` and returns `ExactAggregates`. It must

1. drop rows whose group key is not in `public_keys` (when given) and count them;
2. bound contributions: each privacy unit keeps at most `max_groups` of its groups and at most
   `max_rows` rows in each kept group, both chosen uniformly at random from a keyed hash of
   `seed` (never by row order), so the choice for a unit depends only on that unit's rows;
3. clip each value to its bounds, and aggregate per group: distinct units, kept rows, and for
   each `Measure` the count of non-null values, their clipped sum and clipped sum of squares;
   for each `Cells` the counts of clipped values rounded to a uniform grid, for each `Bins` the
   histogram counts;
4. count what it dropped, clipped or found null (`Diagnostics`).

Everything after this (noise, partition selection, intervals) is engine independent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Measure:
    """Moments of `column` clipped to [lo, hi]: count of non-null values, sum, sum of squares."""

    column: str
    lo: float
    hi: float


@dataclass(frozen=True)
class Cells:
    """Counts of `column` clipped to [lo, hi] and rounded to the grid lo + j(hi-lo)/cells, j = 0..cells."""

    column: str
    lo: float
    hi: float
    cells: int


@dataclass(frozen=True)
class Bins:
    """Histogram counts of `column` over `edges` (values outside are clipped into the end bins)."""

    column: str
    edges: tuple[float, ...]


@dataclass(frozen=True)
class BoundingRequest:
    """A pure description of the exact, bounded aggregation an engine must compute.

    `unit` None: every row is its own unit, so bounding keeps every row (in its one group, once).
    """

    unit: str | None
    keys: tuple[str, ...]
    max_groups: int
    max_rows: int
    seed: int
    public_keys: tuple[tuple[Any, ...], ...] | None = None
    measures: tuple[Measure, ...] = ()
    cells: tuple[Cells, ...] = ()
    bins: tuple[Bins, ...] = ()
    where: tuple[str, ...] = ()


@dataclass(frozen=True)
class Diagnostics:
    """Exact, data-dependent counts (not differentially private) of what bounding changed."""

    rows: int
    kept_rows: int
    dropped_by_bounding: int
    dropped_by_keys: int
    null_units: int
    nulls: dict[str, int] = field(default_factory=dict)
    clipped: dict[Measure | Cells | Bins, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ExactAggregates:
    """Exact per-group values after contribution bounding, groups sorted by key.

    `groups` has the key columns; `units` and `rows` are per-group arrays; `moments[m]` is an
    (n, 3) array of (count, sum, sum of squares) per group; `cells[c]` is a triple
    (group index, grid index, count) sorted by group index, then grid index; `bins[b]` is a
    (groups, bins) count matrix.
    """

    groups: pd.DataFrame
    units: np.ndarray
    rows: np.ndarray
    moments: dict[Measure, np.ndarray]
    cells: dict[Cells, tuple[np.ndarray, np.ndarray, np.ndarray]]
    bins: dict[Bins, np.ndarray]
    diagnostics: Diagnostics


def read_measures(
    stats: pd.DataFrame, req: BoundingRequest, values: list[str]
) -> tuple[dict[Measure, np.ndarray], dict[Measure | Cells | Bins, int], dict[str, int]]:
    """Moments, clipped counts and null counts from an engine's per-group statistics.

    Engines name the columns __n{i}, __s{i}, __q{i}, __c{i} for measure i (count, clipped sum,
    clipped sum of squares, clipped values) and __null{j} for value column j.
    """
    moments = {m: stats[[f"__n{i}", f"__s{i}", f"__q{i}"]].to_numpy(np.float64)
               for i, m in enumerate(req.measures)}
    clipped: dict[Measure | Cells | Bins, int] = {
        m: int(stats[f"__c{i}"].sum()) for i, m in enumerate(req.measures)}
    nulls = {c: int(stats[f"__null{j}"].sum()) for j, c in enumerate(values)}
    return moments, clipped, nulls


class Engine(Protocol):
    """What bayesdp needs from a data engine."""

    def schema(self) -> dict[str, str]:
        """Column name -> engine type name."""
        ...

    def is_numeric(self, column: str) -> bool: ...

    def is_empty(self, where: tuple[str, ...] = ()) -> bool: ...

    def aggregate(self, request: BoundingRequest) -> ExactAggregates: ...
