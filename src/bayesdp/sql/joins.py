"""JOIN in DP SQL: the FROM table joined with tables the metadata marks public (`public = true`:
`Table.join_public`; never on the privacy unit, and with at most the metadata's `max_rows_per_key`
rows per join key when it gives one) or of the same privacy unit (the same `privacy_unit` column:
`Table.join`, with the metadata's `max_rows_per_key` when the join is not on the unit). With the BigQuery
clause, a table without metadata that has the clause's `privacy_unit_column` shares the unit.

`[INNER] JOIN` and `LEFT [OUTER] JOIN`, on equalities of a column of each side (`ON a.x = b.y AND
...`) or `USING (...)`. After the joins the query reads one table: a column of a joined table is
renamed to its name in the joined table (`bayesdp.tables.joins`; NAME_right when the FROM table
has NAME), so the rest of the translation is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

from bayesdp import tables
from bayesdp.errors import BayesdpError, check_positive_int
from bayesdp.expressions import fold, resolve_column
from bayesdp.sql.metadata import Column, TableMetadata
from bayesdp.sql.refusals import SqlError, span
from bayesdp.tables.joins import repeated, right_names

_JOIN_ARGS = ("this", "side", "kind", "on", "using")
_ON = "ON {} is not supported: ON takes equalities of a column of each table, as a.x = b.y, joined by AND"
Refuse = Callable[[str, exp.Expr], SqlError]


def apply_joins(tree: exp.Select, joins: list[exp.Join], table: tables.Table, aliases: set[str],
                sources: Mapping[str, Any], meta: Mapping[str, TableMetadata],
                clause_unit: str | None, refuse: Refuse) -> tuple[tables.Table, dict[str, Column]]:
    """`table` joined as `joins` say, with the columns of `tree` that name a joined table renamed
    to their joined names (in place), and the joined tables' column metadata by joined name."""
    columns: dict[str, Column] = {}
    for join in joins:
        right, how = _right(join, sources, refuse)
        mine = {right.name.lower()} | ({right.alias.lower()} if right.alias else set())
        if mine & aliases:
            raise refuse(f"table {right.name!r} is already in the query: give it another alias", right)
        source = sources[right.name]
        right_meta = meta.get(right.name)
        try:
            if right_meta is not None and right_meta.public:
                other_cols = list(tables.table(source, None).columns)
            else:
                unit = _shared_unit(right, right_meta, table, source, clause_unit, refuse)
                other = tables.table(source, unit)
                other_cols = other.columns
            before = list(table.columns)
            pairs = _pairs(join, before, other_cols, aliases, mine, refuse)
            if right_meta is not None and right_meta.public:
                _off_unit(join, pairs, before, table.privacy_unit, mine, refuse)
                _few_per_key(right, source, [b for _, b in pairs], right_meta.max_rows_per_key, refuse)
                table = table.join_public(source, dict(pairs), how=how)
            else:
                # The metadata's max_rows_per_key serves joins off the unit; on the unit, each
                # unit's rows join its own rows and no truncation applies.
                on_unit = any(fold(a) == fold(str(table.privacy_unit)) and fold(b) == fold(unit)
                              for a, b in pairs)
                table = table.join(other, dict(pairs), how=how, max_rows_per_key=(
                    right_meta.max_rows_per_key if right_meta and not on_unit else None))
        except SqlError:
            raise
        except BayesdpError as exc:
            raise refuse(exc.public_message, join) from None
        resolved = tuple((resolve_column(a, before, "ON") or a, resolve_column(b, other_cols, "ON") or b)
                         for a, b in pairs)
        names = right_names(before, other_cols, resolved)
        aliases |= mine
        for name, col in (right_meta.columns.items() if right_meta is not None else ()):
            found = resolve_column(name, other_cols, "the metadata") or name
            columns[names.get(found, found)] = col
        _rename(tree, mine, names, other_cols, {b for _, b in pairs} if how == "left" else set(),
                refuse)
    return table, columns


def _right(join: exp.Join, sources: Mapping[str, Any], refuse: Refuse) -> tuple[exp.Table, str]:
    for arg, value in join.args.items():
        if value and arg not in _JOIN_ARGS:
            raise refuse(f"{arg.upper()} in a JOIN is not supported", join)
    side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
    if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER") or (kind == "OUTER" and not side):
        raise refuse(f"{' '.join(x for x in (side, kind) if x)} JOIN is not supported: use [INNER] "
                     "JOIN or LEFT [OUTER] JOIN", join)
    right = join.this
    if not isinstance(right, exp.Table) or not isinstance(right.this, exp.Identifier) \
            or right.args.get("db") or right.args.get("catalog"):
        raise refuse("JOIN must name one table given in tables=", right)
    if right.name not in sources:
        known = ", ".join(repr(n) for n in sources) or "none"
        raise refuse(f"JOIN is not supported with table {right.name!r}: it is not one of the tables "
                     f"given ({known})", right)
    return right, "left" if side else "inner"


def _shared_unit(right: exp.Table, right_meta: TableMetadata | None, table: tables.Table,
                 source: Any, clause_unit: str | None, refuse: Refuse) -> str:
    unit = table.privacy_unit
    stated = right_meta.privacy_unit if right_meta is not None else None
    if unit is not None and isinstance(stated, str) and fold(stated) == fold(unit):
        return stated
    if unit is not None and right_meta is None and clause_unit is not None:
        found = resolve_column(clause_unit, tables.table(source, None).columns, "privacy_unit_column")
        if found is not None:
            return found
    raise refuse(f"JOIN reads {right.name!r}, which the metadata marks neither public "
                 f"(public = true) nor of the query's privacy unit {unit!r} (privacy_unit = "
                 f"{unit!r}): a release joins only public tables and tables of the same unit", right)


def _off_unit(join: exp.Join, pairs: list[tuple[str, str]], left: list[str], unit: str | None,
              mine: set[str], refuse: Refuse) -> None:
    """Refuse a public table joined on the privacy unit: its columns would be functions of the
    unit, which WHERE, GROUP BY or an aggregate could then read under another name."""
    if unit is None:
        return
    for a, _ in pairs:
        if resolve_column(a, left, "ON") == unit:
            # The left table's column (in ON; USING names both sides at once).
            culprit = next((n for n in join.find_all(exp.Column, exp.Identifier)
                            if fold(n.name) == fold(a) and span(n)[0] is not None and not (
                                isinstance(n, exp.Column) and n.table.lower() in mine)), join)
            raise refuse(f"JOIN on the privacy unit {unit!r} with a public table would read the "
                         "privacy unit through the public table's columns: join on other columns",
                         culprit)


def _few_per_key(right: exp.Table, source: Any, keys: list[str], most: int | None, refuse: Refuse) -> None:
    """Refuse a public table with more than `most` rows (its metadata's max_rows_per_key) on one
    join key: a row matching a key joins that many rows, so the work of a query, and its time,
    would grow with which keys the private rows hold."""
    if most is None:
        return
    most = check_positive_int("max_rows_per_key", most)
    public = tables.table(source, None)
    found = repeated(public.engine, [resolve_column(k, public.columns, "ON") or k for k in keys], most)
    if found is not None:
        raise refuse(f"the public table {right.name!r} has more than {most} row(s) with the join key "
                     f"{found!r} (max_rows_per_key = {most} in its metadata): join on columns whose "
                     f"keys it holds at most {most} time(s)", right)


def _pairs(join: exp.Join, left: list[str], right: list[str], aliases: set[str], mine: set[str],
           refuse: Refuse) -> list[tuple[str, str]]:
    """(left column, right column) of USING or of ON's equalities, one qualified column a side."""
    using = join.args.get("using")
    if using:
        return [(c.name, c.name) for c in using]
    on = join.args.get("on")
    if on is None:
        raise refuse("a JOIN needs ON or USING (a cross join is not supported)", join)
    out = []
    for part in on.flatten() if isinstance(on, exp.And) else [on]:
        sides = [part.this, part.expression] if isinstance(part, exp.EQ) else []
        if len(sides) != 2 or not all(isinstance(c, exp.Column) and c.table for c in sides):
            # A literal (ON TRUE) keeps no position: point at the join then.
            raise refuse(_ON.format(part.sql()), part if span(part)[0] is not None else join)
        owners = [c.table.lower() for c in sides]
        if owners[0] in mine and owners[1] in aliases:
            sides.reverse()
        elif not (owners[0] in aliases and owners[1] in mine):
            raise refuse(_ON.format(part.sql()), part)
        out.append((sides[0].name, sides[1].name))
    return out


def _rename(tree: exp.Select, mine: set[str], names: dict[str, str], right: list[str],
            nullable_keys: set[str], refuse: Refuse) -> None:
    for col in list(tree.find_all(exp.Column)):
        if not col.table or col.table.lower() not in mine or col.find_ancestor(exp.Join):
            continue
        found = resolve_column(col.name, right, "the query") or col.name
        if found in nullable_keys:
            raise refuse(f"{col.sql()} is a join column of a LEFT JOIN's right table (null "
                         "without a match): name the left table's column instead", col)
        col.set("this", exp.to_identifier(names.get(found, found), quoted=True))
        col.set("table", None)
