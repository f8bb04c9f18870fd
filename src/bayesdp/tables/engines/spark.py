"""The Spark engine: the same contribution bounding and exact aggregates as DuckDB, on a cluster.

The rows never leave Spark; only per-group aggregates reach the driver. The plan is

1. with public keys, the rows whose key is not one of them are dropped by a broadcast
   semi-join; the rows and the null units before it come from the Parquet footers of a bare
   file scan, else a query of their own (`_source_counts`);
2. `groupBy(unit, keys)` collapses each (unit, group) pair to its row count and the
   `max_rows` rows with the smallest keyed row hash (`min_by`; with more than one row, `min_by`
   with k on Spark 4.2 and later, else the head of the hash-sorted list of the pair's rows), so
   time and memory follow the pairs, not the largest unit's rows;
3. one `row_number()` window over each unit's pairs, ordered by the keyed group hash, keeps its
   first `max_groups` groups;
4. grouped aggregations of the kept rows: units, rows, clipped moments, grid cells, bins.

The keyed hashes are Spark's native `xxhash64` of the row's content (of the unit and key for a
group), xor a 64-bit secret, hashed again: the construction of the DuckDB engine with Spark's
own hash, computed in the JVM. For one seed the two engines keep different rows, each a uniform
random choice; the release has the same distribution and the same guarantee on both.

Without grid cells or bins the whole release is one query: the totals of the diagnostics are an
observation of the pairs as the aggregates read them. With cells or bins, which read the kept rows
several times, the pairs are persisted (memory and disk) for the duration of one `aggregate`
call, so every pass reads them without a second scan of the data.
"""

from __future__ import annotations

import math
import os
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from bayesdp.errors import BayesdpError, DataError, InvalidParameter
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
    cell_window,
    engine_failure,
    read_measures,
    value_inputs,
)
from bayesdp.tables.engines.footers import footer_counts

try:
    from py4j.protocol import Py4JJavaError
    from pyspark import StorageLevel
    from pyspark.errors import PySparkException
    from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise InvalidParameter(
        "engine='spark' needs pyspark (and Java 17): install it with pip install 'bayesdp[spark]'"
    ) from exc

_SPARK_ERRORS = (PySparkException, Py4JJavaError)
_ROW_UNIT = "__bdp_row"  # the unit column Spark adds when every row is a unit
_MASK64 = (1 << 64) - 1
OUT_OF_MEMORY_ADVICE = ("give the driver and the executors more memory (spark.driver.memory, "
                        "spark.executor.memory) or more partitions (spark.sql.shuffle.partitions)")
_READERS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "csv", ".txt": "csv",
            ".json": "json", ".jsonl": "json", ".ndjson": "json", ".orc": "orc"}


# A request's pairs, not yet run: the source's rows and units (with public keys),
# the pairs, the request as run, its value columns.
_Plan = tuple[Callable[[], tuple[int, int]] | None, DataFrame, BoundingRequest, list[str]]


class _Observed:
    """Aggregates of a frame observed as a query reads it (`DataFrame.observe`): no pass of
    their own."""

    def __init__(self, *columns: Column) -> None:
        self.columns, self.observation = columns, Observation()
        self.frame: DataFrame | None = None

    def on(self, frame: DataFrame) -> DataFrame:
        self.frame = frame
        return frame.observe(self.observation, *self.columns)

    def values(self) -> list[Any]:
        """The aggregates, once the query has run. When a stage of the query wrote no rows,
        adaptive execution drops it from the final plan, and the metrics it observed with it
        (Spark then fails its own assertion): a query of the frame computes them instead."""
        assert self.frame is not None
        try:
            return list(self.observation.get.values())
        except _SPARK_ERRORS:
            return list(self.frame.agg(*self.columns).collect()[0])


class SparkEngine:
    """Runs bounded aggregations on a Spark DataFrame (a lake table, a file scan, a query)."""

    def __init__(self, frame: DataFrame) -> None:
        self.frame = frame
        self._keys: tuple[BoundingRequest, DataFrame] | None = None
        self._checked: tuple[BoundingRequest, _Plan] | None = None

    def _public(self, req: BoundingRequest) -> DataFrame | None:
        """The request's public keys as a DataFrame, built once for the same keys: a release
        checks its request, then aggregates it."""
        if req.public_keys is None:
            return None
        held = self._keys
        if held is None or held[0].public_keys is not req.public_keys or held[0].keys != req.keys:
            held = self._keys = (req, _key_frame(self.frame.sparkSession, req, self.frame.schema))
        return held[1]

    def schema(self) -> dict[str, str]:
        return {f.name: f.dataType.simpleString() for f in self.frame.schema.fields}

    def _type(self, value: str | RowExpression) -> T.DataType:
        if isinstance(value, RowExpression):
            try:
                return self.frame.selectExpr(value.sql("spark")).schema.fields[0].dataType
            except Exception as exc:  # the analyzer's errors: a schema fact, costs nothing
                raise _data_error(exc) from None
        return self.frame.schema[value].dataType

    def is_numeric(self, value: str | RowExpression) -> bool:
        return isinstance(self._type(value), T.NumericType | T.BooleanType)

    def is_boolean(self, value: str | RowExpression) -> bool:
        return isinstance(self._type(value), T.BooleanType)

    def _filtered(self, where: Sequence[RowExpression]) -> DataFrame:
        try:
            return _where(self.frame, where)
        except _SPARK_ERRORS as exc:
            raise _data_error(exc) from None

    def is_empty(self, where: tuple[RowExpression, ...] = ()) -> bool:
        try:
            return bool(self._filtered(where).isEmpty())
        except _SPARK_ERRORS as exc:
            raise _data_error(exc) from None

    def _plan(self, request: BoundingRequest) -> _Plan:
        """The request's (unit, group) pairs, not yet run, with the query of the source's rows
        and units (with public keys), the request as run, its value columns."""
        values = _values(request)
        source = self._filtered(request.where)
        seen = _source_counts(source, request.unit, queried=request.public_keys is not None)
        if request.unit is None:  # every row is a unit: a unique id makes each row its own pair
            source = source.withColumn(_ROW_UNIT, F.monotonically_increasing_id())
            request = replace(request, unit=_ROW_UNIT)
        return seen, _pairs(source, request, values, self._public(request)), request, values

    def check(self, request: BoundingRequest) -> None:
        # Spark analyses a plan as it is built: building the pairs binds every column and filter.
        # The plan is kept for the aggregate of this request, which follows (building it costs
        # hundreds of calls to the JVM).
        try:
            self._checked = (request, self._plan(request))
        except _SPARK_ERRORS as exc:
            raise _data_error(exc) from None
        _refuse_failing_casts(self.frame, _expressions(request))

    def aggregate(self, request: BoundingRequest) -> ExactAggregates:
        checked, self._checked = self._checked, None
        try:
            plan = checked[1] if checked is not None and checked[0] is request else self._plan(request)
            seen, pairs, request, values = plan
            if not (request.cells or request.bins):  # one pass over the pairs: one query
                return _collect(seen, pairs, request, values)
            with _persisted(pairs) as pairs:
                return _collect(seen, pairs, request, values)
        except _SPARK_ERRORS as exc:
            raise _data_error(exc) from None

    def bounded(self, bounding: Bounding, seed: int, where: tuple[RowExpression, ...]) -> Engine:
        return BoundedSpark(self, bounding, seed, where)


class BoundedSpark(BoundedRows):
    """A Spark table whose rows are bounded once (`Table.bounded`): at the first aggregate the
    kept rows, every column, are persisted (memory and disk) until this object goes; every
    request then reads them, its filters and public keys applied after bounding."""

    def __init__(self, source: SparkEngine, bounding: Bounding, seed: int,
                 where: tuple[RowExpression, ...]) -> None:
        super().__init__(source, bounding, seed, where)
        self.source: SparkEngine = source
        self.frame: DataFrame | None = None

    def is_empty(self, where: tuple[RowExpression, ...] = ()) -> bool:
        if not where:
            return self.source.is_empty(self.where)
        try:
            return bool(_where(self._rows(), where).isEmpty())
        except _SPARK_ERRORS as exc:
            raise _data_error(exc) from None

    def _rows(self) -> DataFrame:
        """The bounded rows, persisted by the first call."""
        if self.frame is None:
            req = self.request()
            others = [c for c in self.schema() if c not in (req.unit, *req.keys)]
            pairs = _pairs(self.source._filtered(self.where), req, others, None, carry=True)
            with _persisted(pairs) as pairs:
                rows, nulls = (int(x) for x in pairs.agg(
                    F.coalesce(F.sum("__n"), F.lit(0)),
                    F.coalesce(F.sum(F.when(F.col("__u").isNull(), F.col("__n"))), F.lit(0)),
                ).collect()[0])
                frame = _kept_rows(pairs, req, others, carry=True).drop("col")
                frame.persist(StorageLevel.MEMORY_AND_DISK)
                kept = frame.count()
            weakref.finalize(self, frame.unpersist).atexit = False
            self.frame, self.totals = frame, (rows, nulls, rows - nulls - kept)
        return self.frame

    def _kept(self, rows: DataFrame, req: BoundingRequest, values: list[str], *,
              marked: bool = True) -> DataFrame:
        """The request's rows (keys, __first, __in, __v0, ...) read from the bounded `rows`;
        without `marked`, no __in (the public keys select groups after aggregating)."""
        rows = _where(rows, req.where)
        keys = [_col(k) for k in req.keys]
        first = F.col("__first")
        if req.where and req.max_rows > 1:  # a filter may have dropped the pair's first row
            pair = Window.partitionBy(_col(self.bounding.unit), *keys).orderBy(F.lit(0))
            first = F.row_number().over(pair) == 1
        if marked:
            rows = _with_in_keys(rows, req, self.source._public(req))
        return rows.select(*keys, first.alias("__first"), *([F.col("__in")] if marked else []),
                           *_exprs(*[f"{_value(req, c)} AS __v{j}" for j, c in enumerate(values)]))

    def check(self, request: BoundingRequest) -> None:
        self.bounding.check(request)
        stand_in = self.source._filtered(self.where).withColumn("__first", F.lit(True))
        try:
            self._kept(stand_in, request, _values(request))
        except _SPARK_ERRORS as exc:
            raise _data_error(exc) from None
        _refuse_failing_casts(self.source.frame, (*self.where, *_expressions(request)))

    def aggregate(self, request: BoundingRequest) -> ExactAggregates:
        self.bounding.check(request)
        values = _values(request)
        try:
            if not (request.cells or request.bins):
                exact = self._selected(request, values)
                return replace(exact, diagnostics=exact.diagnostics.after_filter(self.totals))
            rows = self._kept(self._rows(), request, values)
            with _persisted(rows) as rows:
                n, inside = (int(x) for x in rows.agg(*_exprs("count(1)", _count_if("__in"))).collect()[0])
                exact = _aggregates(rows.where("__in"), request, values,
                                    lambda: (n, n - inside, 0))
        except _SPARK_ERRORS as exc:
            raise _data_error(exc) from None
        return replace(exact, diagnostics=exact.diagnostics.after_filter(self.totals))

    def _selected(self, req: BoundingRequest, values: list[str]) -> ExactAggregates:
        """Without cells or bins, one query: every group of the bounded rows is aggregated, then
        the public keys select groups (a broadcast join of the per-group rows, not of every
        bounded row, and nothing persisted); the rows in and outside the keys are an observation
        of the per-group rows."""
        keys = self.source._public(req)
        rows_in = "__rows" if keys is None else "CASE WHEN __in THEN __rows END"
        totals = _Observed(*_exprs("coalesce(sum(__rows), 0) AS rows",
                                   f"coalesce(sum({rows_in}), 0) AS inside"))

        def select(groups: DataFrame) -> DataFrame:
            if keys is None:
                return totals.on(groups)
            return totals.on(_with_in_keys(groups, req, keys)).where("__in").drop("__in")

        def counts() -> tuple[int, int, int]:
            n, inside = (int(x) for x in totals.values())
            return n, n - inside, 0

        return _aggregates(self._kept(self._rows(), req, values, marked=False), req, values, counts,
                           select=select)


def _values(request: BoundingRequest) -> list[str]:
    """The value columns of a request's measures, cells and bins, first use first."""
    specs: list[Measure | Cells | Bins] = [*request.measures, *request.cells, *request.bins]
    return list(dict.fromkeys(s.column for s in specs))


def _expressions(request: BoundingRequest) -> list[RowExpression]:
    """The request's row expressions: its filters and its expression values."""
    return [*request.where, *(e for _, e in request.expressions)]


def _refuse_failing_casts(frame: DataFrame, expressions: Sequence[RowExpression]) -> None:
    """Refuse, from the schema alone and before anything is spent, an expression in which Spark
    would convert text implicitly in a way that raises on a malformed value: under ANSI mode
    (Spark 4's default) `text_col = 1`, `text_col + 1` or `month(text_col)` cast the text with
    an ANSI cast, so a row holding 'abc' would fail the release on one table and not on its
    neighbour. The expressions are analysed together against `frame`, as one projection (one
    plan, nothing runs), and each one's Catalyst tree searched for such a cast (`_failing_cast`);
    an explicit CAST, rendered as TRY_CAST, gives NULL.

    Deciding from the schema is the robust choice: making those casts total instead means
    rewriting Spark's analysed plan through its internal classes (their constructors change
    between versions) or planning the user's DataFrame again with ANSI off, which is either
    `spark.conf`, shared by the whole session (set and restored around a release, it races with
    the user's other queries), or a new session, to which a DataFrame bound to the user's
    session (its temporary views, cached relations, functions) cannot be moved safely."""
    if not expressions:
        return
    analyzed = frame.select(*(F.expr(e.sql("spark")) for e in expressions))._jdf \
        .queryExecution().analyzed().expressions()
    for i, expression in enumerate(expressions):
        cast = _failing_cast(analyzed.apply(i))
        if cast is not None:
            child, target = cast.child(), cast.dataType().simpleString().upper()
            text = child.sql() if child.getClass().getSimpleName() == "AttributeReference" else "..."
            raise InvalidParameter(
                f"expression {expression.text!r} converts text to {target} implicitly, which "
                f"fails on Spark (ANSI mode) where a value is not a valid {target}: write an "
                f"explicit CAST({text} AS {target}), which gives NULL there")


def _failing_cast(node: Any) -> Any:
    """The first cast in the Catalyst expression `node` (a py4j object) that can raise on a
    row's value: an ANSI cast of text (or bytes) to another type, of a value that is not a
    constant (a constant's error does not depend on the data), outside try_* (TryEval makes
    any error NULL); None when there is none."""
    kind = node.getClass().getSimpleName()
    if kind == "TryEval":
        return None
    if kind == "Cast" and node.evalMode().toString() == "ANSI":
        child, target = node.child(), node.dataType().typeName()
        source = child.dataType().typeName()
        if not child.foldable() and source.startswith(("string", "binary")) \
                and not target.startswith(("string", "binary")):
            return node
    children = node.children()
    for i in range(children.size()):
        found = _failing_cast(children.apply(i))
        if found is not None:
            return found
    return None


def _where(frame: DataFrame, where: Sequence[RowExpression]) -> DataFrame:
    for condition in where:
        frame = frame.where(F.expr(condition.sql("spark")))
    return frame


def _data_error(exc: Exception, public: str = f"Spark {REJECTED}") -> BayesdpError:
    """The bayesdp error with `public` as its message and, as private detail, one line: the
    error of a Python worker (its traceback's last line), else Spark's first."""
    lines = [ln.strip() for ln in str(exc).split("JVM stacktrace:")[0].splitlines() if ln.strip()]
    python = any(ln.startswith("Traceback") for ln in lines)
    message = (lines[-1] if python else lines[0]) if lines else type(exc).__name__
    return engine_failure(message, "Spark", public, out_of_memory="OutOfMemoryError" in str(exc),
                          advice=OUT_OF_MEMORY_ADVICE)


# Expressions are Spark SQL text, parsed by the JVM in one call each: a tree of Column calls
# costs a round trip to the JVM per node (about 0.2 s of calls per release at 1,000 keys).


def _q(name: str) -> str:
    """A column name quoted for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def _col(name: str) -> Column:
    return F.col(_q(name))


def _double(x: float) -> str:
    """A DOUBLE literal (a bare 1.5 is a DECIMAL in Spark SQL); repr keeps every digit."""
    return f"CAST('{float(x)!r}' AS DOUBLE)"


def _keyed_hash(columns: list[str], seed: int) -> str:
    """xxhash64(xxhash64(columns) xor seed): the 64-bit secret keys the order (a plain xor would
    only flip bits of one hash, the second hash mixes them)."""
    key = seed & _MASK64
    signed = key - (1 << 64) if key >> 63 else key
    return f"xxhash64(xxhash64({', '.join(columns)}) ^ CAST({signed} AS BIGINT))"


def _value(req: BoundingRequest, name: str) -> str:
    """A value column or row expression as DOUBLE with NaN as null (as the DuckDB engine reads it)."""
    exprs = dict(req.expressions)
    v = f"CAST({'(' + exprs[name].sql('spark') + ')' if name in exprs else _q(name)} AS DOUBLE)"
    return f"CASE WHEN NOT isnan({v}) THEN {v} END"


def _clip(v: str, lo: float, hi: float) -> str:
    """`v` clipped to [lo, hi]; null stays null (Spark's least/greatest skip nulls)."""
    return f"CASE WHEN {v} IS NOT NULL THEN least(greatest({v}, {_double(lo)}), {_double(hi)}) END"


def _outside(v: str, lo: float, hi: float) -> str:
    return f"{v} < {_double(lo)} OR {v} > {_double(hi)}"


def _count_if(cond: str) -> str:
    return f"count(CASE WHEN {cond} THEN 1 END)"


def _exprs(*sql: str) -> list[Column]:
    return [F.expr(x) for x in sql]


def _key_frame(spark: SparkSession, req: BoundingRequest, schema: T.StructType) -> DataFrame:
    """The public keys (__k0, __k1, ..., __hit) in the types of the key columns of `schema`, sent
    as one Arrow table. Keys that are all integers or all text travel as they are; others as
    text, cast on the cluster (the query layer has checked that each key suits its column)."""
    assert req.public_keys is not None
    names = [f"__k{i}" for i in range(len(req.keys))]
    columns = list(zip(*req.public_keys, strict=True)) or [() for _ in names]
    table = pa.table({n: _key_array(c, schema[k].dataType)
                      for n, c, k in zip(names, columns, req.keys, strict=True)})
    keys = spark.createDataFrame(table)
    return keys.select(*[F.col(n).cast(schema[k].dataType).alias(n)
                         for n, k in zip(names, req.keys, strict=True)], F.lit(True).alias("__hit"))


def _key_array(values: Sequence[Any], column: T.DataType) -> pa.Array:
    """One key column as Arrow: 64-bit integers or text as they are, anything else as text. For
    an integer column a float key is integral (the query layer checks it) and goes as an integer:
    Spark does not cast the text '2.0' to an integer."""
    if isinstance(column, T.IntegralType):
        values = [int(x) if type(x) is float else x for x in values]
    if all((type(x) is int and -(1 << 63) <= x < (1 << 63)) or x is None for x in values):
        return pa.array(values, pa.int64())
    if all(type(x) is str or x is None for x in values):
        return pa.array(values, pa.string())
    return pa.array([None if x is None else _text(x) for x in values], pa.string())


def _with_in_keys(frame: DataFrame, req: BoundingRequest, keys: DataFrame | None, *,
                  semi: bool = False) -> DataFrame:
    """`frame` with `__in`: whether the row's key is one of the public `keys` (`_key_frame`;
    always, without public keys; a null key never is); with `semi`, only the rows in the keys.
    The keys are a broadcast relation joined by equality, never a literal list (which Spark
    evaluates element by element on every row)."""
    if keys is None:
        return frame if semi else frame.withColumn("__in", F.lit(True))
    names = [f"__k{i}" for i in range(len(req.keys))]
    on = [frame[f"`{k}`"] == keys[n] for n, k in zip(names, req.keys, strict=True)]
    if semi:
        return frame.join(F.broadcast(keys), on=on, how="left_semi")
    joined = frame.join(F.broadcast(keys), on=on, how="left")
    return joined.select(frame["*"], F.coalesce(F.col("__hit"), F.lit(False)).alias("__in"))


def _text(value: Any) -> str:
    """A key value as the text Spark casts back exactly (repr keeps every digit of a float)."""
    return repr(value) if isinstance(value, float) else str(value).lower() \
        if isinstance(value, bool) else str(value)


def _pairs(source: DataFrame, req: BoundingRequest, values: list[str], keys: DataFrame | None, *,
           carry: bool = False) -> DataFrame:
    """One row per (unit, group) of the rows in the public `keys` (`_key_frame`; None: all):
    row count, the kept rows (__m0, __m1, ... with one row a pair, else the list __kept), whether
    the pair is kept. With `carry`, the kept rows hold the columns `values` as they are, not as
    DOUBLE."""
    assert req.unit is not None
    content = list(dict.fromkeys([req.unit, *req.keys, *value_inputs(req, values)]))
    narrow = source.selectExpr(*[_q(c) for c in content])
    narrow = _with_in_keys(narrow, req, keys, semi=True)
    by = [_q(k) for k in req.keys]
    hashed = narrow.selectExpr(f"{_q(req.unit)} AS __u", *by,
                               f"{_keyed_hash([_q(c) for c in content], req.seed)} AS __hr",
                               *[f"{_q(c) if carry else _value(req, c)} AS __v{j}"
                                 for j, c in enumerate(values)])
    aggs = ["count(1) AS __n"]
    if values:
        fields = ", ".join(f"__v{j}" for j in range(len(values)))
        if req.max_rows == 1:
            # One min_by per column, not of a struct: a struct buffer turns Spark's hash
            # aggregate into a sort of every row (the floor's plan has none). Rows of one hash
            # have the same content, so the columns come from one row.
            aggs += [f"min_by(__v{j}, __hr) AS __m{j}" for j in range(len(values))]
        elif _top_k(source.sparkSession):  # a heap of max_rows rows a pair, in hash order
            aggs.append(f"min_by(struct(__hr, {fields}), __hr, {req.max_rows}) AS __kept")
        else:  # every row of the pair in a list, then sorted
            ordered = f"array_sort(collect_list(struct(__hr, {fields})))"
            aggs.append(f"slice({ordered}, 1, {req.max_rows}) AS __kept")
    pairs = hashed.groupBy("__u", *[_col(k) for k in req.keys]).agg(*_exprs(*aggs))
    if not req.keys:
        return pairs.withColumn("__keep", F.expr("__u IS NOT NULL"))
    # The group hash is computed per pair, not per row.
    rank = f"row_number() OVER (PARTITION BY __u ORDER BY {_keyed_hash(['__u', *by], req.seed >> 64)})"
    return pairs.withColumn("__keep", F.expr(f"__u IS NOT NULL AND {rank} <= {req.max_groups}"))


def _top_k(spark: SparkSession) -> bool:
    """Whether Spark has `min_by(x, ord, k)`, the k values of smallest `ord` (Spark 4.2,
    SPARK-55322): a bounded heap per group, where a list of the group's rows grows with it."""
    major, minor = (int(p) for p in spark.version.split(".")[:2])
    return (major, minor) >= (4, 2)


def _source_counts(source: DataFrame, unit: str | None, *,
                   queried: bool) -> Callable[[], tuple[int, int]] | None:
    """The source's rows and rows with a unit (`unit` None: every row is one): from the Parquet
    footers of a bare file scan (`footer_counts`, read now), else, when `queried`, a query of
    their own run when called, else None (the pairs' totals then give them). Observed on the
    scan before the public keys' semi-join, every source row would go through the observation,
    which Spark does not compile: 0.5 s of a 1.7 s release at 10M rows."""
    got = footer_counts(source, unit)
    if got is not None:
        return lambda: got
    if not queried:
        return None

    def counted() -> tuple[int, int]:
        units = "count(1)" if unit is None else f"count({_q(unit)})"
        rows, counted_units = source.agg(*_exprs("count(1)", units)).collect()[0]
        return int(rows), int(counted_units)
    return counted


def _kept_rows(pairs: DataFrame, req: BoundingRequest, values: list[str], *,
               carry: bool = False) -> DataFrame:
    """The kept rows (keys, __v0, __v1, ...) with __first marking one row per kept pair. With
    `carry`, the unit, the keys and the columns `values` under their own names, and __first."""
    kept = pairs.where("__keep")
    keys = [_q(k) for k in req.keys]
    fields = [f"__v{j}" for j in range(len(values))]
    names = [_q(n) for n in (values if carry else fields)]
    if carry:
        assert req.unit is not None
        keys.insert(0, f"__u AS {_q(req.unit)}")
    if not values:
        return kept.selectExpr(*keys, "TRUE AS __first", f"explode(sequence(1, least(__n, {req.max_rows})))")
    if req.max_rows == 1:
        return kept.selectExpr(*keys, "TRUE AS __first",
                               *[f"__m{j} AS {n}" for j, n in enumerate(names)])
    rows = kept.selectExpr(*keys, "posexplode(__kept) AS (__pos, __r)")
    carried = [_q(c) for c in rows.columns[:len(keys)]]
    return rows.selectExpr(*carried, "__pos = 0 AS __first",
                           *[f"__r.{f} AS {n}" for f, n in zip(fields, names, strict=True)])


def _collect(seen: Callable[[], tuple[int, int]] | None, pairs: DataFrame, req: BoundingRequest,
             values: list[str]) -> ExactAggregates:
    """The aggregates of the kept rows of `pairs`. The source's rows and null units come from
    `seen` when given (`_source_counts`; with public keys the pairs hold only the rows in the
    keys), else from the pairs' totals. The rows that entered bounding are the rows with a unit
    (without public keys) or the pairs' total (with them): a query of its own when the pairs
    are persisted (cells or bins read them again), else an observation of the aggregates' query,
    which every pair goes through (so none without public keys when `seen` is given)."""
    assert req.unit is not None
    if seen is not None and req.public_keys is None:
        def counted() -> tuple[int, int, int]:
            rows, units = seen()
            return rows, 0, rows - units
        return _aggregates(_kept_rows(pairs, req, values), req, values, counted)
    totals = _Observed(*_exprs("coalesce(sum(CASE WHEN __u IS NOT NULL THEN __n END), 0) AS entered",
                               "coalesce(sum(CASE WHEN __u IS NULL THEN __n END), 0) AS nulls"))
    if req.cells or req.bins:
        queried = list(pairs.agg(*totals.columns).collect()[0])
    else:
        pairs = totals.on(pairs)

    def counts() -> tuple[int, int, int]:
        got = queried if req.cells or req.bins else totals.values()
        entered, null_units = (int(x) for x in got)
        rows_total = entered + null_units
        if seen is not None:
            rows_total, units = seen()
            null_units = rows_total - units
        return rows_total, rows_total - null_units - entered, null_units

    return _aggregates(_kept_rows(pairs, req, values), req, values, counts)


def _aggregates(rows: DataFrame, req: BoundingRequest, values: list[str],
                counts: Callable[[], tuple[int, int, int]], *,
                select: Callable[[DataFrame], DataFrame] | None = None) -> ExactAggregates:
    """The per-group aggregates of the kept `rows` (keys, __first, __v0, ...), with `counts`
    (rows, rows outside the keys, rows with a null unit; read once the first query over `rows`
    has run) for the diagnostics; `select` picks the groups to collect (all). The kept rows are
    the groups' rows."""
    cols = [f"{_count_if('__first')} AS __units", "count(1) AS __rows"]
    for i, meas in enumerate(req.measures):
        v = f"__v{values.index(meas.column)}"
        c = _clip(v, meas.lo, meas.hi)
        cols += [f"count({v}) AS __n{i}", f"coalesce(sum({c}), {_double(0)}) AS __s{i}",
                 f"{_count_if(_outside(v, meas.lo, meas.hi))} AS __c{i}"]
        if meas.squares:  # else no aggregate reads it (read_measures leaves it NaN)
            cols.append(f"coalesce(sum(({c}) * ({c})), {_double(0)}) AS __q{i}")
    for j in range(len(values)):
        cols += [f"{_count_if(f'__v{j} IS NULL')} AS __null{j}",
                 f"{_count_if(f'abs(__v{j}) = {_double(math.inf)}')} AS __inf{j}"]
    stats = _grouped(rows, req.keys, _exprs(*cols), select)
    rows_total, by_keys, null_units = counts()
    kept = int(stats["__rows"].sum())
    groups = stats[list(req.keys)].reset_index(drop=True)
    moments, clipped, nulls, infinite = read_measures(stats, req, values)
    cells = {}
    for spec in req.cells:
        cells[spec], clipped[spec] = _cell_window(rows, req, values, spec, groups)
    bins = {}
    for bspec in req.bins:
        name = f"__v{values.index(bspec.column)}"
        col, lo, hi = F.col(name), bspec.edges[0], bspec.edges[-1]
        df = _grouped(_binned(rows.where(col.isNotNull()), col, bspec.edges), (*req.keys, "__bin"),
                      _exprs("count(1) AS __count", f"{_count_if(_outside(name, lo, hi))} AS __clip"))
        gi = group_index(df, groups, req.keys)
        out = np.zeros((len(groups), len(bspec.edges) - 1), dtype=np.int64)
        np.add.at(out, (gi, df["__bin"].to_numpy(np.int64)), df["__count"].to_numpy(np.int64))
        bins[bspec], clipped[bspec] = out, int(df["__clip"].sum())
    diag = Diagnostics(rows=rows_total, kept_rows=kept,
                       dropped_by_bounding=rows_total - by_keys - null_units - kept,
                       dropped_by_keys=by_keys, null_units=null_units, nulls=nulls,
                       infinite=infinite, clipped=clipped)
    return ExactAggregates(groups=groups, units=stats["__units"].to_numpy(np.int64),
                           rows=stats["__rows"].to_numpy(np.int64), moments=moments,
                           cells=cells, bins=bins, diagnostics=diag)


def _binned(rows: DataFrame, v: Column, edges: tuple[float, ...]) -> DataFrame:
    """`rows` with `__bin`, the number of inner edges at or below the value, found by Spark ML's
    Bucketizer (a binary search per row, where a chain of comparisons would cost one per edge)."""
    from pyspark.ml.feature import Bucketizer

    if len(edges) == 2:
        return rows.withColumn("__bin", F.lit(0))
    bucketizer = Bucketizer(splits=[-math.inf, *edges[1:-1], math.inf], inputCol="__bv",
                            outputCol="__b")
    binned = bucketizer.transform(rows.withColumn("__bv", v))
    return binned.withColumn("__bin", F.col("__b").cast("long")).drop("__bv", "__b")


@contextmanager
def _persisted(frame: DataFrame) -> Iterator[DataFrame]:
    frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield frame
    finally:
        frame.unpersist()


def _grouped(rows: DataFrame, by: Sequence[str], cols: list[Column],
             select: Callable[[DataFrame], DataFrame] | None = None) -> pd.DataFrame:
    """Aggregate per group on the cluster; collect the (small) result sorted by key, nulls last,
    of the groups `select` keeps (all)."""
    keys = [_col(k) for k in by]
    grouped = rows.groupBy(*keys).agg(*cols) if keys else rows.agg(*cols)
    return _collect_sorted(grouped if select is None else select(grouped), by)


def _collect_sorted(frame: DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """`frame` (small) on the driver, sorted there by the columns `by`, nulls last, as Spark sorts
    them (text by code point, which is UTF-8 byte order): a sort on the cluster is one more
    stage (or a sampling job that computes `frame` twice), 0.15-0.2 s of a 0.8 s release on a
    bounded table."""
    if hasattr(frame, "toArrow"):  # pyspark >= 4: columnar transfer, no Row objects
        out: pd.DataFrame = frame.toArrow().to_pandas()
    else:
        out = pd.DataFrame.from_records([tuple(r) for r in frame.collect()], columns=frame.columns)
    if not by or out.empty:
        return out
    return out.sort_values(list(by), na_position="last", kind="stable", ignore_index=True)


def _cell_window(rows: DataFrame, req: BoundingRequest, values: list[str], spec: Cells,
                 groups: pd.DataFrame) -> tuple[CellWindow, int]:
    """The grid cells of `spec` in each group's window, chosen as the DuckDB engine does."""
    v = f"__v{values.index(spec.column)}"
    width = (spec.hi - spec.lo) / spec.cells
    cell = f"CAST(round(({_clip(v, spec.lo, spec.hi)} - {_double(spec.lo)}) / {_double(width)}) AS BIGINT)"
    keys = [_col(k) for k in req.keys]
    grid = rows.where(f"{v} IS NOT NULL").selectExpr(*[_q(k) for k in req.keys], f"{cell} AS __cell",
                                                     f"{_outside(v, spec.lo, spec.hi)} AS __out")
    # One pass over the kept rows: the cells stay on the cluster, the coarse bins come from them.
    cells = grid.groupBy(*keys, "__cell").agg(*_exprs("count(1) AS __count",
                                                      f"{_count_if('__out')} AS __clip"))
    coarse = cells.groupBy(*keys, F.shiftright("__cell", COARSE_SHIFT).alias("__k")).agg(
        F.sum("__count").alias("__cnt"), F.sum("__clip").alias("__clip"))
    by = Window.partitionBy(*keys) if keys else Window.partitionBy(F.lit(0))
    cum, n = F.sum("__cnt").over(by.orderBy("__k")), F.sum("__cnt").over(by)
    q, m = F.lit(float(spec.q)), F.lit(float(spec.margin))
    near = (F.col("__cum").cast("double") > q * F.col("__n").cast("double") - m) & \
        ((F.col("__cum") - F.col("__cnt")).cast("double") < q * F.col("__n").cast("double") + m)
    with _persisted(cells) as cells, _persisted(coarse) as coarse:
        n_clip = int(coarse.agg(F.coalesce(F.sum("__clip"), F.lit(0))).collect()[0][0])
        ranked = coarse.select(*keys, "__k", "__cnt", cum.alias("__cum"), n.alias("__n"))
        with _persisted(ranked.where(near)) as window:
            sel = _grouped(window, req.keys, [
                F.min("__k").alias("__k0"), F.max("__k").alias("__k1"),
                F.min(F.col("__cum") - F.col("__cnt")).alias("__below"), F.first("__n").alias("__n")])
            inside = cells
            if window.count() < coarse.count():  # else every window is the whole grid
                w = window.select(*[_col(k).alias(f"__w{i}") for i, k in enumerate(req.keys)], "__k")
                on = [cells[f"`{k}`"].eqNullSafe(w[f"__w{i}"]) for i, k in enumerate(req.keys)]
                on.append(F.shiftright(cells["__cell"], COARSE_SHIFT) == w["__k"])
                inside = cells.join(F.broadcast(w), on=on).select(cells["*"])
            fine = _collect_sorted(inside.select(*keys, "__cell", "__count"), (*req.keys, "__cell"))
    win = cell_window(len(groups), group_index(sel, groups, req.keys), sel,
                      group_index(fine, groups, req.keys), fine)
    return win, n_clip


def spark_engine(source: Any, spark: Any = None, master: str | None = None) -> SparkEngine:
    """A Spark engine over a Spark DataFrame, or over a file or lake path read by `spark` (default:
    the active session, else a new one on `master`, default local[*])."""
    if isinstance(source, DataFrame):
        return SparkEngine(source)
    if not isinstance(source, str | Path):
        raise DataError(f"cannot read a {type(source).__name__} with engine='spark': give a Spark "
                        "DataFrame or a file or lake path (Parquet, CSV, JSON, ORC)")
    session = spark if spark is not None else session_for(master)
    path = str(source)
    suffixes = [s.lower() for s in Path(path.rstrip("/")).suffixes]
    fmt = next((_READERS[s] for s in reversed(suffixes) if s in _READERS), "parquet")
    if "://" not in path and not Path(path).expanduser().exists():
        raise DataError(f"file {path!r} does not exist")
    try:
        reader = session.read.option("header", "true").option("inferSchema", "true") \
            if fmt == "csv" else session.read
        if fmt == "csv" and ".tsv" in suffixes:
            reader = reader.option("sep", "\t")
        frame = reader.format(fmt).load(path)
    except _SPARK_ERRORS as exc:
        raise _data_error(exc, f"cannot read {path!r} with Spark") from None
    return SparkEngine(frame)


def session_for(master: str | None = None) -> SparkSession:
    """The active Spark session, or a new one on `master` (default local[*]) whose Python
    workers run this interpreter (so they see bayesdp, duckdb and pyarrow)."""
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (SparkSession.builder.master(master or "local[*]").appName("bayesdp")
            .config("spark.ui.showConsoleProgress", "false").getOrCreate())


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


__all__ = ["BoundedSpark", "SparkEngine", "session_for", "spark_engine"]
