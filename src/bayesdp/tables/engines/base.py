"""The engine boundary: what an engine (DuckDB, Spark) must do before any noise is added.

An engine receives a `BoundingRequest` and returns `ExactAggregates`. It must

1. drop rows whose group key is not in `public_keys` (when given) and count them;
2. bound contributions: each privacy unit keeps at most `max_groups` of its groups and at most
   `max_rows` rows in each kept group, both chosen uniformly at random from a keyed hash of
   `seed` (never by row order), so the choice for a unit depends only on that unit's rows;
3. clip each value to its bounds, and aggregate per group: distinct units, kept rows, and for
   each `Measure` the count of non-null values, their clipped sum and clipped sum of squares;
   for each `Cells` the counts of clipped values rounded to a uniform grid near the group's
   q-quantile (`CellWindow`), for each `Bins` the histogram counts;
4. count what it dropped, clipped or found null (`Diagnostics`).

Everything after this (noise, partition selection, intervals) is engine independent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pandas as pd

from bayesdp.errors import BayesdpError, DataError, InvalidParameter, ResourceError
from bayesdp.expressions import RowExpression


@dataclass(frozen=True)
class Measure:
    """Moments of `column` clipped to [lo, hi]: count of non-null values, sum, sum of squares.

    `squares` False: no aggregate reads the sum of squares, and an engine may leave it NaN. It is
    not part of the measure's identity (equal measures are one entry of `moments`)."""

    column: str
    lo: float
    hi: float
    squares: bool = field(default=True, compare=False)


def distinct_measures(needs: Sequence[object]) -> tuple[Measure, ...]:
    """The distinct measures among `needs`, first use first, each computing its sum of squares
    when any of its equals asks for it."""
    out: dict[Measure, Measure] = {}
    for m in needs:
        if isinstance(m, Measure):
            out[m] = replace(m, squares=m.squares or out[m].squares) if m in out else m
    return tuple(out.values())


# Coarse bins of 2^COARSE_SHIFT grid cells locate each group's window before the fine cells are read.
COARSE_SHIFT = 16
# A margin this large puts the whole grid in the window.
FULL_GRID = 2.0**62


@dataclass(frozen=True)
class Cells:
    """Counts of `column` clipped to [lo, hi] and rounded to the grid lo + j(hi-lo)/cells, j = 0..cells,
    read only in the window of each group that holds the ranks q·n ± `margin` (n: the group's
    non-null values).

    The window is a run of whole coarse bins (grid index >> COARSE_SHIFT): those whose rank range
    [cum - count, cum] meets the open interval (q·n - margin, q·n + margin), cum being the
    running count over the group's bins in grid order. `margin=FULL_GRID` reads every cell.
    """

    column: str
    lo: float
    hi: float
    cells: int
    q: float = 0.5
    margin: float = FULL_GRID


@dataclass(frozen=True)
class CellWindow:
    """Per group g: `n[g]` non-null values; the cells start[g] <= j < stop[g] are read, and
    `below[g]` values lie in cells before start[g]. `group`, `cell`, `count` are the read cells
    with their counts, sorted by group, then cell."""

    n: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    below: np.ndarray
    group: np.ndarray
    cell: np.ndarray
    count: np.ndarray


def cell_window(groups: int, sel_index: np.ndarray, sel: pd.DataFrame, cells_index: np.ndarray,
                cells: pd.DataFrame) -> CellWindow:
    """A `CellWindow` from an engine's window rows (one per group with values: __k0, __k1 the
    first and last coarse bin, __below, __n) and cell rows (__cell, __count), both sorted by
    group, with their positions among the `groups` groups."""
    n, start, stop, below = (np.zeros(groups, dtype=np.int64) for _ in range(4))
    # Without group keys the engines aggregate an empty window into one row of nulls: no values.
    held = sel["__n"].notna().to_numpy(dtype=bool)
    sel, sel_index = sel[held], sel_index[held]
    n[sel_index] = sel["__n"].to_numpy(np.int64)
    start[sel_index] = sel["__k0"].to_numpy(np.int64) << COARSE_SHIFT
    stop[sel_index] = (sel["__k1"].to_numpy(np.int64) + 1) << COARSE_SHIFT
    below[sel_index] = sel["__below"].to_numpy(np.int64)
    return CellWindow(n, start, stop, below, cells_index, cells["__cell"].to_numpy(np.int64),
                      cells["__count"].to_numpy(np.int64))


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
    where: tuple[RowExpression, ...] = ()  # checked filters, each rendered by the engine
    # Value names that are row expressions (checked by `bayesdp.expressions`), not columns.
    expressions: tuple[tuple[str, RowExpression], ...] = ()


@dataclass(frozen=True)
class Bounding:
    """Bounds applied once to a table's rows (`Table.bounded`): each `unit` keeps at most
    `max_groups` of its groups by `keys` and `max_rows` rows in each, chosen as a
    `BoundingRequest` chooses them. Requests on the bounded rows must ask for the same."""

    unit: str
    keys: tuple[str, ...]
    max_groups: int
    max_rows: int

    def resolve(self, keys: tuple[str, ...], max_groups: int | None,
                max_rows: int | None) -> tuple[int, int]:
        """The bounds of a release grouped by `keys` asking for `max_groups` and `max_rows`
        (None: the held ones); a release asking for others is refused."""
        if set(keys) != set(self.keys) or len(keys) != len(self.keys):
            by = ", ".join(self.keys) or "nothing (whole-table aggregates)"
            raise InvalidParameter(
                f"this table was bounded for groups by {by}: a release on it groups by the same "
                f"columns (asked: {', '.join(keys) or 'none'}); bound the table again for others")
        for name, asked, held in (("max_groups_per_unit", max_groups, self.max_groups),
                                  ("max_rows_per_group", max_rows, self.max_rows)):
            if asked is not None and asked != held:
                raise InvalidParameter(
                    f"{name}={asked}: this table was bounded with {name}={held}, and a release "
                    f"on it cannot ask for other bounds (give {held} or leave it out, or bound "
                    "the original table again)")
        return self.max_groups, self.max_rows

    def check(self, req: BoundingRequest) -> None:
        self.resolve(req.keys, req.max_groups, req.max_rows)

    def again(self) -> InvalidParameter:
        """The error for bounding rows bounded already."""
        return InvalidParameter("this table is already bounded: bound the original table instead")


def value_inputs(req: BoundingRequest, values: list[str]) -> list[str]:
    """The table columns the values read (an expression's own columns), first use first."""
    exprs = dict(req.expressions)
    cols: list[str] = []
    for v in values:
        cols.extend(sorted(exprs[v].columns) if v in exprs else [v])
    return list(dict.fromkeys(cols))


@dataclass(frozen=True)
class Diagnostics:
    """Exact, data-dependent counts (not differentially private) of what bounding changed."""

    rows: int
    kept_rows: int
    dropped_by_bounding: int
    dropped_by_keys: int
    null_units: int
    nulls: dict[str, int] = field(default_factory=dict)
    infinite: dict[str, int] = field(default_factory=dict)
    clipped: dict[Measure | Cells | Bins, int] = field(default_factory=dict)
    # Bounded rows a where() on a bounded table removed after bounding: with it the fields
    # above add up to `rows` (kept + dropped by bounding, keys, filter + null units).
    dropped_by_filter: int = 0

    def after_filter(self, bounded: tuple[int, int, int]) -> Diagnostics:
        """These counts, taken on the rows of a bounded table that a where() kept, completed
        with the bounded table's `(rows, null units, dropped by bounding)`."""
        rows, null_units, dropped = bounded
        return replace(self, rows=rows, null_units=null_units, dropped_by_bounding=dropped,
                       dropped_by_filter=rows - null_units - dropped - self.rows)


@dataclass(frozen=True)
class ExactAggregates:
    """Exact per-group values after contribution bounding, groups sorted by key.

    `groups` has the key columns; `units` and `rows` are per-group arrays; `moments[m]` is an
    (n, 3) array of (count, sum, sum of squares) per group; `cells[c]` is a `CellWindow`;
    `bins[b]` is a (groups, bins) count matrix.
    """

    groups: pd.DataFrame
    units: np.ndarray
    rows: np.ndarray
    moments: dict[Measure, np.ndarray]
    cells: dict[Cells, CellWindow]
    bins: dict[Bins, np.ndarray]
    diagnostics: Diagnostics


def read_measures(
    stats: pd.DataFrame, req: BoundingRequest, values: list[str]
) -> tuple[dict[Measure, np.ndarray], dict[Measure | Cells | Bins, int], dict[str, int],
           dict[str, int]]:
    """Moments, clipped counts, null counts and infinite counts from an engine's per-group
    statistics.

    Engines name the columns __n{i}, __s{i}, __q{i}, __c{i} for measure i (count, clipped sum,
    clipped sum of squares, clipped values) and __null{j}, __inf{j} for value column j; __q{i}
    may be missing when the measure needs no squares (its moments then hold NaN there).
    """
    moments = {m: stats.reindex(columns=[f"__n{i}", f"__s{i}", f"__q{i}"]).to_numpy(np.float64)
               for i, m in enumerate(req.measures)}
    clipped: dict[Measure | Cells | Bins, int] = {
        m: int(stats[f"__c{i}"].sum()) for i, m in enumerate(req.measures)}
    nulls = {c: int(stats[f"__null{j}"].sum()) for j, c in enumerate(values)}
    infinite = {c: int(stats[f"__inf{j}"].sum()) for j, c in enumerate(values)}
    return moments, clipped, nulls, infinite


REJECTED = "rejected the query: an expression, a key or a column type does not fit the data"


def engine_failure(exc: object, engine: str, public: str, *, out_of_memory: bool,
                   advice: str) -> BayesdpError:
    """The bayesdp error for an engine's exception. The engine's own text may echo a private
    value (a cast error quotes the row's value), so it is only the curator's private detail;
    the public message says what kind of failure it was."""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if out_of_memory:
        return ResourceError(f"{engine} ran out of memory: {advice}", private_detail=detail)
    return DataError(public, private_detail=detail)


class BoundedRows:
    """What a table bounded once (`Table.bounded`) shares across engines: the engine it reads,
    its bounds, the secret seed, the filters applied before bounding, and the totals the engine
    counts when it bounds (rows, rows with a null unit, rows dropped by bounding)."""

    def __init__(self, source: Engine, bounding: Bounding, seed: int,
                 where: tuple[RowExpression, ...]) -> None:
        self.source, self.bounding, self.seed, self.where = source, bounding, seed, where
        self.totals = (0, 0, 0)

    def request(self) -> BoundingRequest:
        """The request that bounds the rows."""
        b = self.bounding
        return BoundingRequest(b.unit, b.keys, b.max_groups, b.max_rows, self.seed, where=self.where)

    def schema(self) -> dict[str, str]:
        return self.source.schema()

    def bounded(self, bounding: Bounding, seed: int, where: tuple[RowExpression, ...]) -> Engine:
        raise self.bounding.again()

    def is_numeric(self, value: str | RowExpression) -> bool:
        return self.source.is_numeric(value)

    def is_boolean(self, value: str | RowExpression) -> bool:
        return self.source.is_boolean(value)


class Engine(Protocol):
    """What bayesdp needs from a data engine."""

    def schema(self) -> dict[str, str]:
        """Column name -> engine type name."""
        ...

    def is_numeric(self, value: str | RowExpression) -> bool:
        """Whether a column or checked row expression has a numeric (or boolean) type."""
        ...

    def is_boolean(self, value: str | RowExpression) -> bool: ...

    def is_empty(self, where: tuple[RowExpression, ...] = ()) -> bool: ...

    def check(self, request: BoundingRequest) -> None:
        """Bind the request's queries without reading a row: errors that depend only on the
        schema (an unknown column, a type that cannot compare) are raised here, before a spend."""
        ...

    def aggregate(self, request: BoundingRequest) -> ExactAggregates: ...

    def bounded(self, bounding: Bounding, seed: int, where: tuple[RowExpression, ...]) -> Engine:
        """An engine over this one's rows where `where` holds, bounded once by `bounding` with
        the keyed hashes of `seed`; nothing is read until its first aggregate."""
        ...
