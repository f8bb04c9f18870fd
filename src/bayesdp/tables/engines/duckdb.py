"""The DuckDB engine: contribution bounding and exact aggregates inside DuckDB.

Bounding follows the (unit, group) pairs, never a unit's rows taken together, so its time and
memory do not grow with the largest unit (with `max_rows` > 1, a window's partition is one
pair's rows: they grow with the largest pair). Each pair keeps its `max_rows` rows of smallest keyed
row hash `hash(hash(row) xor seed_r)` (with one row a pair, a hash aggregate of `arg_min_null`;
with more, a window over the pair's rows), then each unit keeps its first `max_groups` pairs in
the order of the keyed group hash `hash(hash(unit, key) xor seed_g)`, a window over the unit's
pairs. The secret 64-bit seeds make both orders uniformly random permutations, and the kept rows
are those of one sort of the unit's rows by group hash, then row hash: the same choice.

Without quantiles or histograms the kept rows are aggregated in the same query; with them,
the kept rows (at most units x max_groups x max_rows) are materialized once in a temporary
table, dropped afterwards, so the grids cost no second pass over the data. The per-group
statistics then go to a small table numbering the groups in key order; the grids and histograms
join it and group by that number (one BIGINT per group and grid cell), fetched as numpy arrays.
The rows and the null units are `count(*)` and `count(unit)`, which DuckDB answers from a
Parquet file's metadata when no filter applies. With public keys, the rows that enter bounding
are a semi-join (a key list inside a FILTER or a projection is a mark join, several times
slower), and the pairs count them: each unit's first kept row carries the unit's rows that
entered (a sum over the unit's pairs), so one statement reads the source once, bounds
and aggregates, and the rows outside the keys are the rows with a unit less their sum.

Every DuckDB call, building a query and running it, goes through `duckdb_errors`: a DuckDB
error becomes a DataError (or a ResourceError when memory or disk runs out) whose public
message is generic and whose private detail is DuckDB's own text, which can quote a row's value.

Public keys and explicit histogram edges never become SQL lists: each is one JSON string literal
unnested into a temporary table, joined (a semi-join for the keys, an ASOF join for the edges),
so their cost grows with their length, not with its square. The key table is written once per
key list (at `check`, before any budget is spent) and read by every later request with it.
"""

from __future__ import annotations

import json
import os
import re
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from typing import Any, NamedTuple

import duckdb
import numpy as np
import pandas as pd

from bayesdp.errors import BayesdpError, invalid
from bayesdp.expressions import RowExpression
from bayesdp.tables.engines.base import (
    COARSE_SHIFT,
    REJECTED,
    Bins,
    BoundedRows,
    Bounding,
    BoundingRequest,
    Cells,
    CellWindow,
    Diagnostics,
    Engine,
    ExactAggregates,
    Measure,
    engine_failure,
    read_measures,
    value_inputs,
)
from bayesdp.tables.engines.grids import BATCH_ROWS, BoundedGrids, CountedGrid, whole_window

NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
           "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL", "BOOLEAN")
_MASK64 = (1 << 64) - 1
SOURCE = "bdp_source"
OUT_OF_MEMORY_ADVICE = ("raise memory_limit= (--memory-limit on the command line), or give "
                        "temp_directory= (--temp-directory) on a disk with free space so that "
                        "DuckDB spills to it")


_MEMORY = re.compile(r"\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.IGNORECASE)


def connect(memory_limit: str | int | None = None,
            temp_directory: str | os.PathLike[str] | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection for bayesdp: `memory_limit` (bytes, or text such as "2GB") caps its
    memory, `temp_directory` is where it spills what does not fit (DuckDB's default: .tmp in
    the working directory). Insertion order is not preserved: no query relies on it, and
    keeping it makes sorts and windows hold more in memory."""
    config: dict[str, Any] = {"preserve_insertion_order": False}
    if memory_limit is not None:
        if isinstance(memory_limit, int) and not isinstance(memory_limit, bool) and memory_limit > 0:
            config["memory_limit"] = f"{memory_limit}B"
        elif isinstance(memory_limit, str) and _MEMORY.fullmatch(memory_limit.strip()):
            config["memory_limit"] = memory_limit.strip()
        else:
            raise invalid("memory_limit", memory_limit,
                          "a number of bytes > 0 or text such as '2GB' or '512MiB'")
    if temp_directory is not None:
        if not isinstance(temp_directory, str | os.PathLike) or os.path.isfile(temp_directory):
            raise invalid("temp_directory", temp_directory, "a directory path (created if missing)")
        config["temp_directory"] = os.fspath(temp_directory)
    with duckdb_errors("DuckDB refused the configuration"):
        return duckdb.connect(config=config)


@contextmanager
def duckdb_errors(public: str = f"DuckDB {REJECTED}") -> Iterator[None]:
    """Turn a DuckDB error raised inside the block into a bayesdp error with the `public`
    message (or a ResourceError when memory or disk ran out); DuckDB's text stays private."""
    try:
        yield
    except duckdb.Error as exc:
        oom = isinstance(exc, duckdb.OutOfMemoryException) or "No space left on device" in str(exc)
        raise engine_failure(exc, "DuckDB", public, out_of_memory=oom,
                             advice=OUT_OF_MEMORY_ADVICE) from None


def ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _json_literal(values: Sequence[Any]) -> str:
    """A SQL string literal holding `values` as a JSON array (one token, parsed at once)."""
    # default=str: a date key travels as its ISO text, which the key column's type casts back.
    return "'" + json.dumps(list(values), allow_nan=False, default=str).replace("'", "''") + "'"


class _KeyTable(NamedTuple):
    """A temporary table of a key list (`public_keys`, the very tuple) for the group `columns`."""

    public_keys: tuple[tuple[Any, ...], ...]
    columns: tuple[str, ...]
    name: str
    drop: Callable[[], object]  # drops the table at once (a weakref.finalize)


class DuckDBEngine:
    """Runs bounded aggregations on a DuckDB relation (a file scan, a registered frame, a query)."""

    def __init__(self, relation: duckdb.DuckDBPyRelation) -> None:
        self.relation = relation
        self._key_table: _KeyTable | None = None
        self._checked: tuple[str, duckdb.DuckDBPyRelation] | None = None

    def sql(self, query: str) -> duckdb.DuckDBPyRelation:
        """The query bound (not run) over the source; the one `check` bound is bound once."""
        checked, self._checked = self._checked, None
        if checked is not None and checked[0] == query:
            return checked[1]
        with duckdb_errors():
            rel = self.relation.query(SOURCE, query)
        assert rel is not None
        return rel

    def rows(self, query: str) -> list[Any]:
        """The query's result rows."""
        with duckdb_errors():
            return self.sql(query).fetchall()

    def frame(self, query: str) -> pd.DataFrame:
        """The query's result as a pandas frame."""
        with duckdb_errors():
            out: pd.DataFrame = self.sql(query).df()
        return out

    def schema(self) -> dict[str, str]:
        return dict(zip(self.relation.columns, (str(t) for t in self.relation.types), strict=True))

    def _type(self, value: str | RowExpression) -> str:
        if isinstance(value, RowExpression):
            with duckdb_errors():
                return str(self.sql(f"SELECT {value.sql('duckdb')} FROM {SOURCE}").types[0])
        return self.schema()[value]

    def is_numeric(self, value: str | RowExpression) -> bool:
        return self._type(value).split("(")[0] in NUMERIC

    def is_boolean(self, value: str | RowExpression) -> bool:
        return self._type(value) == "BOOLEAN"

    def _filtered(self, where: Sequence[RowExpression]) -> str:
        return f"SELECT * FROM {SOURCE} WHERE {_all(where)}"

    def is_empty(self, where: tuple[RowExpression, ...] = ()) -> bool:
        return not self.rows(f"SELECT 1 FROM ({self._filtered(where)}) LIMIT 1")

    @contextmanager
    def _temp(self, query: str) -> Iterator[str]:
        name = "bdp_" + uuid.uuid4().hex
        self.sql(f"CREATE TEMP TABLE {name} AS {query}")
        try:
            yield name
        finally:
            self.sql(f"DROP TABLE IF EXISTS {name}")

    def bounded(self, bounding: Bounding, seed: int, where: tuple[RowExpression, ...]) -> Engine:
        return BoundedDuckDB(self, bounding, seed, where)

    def check(self, request: BoundingRequest) -> None:
        # Writing the key table casts every key to its column's type: a key the type refuses
        # fails here, before the budget is spent.
        values, entered = _value_columns(request), _counts_entered(request)
        with self._keys(request) as keys:
            kept = _kept_sql(self._filtered(request.where), request, values, keys, entered=entered)
        if request.cells or request.bins:
            self.sql(kept)
            return
        # The statement a one-pass aggregate runs: bound here, kept for it.
        query = _by_key(_stats_sql(f"({kept})", request, values, None, entered=entered), request)
        self._checked = query, self.sql(query)

    def aggregate(self, request: BoundingRequest) -> ExactAggregates:
        values = _value_columns(request)
        source = self._filtered(request.where)
        rows, null_units = self._counts(request)
        entered = _counts_entered(request)
        # Without public keys every row with a unit enters bounding; with them and no unit,
        # every row in the keys is kept, so the rows outside are those not kept.
        totals = rows, null_units, 0 if request.public_keys is None else None
        with self._keys(request) as keys:
            kept_sql = _kept_sql(source, request, values, keys, entered=entered)
        if not request.cells and not request.bins:  # one pass: aggregate the kept rows directly
            return self._collect(f"({kept_sql})", request, values, totals, entered=entered)
        with self._temp(kept_sql) as kept:
            return self._collect(kept, request, values, totals, entered=entered)

    def _counts(self, req: BoundingRequest) -> tuple[int, int]:
        """Rows, rows with a null unit: an aggregate of the relation itself, which DuckDB runs
        as one statement (a query over it first binds it under a view's name)."""
        with duckdb_errors():
            rel = self.relation.filter(_all(req.where)) if req.where else self.relation
            rows, null_units = (int(c) for c in rel.aggregate(_count_columns(req)).fetchall()[0])
        return rows, null_units

    @contextmanager
    def _keys(self, req: BoundingRequest) -> Iterator[str | None]:
        """A temporary table `__k0, __k1, ...` of the public keys, cast to the key columns' types
        (None without public keys), written at the first request with this key list and read by
        every later one (it outlives the block); dropped when another key list replaces it or
        the engine goes."""
        if req.public_keys is None:
            yield None
            return
        known = self._key_table
        if known is not None and known.public_keys is req.public_keys and known.columns == req.keys:
            yield known.name
            return
        schema = self.schema()
        cols = ", ".join(
            f"CAST(unnest(from_json({_json_literal([k[i] for k in req.public_keys])}, '[\"VARCHAR\"]'))"
            f" AS {schema[c]}) AS __k{i}" for i, c in enumerate(req.keys))
        name = "bdp_" + uuid.uuid4().hex
        # An empty key list still needs the typed columns: a WHERE FALSE keeps them, without rows.
        self.sql(f"CREATE TEMP TABLE {name} AS " + (f"SELECT {cols}" if req.public_keys else
                                                   f"SELECT * FROM (SELECT {cols}) WHERE FALSE"))
        if known is not None:
            known.drop()
        # The finalizer holds an engine of its own: one holding this engine would keep it alive.
        drop = weakref.finalize(self, _drop, DuckDBEngine(self.relation), name)
        drop.atexit = False
        self._key_table = _KeyTable(req.public_keys, req.keys, name, drop)
        yield name

    def _collect(self, kept: str, req: BoundingRequest, values: list[str],
                 counts: tuple[int, int, int | None], key_table: str | None = None, *,
                 entered: bool = False, grids: BoundedGrids | None = None) -> ExactAggregates:
        """The per-group aggregates of the `kept` rows; `counts` are the rows, the rows with a
        null unit and the rows outside the public keys (None: every row that enters is kept,
        so the rows outside the keys are the rest; with `entered`, the kept rows' `__entered`
        add up to the rows that entered bounding, and the rows outside are the others). With
        `key_table`, only the groups among its keys are kept (the rows of the others are
        outside the keys). `grids`, when given, hold the grids' counts over the kept rows, read
        instead of the rows."""
        rows_total, null_units, outside = counts
        keys = [ident(k) for k in req.keys]
        stats = _stats_sql(kept, req, values, key_table, entered=entered)
        cells: dict[Cells, CellWindow] = {}
        bins: dict[Bins, np.ndarray] = {}
        grid_clipped: dict[Measure | Cells | Bins, int] = {}
        if not req.cells and not req.bins:
            stats_df = self.frame(_by_key(stats, req))
        else:
            # The groups are numbered in key order (__g), so that the grids read group numbers,
            # not keys: a join with the (small) per-group table instead of a sort by key.
            with self._temp(f"SELECT *, {_group_number(keys)} AS __g FROM ({stats})") as table:
                stats_df = self.frame(f"SELECT * FROM {table} ORDER BY __g")
                null_keys = bool(stats_df[list(req.keys)].isna().to_numpy().any())
                numbered = _numbered(kept, keys, table, null_keys)
                renumber = np.empty(0, dtype=np.int64) if grids is None else \
                    self._renumbered(grids, keys, table, null_keys)
                for spec in req.cells:
                    n = _non_null(stats_df, values, spec)
                    cells[spec] = self._cells(numbered, values, spec, n) if grids is None else \
                        grids.counted[spec].window(renumber, n, spec)
                    grid_clipped[spec] = int(stats_df[_clip_column(req, spec)].sum())
                for bspec in req.bins:
                    bins[bspec], grid_clipped[bspec] = self._bins(numbered, values, bspec, len(stats_df))
        kept_rows = int(stats_df["__rows"].sum())
        if outside is None:
            outside = rows_total - null_units - \
                (int(stats_df["__entered"].sum()) if entered else kept_rows)
        groups = stats_df[list(req.keys)].reset_index(drop=True)
        moments, clipped, nulls, infinite = read_measures(stats_df, req, values)
        clipped.update(grid_clipped)
        diag = Diagnostics(rows=rows_total, kept_rows=kept_rows,
                           dropped_by_bounding=rows_total - outside - null_units - kept_rows,
                           dropped_by_keys=outside, null_units=null_units, nulls=nulls,
                           infinite=infinite, clipped=clipped)
        return ExactAggregates(groups=groups, units=stats_df["__units"].to_numpy(np.int64),
                               rows=stats_df["__rows"].to_numpy(np.int64), moments=moments,
                               cells=cells, bins=bins, diagnostics=diag)

    def _renumbered(self, grids: BoundedGrids, keys: list[str], stats: str, null_keys: bool) -> np.ndarray:
        """Per group of the bounded grids, its number among the request's groups (`stats`), -1
        for a group not among them."""
        renumber = np.full(grids.groups, -1, dtype=np.int64)
        if not keys:
            renumber[:] = 0
            return renumber
        same = "IS NOT DISTINCT FROM" if null_keys else "="
        on = " AND ".join(f"b.{k} {same} s.{k}" for k in keys)
        pairs = self.arrays(f"SELECT b.__g AS __b, s.__g FROM {grids.table} b JOIN {stats} s ON {on}")
        renumber[pairs["__b"]] = pairs["__g"]
        return renumber

    def _cells(self, numbered: str, values: list[str], spec: Cells, n: np.ndarray) -> CellWindow:
        """The grid cells of `spec` in each group's window; `numbered` is the kept rows `r` with
        their group number `__g`, `n` the non-null values per group."""
        v = f"r.__v{values.index(spec.column)}"
        grid, count = f"(SELECT __g, {_cell(v, spec)} AS __cell FROM {numbered} WHERE {v} IS NOT NULL)", \
            "count(*)"
        # One BIGINT per (group, cell) (groups x 2^24 cells fit in 63 bits): DuckDB groups it
        # fastest, and numpy sorts it into group, then cell order.
        stride = spec.cells + 1
        key = f"g.__g * {stride} + g.__cell AS __key"
        cells = f"SELECT {key}, CAST({count} AS BIGINT) AS __count FROM {grid} g"
        # Every group's window is its whole grid when the margin exceeds its values: each coarse
        # bin's rank range then meets (q·n - margin, q·n + margin) (see `Cells`).
        most = int(n.max()) if n.size else 0
        if spec.margin > most + 1.0:
            key_of, count_of = self._cell_counts(f"{cells} GROUP BY ALL", most)
            return whole_window(n, *np.divmod(key_of, stride), count_of)
        start, stop, below = (np.zeros(n.size, dtype=np.int64) for _ in range(3))
        q, m = float(spec.q), float(spec.margin)
        coarse = (f"SELECT __g, __cell >> {COARSE_SHIFT} AS __k, CAST({count} AS BIGINT) AS __cnt"
                  f" FROM {grid} g GROUP BY ALL")
        ranked = (f"SELECT *, CAST(sum(__cnt) OVER (PARTITION BY __g ORDER BY __k) AS BIGINT) AS __cum,"
                  f" CAST(sum(__cnt) OVER (PARTITION BY __g) AS BIGINT) AS __n FROM ({coarse})")
        near = (f"SELECT __g, __k, __cum - __cnt AS __below FROM ({ranked})"
                f" WHERE CAST(__cum AS DOUBLE) > {q!r} * __n - {m!r}"
                f" AND CAST(__cum - __cnt AS DOUBLE) < {q!r} * __n + {m!r}")
        with self._temp(near) as window:
            sel = self.arrays(f"SELECT __g, min(__k) AS __k0, max(__k) AS __k1, min(__below) AS __below"
                              f" FROM {window} GROUP BY __g")
            key_of, count_of = self._cell_counts(f"{cells} JOIN {window} w ON g.__g = w.__g"
                                                 f" AND g.__cell >> {COARSE_SHIFT} = w.__k GROUP BY ALL",
                                                 most)
        g = sel["__g"]
        start[g], stop[g] = sel["__k0"] << COARSE_SHIFT, (sel["__k1"] + 1) << COARSE_SHIFT
        below[g] = sel["__below"]
        group, cell_of = np.divmod(key_of, stride)
        return CellWindow(n, start, stop, below, group, cell_of, count_of)

    def _cell_counts(self, query: str, most: int) -> tuple[np.ndarray, np.ndarray]:
        """The (key, count) rows of `query` (keys >= 0 and distinct, counts <= `most`), sorted by
        key: a count fits in the bits below its key when they fit in 63 bits together, and
        numpy sorts such packed keys several times faster than it argsorts."""
        out = self.arrays(query)
        key, count = out["__key"], out["__count"]
        bits = max(most, 1).bit_length()
        if key.size and int(key.max()).bit_length() + bits > 63:
            order = np.argsort(key)
            return key[order], count[order]
        packed = np.sort((key << bits) | count)
        return packed >> bits, packed & ((1 << bits) - 1)

    def arrays(self, query: str) -> dict[str, np.ndarray]:
        """The query's result as numpy arrays, integers as int64 (the query has no nulls)."""
        with duckdb_errors():
            out = self.sql(query).fetchnumpy()
        return {c: np.asarray(a, dtype=np.int64) for c, a in out.items()}

    def _bins(self, numbered: str, values: list[str], spec: Bins, groups: int) -> tuple[np.ndarray, int]:
        """Histogram counts per group (`numbered`: the kept rows `r` with their group number
        `__g`) and the values clipped into the end bins."""
        v = f"r.__v{values.index(spec.column)}"
        clip = f"count(*) FILTER ({v} < {spec.edges[0]!r} OR {v} > {spec.edges[-1]!r}) AS __clip"
        inner = spec.edges[1:-1]
        if not inner:
            out = self.arrays(f"SELECT __g, 0 AS __bin, count(*) AS __count, {clip}"
                              f" FROM {numbered} WHERE {v} IS NOT NULL GROUP BY ALL")
        else:
            # A value's bin is the number of inner edges at or below it: the ASOF join finds the
            # last such edge (edge i carries i + 1), no edge means bin 0.
            edges = (f"SELECT unnest(from_json({_json_literal(inner)}, '[\"DOUBLE\"]')) AS __e,"
                     " CAST(generate_subscripts(from_json("
                     f"{_json_literal(inner)}, '[\"DOUBLE\"]'), 1) AS BIGINT) AS __b")
            with self._temp(edges) as table:
                out = self.arrays(
                    f"SELECT __g, coalesce(e.__b, 0) AS __bin, count(*) AS __count, {clip}"
                    f" FROM {numbered} ASOF LEFT JOIN {table} e ON {v} >= e.__e"
                    f" WHERE {v} IS NOT NULL GROUP BY ALL")
        counts = np.zeros((groups, len(spec.edges) - 1), dtype=np.int64)
        np.add.at(counts, (out["__g"], out["__bin"]), out["__count"])
        return counts, int(out["__clip"].sum())


def _stats_sql(kept: str, req: BoundingRequest, values: list[str], key_table: str | None, *,
               entered: bool = False) -> str:
    """Per group of the `kept` rows: rows, units, and the columns `read_measures` reads. A
    value's nulls are its rows less its count (one aggregate instead of a FILTER); a measure's
    sum of squares only when it asks for it; with `key_table`, only the groups in the keys;
    with `entered`, the sum of `__entered`."""
    keys = [ident(k) for k in req.keys]
    cols = ["count(*) AS __rows", "count(*) FILTER (__first) AS __units"]
    if entered:
        cols.append("sum(__entered) AS __entered")
    for j in range(len(values)):
        cols += [f"count(__v{j}) AS __nn{j}", f"count(*) FILTER (isinf(__v{j})) AS __inf{j}"]
    derived = [f"__rows - __nn{j} AS __null{j}" for j in range(len(values))]
    for i, meas in enumerate(req.measures):
        v = f"__v{values.index(meas.column)}"
        c = _clip(v, meas.lo, meas.hi)
        cols += [f"coalesce(sum({c}), 0) AS __s{i}", f"{_clipped(v, meas.lo, meas.hi)} AS __c{i}"]
        if meas.squares:
            cols.append(f"coalesce(sum(({c}) * ({c})), 0) AS __q{i}")
        derived.append(f"__nn{values.index(meas.column)} AS __n{i}")
    for k, spec in enumerate(req.cells):
        if _clip_column(req, spec) == f"__cc{k}":
            cols.append(f"{_clipped(f'__v{values.index(spec.column)}', spec.lo, spec.hi)} AS __cc{k}")
    grouped = f"SELECT {''.join(f'{k}, ' for k in keys)}{', '.join(cols)} FROM {kept}"
    if keys:
        grouped += f" GROUP BY {', '.join(keys)}"
    in_keys = f" WHERE {_in_keys(req, key_table)}" if key_table is not None else ""
    return f"SELECT *, {', '.join(derived)} FROM ({grouped}){in_keys}" if derived else \
        f"SELECT * FROM ({grouped}){in_keys}"


def _cell(v: str, spec: Cells) -> str:
    """The grid cell of `v` (not null): clipped to the bounds, rounded to the grid."""
    width = (spec.hi - spec.lo) / spec.cells
    return f"CAST(round(({_clip(v, spec.lo, spec.hi)} - {spec.lo!r}) / {width!r}) AS BIGINT)"


def _clipped(v: str, lo: float, hi: float) -> str:
    """The count of values of `v` outside [lo, hi]."""
    return f"count(*) FILTER ({v} < {lo!r} OR {v} > {hi!r})"


def _clip_column(req: BoundingRequest, spec: Cells) -> str:
    """The stats column counting the values the grid `spec` clips: a measure's with the same
    column and bounds, else its own (__cc{k})."""
    for i, m in enumerate(req.measures):
        if (m.column, m.lo, m.hi) == (spec.column, spec.lo, spec.hi):
            return f"__c{i}"
    return f"__cc{req.cells.index(spec)}"


def _non_null(stats: pd.DataFrame, values: list[str], spec: Cells) -> np.ndarray:
    return stats[f"__nn{values.index(spec.column)}"].to_numpy(np.int64)


def _ordered(keys: Sequence[str]) -> str:
    return ", ".join(f"{k} NULLS LAST" for k in keys)


def _by_key(stats: str, req: BoundingRequest) -> str:
    """The per-group `stats` in key order."""
    return f"{stats} ORDER BY {_ordered([ident(k) for k in req.keys])}" if req.keys else stats


def _group_number(keys: Sequence[str]) -> str:
    """Each group's position in key order (nulls last), from 0."""
    return f"row_number() OVER (ORDER BY {_ordered(keys)}) - 1" if keys else "0"


def _numbered(kept: str, keys: Sequence[str], stats: str, null_keys: bool) -> str:
    """A FROM clause: the `kept` rows as `r`, each with its group's number `__g` from the
    per-group table `stats` (groups not in it drop out). Unless a group's key holds a null
    (`null_keys`), the join compares with `=`, which DuckDB hashes several times faster."""
    if not keys:
        return f"(SELECT *, 0 AS __g FROM {kept}) r"
    same = "IS NOT DISTINCT FROM" if null_keys else "="
    on = " AND ".join(f"r.{k} {same} s.{k}" for k in keys)
    return f"{kept} r JOIN (SELECT {', '.join(keys)}, __g FROM {stats}) s ON {on}"


def _count_columns(req: BoundingRequest) -> str:
    """Rows, rows with a null unit (count(unit), not a FILTER: Parquet metadata answers it)."""
    units = "count(*)" if req.unit is None else f"count({ident(req.unit)})"
    return f"count(*), count(*) - {units}"


def _counts_sql(source: str, req: BoundingRequest) -> str:
    return f"SELECT {_count_columns(req)} FROM ({source})"


def _counts_entered(req: BoundingRequest) -> bool:
    """Whether bounding counts the rows that enter it: only with public keys and a unit (without
    keys they are the rows with a unit; without a unit every row in the keys is kept)."""
    return req.public_keys is not None and req.unit is not None


def _value_columns(req: BoundingRequest) -> list[str]:
    cols = [m.column for m in req.measures] + [c.column for c in req.cells]
    cols += [b.column for b in req.bins]
    return list(dict.fromkeys(cols))


def _clip(v: str, lo: float, hi: float) -> str:
    """`v` clipped to [lo, hi]; NULL stays NULL (least/greatest would turn it into lo)."""
    lo_, hi_ = repr(float(lo)), repr(float(hi))
    return f"CASE WHEN {v} < {lo_} THEN {lo_} WHEN {v} > {hi_} THEN {hi_} ELSE {v} END"


def _in_keys(req: BoundingRequest, key_table: str | None) -> str:
    """A WHERE condition: the row's key is one of the public keys (a null key never is: its IN
    is null). DuckDB plans it as a hash semi-join; wrapped in coalesce it would be a mark join."""
    if key_table is None:
        return "TRUE"
    cols = ", ".join(ident(k) for k in req.keys)
    table_cols = ", ".join(f"__k{i}" for i in range(len(req.keys)))
    return f"({cols}) IN (SELECT {table_cols} FROM {key_table})"


def _fields(req: BoundingRequest, values: list[str]) -> str:
    """`, v0 AS __v0, ...`: each value column or expression as DOUBLE, NaN read as NULL."""
    exprs = dict(req.expressions)
    return "".join(f", nullif(CAST({exprs[c].sql('duckdb') if c in exprs else ident(c)} AS DOUBLE),"
                   f" 'NaN'::DOUBLE) AS __v{j}" for j, c in enumerate(values))


def keyed_hashes(req: BoundingRequest, values: Sequence[str]) -> tuple[str, str]:
    """SQL of the keyed hashes ordering a pair's rows and a unit's groups: the hash of the
    content xor a 64-bit secret, hashed again (the Spark engine builds the same with xxhash64)."""
    assert req.unit is not None
    seed_r, seed_g = req.seed & _MASK64, (req.seed >> 64) & _MASK64
    unit, keys = ident(req.unit), [ident(k) for k in req.keys]
    content = ", ".join([unit, *keys, *(ident(c) for c in value_inputs(req, list(values)))])
    return (f"hash(xor(hash({content}), {seed_r}::UBIGINT))",
            f"hash(xor(hash({', '.join([unit, *keys])}), {seed_g}::UBIGINT))")


def _kept_sql(source: str, req: BoundingRequest, values: list[str], key_table: str | None, *,
              carry: bool = False, entered: bool = False) -> str:
    """The kept rows: keys, `__first` (one row per kept (unit, group) pair), values `__v0`, ...
    With `carry`, the unit, the keys and the columns `values` (the others, all in the row hash)
    as they are, and `__first`. With `entered`, `__entered`: on each unit's first kept row the
    unit's rows that entered bounding, 0 on the others."""
    keys = [ident(k) for k in req.keys]
    key_sel = "".join(f", {k}" for k in keys)
    if req.unit is None:  # every row is a unit: nothing to bound
        return (f"SELECT TRUE AS __first{key_sel}{_fields(req, values)} FROM ({source})"
                f" WHERE {_in_keys(req, key_table)}")
    unit = ident(req.unit)
    row_hash, group_hash = keyed_hashes(req, values)
    names = [ident(c) for c in values] if carry else [f"__v{j}" for j in range(len(values))]
    rows = (f"SELECT {unit}{key_sel}{''.join(f', {c}' for c in names) if carry else _fields(req, values)},"
            f" {row_hash} AS __hr FROM ({source}) WHERE {unit} IS NOT NULL AND {_in_keys(req, key_table)}")
    whole = "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
    count = ", count(*) AS __n" if entered else ""
    pair = ", ".join([unit, *keys])
    if req.max_rows == 1:
        # 1. Each (unit, group) pair to its row of smallest keyed row hash, by a hash aggregate:
        # arg_min_null keeps a null value (arg_min skips it); rows of one hash have the same
        # content, so one arg_min per column takes every column from one row.
        kept = "".join(f", arg_min_null({n}, __hr) AS {n}" for n in names)
        pairs = f"SELECT {pair}{count}{kept}, TRUE AS __first FROM ({rows}) GROUP BY ALL"
        group_rank = "row_number"
    else:
        # 1. Each pair's first max_rows rows in the order of the keyed row hash: a window over
        # the pair's rows (a list aggregate would hold them in memory, unable to spill).
        by_pair = f"PARTITION BY {pair} ORDER BY __hr"
        if entered:
            count = f", count(*) OVER ({by_pair} {whole}) AS __n"
        pairs = (f"SELECT * EXCLUDE (__hr, __i), __i = 0 AS __first FROM (SELECT *{count},"
                 f" row_number() OVER ({by_pair}) - 1 AS __i FROM ({rows})) WHERE __i < {req.max_rows}")
        group_rank = "dense_rank"  # a pair's kept rows share its rank
    # 2. Each unit's first max_groups pairs in the order of the keyed group hash, by a window
    # over the unit's kept rows (at most max_rows a pair), never over all its rows; the unit's
    # rows that entered on its first row. The keys break a tie of the hash, so the order is
    # total; and with a second sort key DuckDB 2.0 keeps the window, which spills, where it
    # turns `row_number() <= k` on one key into a top-k aggregate per unit, which does not.
    ranked, entered_sql = f"SELECT * FROM ({pairs})", "__n"
    if keys:
        by_unit = f"PARTITION BY {unit} ORDER BY {group_hash}, {', '.join(keys)}"
        total = f"CAST(sum(CASE WHEN __first THEN __n END) OVER ({by_unit} {whole}) AS BIGINT)"
        ranked = (f"SELECT *, {group_rank}() OVER ({by_unit}) AS __g"
                  f"{f', {total} AS __e' if entered else ''} FROM ({pairs})")
        ranked = f"SELECT * FROM ({ranked}) WHERE __g <= {req.max_groups}"
        entered_sql = "CASE WHEN __g = 1 THEN __e ELSE 0 END"
    out = ", ".join([*([unit] if carry else []), *keys, "__first", *names])
    if entered:
        out += f", CASE WHEN __first THEN {entered_sql} ELSE 0 END AS __entered"
    return f"SELECT {out} FROM ({ranked})"


class BoundedDuckDB(BoundedRows):
    """A DuckDB table whose rows are bounded once (`Table.bounded`): at the first aggregate the
    kept rows, every column, are written to a temporary table (which spills to the connection's
    temp_directory when it outgrows memory_limit), dropped when this object goes; every request
    then reads them, its filters applied after bounding and its public keys to the groups.
    A quantile's grid (counts per group and cell) is counted once per value, bounds and grid,
    held in numpy (`CountedGrid`), and read by every later request without a filter, as the
    bounded rows are."""

    def __init__(self, source: DuckDBEngine, bounding: Bounding, seed: int,
                 where: tuple[RowExpression, ...]) -> None:
        super().__init__(source, bounding, seed, where)
        self.source: DuckDBEngine = source
        self.table: str | None = None
        self.grids: dict[tuple[str, float, float, int], CountedGrid] = {}
        self.groups: tuple[str | None, int, bool] | None = None

    def is_empty(self, where: tuple[RowExpression, ...] = ()) -> bool:
        if not where:
            return self.source.is_empty(self.where)
        return not self.source.rows(f"SELECT 1 FROM {self._rows()} WHERE {_all(where)} LIMIT 1")

    def _rows(self) -> str:
        """The bounded rows' table, written by the first call."""
        if self.table is None:
            req = self.request()
            source = self.source._filtered(self.where)
            rows, null_units = (int(c) for c in self.source.rows(_counts_sql(source, req))[0])
            others = [c for c in self.schema() if c not in (req.unit, *req.keys)]
            name = "bdp_bounded_" + uuid.uuid4().hex
            self.source.sql(f"CREATE TEMP TABLE {name} AS "
                            f"{_kept_sql(source, req, others, None, carry=True)}")
            kept = int(self.source.rows(f"SELECT count(*) FROM {name}")[0][0])
            weakref.finalize(self, _drop, self.source, name).atexit = False
            self.table, self.totals = name, (rows, null_units, rows - null_units - kept)
        return self.table

    def _kept_sql(self, rows: str, req: BoundingRequest, values: list[str]) -> str:
        """The request's kept rows as `_kept_sql` gives them, read from the bounded `rows`, in
        every group: the public keys select groups after aggregating (`_collect`), which is
        the same for rows bounded already and cheaper than a semi-join on every row."""
        keys = "".join(f"{ident(k)}, " for k in req.keys)
        first = "__first"
        if req.where and req.max_rows > 1:  # a filter may have dropped the pair's first row
            first = f"row_number() OVER (PARTITION BY {ident(self.bounding.unit)}, {keys}TRUE) = 1"
        where = f" WHERE {_all(req.where)}" if req.where else ""
        return f"SELECT {keys}{first} AS __first{_fields(req, values)} FROM {rows}{where}"

    def check(self, request: BoundingRequest) -> None:
        self.bounding.check(request)
        stand_in = f"(SELECT *, TRUE AS __first FROM ({self.source._filtered(self.where)}))"
        values = _value_columns(request)
        with self.source._keys(request) as keys:
            self.source.sql(_stats_sql(f"({self._kept_sql(stand_in, request, values)})", request,
                                       values, keys))

    def aggregate(self, request: BoundingRequest) -> ExactAggregates:
        self.bounding.check(request)
        rows = self._rows()
        values = _value_columns(request)
        # Without a filter the rows are the bounded table's, counted when it was written.
        filtered = self.totals[0] - self.totals[1] - self.totals[2] if not request.where else \
            int(self.source.rows(f"SELECT count(*) FROM {rows} WHERE {_all(request.where)}")[0][0])
        # As a request without a unit: every bounded row is kept, or outside the keys.
        request = replace(request, unit=None)
        grids = None
        if request.cells and not request.where:
            table, count, _ = self._groups(rows, request)
            grids = BoundedGrids(table, count, {c: self._grid(rows, request, c) for c in request.cells})
        with self.source._keys(request) as keys:
            kept_sql = self._kept_sql(rows, request, values)
            exact = self.source._collect(f"({kept_sql})", request, values, (filtered, 0, None), keys,
                                         grids=grids)
        return replace(exact, diagnostics=exact.diagnostics.after_filter(self.totals))

    def _groups(self, rows: str, req: BoundingRequest) -> tuple[str | None, int, bool]:
        """A table numbering the groups of the bounded `rows` in key order (`__g`; None without
        group keys), written once; how many there are, and whether a key holds a null."""
        if self.groups is None:
            keys = [ident(k) for k in req.keys]
            if not keys:
                self.groups = (None, 1, False)
            else:
                name, cols = "bdp_groups_" + uuid.uuid4().hex, ", ".join(keys)
                self.source.sql(f"CREATE TEMP TABLE {name} AS SELECT {cols}, {_group_number(keys)} AS __g"
                                f" FROM (SELECT DISTINCT {cols} FROM {rows})")
                weakref.finalize(self, _drop, self.source, name).atexit = False
                null = " OR ".join(f"{k} IS NULL" for k in keys)
                count, nulls = self.source.rows(f"SELECT count(*), count(*) FILTER ({null}) FROM {name}")[0]
                self.groups = (name, int(count), bool(nulls))
        return self.groups

    def _grid(self, rows: str, req: BoundingRequest, spec: Cells) -> CountedGrid:
        """The counts of the quantile grid `spec` per group and cell over all the bounded `rows`,
        counted at the first request with its value, bounds and grid and read by every later
        one without a filter: the grid of a column is counted once per table, like its
        bounding, not once per release (`CountedGrid`: numpy sorts a packed key per row)."""
        value = _fields(req, [spec.column])
        known = (value, spec.lo, spec.hi, spec.cells)
        if known not in self.grids:
            table, _, null_keys = self._groups(rows, req)
            keys = [ident(k) for k in req.keys]
            kept = f"(SELECT {''.join(f'{k}, ' for k in keys)}TRUE{value} FROM {rows})"
            query = (f"SELECT __g * {spec.cells + 1} + {_cell('r.__v0', spec)} AS __key"
                     f" FROM {_numbered(kept, keys, table or '', null_keys)} WHERE r.__v0 IS NOT NULL")
            with duckdb_errors():
                batches = self.source.sql(query).to_arrow_reader(BATCH_ROWS)
                self.grids[known] = CountedGrid.of((b.column(0).to_numpy() for b in batches),
                                                   spec.cells + 1)
        return self.grids[known]


def _drop(engine: DuckDBEngine, table: str) -> None:
    """Drop a bounded table whose engine is gone; the connection may be closed or its source
    files deleted by then (the table then goes with the connection)."""
    with suppress(BayesdpError):
        engine.sql(f"DROP TABLE IF EXISTS {table}")


def _all(where: Sequence[RowExpression]) -> str:
    return " AND ".join(f"({w.sql('duckdb')})" for w in where) or "TRUE"


__all__ = ["BoundedDuckDB", "DuckDBEngine", "connect", "duckdb_errors", "ident", "keyed_hashes"]
