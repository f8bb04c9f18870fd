"""The configured public schema checked against the types the engine reads, at start-up: a
domain or bounds that cannot match the column would otherwise fail only at release time,
after the data was read. Only the types are read, never a value."""

from __future__ import annotations

import datetime
from typing import Any

import duckdb
from duckdb.sqltypes import DuckDBPyType

from bayesdp.errors import invalid
from bayesdp.serve.config import Dataset

_INTEGER = {"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint", "uinteger",
            "ubigint", "uhugeint"}
_NUMERIC = _INTEGER | {"float", "double", "decimal"}


def check_columns(ds: Dataset, rel: duckdb.DuckDBPyRelation, db: duckdb.DuckDBPyConnection) -> None:
    """Every configured column's bounds and domain fit the type DuckDB reads it as (`db` casts)."""
    types = dict(zip(rel.columns, rel.types, strict=True))
    for column in ds.columns.values():
        kind = types[column.name]
        where = f"datasets.{ds.name}.columns.{column.name}"
        read_as = f"of the column's type {kind} (as DuckDB reads {ds.source.name})"
        if column.bounds is not None and kind.id not in _NUMERIC:
            raise invalid(f"{where}.bounds", list(column.bounds),
                          f"absent: bounds need a numeric column, not one {read_as}")
        if column.domain is not None:
            wrong = [v for v in column.domain if not _fits(v, kind, db)]
            if wrong:
                raise invalid(f"{where}.domain", list(column.domain),
                              f"a list of values {read_as}; {wrong} are not")


# Types whose values have no size the schema bounds (and that the service cannot cut as it cuts
# text): one row's value could make the work of a request on it as long as it likes.
UNSIZED = {"list", "array", "struct", "map", "union", "blob", "bit"}


def check_sized(rel: duckdb.DuckDBPyRelation, columns: list[str], key: str) -> None:
    """Every column of a private table holds values of a bounded size (numbers, text, which the
    service cuts, true/false, dates and times), checked from the types at start-up."""
    for name, kind in zip(rel.columns, rel.types, strict=True):
        if name in columns and kind.id in UNSIZED:
            raise invalid(f"{key} column {name!r}", str(kind),
                          "numbers, text, true/false, dates or times: a value of this type has no "
                          "bounded size, so the time of a request could tell about one row")


def _fits(value: Any, kind: DuckDBPyType, db: duckdb.DuckDBPyConnection) -> bool:
    if kind.id == "boolean":
        return isinstance(value, bool)
    if kind.id in _NUMERIC:
        return isinstance(value, int | float) and not isinstance(value, bool) and \
            (kind.id not in _INTEGER or float(value).is_integer())
    if kind.id == "varchar":
        return isinstance(value, str)
    # Dates, times and the rest: a value DuckDB casts to the type (TOML has dates and times).
    if not isinstance(value, str | datetime.date | datetime.time):
        return False
    return db.execute(f"SELECT TRY_CAST(? AS {kind}) IS NOT NULL", [value]).fetchone() == (True,)
