"""Bound once, query many: the engine of a table whose contribution bounding runs once for many
releases. It takes a table's parts, not the table, so that tables/query.py alone knows `Table`."""

from __future__ import annotations

from bayesdp.errors import InvalidParameter, check_positive_int, invalid
from bayesdp.expressions import RowExpression
from bayesdp.noise import Rng, resolve_rng
from bayesdp.tables.engines.base import Bounding, Engine


def bounded(engine: Engine, unit: str, unit_name: str, cols: tuple[str, ...],
            filters: tuple[RowExpression, ...], max_groups_per_unit: int | None,
            max_rows_per_group: int, *,
            rng: Rng | None) -> tuple[Engine, Bounding]:
    """The engine over `engine`'s rows (after `filters`) with each unit bounded once by a secret
    seed drawn now, and its bounds (see `Table.bounded`)."""
    m = check_positive_int("max_rows_per_group", max_rows_per_group)
    if not cols:
        if max_groups_per_unit not in (None, 1):
            raise invalid("max_groups_per_unit", max_groups_per_unit,
                          "1 or None without group columns (every row is in the one group)")
        k = 1
    elif max_groups_per_unit is None:
        raise InvalidParameter(
            f"max_groups_per_unit is required to bound groups by {', '.join(cols)}: the most "
            f"groups one {unit_name} may contribute to, a public fact (docs/guide/tables.md: no default)")
    else:
        k = check_positive_int("max_groups_per_unit", max_groups_per_unit)
    gen = resolve_rng(rng)
    seed = int(gen.integers(0, 2**63)) << 64 | int(gen.integers(0, 2**63))
    bounding = Bounding(unit, cols, k, m)
    return engine.bounded(bounding, seed, filters), bounding
