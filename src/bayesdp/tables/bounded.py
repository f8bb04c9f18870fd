"""Bound once, query many: a table whose contribution bounding runs once for many releases."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from bayesdp.errors import InvalidParameter, check_positive_int, invalid
from bayesdp.noise import Rng, resolve_rng
from bayesdp.tables.engines.base import Bounding

if TYPE_CHECKING:
    from bayesdp.tables.query import Table


def bounded(table: Table, by: str | Sequence[str], max_groups_per_unit: int | None,
            max_rows_per_group: int, *, rng: Rng | None) -> Table:
    """`table` bounded once by a secret seed drawn now (see `Table.bounded`)."""
    if table.privacy_unit is None:
        raise InvalidParameter("bounded() needs a privacy unit: with privacy_unit=None every row "
                               "is already a unit in one group, once")
    if table.bounding is not None:
        raise table.bounding.again()
    cols = tuple(table.group_by(by, None).by) if by not in ((), "", []) else ()
    m = check_positive_int("max_rows_per_group", max_rows_per_group)
    if not cols:
        if max_groups_per_unit not in (None, 1):
            raise invalid("max_groups_per_unit", max_groups_per_unit,
                          "1 or None without group columns (every row is in the one group)")
        k = 1
    elif max_groups_per_unit is None:
        raise InvalidParameter(
            f"max_groups_per_unit is required to bound groups by {', '.join(cols)}: the most "
            f"groups one {table.unit_name} may contribute to, a public fact (README: no default)")
    else:
        k = check_positive_int("max_groups_per_unit", max_groups_per_unit)
    gen = resolve_rng(rng)
    seed = int(gen.integers(0, 2**63)) << 64 | int(gen.integers(0, 2**63))
    bounding = Bounding(table.privacy_unit, cols, k, m)
    engine = table.engine.bounded(bounding, seed, table.filters)
    return replace(table, engine=engine, filters=(), bounding=bounding)
