"""The DuckDB engine: contribution bounding and exact aggregates inside DuckDB.

Bounding uses one hash aggregate and one window, never a row-order choice:

1. `GROUP BY unit, keys` collapses each (unit, group) pair to its row count and the `max_rows`
   rows with the smallest keyed hash `hash(hash(row) xor seed_r)` (a uniformly random subset,
   since the secret 64-bit seed makes the hash order a random permutation);
2. one `row_number()` window over the pairs (not the rows) ranks each unit's groups by
   `hash(hash(unit, key) xor seed_g)` and keeps the first `max_groups`.

The pairs table is materialized once (a temporary table dropped afterwards) and every
aggregate reads it, so quantile grids and histograms cost no second scan of the data.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from bayesdp.errors import DataError
from bayesdp.tables.engines.base import (
    Bins,
    BoundingRequest,
    Cells,
    Diagnostics,
    ExactAggregates,
    Measure,
)

_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
            "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL", "BOOLEAN")
_MASK64 = (1 << 64) - 1
SOURCE = "bdp_source"


def ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: Any) -> str:
    """A SQL literal for a public key value (str, int, float, bool, None)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool | np.bool_):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        if not math.isfinite(float(value)):
            raise DataError(f"public key {value!r} is not finite")
        return repr(float(value))
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise DataError(f"public key {value!r} has type {type(value).__name__}; use str, int, float or bool")


class DuckDBEngine:
    """Runs bounded aggregations on a DuckDB relation (a file scan, a registered frame, a query)."""

    def __init__(self, relation: duckdb.DuckDBPyRelation) -> None:
        self.relation = relation

    def sql(self, query: str) -> duckdb.DuckDBPyRelation:
        try:
            rel = self.relation.query(SOURCE, query)
        except duckdb.Error as exc:
            raise DataError(f"the engine rejected the query: {exc}".replace("\n", " ")) from None
        assert rel is not None
        return rel

    def schema(self) -> dict[str, str]:
        return dict(zip(self.relation.columns, (str(t) for t in self.relation.types), strict=True))

    def is_numeric(self, column: str) -> bool:
        return self.schema()[column].split("(")[0] in _NUMERIC

    def _filtered(self, where: Sequence[str]) -> str:
        cond = " AND ".join(f"({w})" for w in where) if where else "TRUE"
        return f"SELECT * FROM {SOURCE} WHERE {cond}"

    def is_empty(self, where: tuple[str, ...] = ()) -> bool:
        return not self.sql(f"SELECT 1 FROM ({self._filtered(where)}) LIMIT 1").fetchall()

    @contextmanager
    def _temp(self, query: str) -> Iterator[str]:
        name = "bdp_" + uuid.uuid4().hex
        self.sql(f"CREATE TEMP TABLE {name} AS {query}")
        try:
            yield name
        finally:
            self.relation.query(SOURCE, f"DROP TABLE IF EXISTS {name}")

    def aggregate(self, request: BoundingRequest) -> ExactAggregates:
        values = _value_columns(request)
        with self._temp(_pairs_sql(self._filtered(request.where), request, values)) as pairs:
            return self._collect(pairs, request, values)

    def _collect(self, pairs: str, req: BoundingRequest, values: list[str]) -> ExactAggregates:
        m = req.max_rows
        totals = self.sql(
            f"SELECT coalesce(sum(__n), 0), coalesce(sum(least(__n, {m})) FILTER (__keep), 0),"
            f" coalesce(sum(__n) FILTER (NOT __in), 0), coalesce(sum(__n) FILTER (__u IS NULL), 0)"
            f" FROM {pairs}"
        ).fetchall()[0]
        rows_total, kept, by_keys, null_units = (int(x) for x in totals)
        keys = [ident(k) for k in req.keys]
        rows_view = _rows_sql(pairs, keys, values, m)
        group_by = f"GROUP BY {', '.join(keys)} ORDER BY {', '.join(keys)} NULLS LAST" if keys else ""
        key_sel = "".join(f"{k}, " for k in keys)
        cols = ["count(*) AS __rows"]
        for i, meas in enumerate(req.measures):
            v = f"__v{values.index(meas.column)}"
            c = _clip(v, meas.lo, meas.hi)
            cols += [f"count({v}) AS __n{i}", f"coalesce(sum({c}), 0) AS __s{i}",
                     f"coalesce(sum(({c}) * ({c})), 0) AS __q{i}",
                     f"count(*) FILTER ({v} < {meas.lo!r} OR {v} > {meas.hi!r}) AS __c{i}"]
        for j in range(len(values)):
            cols.append(f"count(*) FILTER (__v{j} IS NULL) AS __null{j}")
        units = f"SELECT {key_sel}count(*) AS __units FROM {pairs} WHERE __keep {group_by}"
        stats = f"SELECT {key_sel}{', '.join(cols)} FROM ({rows_view}) {group_by}"
        units_df = self.sql(units).df()
        stats_df = self.sql(stats).df()
        groups = units_df[list(req.keys)].reset_index(drop=True)
        clipped: dict[Measure | Cells | Bins, int] = {}
        moments = {}
        for i, meas in enumerate(req.measures):
            moments[meas] = stats_df[[f"__n{i}", f"__s{i}", f"__q{i}"]].to_numpy(np.float64)
            clipped[meas] = int(stats_df[f"__c{i}"].sum())
        nulls = {c: int(stats_df[f"__null{j}"].sum()) for j, c in enumerate(values)}
        cells = {}
        for spec in req.cells:
            idx, gi, counts, n_clip = self._cells(rows_view, req, values, spec, groups)
            cells[spec] = (idx, gi, counts)
            clipped[spec] = n_clip
        bins = {}
        for bspec in req.bins:
            bins[bspec], clipped[bspec] = self._bins(rows_view, req, values, bspec, groups)
        diag = Diagnostics(rows=rows_total, kept_rows=kept,
                           dropped_by_bounding=rows_total - by_keys - null_units - kept,
                           dropped_by_keys=by_keys, null_units=null_units, nulls=nulls,
                           clipped=clipped)
        return ExactAggregates(groups=groups, units=units_df["__units"].to_numpy(np.int64),
                               rows=stats_df["__rows"].to_numpy(np.int64), moments=moments,
                               cells=cells, bins=bins, diagnostics=diag)

    def _cells(self, rows_view: str, req: BoundingRequest, values: list[str], spec: Cells,
               groups: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        v = f"__v{values.index(spec.column)}"
        width = (spec.hi - spec.lo) / spec.cells
        cell = f"CAST(round(({_clip(v, spec.lo, spec.hi)} - {spec.lo!r}) / {width!r}) AS BIGINT)"
        keys = "".join(f"{ident(k)}, " for k in req.keys)
        df = self.sql(
            f"SELECT {keys}{cell} AS __cell, count(*) AS __count,"
            f" count(*) FILTER ({v} < {spec.lo!r} OR {v} > {spec.hi!r}) AS __clip"
            f" FROM ({rows_view}) WHERE {v} IS NOT NULL GROUP BY ALL"
        ).df()
        gi = _group_index(df, groups, req.keys)
        order = np.lexsort((df["__cell"].to_numpy(), gi))
        return (gi[order], df["__cell"].to_numpy(np.int64)[order],
                df["__count"].to_numpy(np.int64)[order], int(df["__clip"].sum()))

    def _bins(self, rows_view: str, req: BoundingRequest, values: list[str], spec: Bins,
              groups: pd.DataFrame) -> tuple[np.ndarray, int]:
        v = f"__v{values.index(spec.column)}"
        inner = spec.edges[1:-1]
        case = "CASE " + " ".join(f"WHEN {v} < {e!r} THEN {i}" for i, e in enumerate(inner))
        case += f" ELSE {len(inner)} END" if inner else ""
        b = case if inner else "0"
        keys = "".join(f"{ident(k)}, " for k in req.keys)
        df = self.sql(
            f"SELECT {keys}{b} AS __bin, count(*) AS __count,"
            f" count(*) FILTER ({v} < {spec.edges[0]!r} OR {v} > {spec.edges[-1]!r}) AS __clip"
            f" FROM ({rows_view}) WHERE {v} IS NOT NULL GROUP BY ALL"
        ).df()
        gi = _group_index(df, groups, req.keys)
        out = np.zeros((len(groups), len(spec.edges) - 1), dtype=np.int64)
        np.add.at(out, (gi, df["__bin"].to_numpy(np.int64)), df["__count"].to_numpy(np.int64))
        return out, int(df["__clip"].sum())


def _value_columns(req: BoundingRequest) -> list[str]:
    cols = [m.column for m in req.measures] + [c.column for c in req.cells]
    cols += [b.column for b in req.bins]
    return list(dict.fromkeys(cols))


def _clip(v: str, lo: float, hi: float) -> str:
    return f"least(greatest({v}, {float(lo)!r}), {float(hi)!r})"


def _in_list(req: BoundingRequest) -> str:
    if req.public_keys is None:
        return "TRUE"
    if not req.public_keys:
        return "FALSE"
    if len(req.keys) == 1:
        items = ", ".join(literal(k[0]) for k in req.public_keys)
        return f"coalesce({ident(req.keys[0])} IN ({items}), FALSE)"
    items = ", ".join("row(" + ", ".join(literal(x) for x in k) + ")" for k in req.public_keys)
    return f"coalesce(row({', '.join(ident(k) for k in req.keys)}) IN ({items}), FALSE)"


def _pairs_sql(source: str, req: BoundingRequest, values: list[str]) -> str:
    """One row per (unit, group): row count, the kept rows, whether the pair is kept."""
    seed_r, seed_g = req.seed & _MASK64, (req.seed >> 64) & _MASK64
    unit, keys = ident(req.unit), [ident(k) for k in req.keys]
    content = ", ".join([unit, *keys, *(ident(c) for c in values)])
    row_hash = f"hash(xor(hash({content}), {seed_r}::UBIGINT))"
    kept = ""
    if values:
        struct = "{" + ", ".join(
            f"'__v{j}': nullif(CAST({ident(c)} AS DOUBLE), 'NaN'::DOUBLE)"
            for j, c in enumerate(values)) + "}"
        kept = (f", arg_min({struct}, {row_hash}) AS __kept" if req.max_rows == 1
                else f", min_by({struct}, {row_hash}, {req.max_rows}) AS __kept")
    group_hash = f"hash(xor(hash({', '.join([unit, *keys])}), {seed_g}::UBIGINT))"
    key_sel = "".join(f", {k}" for k in keys)
    pairs = (f"SELECT {unit} AS __u{key_sel}, count(*) AS __n, {_in_list(req)} AS __in,"
             f" {group_hash} AS __hg{kept} FROM ({source}) GROUP BY ALL")
    if not keys:
        return f"SELECT *, __u IS NOT NULL AS __keep FROM ({pairs})"
    rank = "row_number() OVER (PARTITION BY __u ORDER BY __in DESC, __hg)"
    return (f"SELECT * EXCLUDE (__hg), __in AND __u IS NOT NULL AND {rank} <= {req.max_groups}"
            f" AS __keep FROM ({pairs})")


def _rows_sql(pairs: str, keys: list[str], values: list[str], max_rows: int) -> str:
    """The kept rows: one per kept value (struct fields as columns __v0, __v1, ...)."""
    key_sel = "".join(f"{k}, " for k in keys)
    if not values:
        unnest = f"unnest(range(least(__n, {max_rows}))) AS __i"
        return f"SELECT {key_sel}{unnest} FROM {pairs} WHERE __keep"
    if max_rows == 1:
        fields = ", ".join(f"__kept.__v{j} AS __v{j}" for j in range(len(values)))
        return f"SELECT {key_sel}{fields} FROM {pairs} WHERE __keep"
    return f"SELECT {key_sel}unnest(__kept, recursive := true) FROM {pairs} WHERE __keep"


def _group_index(df: pd.DataFrame, groups: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """Positions in `groups` of the key rows of `df` (every key of df is in groups)."""
    if not keys:
        return np.zeros(len(df), dtype=np.int64)
    index = groups.assign(__gi=np.arange(len(groups)))
    merged = df[list(keys)].merge(index, on=list(keys), how="left", sort=False)
    return merged["__gi"].to_numpy(np.int64)


__all__ = ["DuckDBEngine", "ident", "literal"]
