"""The metadata a plain SQL query needs and cannot state: per table, the privacy unit, the
contribution bounds, per-column bounds and public keys, default ε, δ and α (TOML)::

    [tables.events]
    privacy_unit = "user_id"          # false: each row is a different person
    max_groups_per_unit = 5
    max_rows_per_group = 1
    epsilon = 1.0                     # defaults for queries that give none
    delta = 1e-6
    [tables.events.columns.revenue]
    bounds = [0, 100]                 # clipping bounds of every aggregate over this column
    [tables.events.columns.campaign]
    keys = ["spring", "summer"]       # public keys: every one released, no partition selection
    [tables.events.columns.country]
    public = true                     # a `WHERE country IN (...)` list gives public keys
    [tables.campaigns]
    public = true                     # a public table, which a JOIN may read
    max_rows_per_key = 1              # optional: refused if it has more rows on a JOIN's key
    [tables.profiles]
    privacy_unit = "user_id"          # the same unit: a JOIN pairs each user's rows
    max_rows_per_key = 1              # when the JOIN is not on the unit (`bayesdp.sql.joins`)
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bayesdp.errors import DataError, check_keys

_TABLE_KEYS = ("privacy_unit", "max_groups_per_unit", "max_rows_per_group", "epsilon", "delta",
               "alpha", "noise", "columns", "public", "max_rows_per_key")
_COLUMN_KEYS = ("bounds", "keys", "public")


@dataclass(frozen=True)
class Column:
    bounds: tuple[float, float] | None = None
    keys: tuple[Any, ...] | None = None
    public: bool = False


@dataclass(frozen=True)
class TableMetadata:
    """What the curator states about one table (every field optional)."""

    privacy_unit: str | bool | None = None  # None: not stated; False: one row per person
    options: dict[str, Any] = field(default_factory=dict)  # max_groups_per_unit, epsilon, ...
    columns: dict[str, Column] = field(default_factory=dict)
    public: bool = False  # a public table, which a JOIN may read (`bayesdp.sql.joins`)
    max_rows_per_key: int | None = None  # a private JOIN off the unit keeps this many rows per key;
    # a public table may have at most this many rows per JOIN key


def load(metadata: str | Path | Mapping[str, Any] | None) -> dict[str, TableMetadata]:
    """Per table name, its metadata, from a TOML path or an already-parsed mapping."""
    if metadata is None:
        return {}
    where = "metadata"
    if isinstance(metadata, str | Path):
        where = str(metadata)
        try:
            metadata = tomllib.loads(Path(metadata).read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise DataError(f"cannot parse the metadata {where!r}: {exc}") from None
    if not isinstance(metadata, Mapping) or set(metadata) - {"tables"}:
        raise DataError(f"the metadata {where!r} must hold one [tables.NAME] table per table "
                        "(and nothing else at the top level)")
    tables = metadata.get("tables", {})
    if not isinstance(tables, Mapping):
        raise DataError(f"[tables] in the metadata {where!r} must be a table of tables")
    return {str(name): _table(f"{where}: tables.{name}", spec) for name, spec in tables.items()}


def _checked(where: str, spec: Any, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(spec, Mapping):
        raise DataError(f"{where} must be a table")
    check_keys(spec, allowed, where, DataError)
    return spec


def _table(where: str, spec: Any) -> TableMetadata:
    spec = _checked(where, spec, _TABLE_KEYS)
    unit = spec.get("privacy_unit")
    if not (unit is None or isinstance(unit, str) or unit is False):
        raise DataError(f"{where}.privacy_unit must be a column name, or false when each row "
                        "is a different person")
    columns = spec.get("columns", {})
    if not isinstance(columns, Mapping):
        raise DataError(f"{where}.columns must be a table of column tables")
    public = spec.get("public", False)
    if not isinstance(public, bool):
        raise DataError(f"{where}.public must be true or false")
    options = {k: v for k, v in spec.items()
               if k not in ("privacy_unit", "columns", "public", "max_rows_per_key")}
    return TableMetadata(unit, options, {str(c): _column(f"{where}.columns.{c}", v)
                                         for c, v in columns.items()},
                         public=public, max_rows_per_key=spec.get("max_rows_per_key"))


def _column(where: str, spec: Any) -> Column:
    spec = _checked(where, spec, _COLUMN_KEYS)
    bounds = spec.get("bounds")
    if bounds is not None and (not isinstance(bounds, list) or len(bounds) != 2):
        raise DataError(f"{where}.bounds must be [low, high]")
    keys = spec.get("keys")
    if keys is not None and not isinstance(keys, list):
        raise DataError(f"{where}.keys must be a list of key values")
    public = spec.get("public", False)
    if not isinstance(public, bool):
        raise DataError(f"{where}.public must be true or false")
    return Column(None if bounds is None else (bounds[0], bounds[1]),
                  None if keys is None else tuple(keys), public or keys is not None)
