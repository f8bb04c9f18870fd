"""The in-memory engine: row-level aggregates of a data frame, Arrow table or numpy columns,
computed by numpy where the data already is, without DuckDB's round trip (issue 16 §2b).

Row level (`privacy_unit=None`) leaves nothing to bound: each row is its own unit, in one group,
once. A request is served here when it holds only moments (`Measure`) of plain numeric columns,
no filter, row expression, quantile grid or histogram, and either no group keys or public keys
whose Python types match their column's exactly (ints for an integer column in its range, ints
or floats for a float column, bools for a boolean one, strings for text). Every other request
goes, unchanged, to the DuckDB engine over the same data. Both compute the same aggregates:
NaN and null are null (DuckDB's `nullif(CAST(v AS DOUBLE), 'NaN')`), counted and left out;
infinities are counted and, like any value, clipped to their bounds, the clipped ones counted;
a null key never matches a public key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from bayesdp.expressions import RowExpression
from bayesdp.tables.engines.base import (
    Bounding,
    BoundingRequest,
    Diagnostics,
    Engine,
    ExactAggregates,
    Measure,
)

_INTEGERS: dict[str, type[np.integer[Any]]] = {
    "TINYINT": np.int8, "SMALLINT": np.int16, "INTEGER": np.int32, "BIGINT": np.int64,
    "UTINYINT": np.uint8, "USMALLINT": np.uint16, "UINTEGER": np.uint32, "UBIGINT": np.uint64}
# Not FLOAT: DuckDB compares a FLOAT column with its keys rounded to float32.
_FLOATS = {"DOUBLE": np.float64}


def _column(source: Any, name: str) -> Any:
    """A frame's, Arrow table's or mapping's column, as the source holds it."""
    if isinstance(source, pd.DataFrame | Mapping):
        return source[name]
    return source.column(name)


def _plain_numeric(col: Any) -> bool:
    """Whether a column holds plain numbers or booleans (not objects, whose type DuckDB infers)."""
    if isinstance(col, np.ndarray | pd.Series):
        return getattr(col.dtype, "kind", "O") in "fiub"  # pandas' Int64, Float64, boolean too
    import pyarrow as pa

    return bool(pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
                or pa.types.is_boolean(col.type))


def _as_float(col: Any) -> np.ndarray:
    """A plain numeric column as float64 with NaN for null (DuckDB's CAST AS DOUBLE)."""
    if isinstance(col, pd.Series) and not isinstance(col.dtype, np.dtype):
        return col.to_numpy(np.float64, na_value=np.nan)
    if isinstance(col, np.ndarray | pd.Series):
        return np.asarray(col, dtype=np.float64)
    import pyarrow as pa
    import pyarrow.compute as pc

    out: np.ndarray = pc.cast(col, pa.float64()).to_numpy()
    return out


def _as_keys(col: Any) -> np.ndarray:
    """A key column as numpy values (text as objects, nulls as None or NaN)."""
    if isinstance(col, pd.Series | np.ndarray):
        return np.asarray(col)
    out: np.ndarray = col.to_numpy()
    return out


class ArrayEngine:
    """Row-level aggregates in numpy over `source` (a pandas frame, an Arrow table or a mapping
    of names to 1-D numpy arrays); `duckdb` is the DuckDB engine over the same data, which
    answers the schema and every request this engine does not serve."""

    def __init__(self, source: Any, duckdb: Engine) -> None:
        self.source = source
        self.duckdb = duckdb
        self._schema = duckdb.schema()
        self.rows = len(source) if isinstance(source, pd.DataFrame) else (
            source.num_rows if hasattr(source, "num_rows") else len(next(iter(source.values()), ())))

    def schema(self) -> dict[str, str]:
        return dict(self._schema)

    def is_numeric(self, value: str | RowExpression) -> bool:
        return self.duckdb.is_numeric(value)

    def is_boolean(self, value: str | RowExpression) -> bool:
        return self.duckdb.is_boolean(value)

    def is_empty(self, where: tuple[RowExpression, ...] = ()) -> bool:
        return self.duckdb.is_empty(where) if where else self.rows == 0

    def bounded(self, bounding: Bounding, seed: int, where: tuple[RowExpression, ...]) -> Engine:
        return self.duckdb.bounded(bounding, seed, where)

    def check(self, request: BoundingRequest) -> None:
        # A served request reads only columns whose names and types agg() and group_by() checked.
        if not self._serves(request):
            self.duckdb.check(request)

    def aggregate(self, request: BoundingRequest) -> ExactAggregates:
        if not self._serves(request):
            return self.duckdb.aggregate(request)
        values = list(dict.fromkeys(m.column for m in request.measures))
        kept: np.ndarray | None = None  # rows with a public key (None: all rows)
        group: np.ndarray | None = None  # each kept row's group (None: one group)
        groups, per_group = pd.DataFrame(index=pd.RangeIndex(1)), np.array([self.rows])
        if request.keys:
            assert request.public_keys is not None
            keys, columns = request.public_keys, list(request.keys)
            index = self._match(request.keys, keys)
            kept = np.flatnonzero(index >= 0)
            rows = np.bincount(index[kept], minlength=len(keys))
            # The groups are the keys with rows, sorted by key as DuckDB's ORDER BY sorts them.
            present = np.flatnonzero(rows)
            present = present[pd.DataFrame([keys[i] for i in present], columns=columns).sort_values(
                columns, kind="stable").index.to_numpy()]
            position = np.full(len(keys), -1, dtype=np.int64)
            position[present] = np.arange(len(present))
            group = position[index[kept]]
            groups = pd.DataFrame([keys[i] for i in present], columns=columns)
            per_group = rows[present]
            if len(kept) == self.rows:  # every row has a public key: no copy of the values
                kept = None
        count = len(groups)
        moments: dict[Measure, np.ndarray] = {}
        clipped: dict[Any, int] = {}
        nulls: dict[str, int] = {}
        infinite: dict[str, int] = {}
        for c in values:
            v = _as_float(_column(self.source, c))
            v = v if kept is None else v[kept]
            stats = _Column(v, group, count)
            nulls[c], infinite[c] = stats.nulls, stats.infinite
            for m in request.measures:
                if m.column == c:
                    moments[m], clipped[m] = stats.moments(m.lo, m.hi)
        per_group = per_group.astype(np.int64)
        kept_rows = int(per_group.sum())
        outside = self.rows - kept_rows
        diag = Diagnostics(rows=self.rows, kept_rows=kept_rows, dropped_by_bounding=0,
                           dropped_by_keys=outside, null_units=0, nulls=nulls, infinite=infinite,
                           clipped=clipped)
        return ExactAggregates(groups=groups, units=per_group, rows=per_group.copy(),
                               moments=moments, cells={}, bins={}, diagnostics=diag)

    def _serves(self, req: BoundingRequest) -> bool:
        if req.unit is not None or req.where or req.expressions or req.cells or req.bins:
            return False
        if not all(_plain_numeric(_column(self.source, m.column)) for m in req.measures):
            return False
        if not req.keys:
            return True
        return req.public_keys is not None and all(
            self._key_fits(c, [k[i] for k in req.public_keys]) for i, c in enumerate(req.keys))

    def _key_fits(self, column: str, keys: Sequence[Any]) -> bool:
        """Whether every key is of the column's own kind, so matching needs no cast DuckDB could
        refuse (DuckDB casts each key's text to the column's type)."""
        kind = self._schema[column].split("(")[0].upper()
        given = [k for k in keys if k is not None]
        if kind in _INTEGERS:
            info = np.iinfo(_INTEGERS[kind])
            return all(isinstance(k, int) and not isinstance(k, bool) and info.min <= k <= info.max
                       for k in given)
        if kind in _FLOATS:
            return all(isinstance(k, int | float) and not isinstance(k, bool) for k in given)
        if kind == "BOOLEAN":
            return all(isinstance(k, bool) for k in given)
        return kind == "VARCHAR" and all(isinstance(k, str) for k in given)

    def _match(self, columns: tuple[str, ...], keys: tuple[tuple[Any, ...], ...]) -> np.ndarray:
        """Per row, the position of its key among the public `keys` (-1: none; a null never
        matches)."""
        code = np.zeros(self.rows, dtype=np.int64)
        key_code = np.zeros(len(keys), dtype=np.int64)
        space = 1
        for i, c in enumerate(columns):
            wanted = [k[i] for k in keys]
            levels = list(dict.fromkeys(w for w in wanted if w is not None))
            pos = _positions(levels, _column(self.source, c))
            kpos = _positions(levels, np.array(wanted, dtype=object))
            # Mixed radix over the columns' levels: one code per key tuple, -1 once a part misses.
            width = len(levels)
            code = pos if i == 0 else np.where((code < 0) | (pos < 0), -1, code * width + pos)
            key_code = np.where((key_code < 0) | (kpos < 0), -1, key_code * width + kpos)
            space *= max(width, 1)
        matched = np.flatnonzero(key_code >= 0)
        if space <= 1 << 24:  # a lookup table from code to key beats a search per row
            table = np.full(space, -1, dtype=np.int64)
            table[key_code[matched]] = matched
            index = np.where(code >= 0, table[np.maximum(code, 0)], -1)
        else:
            index = pd.Index(key_code[matched]).get_indexer(pd.Index(code))
            index = np.where(index >= 0, matched[np.maximum(index, 0)], -1)
        return index


def _positions(levels: list[Any], column: Any) -> np.ndarray:
    """The position of each value of `column` among the distinct `levels` (-1: none; a null
    matches none). Integers within a span of 2^20 through a lookup table (a hash per row costs
    ten times more); text held by Arrow through Arrow's hash lookup (pandas would first turn
    every string into a Python object)."""
    if not levels:
        return np.full(len(column), -1, dtype=np.int64)
    if _arrow_text(column):
        import pyarrow as pa
        import pyarrow.compute as pc

        found = pc.index_in(pa.array(column), value_set=pa.array(levels, pa.string()))
        return np.asarray(found.fill_null(-1).to_numpy(), dtype=np.int64)
    values = _as_keys(column)
    if values.dtype.kind in "iub" and all(-(1 << 63) <= int(v) < 1 << 63 for v in levels):
        ints = np.asarray(levels, dtype=np.int64)
        lo, hi = int(ints.min()), int(ints.max())
        if hi - lo < 1 << 20:
            table = np.full(hi - lo + 1, -1, dtype=np.int64)
            table[ints - lo] = np.arange(len(ints))
            inside = (values >= lo) & (values <= hi)
            return np.where(inside, table[np.where(inside, values, lo).astype(np.int64) - lo], -1)
    return np.asarray(pd.Index(levels).get_indexer(values), dtype=np.int64)


def _arrow_text(column: Any) -> bool:
    """Whether `column` is text held in Arrow memory: an Arrow column, or a pandas column backed
    by Arrow (pandas' default text type)."""
    import pyarrow as pa

    if isinstance(column, pd.Series):
        dtype = column.dtype
        if getattr(dtype, "storage", None) == "pyarrow":
            return True
        return isinstance(dtype, pd.ArrowDtype) and pa.types.is_string(dtype.pyarrow_dtype)
    if isinstance(column, pa.ChunkedArray | pa.Array):
        t = column.type
        return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))
    return False


class _Column:
    """One value column's per-group null and infinite counts and moments (`group` None: one group)."""

    def __init__(self, v: np.ndarray, group: np.ndarray | None, count: int) -> None:
        self.v, self.group, self.count = v, group, count
        lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
        # min and max are finite only without NaN and infinities: then no mask is needed.
        self.clean = bool(np.isfinite(lo) and np.isfinite(hi))
        self.range = (lo, hi)
        self.null = None if self.clean else np.isnan(v)
        self.nulls = 0 if self.null is None else int(np.count_nonzero(self.null))
        self.infinite = 0 if self.clean else int(np.count_nonzero(np.isinf(v)))

    def _sum(self, x: np.ndarray) -> np.ndarray:
        if self.group is None:
            return np.array([x.sum()], dtype=np.float64)
        return np.bincount(self.group, weights=x, minlength=self.count)

    def moments(self, lo: float, hi: float) -> tuple[np.ndarray, int]:
        """(count, clipped sum, clipped sum of squares) per group, and how many values were clipped."""
        v = self.v
        if self.clean and lo <= self.range[0] and self.range[1] <= hi:
            c, clipped = v, 0
        else:
            c = np.clip(v, lo, hi)
            clipped = int(np.count_nonzero((v < lo) | (v > hi)))
        if self.null is not None and self.nulls:
            c = np.where(self.null, 0.0, c)
            n = self._sum((~self.null).astype(np.float64))
        elif self.group is None:
            n = np.array([float(v.size)])
        else:
            n = np.bincount(self.group, minlength=self.count).astype(np.float64)
        # einsum, not dot: BLAS threads cost more than the sum on a busy machine.
        squares = np.array([np.einsum("i,i->", c, c)]) if self.group is None else self._sum(c * c)
        return np.column_stack([n, self._sum(c), squares]), clipped


def in_memory(source: Any, duckdb: Engine) -> Engine:
    """The array engine for a source already in memory (pandas, Polars, Arrow, numpy columns)
    whose column names are DuckDB's (not when DuckDB renamed duplicates or non-text names), else
    `duckdb`."""
    if type(source).__module__.startswith("polars"):
        source = source.to_arrow()
    if isinstance(source, Mapping):
        names = list(source)
    elif isinstance(source, pd.DataFrame):
        names = list(source.columns)
    elif type(source).__module__.startswith("pyarrow") and hasattr(source, "column_names"):
        names = list(source.column_names)
    else:
        return duckdb
    return ArrayEngine(source, duckdb) if names == list(duckdb.schema()) else duckdb


__all__ = ["ArrayEngine", "in_memory"]
