"""The spec format: a tables Query described as plain data (a TOML file for `bayesdp release`,
whose help shows an example; a JSON object in the service), checked and built into a Query by
the same code for both. Its keys: the privacy unit (false when each row is a different
person), unit_name, group_by and public keys, where, label, the aggregates (each a table with
its kind and that kind's arguments, as `Aggregate.spec()` writes them) and the release options.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bayesdp.errors import DataError, InvalidParameter, check_keys, invalid
from bayesdp.tables.aggregates import CONSTRUCTORS, Aggregate
from bayesdp.tables.query import Query, table

if TYPE_CHECKING:
    import duckdb

RELEASE_KEYS = ("epsilon", "delta", "max_groups_per_unit", "max_rows_per_group", "alpha", "noise",
                 "selection_weight")
SPEC_KEYS = ("privacy_unit", "unit_name", "group_by", "keys", "where", "aggregates", "label",
             *RELEASE_KEYS)
MAX_DEPTH = 32  # levels of nested tables and lists in a spec or a request
MAX_NAME = 200  # characters of a label, a unit's name, a column or an aggregate's name
_INT_RANGE = 2**63  # integers are 64-bit: larger ones fit neither an engine's integer nor a float


def check_values(value: Any, root: str = "") -> None:
    """Every value nested in parsed data, checked without recursion before anything reads it:
    numbers finite and integers of 64 bits (NaN, infinities and 10**400 are refused, not turned
    into an error deep inside, or after the spend), text valid Unicode (no lone surrogate),
    at most MAX_DEPTH levels. Refusals name the value by its path below `root`."""
    stack: list[tuple[Any, str, int]] = [(value, root, 0)]
    while stack:
        item, path, depth = stack.pop()
        name = path or "the value"
        if depth > MAX_DEPTH:
            raise InvalidParameter(f"{name} is nested too deeply: at most {MAX_DEPTH} levels")
        if isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    raise invalid(f"a key of {name}", key, "text")
                stack.append((key, f"a key of {name}", depth + 1))
                shown = key.encode("utf-8", "backslashreplace").decode("utf-8")  # no lone surrogate
                stack.append((inner, f"{path}.{shown}" if path else shown, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((inner, f"{path}[{i}]", depth + 1) for i, inner in enumerate(item))
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise invalid(name, item.encode("utf-8", "backslashreplace").decode("ascii"),
                              "valid Unicode text (a lone surrogate is not a character)") from None
        elif isinstance(item, float) and not math.isfinite(item):
            raise invalid(name, item, "a finite number")
        elif isinstance(item, int) and not isinstance(item, bool) and not -_INT_RANGE <= item < _INT_RANGE:
            digits = len(str(abs(item)))
            raise InvalidParameter(f"{name} is a number of {digits} digits: it must be between "
                                   "-2**63 and 2**63")


def check_spec(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """A parsed spec (TOML or JSON), with its keys and the type of every value checked (the
    ranges are the library's to check); `where` names it."""
    check_values(spec)
    check_keys(spec, SPEC_KEYS, where, DataError)
    unit = spec.get("privacy_unit")
    if not (isinstance(unit, str) or unit is False):
        raise DataError(f"{where} must name the privacy_unit column, or set "
                        "privacy_unit = false when each row is a different person")
    if not isinstance(spec.get("aggregates"), dict) or not spec["aggregates"]:
        raise DataError(f"{where} needs an [aggregates] table, e.g. n = {{ kind = \"count\" }}")
    # The library checks the release options and each aggregate; these it takes as given.
    for key in ("label", "unit_name"):
        if spec.get(key) is not None:
            _name(key, spec[key])
    by = spec.get("group_by")
    if by is not None and not all(isinstance(c, str) for c in ([by] if isinstance(by, str) else
                                                               by if isinstance(by, list) else [by])):
        raise invalid("group_by", by, "a column name or a list of them")
    keys = spec.get("keys")
    if keys is not None and (not isinstance(keys, list) or any(
            isinstance(k, dict) or (isinstance(k, list) and any(isinstance(x, dict | list) for x in k))
            for k in keys)):
        raise invalid("keys", keys, "a list of the public group keys: values, or lists of values "
                      "(one per group column)")
    for name in spec["aggregates"]:
        _name("an aggregate's name", name)
    return spec


def _name(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
        raise invalid(key, value, f"non-empty text of at most {MAX_NAME} characters")
    return value


def aggregate(name: str, item: Any) -> Aggregate:
    """One [aggregates] entry as an Aggregate."""
    kind = item.get("kind") if isinstance(item, dict) else None
    if not isinstance(kind, str) or kind not in CONSTRUCTORS:
        raise invalid(f"aggregates.{name}", item, f"a table with kind one of {tuple(CONSTRUCTORS)}")
    args = {k: v for k, v in item.items() if k != "kind"}
    try:
        agg = CONSTRUCTORS[kind](**args)
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
