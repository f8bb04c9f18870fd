"""The DuckDB engine: contribution bounding and exact aggregates inside DuckDB.

Bounding is one sort per unit (DuckDB's windows beat a hash aggregate with one entry per
(unit, group) pair), never a row-order choice. Each unit's rows are ordered by the keyed group
hash `hash(hash(unit, key) xor seed_g)`, then by the keyed row hash `hash(hash(row) xor seed_r)`;
the secret 64-bit seeds make both orders uniformly random permutations. A row is kept when
its group is among the unit's first `max_groups` (dense_rank) and its position inside the group
is below `max_rows` (row_number - rank). The three window functions share the one sort.

Without quantiles or histograms the kept rows are aggregated in the same query; with them,
the kept rows (at most units x max_groups x max_rows) are materialized once in a temporary
table, dropped afterwards, so the grids cost no second pass over the data.
One cheap scan counts the rows and the null units. The rows outside the public keys are the
others minus those that entered bounding, which the bounding sort counts per unit (a window
over the whole partition, sharing the sort), so the keys are joined to the rows only once.

Every DuckDB call, building a query and running it, goes through `duckdb_errors`: a DuckDB
error becomes a DataError (or a ResourceError when memory or disk runs out) whose public
message is generic and whose private detail is DuckDB's own text, which can quote a row's value.

Public keys and explicit histogram edges never become SQL lists: each is one JSON string literal
unnested into a temporary table, joined (a semi-join for the keys, an ASOF join for the edges),
so their cost grows with their length, not with its square.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from bayesdp.errors import invalid
from bayesdp.expressions import RowExpression
from bayesdp.tables.engines.base import (
    COARSE_SHIFT,
    REJECTED,
    Bins,
    BoundingRequest,
    Cells,
    CellWindow,
    Diagnostics,
    ExactAggregates,
    cell_window,
    engine_failure,
    read_measures,
    value_inputs,
)

_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
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
    return "'" + json.dumps(list(values), allow_nan=False).replace("'", "''") + "'"


class DuckDBEngine:
    """Runs bounded aggregations on a DuckDB relation (a file scan, a registered frame, a query)."""

    def __init__(self, relation: duckdb.DuckDBPyRelation) -> None:
        self.relation = relation

    def sql(self, query: str) -> duckdb.DuckDBPyRelation:
        """The query bound (not run) over the source."""
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
        return self._type(value).split("(")[0] in _NUMERIC

    def is_boolean(self, value: str | RowExpression) -> bool:
        return self._type(value) == "BOOLEAN"

    def _filtered(self, where: Sequence[RowExpression]) -> str:
        cond = " AND ".join(w.sql("duckdb") for w in where) if where else "TRUE"
        return f"SELECT * FROM {SOURCE} WHERE {cond}"

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

    def check(self, request: BoundingRequest) -> None:
        values = _value_columns(request)
        source = self._filtered(request.where)
        with self._keys(request) as keys:
            self.sql(_counts_sql(source, request))
            self.sql(_kept_sql(source, request, values, keys))

    def aggregate(self, request: BoundingRequest) -> ExactAggregates:
        values = _value_columns(request)
        source = self._filtered(request.where)
        with self._keys(request) as keys:
            totals = tuple(int(c) for c in self.rows(_counts_sql(source, request))[0])
            kept_sql = _kept_sql(source, request, values, keys)
            if not request.cells and not request.bins:  # one pass: aggregate the kept rows directly
                return self._collect(f"({kept_sql})", request, values, totals)
            with self._temp(kept_sql) as kept:
                return self._collect(kept, request, values, totals)

    @contextmanager
    def _keys(self, req: BoundingRequest) -> Iterator[str | None]:
        """A temporary table `__k0, __k1, ...` of the public keys, cast to the key columns' types
        (None without public keys)."""
        if req.public_keys is None:
            yield None
            return
        schema = self.schema()
        cols = ", ".join(
            f"CAST(unnest(from_json({_json_literal([k[i] for k in req.public_keys])}, '[\"VARCHAR\"]'))"
            f" AS {schema[c]}) AS __k{i}" for i, c in enumerate(req.keys))
        # An empty key list still needs the typed columns: a WHERE FALSE keeps them, without rows.
        with self._temp(f"SELECT {cols}" if req.public_keys else
                        f"SELECT * FROM (SELECT {cols}) WHERE FALSE") as name:
            yield name

    def _collect(self, kept: str, req: BoundingRequest, values: list[str],
                 counts: tuple[int, ...]) -> ExactAggregates:
        rows_total, null_units = counts
        keys = [ident(k) for k in req.keys]
        group_by = f"GROUP BY {', '.join(keys)} ORDER BY {', '.join(keys)} NULLS LAST" if keys else ""
        key_sel = "".join(f"{k}, " for k in keys)
        cols = ["count(*) AS __rows", "count(*) FILTER (__first) AS __units"]
        if _counts_entered(req):
            cols.append("sum(__entered) AS __entered")
        for i, meas in enumerate(req.measures):
            v = f"__v{values.index(meas.column)}"
            c = _clip(v, meas.lo, meas.hi)
            cols += [f"count({v}) AS __n{i}", f"coalesce(sum({c}), 0) AS __s{i}",
                     f"coalesce(sum(({c}) * ({c})), 0) AS __q{i}",
                     f"count(*) FILTER ({v} < {meas.lo!r} OR {v} > {meas.hi!r}) AS __c{i}"]
        for j in range(len(values)):
            cols += [f"count(*) FILTER (__v{j} IS NULL) AS __null{j}",
                     f"count(*) FILTER (isinf(__v{j})) AS __inf{j}"]
        stats_df = self.frame(f"SELECT {key_sel}{', '.join(cols)} FROM {kept} {group_by}")
        kept_rows = int(stats_df["__rows"].sum())
        # Rows outside the public keys: those with a unit that did not enter bounding.
        outside = 0 if req.public_keys is None else rows_total - null_units - (
            int(stats_df["__entered"].sum()) if _counts_entered(req) else kept_rows)
        groups = stats_df[list(req.keys)].reset_index(drop=True)
        moments, clipped, nulls, infinite = read_measures(stats_df, req, values)
        cells = {}
        for spec in req.cells:
            cells[spec], clipped[spec] = self._cells(kept, req, values, spec, groups)
        bins = {}
        for bspec in req.bins:
            bins[bspec], clipped[bspec] = self._bins(kept, req, values, bspec, groups)
        diag = Diagnostics(rows=rows_total, kept_rows=kept_rows,
                           dropped_by_bounding=rows_total - outside - null_units - kept_rows,
                           dropped_by_keys=outside, null_units=null_units, nulls=nulls,
                           infinite=infinite, clipped=clipped)
        return ExactAggregates(groups=groups, units=stats_df["__units"].to_numpy(np.int64),
                               rows=stats_df["__rows"].to_numpy(np.int64), moments=moments,
                               cells=cells, bins=bins, diagnostics=diag)

    def _cells(self, kept: str, req: BoundingRequest, values: list[str], spec: Cells,
               groups: pd.DataFrame) -> tuple[CellWindow, int]:
        v = f"__v{values.index(spec.column)}"
        width = (spec.hi - spec.lo) / spec.cells
        cell = f"CAST(round(({_clip(v, spec.lo, spec.hi)} - {spec.lo!r}) / {width!r}) AS BIGINT)"
        keys = [ident(k) for k in req.keys]
        key_sel = "".join(f"{k}, " for k in keys)
        order = "".join(f"{k} NULLS LAST, " for k in keys)
        part = f"PARTITION BY {', '.join(keys)}" if keys else ""
        grid = (f"(SELECT {key_sel}{cell} AS __cell, {v} < {spec.lo!r} OR {v} > {spec.hi!r} AS __out"
                f" FROM {kept} WHERE {v} IS NOT NULL)")
        bins = (f"SELECT {key_sel}__cell >> {COARSE_SHIFT} AS __k, count(*) AS __cnt,"
                f" count(*) FILTER (__out) AS __clip FROM {grid} GROUP BY ALL")
        with self._temp(bins) as coarse:
            n_clip = self.rows(f"SELECT coalesce(sum(__clip), 0) FROM {coarse}")[0][0]
            ranked = (f"SELECT *, CAST(sum(__cnt) OVER ({part} ORDER BY __k) AS BIGINT) AS __cum,"
                      f" CAST(sum(__cnt) OVER ({part}) AS BIGINT) AS __n FROM {coarse}")
            q, m = float(spec.q), float(spec.margin)
            near = (f"SELECT * FROM ({ranked}) WHERE CAST(__cum AS DOUBLE) > {q!r} * __n - {m!r}"
                    f" AND CAST(__cum - __cnt AS DOUBLE) < {q!r} * __n + {m!r}")
            with self._temp(near) as window:
                sel_df = self.frame(
                    f"SELECT {key_sel}min(__k) AS __k0, max(__k) AS __k1, min(__cum - __cnt) AS __below,"
                    f" any_value(__n) AS __n FROM {window} GROUP BY ALL ORDER BY {order}__k0")
                # When the noise is wide next to the groups, every window is the whole grid: skip the join.
                whole = self.rows(f"SELECT (SELECT count(*) FROM {window}) = (SELECT count(*) FROM"
                                  f" {coarse})")[0][0]
                on = "".join(f"g.{k} IS NOT DISTINCT FROM w.{k} AND " for k in keys)
                join = "" if whole else f" JOIN {window} w ON {on}g.__cell >> {COARSE_SHIFT} = w.__k"
                cells_df = self.frame(
                    f"SELECT {''.join(f'g.{k}, ' for k in keys)}g.__cell, count(*) AS __count"
                    f" FROM {grid} g{join}"
                    f" GROUP BY ALL ORDER BY {''.join(f'g.{k} NULLS LAST, ' for k in keys)}g.__cell")
        win = cell_window(len(groups), group_index(sel_df, groups, req.keys), sel_df,
                          group_index(cells_df, groups, req.keys), cells_df)
        return win, int(n_clip)

    def _bins(self, kept: str, req: BoundingRequest, values: list[str], spec: Bins,
              groups: pd.DataFrame) -> tuple[np.ndarray, int]:
        v = f"__v{values.index(spec.column)}"
        keys = "".join(f"{ident(k)}, " for k in req.keys)
        clip = f"count(*) FILTER ({v} < {spec.edges[0]!r} OR {v} > {spec.edges[-1]!r}) AS __clip"
        inner = spec.edges[1:-1]
        if not inner:
            df = self.frame(f"SELECT {keys}0 AS __bin, count(*) AS __count, {clip}"
                            f" FROM {kept} WHERE {v} IS NOT NULL GROUP BY ALL")
        else:
            # A value's bin is the number of inner edges at or below it: the ASOF join finds the
            # last such edge (edge i carries i + 1), no edge means bin 0.
            edges = (f"SELECT unnest(from_json({_json_literal(inner)}, '[\"DOUBLE\"]')) AS __e,"
                     " CAST(generate_subscripts(from_json("
                     f"{_json_literal(inner)}, '[\"DOUBLE\"]'), 1) AS BIGINT) AS __b")
            with self._temp(edges) as table:
                df = self.frame(
                    f"SELECT {''.join(f'r.{ident(k)}, ' for k in req.keys)}coalesce(e.__b, 0) AS __bin,"
                    f" count(*) AS __count, {clip.replace(v, f'r.{v}')} FROM {kept} r"
                    f" ASOF LEFT JOIN {table} e ON r.{v} >= e.__e WHERE r.{v} IS NOT NULL GROUP BY ALL")
        gi = group_index(df, groups, req.keys)
        out = np.zeros((len(groups), len(spec.edges) - 1), dtype=np.int64)
        np.add.at(out, (gi, df["__bin"].to_numpy(np.int64)), df["__count"].to_numpy(np.int64))
        return out, int(df["__clip"].sum())


def _counts_sql(source: str, req: BoundingRequest) -> str:
    """Rows, rows with a null unit."""
    unit_null = "FALSE" if req.unit is None else f"{ident(req.unit)} IS NULL"
    return f"SELECT count(*), count(*) FILTER ({unit_null}) FROM ({source})"


def _counts_entered(req: BoundingRequest) -> bool:
    """Whether the kept rows carry `__entered`, each unit's rows in the public keys (on one kept
    row of the unit, 0 on the others). Without public keys every row enters; without a unit
    every row in the keys is kept."""
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
    """Whether a row's key is one of the public keys (a null key never is); DuckDB plans the
    subquery as a hash semi-join."""
    if key_table is None:
        return "TRUE"
    cols = ", ".join(ident(k) for k in req.keys)
    table_cols = ", ".join(f"__k{i}" for i in range(len(req.keys)))
    return f"coalesce(({cols}) IN (SELECT {table_cols} FROM {key_table}), FALSE)"


def keyed_hashes(req: BoundingRequest, values: Sequence[str]) -> tuple[str, str]:
    """SQL of the keyed hashes ordering a pair's rows and a unit's groups (the Spark engine
    evaluates the same expressions, so both engines keep the same rows for the same seed)."""
    assert req.unit is not None
    seed_r, seed_g = req.seed & _MASK64, (req.seed >> 64) & _MASK64
    unit, keys = ident(req.unit), [ident(k) for k in req.keys]
    content = ", ".join([unit, *keys, *(ident(c) for c in value_inputs(req, list(values)))])
    return (f"hash(xor(hash({content}), {seed_r}::UBIGINT))",
            f"hash(xor(hash({', '.join([unit, *keys])}), {seed_g}::UBIGINT))")


def _kept_sql(source: str, req: BoundingRequest, values: list[str], key_table: str | None) -> str:
    """The kept rows: keys, `__first` (one row per kept (unit, group) pair), values `__v0`, ..."""
    keys = [ident(k) for k in req.keys]
    key_sel = "".join(f", {k}" for k in keys)
    exprs = dict(req.expressions)
    fields = "".join(f", nullif(CAST({exprs[c].sql('duckdb') if c in exprs else ident(c)} AS DOUBLE),"
                     f" 'NaN'::DOUBLE) AS __v{j}" for j, c in enumerate(values))
    if req.unit is None:  # every row is a unit: nothing to bound, no sort
        return f"SELECT TRUE AS __first{key_sel}{fields} FROM ({source}) WHERE {_in_keys(req, key_table)}"
    unit = ident(req.unit)
    row_hash, group_hash = keyed_hashes(req, values)
    if keys:
        by_group = f"PARTITION BY {unit} ORDER BY {group_hash}"
        # The three windows share one sort (the second order extends the first): dense_rank
        # numbers the unit's groups in random order, row_number - rank is the row's position
        # inside its group in random order.
        ranks = (f", dense_rank() OVER ({by_group}) AS __g, row_number() OVER ({by_group},"
                 f" {row_hash}) - rank() OVER ({by_group}) AS __i")
        if _counts_entered(req):  # the same sort: the whole partition is the unit's rows
            ranks += (f", count(*) OVER ({by_group} ROWS BETWEEN UNBOUNDED PRECEDING AND"
                      " UNBOUNDED FOLLOWING) AS __n")
        keep = f"__g <= {req.max_groups} AND __i < {req.max_rows}"
    else:
        ranks = f", row_number() OVER (PARTITION BY {unit} ORDER BY {row_hash}) - 1 AS __i"
        keep = f"__i < {req.max_rows}"
    out = "".join(f"{k}, " for k in keys) + "__i = 0 AS __first" + \
        "".join(f", __v{j}" for j in range(len(values)))
    if _counts_entered(req):
        out += ", CASE WHEN __g = 1 AND __i = 0 THEN __n ELSE 0 END AS __entered"
    # An outer WHERE, not QUALIFY: DuckDB turns `row_number() ... QUALIFY __i < k` into a top-k
    # per partition that cannot spill, so a memory limit would fail what a spilling sort finishes.
    return (f"SELECT {out} FROM (SELECT {unit} AS __u{key_sel}{fields}{ranks} FROM ({source})"
            f" WHERE {unit} IS NOT NULL AND {_in_keys(req, key_table)}) WHERE {keep}")


def group_index(df: pd.DataFrame, groups: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """Positions in `groups` of the key rows of `df` (every key of df is in groups)."""
    if not keys:
        return np.zeros(len(df), dtype=np.int64)
    if df.empty:
        return np.zeros(0, dtype=np.int64)
    # Rows come in runs of equal keys (sorted by key): look up one row per run.
    change = np.zeros(len(df), dtype=bool)
    change[0] = True
    for c in keys:
        col, prev = df[c], df[c].shift()
        same = (col == prev) | (col.isna() & prev.isna())
        change |= ~same.to_numpy(dtype=bool)
    starts = np.flatnonzero(change)
    index = groups.assign(__gi=np.arange(len(groups)))
    runs = df[list(keys)].iloc[starts].merge(index, on=list(keys), how="left", sort=False)
    return np.repeat(runs["__gi"].to_numpy(np.int64), np.diff(np.append(starts, len(df))))


__all__ = ["DuckDBEngine", "connect", "duckdb_errors", "ident", "keyed_hashes"]
