"""Per-unit pre-aggregation: each privacy unit's rows in a group reduced to its own values first.

BigQuery's differentially private aggregates ("Differentially private aggregate functions",
`contribution_bounds_per_group`) first aggregate each privacy unit's rows in a group (its count,
its sum, its average), clamp that per-unit value to the bounds, and only then aggregate across
units; PERCENTILE_CONT, VAR_POP and STDDEV_POP take up to 5 of the unit's rows in the group at
random (ZetaSQL's rewriter: `ARRAY_AGG(expr IGNORE NULLS ORDER BY rand() LIMIT 5)`). `per_unit`
builds that table in the engine: one row per (unit, group) holding the unit's per-unit values,
plus, when per-row values are asked for, up to `rows` rows per (unit, group) holding them (the
per-unit values on the first row only, null on the others).

A unit's rows of the result depend on its own rows only (and a secret seed), so the step is
1-stable (McSherry 2009, PINQ): releases on it keep their guarantee per unit. `unit_sum` and
`unit_mean` are the builder's sum and mean for a column with at most one non-null value per
unit and group (the per-unit columns here): one unit moves them as one row does, whatever
`max_rows_per_group` the per-row values need.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

from bayesdp.errors import BayesdpError, InvalidParameter
from bayesdp.expressions import RowExpression
from bayesdp.noise import Rng, resolve_rng
from bayesdp.tables.aggregates import Noisy
from bayesdp.tables.engines.duckdb import SOURCE, DuckDBEngine, ident
from bayesdp.tables.means import Mean
from bayesdp.tables.query import Table
from bayesdp.tables.sums import Sum

# What a unit's rows in a group reduce to: their number, the number of non-null values, their sum, their mean.
Reduction = Literal["rows", "count", "sum", "avg"]
# ZetaSQL's per-unit row limit for PERCENTILE_CONT, VAR_POP and STDDEV_POP (kPerUserArrayAggLimit).
ROWS = 5


@dataclass(frozen=True)
class UnitSum(Sum):
    """A sum of a column with at most one non-null value per unit and group: sensitivity max(|lo|, |hi|)."""

    def sensitivity(self, part: str, max_rows: int) -> float:
        return super().sensitivity(part, 1)


@dataclass(frozen=True)
class UnitCount(UnitSum):
    """Units' counts clamped to integer bounds: an integer sum, released with discrete noise as
    `CountWhere` is (Canonne, Kamath & Steinke 2020), so that COUNT is an integer as in BigQuery."""

    noisy: ClassVar[tuple[Noisy, ...]] = (Noisy("sum", 1.0, integer=True),)


@dataclass(frozen=True)
class UnitMean(Mean):
    """A mean of a column with at most one non-null value per unit and group (`Mean` at one row)."""

    def sensitivity(self, part: str, max_rows: int) -> float:
        return super().sensitivity(part, 1)


def fresh_prefix(base: str, taken: Sequence[str]) -> str:
    """`base`, lengthened with underscores until no name in `taken` starts with it (any case):
    every name made by appending to it is then free, whatever columns the table holds."""
    lowered = [t.lower() for t in taken]
    while any(t.startswith(base.lower()) for t in lowered):
        base += "_"
    return base


def per_unit(table: Table, by: Sequence[str], values: Mapping[str, tuple[Reduction, RowExpression | None]],
             rows: Mapping[str, RowExpression] | None = None, *, max_rows: int = ROWS,
             rng: Rng | None = None) -> Table:
    """The table of `table`'s units (after its filters) reduced per (unit, group of `by`):
    `values` maps each new column to its reduction of a row expression (None with "rows"),
    NaN ignored as null; `rows` maps new columns to row expressions kept on up to `max_rows`
    rows per (unit, group), chosen by a keyed hash of a secret seed drawn now (`rng`: tests only),
    rows where the first is not null first. The result holds the unit, the `by` columns and the
    new columns."""
    unit = table.privacy_unit
    if unit is None or table.bounding is not None:
        raise InvalidParameter("per_unit needs a table with a privacy unit, not yet bounded")
    rows = dict(rows or {})
    taken = {c.lower() for c in (unit, *by)}
    if any(name.lower() in taken for name in (*values, *rows)):
        raise InvalidParameter(f"per_unit: new column names {[*values, *rows]} collide with {[unit, *by]}")
    gen = resolve_rng(rng)
    seed = int(gen.integers(0, 2**63))
    engine = table.engine
    if isinstance(engine, DuckDBEngine):
        return Table(DuckDBEngine(engine.sql(_sql(_Duck, table, by, values, rows, max_rows, seed, SOURCE))),
                     privacy_unit=unit, unit_name=table.unit_name, name=table.name)
    from bayesdp.tables.engines.spark import SparkEngine

    if not isinstance(engine, SparkEngine):
        raise InvalidParameter("per_unit runs on DuckDB or Spark tables")
    frame = engine.frame
    view = "bdp_per_unit_" + uuid.uuid4().hex  # not the seed: the catalog lists view names
    frame.createOrReplaceTempView(view)
    try:  # the result is analysed now: it no longer needs the view's name
        reduced = frame.sparkSession.sql(_sql(_Spark, table, by, values, rows, max_rows, seed, view))
    finally:
        frame.sparkSession.catalog.dropTempView(view)
    return Table(SparkEngine(reduced), privacy_unit=unit, unit_name=table.unit_name, name=table.name)


def materialized(table: Table) -> Table:
    """`table` (a per-unit table) with its rows written once to a DuckDB temporary table, dropped
    when the result goes, so that the releases on it (learnt bounds, then the aggregates, a
    quantile's grid) read them instead of aggregating the source again; on Spark, its frame
    persisted (memory and disk) when first computed, unpersisted when the result goes."""
    engine = table.engine
    if not isinstance(engine, DuckDBEngine):
        return _persisted(table)
    name = "bdp_" + uuid.uuid4().hex
    engine.sql(f"CREATE TEMP TABLE {name} AS SELECT * FROM {SOURCE}")
    written = DuckDBEngine(engine.sql(f"SELECT * FROM {name}"))
    weakref.finalize(written, _drop, engine, name).atexit = False
    return replace(table, engine=written)


def _persisted(table: Table) -> Table:
    from pyspark import StorageLevel

    from bayesdp.tables.engines.spark import SparkEngine

    if not isinstance(table.engine, SparkEngine):
        return table
    # A frame of its own (the same rows), so that the caller's frame is never unpersisted here.
    frame = table.engine.frame.select("*").persist(StorageLevel.MEMORY_AND_DISK)
    written = SparkEngine(frame)
    weakref.finalize(written, frame.unpersist).atexit = False
    return replace(table, engine=written)


def _drop(engine: DuckDBEngine, name: str) -> None:
    with suppress(BayesdpError):  # the connection may be closed by then, taking the table with it
        engine.sql(f"DROP TABLE IF EXISTS {name}")


class _Duck:
    quote = staticmethod(ident)
    dialect: ClassVar[Literal["duckdb"]] = "duckdb"

    @staticmethod
    def row_hash(values: str, seed: int) -> str:
        return f"hash(xor(hash({values}), {seed}::UBIGINT))"


class _Spark:
    dialect: ClassVar[Literal["spark"]] = "spark"

    @staticmethod
    def quote(name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    @staticmethod
    def row_hash(values: str, seed: int) -> str:
        return f"xxhash64(xxhash64({values}) ^ CAST({seed} AS BIGINT))"


def _sql(sql: type[_Duck] | type[_Spark], table: Table, by: Sequence[str],
         values: Mapping[str, tuple[Reduction, RowExpression | None]], rows: Mapping[str, RowExpression],
         max_rows: int, seed: int, source_name: str) -> str:
    q = sql.quote
    unit = q(table.privacy_unit or "")
    pair = ", ".join([unit, *(q(c) for c in by)])
    where = " AND ".join(f"coalesce({w.sql(sql.dialect)}, false)" for w in table.filters) or "true"

    def number(e: RowExpression | None) -> str:
        v = f"CAST({e.sql(sql.dialect) if e is not None else 1} AS DOUBLE)"
        return f"CASE WHEN isnan({v}) THEN NULL ELSE {v} END"

    def reduce(how: Reduction, e: RowExpression | None) -> str:
        raw = e.sql(sql.dialect) if e is not None else "1"
        return {"rows": "count(*)", "count": f"count({raw})", "sum": f"sum({number(e)})",
                "avg": f"avg({number(e)})"}[how]

    source = f"(SELECT * FROM {source_name} s WHERE {where}) s"
    if not rows:
        reduced = ", ".join(f"{reduce(how, e)} AS {q(n)}" for n, (how, e) in values.items())
        return _named(f"SELECT {pair}{', ' if reduced else ''}{reduced} FROM {source} GROUP BY {pair}")
    window = f"OVER (PARTITION BY {pair})"
    first = number(next(iter(rows.values())))
    # Rows are chosen by a keyed hash of the values kept: rows that tie hold the same values, so
    # which of them is kept changes nothing, and a unit's choice depends on its own rows only.
    kept = ", ".join(number(e) for e in rows.values())
    j = q(fresh_prefix("bdp_j", [table.privacy_unit or "", *by, *values, *rows]))  # the row's rank
    inner = ", ".join([pair, *(f"{reduce(how, e)} {window} AS {q(n)}" for n, (how, e) in values.items()),
                       *(f"{number(e)} AS {q(n)}" for n, e in rows.items()),
                       f"row_number() OVER (PARTITION BY {pair} ORDER BY {first} IS NULL, "
                       f"{sql.row_hash(kept, seed)}) AS {j}"])
    outer = ", ".join([pair, *(f"CASE WHEN {j} = 1 THEN {q(n)} END AS {q(n)}" for n in values),
                       *(q(n) for n in rows)])
    return _named(f"SELECT {outer} FROM (SELECT {inner} FROM {source}) WHERE {j} <= {int(max_rows)}")


def _named(query: str) -> str:
    """The query under a name of its own, so that an engine's query log shows what issued it."""
    return f"WITH bdp_per_unit AS ({query}) SELECT * FROM bdp_per_unit"


__all__ = ["ROWS", "UnitMean", "UnitSum", "fresh_prefix", "materialized", "per_unit"]
