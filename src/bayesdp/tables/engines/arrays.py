"""The in-memory engine: row-level aggregates of a data frame, Arrow table or numpy columns,
computed by numpy where the data already is, without DuckDB's round trip (issue 16 §2b).

Row level (`privacy_unit=None`) leaves nothing to bound: each row is its own unit, in one group,
once. A request is served here when it holds only moments (`Measure`) and quantile grids
(`Cells`, counted in one compiled pass, `scans.py`) of plain numeric columns, no filter, row
expression or histogram, and either no group keys or public keys
whose Python types match their column's exactly (ints for an integer column in its range, ints
or floats for a float column, bools for a boolean one, strings for text). Every other request
goes, unchanged, to the DuckDB engine over the same data. Both compute the same aggregates:
NaN and null are null (DuckDB's `nullif(CAST(v AS DOUBLE), 'NaN')`), counted and left out;
infinities are counted and, like any value, clipped to their bounds, the clipped ones counted;
a null key never matches a public key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from bayesdp.expressions import RowExpression
from bayesdp.tables.engines import scans
from bayesdp.tables.engines.base import (
    COARSE_SHIFT,
    Bounding,
    BoundingRequest,
    Cells,
    CellWindow,
    Diagnostics,
    Engine,
    ExactAggregates,
    Measure,
)
from bayesdp.tables.engines.grids import whole_window

_INTEGERS: dict[str, type[np.integer[Any]]] = {
    "TINYINT": np.int8, "SMALLINT": np.int16, "INTEGER": np.int32, "BIGINT": np.int64,
    "UTINYINT": np.uint8, "USMALLINT": np.uint16, "UINTEGER": np.uint32, "UBIGINT": np.uint64}
# Not FLOAT: DuckDB compares a FLOAT column with its keys rounded to float32.
_FLOATS = {"DOUBLE": np.float64}
# DuckDB's type of each Arrow type the array engine names itself (`_schema`).
_ARROW_TYPES = {"int8": "TINYINT", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT",
                "uint8": "UTINYINT", "uint16": "USMALLINT", "uint32": "UINTEGER", "uint64": "UBIGINT",
                "float": "FLOAT", "double": "DOUBLE", "bool": "BOOLEAN", "string": "VARCHAR",
                "large_string": "VARCHAR", "string_view": "VARCHAR"}
_NUMERIC = {*_ARROW_TYPES.values()} - {"VARCHAR"}
# Quantile grids are served here while groups x coarse bins stay below this (32 MiB of counts).
_COARSE_BINS = 1 << 22


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

    if col.type != pa.float64():
        col = pc.cast(col, pa.float64())
    if isinstance(col, pa.ChunkedArray):  # one chunk is read in place; more, copied once
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    out: np.ndarray = col.to_numpy(zero_copy_only=False)
    return out


def _as_keys(col: Any) -> np.ndarray:
    """A key column as numpy values (text as objects, nulls as None or NaN)."""
    if isinstance(col, pd.Series | np.ndarray):
        return np.asarray(col)
    out: np.ndarray = col.to_numpy()
    return out


class ArrayEngine:
    """Row-level aggregates in numpy over `source` (a pandas frame, an Arrow table or a mapping
    of names to 1-D numpy arrays) with DuckDB's names and types of its columns (`schema`);
    `duckdb`, the DuckDB engine over the same data that `open_duckdb` opens when first needed,
    answers every request this engine does not serve."""

    def __init__(self, source: Any, open_duckdb: Callable[[], Engine], schema: dict[str, str]) -> None:
        self.source = source
        self._open_duckdb = open_duckdb
        self._schema = schema
        self.rows = len(source) if isinstance(source, pd.DataFrame) else (
            source.num_rows if hasattr(source, "num_rows") else len(next(iter(source.values()), ())))

    @cached_property
    def duckdb(self) -> Engine:
        """The DuckDB engine over the same data, opened at the first request it must serve (a
        connection costs more than a mean of a million values)."""
        return self._open_duckdb()

    def schema(self) -> dict[str, str]:
        return dict(self._schema)

    def is_numeric(self, value: str | RowExpression) -> bool:
        if isinstance(value, str) and value in self._schema:
            return self._schema[value] in _NUMERIC
        return self.duckdb.is_numeric(value)

    def is_boolean(self, value: str | RowExpression) -> bool:
        if isinstance(value, str) and value in self._schema:
            return self._schema[value] == "BOOLEAN"
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
        values = list(dict.fromkeys([m.column for m in request.measures]
                                    + [c.column for c in request.cells]))
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
        cells: dict[Cells, CellWindow] = {}
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
                    moments[m], clipped[m] = stats.moments(m.lo, m.hi, m.squares)
            for spec in request.cells:
                if spec.column == c:
                    cells[spec], clipped[spec] = _cell_window(v, group, count, spec)
        per_group = per_group.astype(np.int64)
        kept_rows = int(per_group.sum())
        outside = self.rows - kept_rows
        diag = Diagnostics(rows=self.rows, kept_rows=kept_rows, dropped_by_bounding=0,
                           dropped_by_keys=outside, null_units=0, nulls=nulls, infinite=infinite,
                           clipped=clipped)
        return ExactAggregates(groups=groups, units=per_group, rows=per_group.copy(),
                               moments=moments, cells=cells, bins={}, diagnostics=diag)

    def _serves(self, req: BoundingRequest) -> bool:
        if req.unit is not None or req.where or req.expressions or req.bins:
            return False
        groups = 1 if req.public_keys is None else max(len(req.public_keys), 1)
        if any(groups * ((c.cells >> COARSE_SHIFT) + 1) > _COARSE_BINS for c in req.cells):
            return False
        read = [m.column for m in req.measures] + [c.column for c in req.cells]
        if not all(_plain_numeric(_column(self.source, c)) for c in read):
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

    def moments(self, lo: float, hi: float, squares: bool) -> tuple[np.ndarray, int]:
        """(count, clipped sum, clipped sum of squares) per group, and how many values were
        clipped; the sum of squares is NaN unless `squares` (no aggregate reads it, `Measure`)."""
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
        if not squares:
            sq = np.full(n.size, np.nan)
        elif self.group is None:  # einsum, not dot: BLAS threads cost more than the sum when busy
            sq = np.array([np.einsum("i,i->", c, c)])
        else:
            sq = self._sum(c * c)
        return np.column_stack([n, self._sum(c), sq]), clipped


def _cell_window(v: np.ndarray, group: np.ndarray | None, count: int,
                 spec: Cells) -> tuple[CellWindow, int]:
    """The grid cells of `spec` in each group's window, as the DuckDB engine reads them
    (`Cells`: the coarse bins with values whose rank range meets q·n ± margin), and how many
    values the grid clipped."""
    cell = np.empty(v.size, dtype=np.int64)
    clipped = scans.grid_cells(v, spec.lo, spec.hi, (spec.hi - spec.lo) / spec.cells, cell)
    valid = cell >= 0  # not NaN
    if not valid.all():
        cell, group = cell[valid], None if group is None else group[valid]
    n = np.array([cell.size]) if group is None else np.bincount(group, minlength=count)
    stride = spec.cells + 1
    if spec.margin > (int(n.max()) if n.size else 0) + 1.0:  # every cell: the whole grid
        key, counts = np.unique(cell if group is None else group * stride + cell, return_counts=True)
        return whole_window(n, *np.divmod(key, stride), counts), clipped
    bins = (spec.cells >> COARSE_SHIFT) + 1
    coarse = cell >> COARSE_SHIFT
    per_bin = np.bincount(coarse if group is None else group * bins + coarse,
                          minlength=count * bins).reshape(count, bins)
    cum = np.cumsum(per_bin, axis=1)
    before = cum - per_bin
    aim = spec.q * n.astype(np.float64)[:, None]  # DuckDB: CAST(cum AS DOUBLE) against q·n ± m
    hit = (per_bin > 0) & (cum.astype(np.float64) > aim - spec.margin) & \
        (before.astype(np.float64) < aim + spec.margin)
    some = hit.any(axis=1)
    first, last = np.argmax(hit, axis=1), bins - 1 - np.argmax(hit[:, ::-1], axis=1)
    start = np.where(some, first << COARSE_SHIFT, 0)
    stop = np.where(some, (last + 1) << COARSE_SHIFT, 0)
    below = np.where(some, before[np.arange(count), first], 0)
    if group is None:  # one window: count its cells directly
        inside = cell[(cell >= start[0]) & (cell < stop[0])] - start[0]
        fine = np.bincount(inside, minlength=int(stop[0] - start[0]))
        at = np.flatnonzero(fine)
        return CellWindow(n, start, stop, below, np.zeros(at.size, dtype=np.int64), at + start[0],
                          fine[at]), clipped
    inside = (cell >= start[group]) & (cell < stop[group])
    key, counts = np.unique(group[inside] * stride + cell[inside], return_counts=True)
    g, c = np.divmod(key, stride)
    return CellWindow(n, start, stop, below, g, c, counts), clipped


def in_memory(source: Any, open_duckdb: Callable[[], Engine]) -> Engine:
    """The array engine for a source already in memory (pandas, Polars, Arrow, numpy columns),
    else the DuckDB engine `open_duckdb()` opens. The array engine names and types the columns
    as DuckDB does (`_schema`) and opens DuckDB only for what it does not serve; where it cannot
    tell DuckDB's names or types, DuckDB is opened now and its schema used: it serves the source
    only when DuckDB kept the source's column names (it renames duplicates and non-text names)."""
    if type(source).__module__.startswith("polars"):
        source = source.to_arrow()
    if isinstance(source, Mapping):
        names = list(source)
    elif isinstance(source, pd.DataFrame):
        names = list(source.columns)
    elif type(source).__module__.startswith("pyarrow") and hasattr(source, "column_names"):
        names = list(source.column_names)
    else:
        return open_duckdb()
    schema = _schema(source, names)
    if schema is not None:
        return ArrayEngine(source, open_duckdb, schema)
    duckdb = open_duckdb()
    if names != list(duckdb.schema()):
        return duckdb
    engine = ArrayEngine(source, lambda: duckdb, duckdb.schema())
    engine.duckdb  # noqa: B018 (already open)
    return engine


def _schema(source: Any, names: list[Any]) -> dict[str, str] | None:
    """DuckDB's names and types of the source's columns when every name is text DuckDB keeps
    (non-empty, distinct without case) and every type one of `_ARROW_TYPES`; else None."""
    if not all(isinstance(n, str) and n for n in names) or len({n.lower() for n in names}) < len(names):
        return None
    if isinstance(source, Mapping) and (
            not all(isinstance(v, np.ndarray) and v.ndim == 1 for v in source.values())
            or len({len(v) for v in source.values()}) > 1):
        return None  # opening DuckDB names the problem
    out = {}
    for name in names:
        kind = _duckdb_type(_column(source, name))
        if kind is None:
            return None
        out[name] = kind
    return out


def _duckdb_type(col: Any) -> str | None:
    """The type DuckDB gives a numeric, boolean or text column (None: another kind)."""
    import pyarrow as pa

    if isinstance(col, np.ndarray | pd.Series):
        dtype = col.dtype
        if isinstance(dtype, pd.ArrowDtype):
            return _ARROW_TYPES.get(str(dtype.pyarrow_dtype))
        if isinstance(dtype, pd.StringDtype):
            return "VARCHAR"
        numpy_dtype = dtype if isinstance(dtype, np.dtype) else getattr(dtype, "numpy_dtype", None)
        if numpy_dtype is None or numpy_dtype.kind not in "iufb":
            return None
        return _ARROW_TYPES.get(str(pa.from_numpy_dtype(numpy_dtype)))
    return _ARROW_TYPES.get(str(col.type))


__all__ = ["ArrayEngine", "in_memory"]
