"""Table -> grouped -> query -> release: the user-facing builder (pure descriptions until release)."""

from __future__ import annotations

import datetime
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import duckdb
import numpy as np
import pandas as pd

from bayesdp.errors import (
    CuratorWarning,
    DataError,
    InvalidParameter,
    check_delta,
    check_open_unit,
    check_positive,
    check_positive_int,
    invalid,
)
from bayesdp.expressions import RowExpression, row_expression
from bayesdp.mechanisms.base import check_epsilon
from bayesdp.noise import Rng, resolve_rng
from bayesdp.privacy import Guarantee
from bayesdp.tables.aggregates import Aggregate
from bayesdp.tables.bounded import bounded
from bayesdp.tables.cdf import BRANCHING, CdfRelease, cdf
from bayesdp.tables.engines.arrays import in_memory
from bayesdp.tables.engines.base import (
    Bins,
    Bounding,
    BoundingRequest,
    Cells,
    CellWindow,
    Diagnostics,
    Engine,
    distinct_measures,
)
from bayesdp.tables.engines.duckdb import connect
from bayesdp.tables.estimate import Estimate, estimate
from bayesdp.tables.joins import (
    check_how,
    check_unique,
    join_engines,
    pairs_of,
    private_pairs,
    public_engine,
)
from bayesdp.tables.plan import Plan, make_plan
from bayesdp.tables.release import Release, selection_needs
from bayesdp.tables.source import check_column, engine_for

# Bounding that drops more than this share of the rows warns the curator (CuratorWarning).
DROPPED_WARNING = 0.2


class Ledger(Protocol):
    def spend(self, guarantee: Guarantee, label: str) -> Any: ...


def table(source: Any, privacy_unit: str | None, *, unit_name: str | None = None,
          name: str | None = None, connection: Any = None, engine: str = "duckdb",
          spark: Any = None, memory_limit: str | int | None = None,
          temp_directory: str | os.PathLike[str] | None = None) -> Table:
    """A table about people: a CSV/Parquet/JSON path, a pandas or Polars frame, an Arrow table, a
    mapping of column names to 1-D numpy arrays or a DuckDB relation; `privacy_unit` names the
    column identifying the person (or household, ...) whose whole contribution the guarantee
    protects. None: each row is a different person (as diffprivlib, OpenDP's row-level
    transformations and Tumult's AddOneRow assume): nothing is bounded, and a unit contributes
    one row to one group (data in memory: numpy computes what it can, `engines.arrays`).
    `connection`: the DuckDB connection to read files and frames with (default: a new one).
    `memory_limit` (bytes, or text such as "2GB") caps the memory of that new connection and
    `temp_directory` is where it spills what does not fit; running out raises ResourceError. A
    Spark DataFrame, or a path or lake URI with engine="spark", runs on Spark (`spark`: the
    session, default the active one).
    `unit_name` is what one unit is called in guarantees and explanations ("person"; default
    the column's name); `name` names the dataset in reports (default a file's name)."""
    if engine not in ("duckdb", "spark"):
        raise invalid("engine", engine, "'duckdb' or 'spark'")
    spark_source = engine == "spark" or type(source).__module__.startswith("pyspark.")
    own = connection is None and not spark_source and not isinstance(source, duckdb.DuckDBPyRelation)
    for option, value in (("memory_limit", memory_limit), ("temp_directory", temp_directory)):
        if value is not None and not own:
            raise invalid(option, value, "None with a connection, a DuckDB relation or Spark: set "
                          "it there (DuckDB: SET memory_limit; Spark: spark.executor.memory)")
    if own and (memory_limit is not None or temp_directory is not None):
        connection = connect(memory_limit, temp_directory)  # checks the options now
    if spark_source:
        from bayesdp.tables.engines.spark import spark_engine

        eng: Engine = spark_engine(source, spark)
    else:
        def open_duckdb(con: Any = connection) -> Engine:
            return engine_for(source, con)  # a new connection only for what needs one

        # Row level: numpy serves what it can of data already in memory, DuckDB the rest.
        eng = in_memory(source, open_duckdb) if privacy_unit is None else open_duckdb()
    if privacy_unit is not None:
        privacy_unit = check_column(privacy_unit, list(eng.schema()), "privacy_unit")
    for label, text in (("unit_name", unit_name), ("name", name)):
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise invalid(label, text, "None or a non-empty string")
    if name is None and isinstance(source, str | Path):
        name = Path(source).name
    return Table(eng, privacy_unit=privacy_unit, unit_name=unit_name or privacy_unit or "row", name=name)


@dataclass(frozen=True)
class Table:
    """A lazy table with its privacy unit and optional row filters."""

    engine: Engine
    _: KW_ONLY
    privacy_unit: str | None
    filters: tuple[RowExpression, ...] = ()
    unit_name: str = "row"
    name: str | None = None
    bounding: Bounding | None = None  # set by bounded()

    @property
    def columns(self) -> list[str]:
        return list(self.engine.schema())

    def bounded(self, by: str | Sequence[str] = (), *, max_groups_per_unit: int | None = None,
                max_rows_per_group: int = 1, rng: Rng | None = None) -> Table:
        """This table with each unit's contribution bounded once, for groups by `by`: at most
        `max_groups_per_unit` groups and `max_rows_per_group` rows per group, chosen at random
        with a secret seed drawn now (`rng`: tests only). The kept rows are materialised at the
        first release (DuckDB: a temporary table, spilled to temp_directory past memory_limit;
        Spark: a persisted DataFrame) and every release on the result reads them: group_by the
        same columns, any aggregates, where, public keys, preview. Bounding is a 1-stable
        transformation (McSherry 2009, PINQ: a c-stable transformation then an ε-DP query is
        cε-DP; a unit's kept rows depend on its own rows only), so each release costs only its
        own ε, δ in the ledger. A where() here filters after bounding (one before bounded() filters
        before), and rows outside public keys are dropped after bounding, so a unit's kept
        groups are chosen among all its groups; a release asking for other bounds is refused."""
        if self.privacy_unit is None:
            raise InvalidParameter("bounded() needs a privacy unit: with privacy_unit=None every row "
                                   "is already a unit in one group, once")
        if self.bounding is not None:
            raise self.bounding.again()
        cols = tuple(self.group_by(by, None).by) if by not in ((), "", []) else ()
        engine, bounding = bounded(self.engine, self.privacy_unit, self.unit_name, cols, self.filters,
                                   max_groups_per_unit, max_rows_per_group, rng=rng)
        return replace(self, engine=engine, filters=(), bounding=bounding)

    def join_public(self, public: Any, on: str | Sequence[str] | dict[str, str], *,
                    how: str = "inner") -> Table:
        """This table's rows joined with a public table's (a pandas, Polars or Arrow frame, a file
        path, a DuckDB relation or, on Spark, a Spark DataFrame), on `on`: column names both have,
        or {this table's column: the public table's}. `how`: "inner" keeps rows with a match,
        "left" every row (the public columns null without a match). The public table is not
        private: the join is a per-row map, so a unit's joined rows depend on its own rows only,
        and the release bounds each unit's contribution after the join (a row matching several
        public rows stays within its unit's bounds): the guarantee is unchanged. Without a
        privacy unit each row is a person, so the public keys must then be unique."""
        how = check_how(how)
        self._joinable()
        other = public_engine(public, self.engine)
        pairs = pairs_of(on, self.columns, list(other.schema()))
        if self.privacy_unit is None:
            check_unique(other, [b for _, b in pairs])
        return replace(self, engine=join_engines(self.engine, other, pairs, how))

    def join(self, other: Table, on: str | Sequence[str] | dict[str, str], *, how: str = "inner",
             max_rows_per_key: int | None = None, rng: Rng | None = None) -> Table:
        """This table joined with `other`, a table of the same privacy unit (its `unit_name`), on
        `on` (as `join_public`): a unit's rows join only that unit's rows in `other` (the unit
        columns are paired, added to `on` when it leaves them out). When `on` leaves them out,
        `other` first keeps at most `max_rows_per_key` rows per unit and join key, chosen at
        random with a secret seed drawn now (`rng`: tests only), so that a row joins at most
        that many rows.

        Proof of the guarantee: both tables' neighbours add or remove one unit's rows (all of
        them, in both). The join pairs rows of one unit only, and the truncation of a unit's
        rows reads that unit's rows only, so the joined rows of any other unit are the same in
        both neighbours: the join is 1-stable for units (McSherry 2009, PINQ), like the per-unit
        join of Tumult's join_private for tables with a privacy ID. A release then bounds each
        unit's joined rows (max_groups_per_unit, max_rows_per_group) and its sensitivities
        follow from those bounds as for any table, so it costs its own ε, δ per unit."""
        how = check_how(how)
        if not isinstance(other, Table):
            raise invalid("other", other, "a bdp.table (for a public table use join_public)")
        self._joinable()
        other._joinable()
        if self.privacy_unit is None or other.privacy_unit is None:
            raise InvalidParameter("join() joins two tables of the same privacy unit; a table "
                                   "without one (privacy_unit=None) cannot be joined privately: "
                                   "for a public table use join_public")
        if self.unit_name != other.unit_name:
            raise InvalidParameter(
                f"the tables protect different privacy units ({self.unit_name!r} and "
                f"{other.unit_name!r}): a row joining two units' rows would be about both, "
                "which neither guarantee covers. Join tables of the same unit, or a public table "
                "(join_public)")
        pairs, m = private_pairs(pairs_of(on, self.columns, other.columns), self.privacy_unit,
                                 other.privacy_unit, max_rows_per_key, self.unit_name)
        truncate = None
        if m is not None:
            gen = resolve_rng(rng)
            truncate = (self.privacy_unit, other.privacy_unit, m, int(gen.integers(0, 2**63)))
        return replace(self, engine=join_engines(self.engine, other.engine, pairs, how,
                                                 truncate=truncate))

    def _joinable(self) -> None:
        if self.bounding is not None:
            raise InvalidParameter("join before bounded(): a bounded table's rows are chosen "
                                   "for its groups, which a join changes")
        if self.filters:
            raise InvalidParameter("join before where(): filter the joined table instead (its "
                                   "filters then read the joined columns)")

    def where(self, condition: str | RowExpression) -> Table:
        """Keep rows where the SQL expression holds (a public filter, applied before bounding).

        The expression may read only this row's columns (see `bayesdp.expressions`): a
        subquery, another table or file, an aggregate or a function outside the allow-list is
        refused here, and a row on which it would raise is dropped rather than failing."""
        checked = row_expression(condition, self.columns, role="condition")
        return replace(self, filters=(*self.filters, checked))

    def group_by(self, columns: str | Sequence[str], keys: Sequence[Any] | None = None) -> Grouped:
        """Group by columns. keys=None: the released keys are chosen privately (partition
        selection, needs δ > 0); keys=[...]: public keys, each released, rows with other keys
        dropped and counted (for several columns give tuples); a pandas or Arrow column of a
        public table gives its distinct non-null values."""
        cols = (columns,) if isinstance(columns, str) else tuple(columns)
        if not cols:
            raise invalid("columns", columns, "one or more column names")
        cols = tuple(check_column(c, self.columns, "group_by column") for c in cols)
        if len(set(cols)) < len(cols):
            raise invalid("columns", columns, "distinct columns (names are compared without case, "
                          "as the engines compare them)")
        for c in cols:
            if c == self.privacy_unit:
                raise invalid("columns", columns, "group keys other than the privacy unit")
        if keys is None:
            return Grouped(self, by=cols, keys=None)
        public = _public_keys(keys, len(cols))
        for i, c in enumerate(cols):
            _check_key_type(self.engine, c, [k[i] for k in public])
        return Grouped(self, by=cols, keys=public)

    def agg(self, **aggregates: Aggregate) -> Query:
        """Aggregates over the whole table (one group, no partition selection)."""
        return Grouped(self, by=(), keys=None).agg(**aggregates)

    def cdf(self, column: str, *, bounds: Sequence[float] | None = None,
            bins: int | Sequence[float] = 1024, branching: int = BRANCHING) -> CdfQuery:
        """Any range count and every quantile of `column` from one release: a hierarchical
        histogram of `bins` bins over `bounds` (`bayesdp.tables.cdf`)."""
        return Grouped(self, by=(), keys=None).cdf(column, bounds=bounds, bins=bins, branching=branching)


def _not_numeric(engine: Engine, column: str, name: str) -> DataError:
    if column not in engine.schema():
        return DataError(f"the expression {column!r} of {name} does not give numbers: CAST it to a "
                         "number or compare it (a true/false expression counts as 1 or 0)")
    kind = str(engine.schema()[column])
    if kind.upper() in ("VARCHAR", "STRING", "TEXT"):  # DuckDB's and Spark's names for text
        ident = column if column.isidentifier() else '"' + column.replace('"', '""') + '"'
        advice = (f"give the expression CAST({ident} AS DOUBLE) in its place (text that is not a "
                  "number, such as 'n/a', becomes null and is left out)")
    else:
        advice = "convert it to a numeric type first"
    return DataError(f"column {column!r} of {name} holds {kind} values, not numbers: {advice}, or "
                     "choose a numeric column")


def _public_keys(keys: Sequence[Any], width: int) -> tuple[tuple[Any, ...], ...]:
    if isinstance(keys, pd.Series) or type(keys).__module__.startswith("pyarrow"):
        # A column of a public table (e.g. the one join_public joined): its distinct values.
        values = keys.tolist() if isinstance(keys, pd.Series) else keys.to_pylist()  # type: ignore[attr-defined]
        keys = list(dict.fromkeys(v for v in values if not pd.isna(v)))
    if isinstance(keys, str | bytes) or not hasattr(keys, "__iter__"):
        raise invalid("keys", keys, "None (private keys) or a list of key values")
    out = []
    for k in keys:
        t = tuple(k) if isinstance(k, tuple | list) else (k,)
        if len(t) != width:
            raise invalid("keys", k, f"a tuple of {width} values (one per group column)")
        out.append(tuple(x.item() if isinstance(x, np.generic) else x for x in t))
    if len(set(out)) != len(out):
        raise invalid("keys", keys, "a list without duplicates")
    return tuple(out)


_INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                  "UINTEGER", "UBIGINT", "UHUGEINT", "INT", "LONG", "SHORT", "BYTE")
_TEXT_TYPES = ("VARCHAR", "STRING", "TEXT", "CHAR", "BPCHAR")
_DATE_TYPES = ("DATE", "TIMESTAMP", "DATETIME", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S",
               "TIMESTAMP_NTZ", "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE")


def _check_key_type(engine: Engine, column: str, values: list[Any]) -> None:
    """Each public key suits its column: numbers (integral for an integer column) for a numeric
    column, True/False for a boolean one, text for a text one; None never matches a row."""
    declared = engine.schema()[column]
    kind = declared.split("(")[0].upper()
    numeric = engine.is_numeric(column)
    for v in values:
        if v is None:
            continue
        if kind == "BOOLEAN":
            ok, allowed = isinstance(v, bool), "True or False"
        elif numeric:
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and \
                (kind not in _INTEGER_TYPES or float(v).is_integer())
            allowed = "an integer" if kind in _INTEGER_TYPES else "a finite number"
        elif kind in _TEXT_TYPES:
            ok, allowed = isinstance(v, str), "a string"
        elif kind in _DATE_TYPES:  # matched as the engine casts them: pandas must read them too
            ok = isinstance(v, str | datetime.date) and not pd.isna(pd.to_datetime(v, errors="coerce"))
            allowed = "a date (a datetime.date or text such as '2024-01-31')"
        else:  # times, decimals, ...: the engine casts the key's text to the column's type
            ok, allowed = isinstance(v, str | int | float) and not isinstance(v, bool), \
                "a string, integer or number the engine can cast"
        if not ok:
            raise invalid("keys", v, f"{allowed}, like the values of group column {column!r} "
                                     f"({declared})")


def _as_dates(public: pd.DataFrame, groups: pd.DataFrame,
              schema: dict[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Key columns of a date or timestamp column as pandas timestamps on both sides: keys come as
    text or dates, the engine's groups as datetime64 (DuckDB) or dates (Spark); a DATE column
    truncates a key's time of day, as the engine's cast did, and a zoned one reads it in the zone
    the engine returns (its session's, in which it cast the key)."""
    dates = [c for c in public.columns if schema[c].split("(")[0].upper() in _DATE_TYPES]
    if not dates:
        return public, groups
    public, groups = public.copy(), groups.copy()
    for c in dates:
        try:
            keys = pd.to_datetime(public[c], format="mixed")
        except ValueError:  # keys with different UTC offsets
            keys = pd.to_datetime(public[c], format="mixed", utc=True)
        found = pd.to_datetime(groups[c])
        if schema[c].upper() == "DATE":
            keys = keys.dt.normalize()
        if found.dt.tz is not None:  # the engine read a key without a zone in its session's zone
            keys = keys.dt.tz_localize(found.dt.tz) if keys.dt.tz is None else keys.dt.tz_convert(found.dt.tz)
        public[c], groups[c] = keys, found
    return public, groups


def _column_types(public: pd.DataFrame, groups: pd.DataFrame) -> dict[str, Any]:
    """The types to compare public keys with the groups in. The engine matched the keys in the
    column's own type: a float32 column holds float32(0.1), which float64 0.1 does not equal, so
    floats compare in the column's float type; integers in the column's integer type when every
    key fits it (pandas merges int64 keys with uint64 groups ten times slower than alike)."""
    return {c: groups[c].dtype for c in public.columns if _fits(public[c], groups[c].dtype)}


def _fits(keys: pd.Series, dtype: Any) -> bool:
    """Both float, or both integer with every key in `dtype`'s range."""
    is_float, is_int = pd.api.types.is_float_dtype, pd.api.types.is_integer_dtype
    if is_float(dtype) and is_float(keys.dtype):
        return True
    return bool(is_int(dtype) and is_int(keys.dtype) and not keys.empty and
                np.iinfo(dtype).min <= int(keys.min()) and int(keys.max()) <= np.iinfo(dtype).max)


@dataclass(frozen=True)
class Grouped:
    table: Table
    _: KW_ONLY
    by: tuple[str, ...]
    keys: tuple[tuple[Any, ...], ...] | None

    def agg(self, **aggregates: Aggregate) -> Query:
        if not aggregates:
            raise InvalidParameter("agg() needs at least one aggregate, e.g. users=bdp.count_units()")
        expressions: dict[str, RowExpression] = {}
        for name, a in aggregates.items():
            if not isinstance(a, Aggregate):
                raise invalid(name, a, "an aggregate such as bdp.count() or bdp.sum('col', bounds=(0, 1))")
            column = a.reads()
            if column is not None:
                value = self._value(name, a, column)
                if isinstance(value, RowExpression):
                    expressions[column] = value
            if name in self.by:
                raise invalid(name, a, "an aggregate name that is not also a group column")
        return Query(self.table, by=self.by, keys=self.keys, aggregates=dict(aggregates),
                     expressions=expressions)

    def cdf(self, column: str, *, bounds: Sequence[float] | None = None,
            bins: int | Sequence[float] = 1024, branching: int = BRANCHING) -> CdfQuery:
        """A hierarchical histogram of `column` per group (`Table.cdf`)."""
        return CdfQuery(self.agg(cdf=cdf(column, bins, bounds, branching=branching)))

    def _value(self, name: str, a: Aggregate, column: str) -> str | RowExpression:
        """The aggregate's column, or its row expression (`price * qty`, `"union" = 'yes'`)
        checked by `bayesdp.expressions` and computed by the engine; of a numeric type, or
        of the type the aggregate asks for (`Aggregate.refusal`: true/false for a share)."""
        columns, engine = self.table.columns, self.table.engine
        if column in columns or column.isidentifier():
            value: str | RowExpression = check_column(column, columns, f"aggregate {name!r}")
            if value != column:  # another spelling of a column: the engine reads the schema's name
                value = row_expression(column, columns, role=f"aggregate {name!r}")
        else:
            value = row_expression(column, columns, role=f"aggregate {name!r}")
        refused = a.refusal(engine, value, name)
        if refused is not None:
            raise refused
        if not engine.is_numeric(value):
            raise _not_numeric(engine, column, name)
        return value


@dataclass(frozen=True)
class Query:
    table: Table
    _: KW_ONLY
    by: tuple[str, ...]
    keys: tuple[tuple[Any, ...], ...] | None
    aggregates: dict[str, Aggregate] = field(default_factory=dict)
    expressions: dict[str, RowExpression] = field(default_factory=dict)

    @property
    def private_keys(self) -> bool:
        return bool(self.by) and self.keys is None

    def plan(self, epsilon: float, delta: float = 0.0, *, max_groups_per_unit: int | None = None,
             max_rows_per_group: int | None = None, noise: str = "laplace",
             selection_weight: float = 1.0) -> Plan:
        """The budget split and mechanisms for these parameters (touches no data).

        `epsilon` in [1e-12, 700]; `delta` in [0, 1) (> 0 with private keys or Gaussian noise);
        each noisy part's share, ε/max_groups_per_unit included, must stay in the mechanisms'
        ranges (`bayesdp.mechanisms.base`), and partition selection needs δ/max_groups_per_unit
        >= 2.2e-308.
        """
        eps = check_epsilon(epsilon)
        d = check_delta("delta", delta)
        if self.table.bounding is not None:  # None: the bounded table's
            max_groups_per_unit, max_rows_per_group = self.table.bounding.resolve(
                self.by, max_groups_per_unit, max_rows_per_group)
        k = self._max_groups(max_groups_per_unit)
        m = check_positive_int("max_rows_per_group", 1 if max_rows_per_group is None else max_rows_per_group)
        if self.table.privacy_unit is None and (k, m) != (1, 1):
            raise InvalidParameter(
                f"max_groups_per_unit={k} and max_rows_per_group={m}: "
                "without a privacy unit (privacy_unit=None; in a spec privacy_unit = false) every "
                "row is a unit, in one group, once; both must be 1 "
                "(name a privacy_unit column when a person has several rows)")
        return make_plan(self.aggregates, epsilon=eps, delta=d, noise=noise,
                         unit=self.table.unit_name, max_groups=k, max_rows=m,
                         private_keys=self.private_keys,
                         selection_weight=check_positive("selection_weight", selection_weight))

    def _max_groups(self, value: int | None) -> int:
        """Groups a unit may keep: required when grouping rows of a named unit (docs/guide/tables.md: no
        default), because any fixed default silently drops most rows of a panel."""
        if not self.by:
            return 1
        if value is None:
            if self.table.privacy_unit is None:
                return 1
            unit = self.table.unit_name
            raise InvalidParameter(
                f"max_groups_per_unit is required for a release grouped by {', '.join(self.by)} "
                f"with privacy unit {unit!r}: the most groups one {unit} may contribute to, a "
                f"public fact (for a panel of 8 years grouped by year: 8). Rows of a {unit} in "
                "more groups are dropped; a larger value adds noise to every group")
        return check_positive_int("max_groups_per_unit", value)

    def release(self, epsilon: float, delta: float = 0.0, *, max_groups_per_unit: int | None = None,
                max_rows_per_group: int | None = None, alpha: float = 0.05, ledger: Ledger | None = None,
                rng: Rng | None = None, noise: str = "laplace", selection_weight: float = 1.0,
                label: str | None = None) -> Release:
        """Run the release. `rng` is for tests only (a seeded generator is not private).

        With `ledger`, the spend is recorded before the engine reads a row. Checks that depend
        only on public facts (the parameters, the plan, the schema: the engine binds its
        queries without running them) come first and cost nothing. Nothing the data decides
        fails the release or changes its shape, as whether it failed would tell a row's value:
        an empty table releases noisy zeros, rows with a null unit are dropped, an infinite
        value is clipped into the bounds, NaN and an expression failing on a row are null (the
        exact counts go to the curator: `Release.curator_notes`, CuratorWarning). Only the
        engine running out of memory or disk still fails, after the spend; its public message
        is generic, its exact facts in `private_detail`, for the data holder.
        """
        gen = resolve_rng(rng)
        plan, a, request = self._checked(epsilon, delta, max_groups_per_unit=max_groups_per_unit,
                                         max_rows_per_group=max_rows_per_group, alpha=alpha, noise=noise,
                                         selection_weight=selection_weight, rng=gen)
        for w in usefulness_warnings(plan):
            warnings.warn(w, UserWarning, stacklevel=2)
        engine = self.table.engine
        if ledger is not None:
            ledger.spend(plan.guarantee, label or self.describe())
        exact = engine.aggregate(request)
        _warn_dropped(exact.diagnostics, plan)
        _warn_defined(exact.diagnostics, self.table.privacy_unit)
        index, keys = self._released(plan, exact.groups, exact.units, rng=gen)
        if plan.selection is not None and not index.size:  # the number of groups is a DP output
            warnings.warn(f"no group was released: {selection_needs(plan)}; raise epsilon or delta, "
                          "lower max_groups_per_unit, group more coarsely, or give public keys",
                          UserWarning, stacklevel=2)

        def full_grid(cells: Cells) -> CellWindow:
            # The same seed keeps the same rows, so this reads the grid of the same bounded data.
            again = replace(request, measures=(), cells=(cells,), bins=())
            return engine.aggregate(again).cells[cells]

        estimates: dict[str, Estimate] = {}
        for name, step in plan.steps.items():
            estimates[name] = estimate(step, exact, index, a, rng=gen, full_grid=full_grid)
        return Release(keys, estimates=estimates, plan=plan, alpha=a, diagnostics=exact.diagnostics,
                       public_keys=self.keys is not None, label=label, dataset=self.table.name)

    def check(self, epsilon: float, delta: float = 0.0, *, max_groups_per_unit: int | None = None,
              max_rows_per_group: int | None = None, alpha: float = 0.05, noise: str = "laplace",
              selection_weight: float = 1.0) -> Plan:
        """Every check `release` makes before it spends (parameters, plan, the engine binding its
        statements), reading no row and spending nothing: its plan."""
        return self._checked(epsilon, delta, max_groups_per_unit=max_groups_per_unit,
                             max_rows_per_group=max_rows_per_group, alpha=alpha, noise=noise,
                             selection_weight=selection_weight, rng=resolve_rng(None))[0]

    def _checked(self, epsilon: float, delta: float, *, max_groups_per_unit: int | None,
                 max_rows_per_group: int | None, alpha: float, noise: str, selection_weight: float,
                 rng: Rng) -> tuple[Plan, float, BoundingRequest]:
        plan = self.plan(epsilon, delta, max_groups_per_unit=max_groups_per_unit,
                         max_rows_per_group=max_rows_per_group, noise=noise,
                         selection_weight=selection_weight)
        a = check_open_unit("alpha", alpha)
        request = self._request(plan, a, int(rng.integers(0, 2**63)) << 64 | int(rng.integers(0, 2**63)))
        self.table.engine.check(request)
        return plan, a, request

    def describe(self) -> str:
        aggs = ", ".join(f"{n}={a.describe()}" for n, a in self.aggregates.items())
        by = f" by {', '.join(self.by)}" if self.by else ""
        return f"release{by}: {aggs}"

    def _request(self, plan: Plan, alpha: float, seed: int) -> BoundingRequest:
        needs = [n for name, step in plan.steps.items() for n in step.aggregate.needs(step, alpha)]
        cells = [n for n in needs if isinstance(n, Cells)]
        bins = [n for n in needs if isinstance(n, Bins)]
        return BoundingRequest(
            unit=self.table.privacy_unit, keys=self.by, max_groups=plan.max_groups,
            max_rows=plan.max_rows, seed=seed, public_keys=self.keys,
            measures=distinct_measures(needs), cells=tuple(dict.fromkeys(cells)),
            bins=tuple(dict.fromkeys(bins)), where=self.table.filters,
            expressions=tuple(self.expressions.items()))

    def _released(self, plan: Plan, groups: pd.DataFrame, units: np.ndarray, *,
                  rng: Rng) -> tuple[np.ndarray, pd.DataFrame]:
        """Indices into the exact groups of the released groups (-1: public key without data)."""
        if not self.by:
            return np.zeros(1, dtype=np.int64), pd.DataFrame(index=pd.RangeIndex(1))
        if self.keys is None:
            assert plan.selection is not None
            keep = np.flatnonzero(plan.selection.select(units, rng=rng))
            return keep, groups.iloc[keep].reset_index(drop=True)
        public = self._public_frame
        found = groups.assign(__gi=np.arange(len(groups)))
        keys, found = _as_dates(public, found, self.table.engine.schema())
        try:
            merged = keys.astype(_column_types(keys, found)).merge(found, on=list(self.by), how="left",
                                                                   sort=False)
        except (ValueError, TypeError) as exc:
            raise DataError("public keys do not match the type of the group columns",
                            private_detail=str(exc)) from None
        index = merged["__gi"].fillna(-1).to_numpy(np.int64)
        return index, public.copy()

    @cached_property
    def _public_frame(self) -> pd.DataFrame:
        """The public keys as a frame, a column per group column: built once per query, as
        pandas takes tens of milliseconds to build it from 100,000 keys."""
        return pd.DataFrame(list(self.keys or ()), columns=list(self.by))

    def preview(self, epsilon: float, delta: float = 0.0, *, max_groups_per_unit: int | None = None,
                max_rows_per_group: int | None = None, alpha: float = 0.05, noise: str = "laplace",
                selection_weight: float = 1.0, group_size: int | None = None,
                rng: Rng | None = None) -> pd.DataFrame:
        """Expected accuracy from public parameters only (reads no data values).

        One row per aggregate, for a group of `group_size` values (default the number of units
        partition selection needs for a 50% chance to keep a group, else 100): `half_width`, the
        expected half-width of its interval at level 1 - α, and `abs_error`, the expected
        absolute error of its estimate (noise only), for the estimator a release runs
        (`Aggregate.accuracy`: exact for counts, sums and histogram cells; for a mean, simulated in
        both of its stages, at a mean in the middle of its bounds, and in `half_width_max`,
        `abs_error_max` anywhere in them). For a std or quantile, `half_width` is an upper bound
        (`upper_bound` is True; a quantile's is in quantile levels) and `abs_error` is not given.
        `noise_scale` is the scale of the one noise of a count, sum or histogram; the other
        aggregates combine several (`plan(...).describe()` lists them) and show none. Warns when
        the release would be useless. A preview is repeatable: its simulation has a fixed seed
        (it reads no data), which `rng` replaces.
        """
        plan = self.plan(epsilon, delta, max_groups_per_unit=max_groups_per_unit,
                         max_rows_per_group=max_rows_per_group, noise=noise,
                         selection_weight=selection_weight)
        a = check_open_unit("alpha", alpha)
        threshold = plan.selection.threshold() if plan.selection is not None else None
        n = check_positive_int("group_size", group_size) if group_size is not None else (threshold or 100)
        for w in usefulness_warnings(plan, n):
            warnings.warn(w, UserWarning, stacklevel=2)
        rows = []
        for name, step in plan.steps.items():
            acc = step.aggregate.accuracy(step, a, n, rng=rng)
            parts = list(step.parts.values())
            rows.append({"aggregate": name, "what": step.aggregate.describe(),
                         "epsilon": step.epsilon, "rho": step.rho,
                         "noise_scale": parts[0].scale if len(parts) == 1 else math.nan,
                         "group_size": n, "half_width": acc.half_width, "abs_error": acc.abs_error,
                         "half_width_max": acc.half_width_max, "abs_error_max": acc.abs_error_max,
                         "upper_bound": acc.upper_bound, "units_to_keep_group_50%": threshold})
        return pd.DataFrame(rows)


@dataclass(frozen=True)
class CdfQuery:
    """A hierarchical histogram to release (`Table.cdf`, `Grouped.cdf`): `plan`, `preview` and
    `release` take the arguments of `Query`'s."""

    query: Query

    def plan(self, *args: Any, **kwargs: Any) -> Plan:
        return self.query.plan(*args, **kwargs)

    def preview(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        return self.query.preview(*args, **kwargs)

    def release(self, *args: Any, **kwargs: Any) -> CdfRelease:
        return CdfRelease.of(self.query.release(*args, **kwargs))


def _warn_dropped(d: Diagnostics, plan: Plan) -> None:
    """Warn the curator when contribution bounding drops more than DROPPED_WARNING of the rows."""
    considered = d.rows - d.dropped_by_keys - d.null_units
    if considered and d.dropped_by_bounding > DROPPED_WARNING * considered:
        warnings.warn(
            f"curator only (exact, not differentially private; do not publish): contribution "
            f"bounding dropped {d.dropped_by_bounding:,} of {considered:,} rows "
            f"({d.dropped_by_bounding / considered:.0%}), so the release describes the rows kept, "
            f"not the table. If a {plan.unit} really has more, raise max_groups_per_unit (now "
            f"{plan.max_groups}) or max_rows_per_group (now {plan.max_rows}), at the cost of "
            "more noise per group", CuratorWarning, stacklevel=3)


def _warn_defined(d: Diagnostics, unit: str | None) -> None:
    """Tell the curator which rows took a defined value instead of failing the release: rows
    with a null unit belong to nobody and are dropped; an infinite value is clipped into the
    bounds like any other (NaN and a failed expression are null). A release never fails on
    these, or whether it failed would tell a row's value (a data-dependent error is an exact
    bit the analyst chose)."""
    facts = [f"{d.null_units:,} rows with a null privacy_unit {unit!r} were dropped"] if d.null_units else []
    facts += [f"{k:,} kept values of {c!r} were infinite and clipped into the bounds"
              for c, k in d.infinite.items() if k]
    if facts:
        warnings.warn(f"curator only (exact, not differentially private; do not publish): "
                      f"{'; '.join(facts)}", CuratorWarning, stacklevel=3)


def usefulness_warnings(plan: Plan, n: int | None = None) -> list[str]:
    """Warnings computed from public parameters: releases that will carry (almost) no signal."""
    out = []
    if plan.selection is not None:
        t = plan.selection.threshold()
        if t > 100_000:
            out.append(f"partition selection needs about {t:,} units in a group to release it "
                       "with probability 1/2: almost certainly no group will be released; raise "
                       "epsilon or delta, lower max_groups_per_unit, or give public keys")
        elif n is not None and n < t:
            out.append(f"groups of {n:,} units are unlikely to be released (about {t:,} needed "
                       "for probability 1/2)")
    if n is None:
        return out
    for name, step in plan.steps.items():
        warning = step.aggregate.warning(name, step, n)
        if warning is not None:
            out.append(warning)
    return out
