"""Joins inside the engine: a private table with a public one (`Table.join_public`) and two
private tables of the same privacy unit (`Table.join`). It takes a table's parts, not the table,
so that tables/query.py alone knows `Table`; the result is an engine over the joined rows, which
a release bounds per unit like any other table.

Output columns: the left table's, then the right table's other than its join columns; a right
column whose name the left already has is renamed NAME_right.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from bayesdp.errors import DataError, InvalidParameter, check_positive_int, invalid
from bayesdp.tables.engines.arrays import ArrayEngine
from bayesdp.tables.engines.base import Engine
from bayesdp.tables.engines.duckdb import SOURCE, DuckDBEngine, duckdb_errors, ident
from bayesdp.tables.source import check_column, engine_for

HOWS = ("inner", "left")
_MASK64 = (1 << 64) - 1

Pairs = tuple[tuple[str, str], ...]


def check_how(how: Any) -> str:
    if how not in HOWS:
        raise invalid("how", how, f"one of {HOWS}")
    return str(how)


def pairs_of(on: Any, left: list[str], right: list[str]) -> Pairs:
    """The (left, right) column pairs `on` names: a column name both tables have, a list of them,
    or a mapping {left column: right column}."""
    if isinstance(on, str):
        on = [on]
    if isinstance(on, Mapping):
        items = list(on.items())
    elif isinstance(on, Sequence) and on:
        items = [(c, c) for c in on]
    else:
        raise invalid("on", on, "a column name, a list of column names or a mapping {left: right}")
    out = tuple((check_column(a, left, "on (left table)"), check_column(b, right, "on (right table)"))
                for a, b in items)
    if len({a for a, _ in out}) < len(out):
        raise invalid("on", on, "distinct join columns")
    return out


def right_names(left: list[str], right: list[str], pairs: Pairs) -> dict[str, str]:
    """Each right column's name in the joined table (its join columns: the left ones they equal)."""
    return {**{b: a for a, b in pairs}, **dict(_projection(left, right, pairs))}


def _projection(left: list[str], right: list[str], pairs: Pairs) -> list[tuple[str, str]]:
    """The right table's output columns: (its name, the output name)."""
    joined = {b for _, b in pairs}
    taken = {c.lower() for c in left}
    out = []
    for c in right:
        if c in joined:
            continue
        name = c if c.lower() not in taken else f"{c}_right"
        if name.lower() in taken:
            raise DataError(f"the right table's column {c!r} and its rename {name!r} are both "
                            "taken in the left table: rename one of them before joining")
        taken.add(name.lower())
        out.append((c, name))
    return out


def _duckdb(engine: Engine) -> DuckDBEngine | None:
    if isinstance(engine, ArrayEngine):
        engine = engine.duckdb
    return engine if isinstance(engine, DuckDBEngine) else None


def _spark(engine: Engine) -> Any:
    from bayesdp.tables.engines.spark import SparkEngine

    return engine if isinstance(engine, SparkEngine) else None


def public_engine(public: Any, left: Engine) -> Engine:
    """An engine over the public table on the left's kind of engine (DuckDB or Spark)."""
    if _spark(left) is not None:
        from bayesdp.tables.engines.spark import spark_engine

        session = left.frame.sparkSession  # type: ignore[attr-defined]
        if isinstance(public, str | Path) or type(public).__module__.startswith("pyspark."):
            return spark_engine(public, session)
        frame = engine_for(public).relation.df()  # any input DuckDB reads, then to Spark
        return spark_engine(session.createDataFrame(frame), session)
    return engine_for(public)


def repeated(engine: Engine, columns: list[str], most: int = 1) -> tuple[Any, ...] | None:
    """A key of `columns` that more than `most` of the table's rows hold, or None; a key with a
    null never matches, so those rows do not count."""
    duck = _duckdb(engine)
    if duck is not None:
        cols = ", ".join(ident(c) for c in columns)
        known = " AND ".join(f"{ident(c)} IS NOT NULL" for c in columns)
        found = duck.rows(f"SELECT {cols} FROM {SOURCE} WHERE {known} GROUP BY ALL "
                          f"HAVING count(*) > {int(most)} LIMIT 1")
    else:
        from pyspark.sql import functions as F

        frame = engine.frame  # type: ignore[attr-defined]
        found = frame.dropna(subset=columns).groupBy(*columns).agg(F.count(F.lit(1)).alias("__n")) \
            .where(F.col("__n") > int(most)).select(*columns).limit(1).collect()
    return tuple(found[0]) if found else None


def check_unique(engine: Engine, columns: list[str]) -> None:
    """A public table's join columns hold each key once (a row-level table's row must stay one
    row); a key with a null never matches, so those rows may repeat."""
    found = repeated(engine, columns)
    if found is not None:
        raise InvalidParameter(
            f"the public table repeats keys of {columns} (such as {found!r}): a table "
            "without a privacy unit treats each row as a person, so a row matching several public "
            "rows would become several people. Join on unique keys, or name the privacy unit "
            "(bdp.table(..., privacy_unit=...))")


def _kind(engine: Engine, column: str) -> str:
    """The kind of values a join column holds, as far as matching goes."""
    if engine.is_boolean(column):
        return "true/false"
    if engine.is_numeric(column):
        return "numbers"
    kind = engine.schema()[column].split("(")[0].upper()
    if kind.startswith(("DATE", "TIMESTAMP")):
        return "dates and times"
    return "text" if kind in ("VARCHAR", "STRING", "TEXT", "CHAR", "BPCHAR") else kind.lower()


def check_key_kinds(left: Engine, right: Engine, pairs: Pairs) -> None:
    """Join columns of one kind: the engine would otherwise cast one side to the other's type,
    matching '01' with 1 and failing on a row whose text is not a number (an error that would
    depend on one row), so mixed kinds are refused from the schemas, before anything is read."""
    for a, b in pairs:
        ka, kb = _kind(left, a), _kind(right, b)
        if ka != kb:
            raise InvalidParameter(
                f"on pairs {a!r} ({left.schema()[a]}, {ka}) with {b!r} ({right.schema()[b]}, {kb}): "
                "join columns must hold the same kind of values (numbers, text, dates and times, "
                "or true/false); convert one of them before joining")


def join_engines(left: Engine, right: Engine, pairs: Pairs, how: str, *,
                 truncate: tuple[str, str, int, int] | None = None) -> Engine:
    """The engine over `left` joined with `right` on `pairs`. `truncate` = (left unit, right
    unit, m, seed): first keep at most m of `right`'s rows per unit and join key, chosen by a
    keyed hash of the row with the secret `seed` (never by row order)."""
    lcols, rcols = list(left.schema()), list(right.schema())
    proj = _projection(lcols, rcols, pairs)
    check_key_kinds(left, right, pairs)
    ld, rd = _duckdb(left), _duckdb(right)
    if ld is not None and rd is not None:
        return _join_duckdb(ld, rd, pairs, how, proj, truncate)
    ls, rs = _spark(left), _spark(right)
    if ls is not None and rs is not None:
        return _join_spark(ls, rs, pairs, how, proj, truncate)
    raise InvalidParameter("both tables of a join must run on the same engine (DuckDB or Spark): "
                           "read the other table with the same engine")


def _join_duckdb(left: DuckDBEngine, right: DuckDBEngine, pairs: Pairs, how: str,
                 proj: list[tuple[str, str]], truncate: tuple[str, str, int, int] | None) -> Engine:
    rcols = list(right.schema())
    kept = "SELECT * FROM __r"
    if truncate is not None:
        _, unit, m, seed = truncate
        part = ", ".join(ident(c) for c in (unit, *(b for _, b in pairs)))
        row = f"hash(xor(hash({', '.join(ident(c) for c in rcols)}), {seed & _MASK64}::UBIGINT))"
        kept += f" QUALIFY row_number() OVER (PARTITION BY {part} ORDER BY {row}) <= {m}"
    cond = " AND ".join(f"__a.{ident(a)} = __b.{ident(b)}" for a, b in pairs)
    cols = "".join(f", __b.{ident(c)} AS {ident(n)}" for c, n in proj)
    sql = (f"WITH __a AS (SELECT * FROM __l), __b AS ({kept}) "
           f"SELECT __a.*{cols} FROM __a {how.upper()} JOIN __b ON {cond}")
    __r = right.relation
    with duckdb_errors("DuckDB could not join the tables"):
        try:
            rel = left.relation.query("__l", sql)
        except duckdb.InvalidInputException:  # another connection: its rows come over as Arrow
            __r = right.relation.to_arrow_table()
            rel = left.relation.query("__l", sql)
    assert rel is not None
    return DuckDBEngine(rel)


def _join_spark(left: Any, right: Any, pairs: Pairs, how: str, proj: list[tuple[str, str]],
                truncate: tuple[str, str, int, int] | None) -> Engine:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from bayesdp.tables.engines.spark import SparkEngine

    r = right.frame
    if truncate is not None:
        _, unit, m, seed = truncate
        order = F.xxhash64(*(F.col(c) for c in r.columns), F.lit(seed & ((1 << 63) - 1)))
        w = Window.partitionBy(F.col(unit), *(F.col(b) for _, b in pairs)).orderBy(order)
        r = r.withColumn("__n", F.row_number().over(w)).where(F.col("__n") <= m).drop("__n")
    a, b = left.frame.alias("__a"), r.alias("__b")
    cond = [F.col(f"__a.`{x}`") == F.col(f"__b.`{y}`") for x, y in pairs]
    out = a.join(b, cond, how).select(*(F.col(f"__a.`{c}`").alias(c) for c in left.frame.columns),
                                      *(F.col(f"__b.`{c}`").alias(n) for c, n in proj))
    return SparkEngine(out)


def private_pairs(pairs: Pairs, left_unit: str, right_unit: str, max_rows_per_key: int | None,
                  unit_name: str) -> tuple[Pairs, int | None]:
    """The join pairs with the privacy units paired (added when `on` leaves them out), and the
    right table's rows kept per unit and join key (None when `on` pairs the units already: no
    truncation)."""
    for a, b in pairs:
        if (a == left_unit) != (b == right_unit):
            raise InvalidParameter(
                f"on pairs {a!r} with {b!r}: the privacy unit columns ({left_unit!r}, "
                f"{right_unit!r}) may only be paired with each other, as a {unit_name}'s rows "
                f"join only that same {unit_name}'s rows")
    if (left_unit, right_unit) in pairs:
        if max_rows_per_key is not None:
            raise invalid("max_rows_per_key", max_rows_per_key,
                          f"None when `on` pairs the privacy units (each {unit_name}'s rows join "
                          "its own rows only; the release's bounds apply to the result)")
        return pairs, None
    if max_rows_per_key is None:
        raise InvalidParameter(
            f"max_rows_per_key is required to join on {[a for a, _ in pairs]} rather than the "
            f"privacy unit: the most rows of the right table one {unit_name} may have per join "
            "key (a public fact; rows beyond are dropped at random; in SQL, max_rows_per_key in "
            "the metadata of the joined table)")
    return ((left_unit, right_unit), *pairs), check_positive_int("max_rows_per_key", max_rows_per_key)
