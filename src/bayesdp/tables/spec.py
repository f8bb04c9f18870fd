"""The spec format: a tables Query described as plain data (a TOML file for `bayesdp release`,
whose help shows an example; a JSON object in the service), checked and built into a Query by
the same code for both. Its keys: the privacy unit (false when each row is a different
person), unit_name, group_by and public keys, where, label, the aggregates (each a table with
its kind and that kind's arguments, as `Aggregate.spec()` writes them) and the release options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bayesdp.errors import DataError, invalid
from bayesdp.tables.aggregates import CONSTRUCTORS, Aggregate
from bayesdp.tables.query import Query, table

if TYPE_CHECKING:
    import duckdb

RELEASE_KEYS = ("epsilon", "delta", "max_groups_per_unit", "max_rows_per_group", "alpha", "noise",
                 "selection_weight")
SPEC_KEYS = ("privacy_unit", "unit_name", "group_by", "keys", "where", "aggregates", "label",
             *RELEASE_KEYS)


def check_spec(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """A parsed spec (TOML or JSON), with its keys checked; `where` names it."""
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise DataError(f"unknown key(s) {unknown} in {where}; allowed: {list(SPEC_KEYS)}")
    unit = spec.get("privacy_unit")
    if not (isinstance(unit, str) or unit is False):
        raise DataError(f"{where} must name the privacy_unit column, or set "
                        "privacy_unit = false when each row is a different person")
    if not isinstance(spec.get("aggregates"), dict) or not spec["aggregates"]:
        raise DataError(f"{where} needs an [aggregates] table, e.g. n = {{ kind = \"count\" }}")
    return spec


def aggregate(name: str, item: Any) -> Aggregate:
    """One [aggregates] entry as an Aggregate."""
    if not isinstance(item, dict) or item.get("kind") not in CONSTRUCTORS:
        raise invalid(f"aggregates.{name}", item, f"a table with kind one of {tuple(CONSTRUCTORS)}")
    args = {k: v for k, v in item.items() if k != "kind"}
    try:
        agg = CONSTRUCTORS[item["kind"]](**args)
    except TypeError as exc:
        raise DataError(f"aggregates.{name}: {exc}") from None
    return agg


def build(data: Any, spec: dict[str, Any], connection: duckdb.DuckDBPyConnection | None = None,
          engine: str = "duckdb", spark: Any = None) -> Query:
    """The Query a checked spec describes, over `data` (a path, a relation or a frame)."""
    t = table(data, spec["privacy_unit"] or None, unit_name=spec.get("unit_name"),
              connection=connection, engine=engine, spark=spark)
    where = spec.get("where", [])
    for cond in [where] if isinstance(where, str) else where:
        t = t.where(cond)
    aggs = {n: aggregate(n, item) for n, item in spec["aggregates"].items()}
    if spec.get("group_by"):
        return t.group_by(spec["group_by"], keys=spec.get("keys")).agg(**aggs)
    return t.agg(**aggs)
