"""A query's text -> the builder's Query, its release options and the post-processing of its outputs.

Every refusal names the construct and points at it (`SqlError`). Expressions over one row (the
WHERE clause, aggregate arguments) go through the row-local checker `bayesdp.expressions`; the
Query carries them to the builder, whose code quotes identifiers and literals for the engine.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from bayesdp import tables
from bayesdp.errors import BayesdpError
from bayesdp.expressions import RowExpression, fold, resolve_column, row_expression
from bayesdp.sql import bigquery
from bayesdp.sql.dialect import BigQueryDP, DifferentialPrivacy, NamedArguments
from bayesdp.sql.joins import apply_joins
from bayesdp.sql.metadata import Column as ColumnMetadata
from bayesdp.sql.metadata import TableMetadata, load
from bayesdp.sql.refusals import SqlError, refuse, span

# BigQuery's options of the clause, and the ones bayesdp adds (its release parameters).
_OPTIONS = ("epsilon", "delta", "max_groups_contributed", "privacy_unit_column", "max_rows_per_group",
            "alpha", "noise")
_BOUNDS = ("contribution_bounds_per_group", "contribution_bounds_per_row")
_SELECT_ARGS = ("expressions", "from_", "where", "group", "having", "order", "limit", "offset",
                "differential_privacy", "kind")
_CONSTRUCTS = {"with_": "WITH (a common table expression)", "joins": "JOIN", "distinct": "SELECT DISTINCT",
               "qualify": "QUALIFY", "windows": "WINDOW", "laterals": "LATERAL", "sample": "TABLESAMPLE",
               "into": "SELECT INTO", "pivots": "PIVOT", "prewhere": "PREWHERE", "connect": "CONNECT BY",
               "match": "MATCH_RECOGNIZE", "hint": "a query hint", "locks": "FOR UPDATE"}
# FROM names one table, with an optional alias: every other argument of the FROM, the table or
# its alias (a sample, time travel, a version, hints, column renames, and whatever a later
# sqlglot adds) would change what is read without the release knowing, so it is refused.
_FROM_ARGS = ("this",)
_TABLE_ARGS = ("this", "alias")
_ALIAS_ARGS = ("this",)
_TABLE_CONSTRUCTS = {"sample": "TABLESAMPLE", "when": "AT/BEFORE (time travel)",
                     "version": "FOR SYSTEM_TIME AS OF (a table version)",
                     "system_time": "FOR SYSTEM_TIME (time travel)", "changes": "CHANGES",
                     "hints": "a table hint", "indexed": "INDEXED BY", "joins": "JOIN",
                     "laterals": "LATERAL", "pivots": "PIVOT", "partition": "PARTITION",
                     "only": "ONLY", "ordinality": "WITH ORDINALITY", "rows_from": "ROWS FROM",
                     "columns": "renaming columns in the table's alias"}
# Levels of nesting of a query's tree: deeper input would exhaust Python's stack in the parser,
# the checks or the post-processing (a RecursionError), so it is refused before anything runs.
MAX_DEPTH = 100
_DUCKDB = sqlglot.Dialect.get_or_raise("duckdb")
_BIGQUERY = BigQueryDP()
_STD = (exp.Stddev, exp.StddevPop, exp.StddevSamp)
_VARIANCE = (exp.Variance, exp.VariancePop)
# What a call becomes: the builder's aggregate, or the BigQuery clause's per-unit one.
Built = tables.Aggregate | bigquery.UnitAggregate
_SUPPORTED = (exp.Count, exp.Sum, exp.Avg, exp.Median, exp.PercentileCont, *_STD, *_VARIANCE)


@dataclass(frozen=True)
class Output:
    """One item of the SELECT list: a group key (`key` names its column) or a released value."""

    name: str
    _: KW_ONLY
    node: exp.Expr
    key: str | None = None


@dataclass(frozen=True)
class Translation:
    """What a query asks for: the builder's Query and release options, then post-processing."""

    text: str
    _: KW_ONLY
    query: tables.Query
    options: dict[str, Any]
    outputs: tuple[Output, ...]
    aggregates: dict[exp.Expr, str]  # an aggregate call (compared by structure) -> its Query name
    squared: frozenset[exp.Expr]  # calls released as a standard deviation and squared (VARIANCE)
    having: exp.Expr | None
    order: tuple[exp.Ordered, ...]
    limit: int | None
    offset: int
    dialect: str
    tokens: tuple[Token, ...]
    learn: bigquery.Learn | None = None  # bounds the BigQuery clause learns before its release
    per_unit: bool = False  # the BigQuery clause: `query` reads each unit's values per group
    shown: dict[str, str] = field(default_factory=dict)  # per-unit columns: what the analyst wrote

    def call(self, node: exp.Expr) -> str:
        return call_sql(node, self.dialect)

    def refuse(self, message: str, node: exp.Expr) -> SqlError:
        return refuse(message, self.text, node, self.tokens)


def call_sql(node: exp.Expr, dialect: str) -> str:
    """An aggregate call's SQL: its identity in a query and its column name when not aliased."""
    return node.sql(dialect=BigQueryDP if dialect == "bigquery" else dialect)


def parse(text: str) -> tuple[exp.Select, str, list[Token]]:
    """The one SELECT of `text` and the dialect it was read in: BigQuery's when it starts with
    `SELECT WITH DIFFERENTIAL_PRIVACY`, else DuckDB's (plain SQL, identifiers in double quotes)."""
    if not isinstance(text, str) or not text.strip():
        raise SqlError("the query is empty: give one SELECT statement")
    dialect = _DUCKDB
    try:
        tokens = _clause_tokens(text)
        if tokens:
            dialect = _BIGQUERY
        else:
            tokens = dialect.tokenize(text)
        statements = dialect.parser().parse(tokens, text)
    except ParseError as exc:
        raise _parse_error(text, exc, tokens, dialect is _BIGQUERY) from None
    except TokenError as exc:
        raise SqlError(f"the query cannot be read: {exc}", text, 0, len(text)) from None
    except RecursionError:
        raise _too_deep(text) from None
    statements = [s for s in statements if s is not None]
    if not statements:
        raise SqlError("the query is empty: give one SELECT statement")
    if len(statements) > 1:
        second = next(i for i, t in enumerate(tokens) if t.token_type == TokenType.SEMICOLON) + 1
        second = min(second, len(tokens) - 1)
        raise SqlError("several statements are not allowed: give one SELECT", text,
                       tokens[second].start, tokens[-1].end + 1)
    tree = statements[0]
    if isinstance(tree, exp.SetOperation):
        name = type(tree).__name__.upper()
        raise refuse(f"{name} is not supported: a release is one SELECT over one table", text,
                     tree.expression, tokens)
    if not isinstance(tree, exp.Select):
        what = tree.key.upper() if tree is not None else "this"
        raise SqlError(f"only SELECT queries can be released, not {what}", text,
                       tokens[0].start, tokens[0].end + 1)
    if _depth(tree) > MAX_DEPTH:
        raise _too_deep(text)
    return tree, "bigquery" if dialect is _BIGQUERY else "duckdb", tokens


def _clause_tokens(text: str) -> list[Token]:
    """BigQuery's tokens of `text` if they hold `SELECT WITH DIFFERENTIAL_PRIVACY`, else none (the
    text is then read as DuckDB's). The clause may follow a common table expression: it is read
    in BigQuery's grammar wherever it is, so that the CTE, not the clause's WITH, is refused.
    A query holding the clause is tokenized once (a tokenization is much of a parse)."""
    if "differential_privacy" not in text.lower():
        return []
    try:
        tokens = _BIGQUERY.tokenize(text)
    except TokenError:
        return []
    clause = any(a.token_type == TokenType.SELECT and b.token_type == TokenType.WITH
                 and c.text.upper() == "DIFFERENTIAL_PRIVACY"
                 for a, b, c in zip(tokens, tokens[1:], tokens[2:], strict=False))
    return tokens if clause else []


def _depth(tree: exp.Expr) -> int:
    """The number of levels of a tree (counted without recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in node.iter_expressions())
    return deepest


def _too_deep(text: str) -> SqlError:
    return SqlError(f"the query is nested too deeply: its tree may have at most {MAX_DEPTH} levels "
                    "(parentheses, operators and calls inside one another)", text, 0, len(text))


def _parse_error(text: str, exc: ParseError, tokens: Sequence[Token], bigquery: bool) -> SqlError:
    err = exc.errors[0] if exc.errors else {}
    line, col = err.get("line"), err.get("col")
    message = f"the query cannot be read: {err.get('description') or exc}"
    if not line or not col:
        return SqlError(message)
    offset = sum(len(s) + 1 for s in text.split("\n")[:line - 1]) + col
    width = max(1, len(err.get("highlight") or " "))
    # A column named like a keyword (union, order, ...) reads as the keyword: say how to quote it.
    # (sqlglot stops at the keyword or at the token after it.)
    at = sum(t.start < offset for t in tokens)
    opens = {i for i, t in enumerate(tokens) if t.token_type in _LISTS}
    if bigquery:  # the SELECT list starts after OPTIONS (...)
        depth = itertools.accumulate((t.token_type == TokenType.L_PAREN) - (t.token_type == TokenType.R_PAREN)
                                     for t in tokens)
        opens.add(next((i for i, d in enumerate(depth) if i > 3 and d == 0), 0))
    for i in (at - 1, at - 2, at):
        if 0 < i < len(tokens) and i - 1 in opens and \
                tokens[i].token_type not in _NAMES and tokens[i].text.isidentifier():
            word = tokens[i].text
            quoted = f"`{word}`" if bigquery else f'"{word}"'
            message += f" ({word!r} is an SQL keyword: to name a column so called, quote it as {quoted})"
            break
    return SqlError(message, text, offset - width, offset)


_NAMES = frozenset({TokenType.VAR, TokenType.IDENTIFIER})
_LISTS = frozenset({TokenType.SELECT, TokenType.COMMA, TokenType.L_PAREN, TokenType.GROUP_BY,
                    TokenType.ORDER_BY})


def translate(text: str, sources: Mapping[str, Any], *,
              metadata: str | Path | Mapping[str, Any] | None = None, epsilon: float | None = None,
              delta: float | None = None) -> Translation:
    """Check the query and build its Query (touches no data values: it reads the schema)."""
    tree, dialect, tokens = parse(text)
    return _Translator(text, tree, dialect, tokens, sources, load(metadata)).run(epsilon, delta)


class _Translator:
    def __init__(self, text: str, tree: exp.Select, dialect: str, tokens: list[Token],
                 sources: Mapping[str, Any], meta: dict[str, TableMetadata]) -> None:
        self.text, self.tree, self.dialect, self.tokens = text, tree, dialect, tokens
        self.sources, self.meta = sources, meta
        self.aggregates: dict[str, Built] = {}
        self.names: dict[exp.Expr, str] = {}
        self.squared: set[exp.Expr] = set()
        self.auto: set[str] = set()  # names made from a call's SQL, not an alias
        self.max_rows: list[tuple[int, exp.Expr]] = []
        # The aggregates' constructors: the builder's, or the BigQuery clause's per-unit ones.
        self.make: Any = tables

    def error(self, message: str, node: exp.Expr | None) -> SqlError:
        return refuse(message, self.text, node, self.tokens)

    def run(self, epsilon: float | None, delta: float | None) -> Translation:
        tree = self.tree
        joins = tree.args.get("joins") or []
        tree.set("joins", None)  # read by `sql.joins` below
        self._refuse_constructs()
        table_node = self._table()
        self.table_meta = self.meta.get(table_node.name, TableMetadata())
        clause_node = tree.args.get("differential_privacy")
        clause = self._clause(clause_node)
        unit = self._unit(clause)
        source = self.sources[table_node.name]
        self.aliases = {table_node.name.lower()} | ({table_node.alias.lower()} if table_node.alias else set())
        try:
            table = tables.table(source, unit)
        except BayesdpError as exc:
            raise self.error(_public(exc), table_node) from None
        joined: dict[str, ColumnMetadata] = {}
        if joins:
            table, joined = apply_joins(tree, joins, table, self.aliases, self.sources, self.meta,
                                        clause["privacy_unit_column"][0] if "privacy_unit_column" in clause
                                        else None, self.error)
        self.table, self.unit, self.columns = table, table.privacy_unit, table.columns
        # The BigQuery clause aggregates each unit's rows first (`bigquery`); rows as units need not.
        self.per_unit = clause_node is not None and self.unit is not None
        if self.per_unit:
            self.make = bigquery.Make
        self.column_meta = {**joined, **self._column_metadata(table_node)}
        for col in tree.find_all(exp.Column):
            self._column(col)
        where = tree.args.get("where")
        if where is not None:
            table = table.where(self._row_expression(where.this, "WHERE"))
        by = self._group_by()
        outputs = self._outputs(by)
        for clause_node in (tree.args.get("having"), tree.args.get("order")):
            if clause_node is not None:
                self._collect(clause_node)
        keys = self._keys(by, where)
        try:
            grouped = table.group_by(by, keys=keys) if by else None
        except BayesdpError as exc:
            raise self.error(_public(exc), tree.args.get("group")) from None
        options = self._options(clause, epsilon, delta)
        learn = None
        shown: dict[str, str] = {}
        try:
            if self.per_unit:
                query, learn, options["max_rows_per_group"], shown = bigquery.unit_query(
                    table, by, keys, cast(dict[str, bigquery.UnitAggregate], self.aggregates),
                    options.get("max_rows_per_group"))
            else:
                aggregates = cast(dict[str, tables.Aggregate], self.aggregates)
                query = grouped.agg(**aggregates) if grouped else table.agg(**aggregates)
        except bigquery.Refused as exc:
            raise self.error(_public(exc), next(c for c, n in self.names.items() if n == exc.name)) from None
        except BayesdpError as exc:
            culprit = tree if self.per_unit else self._culprit(grouped or table)
            raise self.error(_public(exc), culprit) from None
        order = tree.args.get("order")
        return Translation(
            self.text, query=query, options=options, learn=learn, per_unit=self.per_unit, shown=shown,
            outputs=tuple(outputs), aggregates=dict(self.names), squared=frozenset(self.squared),
            having=tree.args["having"].this if tree.args.get("having") else None,
            order=tuple(order.expressions) if order else (),
            limit=self._count(tree.args.get("limit")),
            offset=self._count(tree.args.get("offset")) or 0, dialect=self.dialect,
            tokens=tuple(self.tokens))

    def _culprit(self, target: Any) -> exp.Expr:
        """The aggregate call the builder refuses (each tried alone, on the error path only)."""
        for call, name in self.names.items():
            try:
                target.agg(**{name: self.aggregates[name]})
            except BayesdpError:
                return call
        return self.tree

    # -- the shape of the query -----------------------------------------------------------------

    def _refuse_constructs(self) -> None:
        tree = self.tree
        for arg, value in tree.args.items():
            if value and arg not in _SELECT_ARGS:
                name = _CONSTRUCTS.get(arg, arg.upper().rstrip("_"))
                node = value[0] if isinstance(value, list) else value
                message = f"{name} is not supported: a release reads one table, row by row"
                if arg == "distinct" and len(self.tokens) > 1:
                    raise SqlError(message, self.text, self.tokens[1].start, self.tokens[1].end + 1)
                raise self.error(message, node)
        if tree.args.get("kind"):
            raise self.error(f"SELECT AS {tree.args['kind']} is not supported", tree)
        for node in tree.walk():
            if node is tree:
                continue
            if isinstance(node, exp.Query | exp.Subquery | exp.Exists):
                raise self.error("a subquery is not supported: it would read private rows outside "
                                 "the release's bounding", node)
            if isinstance(node, exp.Window):
                raise self.error("window functions are not supported: a row's value would depend "
                                 "on other people's rows", node)
        for item in tree.expressions:
            inner = item.this if isinstance(item, exp.Alias) else item
            if isinstance(inner, exp.Star) or (isinstance(inner, exp.Column)
                                               and isinstance(inner.this, exp.Star)):
                raise self.error("SELECT * is not supported: select group keys and aggregates", item)

    def _table(self) -> exp.Table:
        from_ = self.tree.args.get("from_")
        if from_ is None:
            raise self.error("the query needs FROM and one table", self.tree)
        node = from_.this
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier) \
                or node.args.get("db") or node.args.get("catalog"):
            raise self.error("FROM must name one table given in tables= (no table functions, "
                             "subqueries or qualified names)", node)
        alias = node.args.get("alias")
        for owner, allowed in ((from_, _FROM_ARGS), (node, _TABLE_ARGS), (alias, _ALIAS_ARGS)):
            for arg, value in (owner.args.items() if owner is not None else ()):
                if value and arg not in allowed:
                    name = _TABLE_CONSTRUCTS.get(arg, arg.upper().rstrip("_"))
                    culprit = value[0] if isinstance(value, list) else value
                    raise self.error(f"{name} is not supported: a release reads the whole table, "
                                     "as it is now", culprit if isinstance(culprit, exp.Expr) else node)
        if node.name not in self.sources:
            known = ", ".join(repr(n) for n in self.sources) or "none"
            raise self.error(f"table {node.name!r} is not one of the tables given ({known})", node)
        return node

    def _clause(self, node: DifferentialPrivacy | None) -> dict[str, tuple[Any, exp.Expr]]:
        """The OPTIONS of `WITH DIFFERENTIAL_PRIVACY`, each with the node it came from."""
        if node is None:
            return {}
        out: dict[str, tuple[Any, exp.Expr]] = {}
        for item in node.expressions:
            if not isinstance(item, exp.EQ) or not isinstance(item.this, exp.Column | exp.Var):
                raise self.error("OPTIONS takes name = value pairs", item)
            name = item.this.name.lower()
            if name not in _OPTIONS:
                raise self.error(f"option {name!r} is not supported; bayesdp reads {list(_OPTIONS)}",
                                 item.this)
            if name in out:
                raise self.error(f"option {name!r} is given twice", item)
            value = item.expression
            if name == "privacy_unit_column":
                if not isinstance(value, exp.Column):
                    raise self.error("privacy_unit_column names a column", value)
                out[name] = (value.name, value)
            elif name == "noise":
                if not (isinstance(value, exp.Literal) and value.is_string):
                    raise self.error("noise is 'laplace' or 'gaussian'", value)
                out[name] = (value.this, value)
            elif isinstance(value, exp.Null):
                raise self.error(f"{name} = NULL is not supported: bayesdp always bounds "
                                 "contributions, so the guarantee holds", item)
            else:
                out[name] = (self._number(value, name), value)
        return out

    def _unit(self, clause: dict[str, tuple[Any, exp.Expr]]) -> str | None:
        stated = self.table_meta.privacy_unit
        if "privacy_unit_column" in clause:
            unit, node = clause["privacy_unit_column"]
            if stated is not None and not (isinstance(stated, str) and fold(stated) == fold(unit)):
                raise self.error(f"privacy_unit_column {unit!r} differs from the metadata's "
                                 f"privacy unit {stated!r}", node)
            return str(unit)
        if stated is None:
            where = "the query's OPTIONS" if self.tree.args.get("differential_privacy") else "the metadata"
            raise self.error(f"the privacy unit of table {self._table().name!r} is not stated: give "
                             f"it in {where} (privacy_unit_column = ..., or privacy_unit = \"...\" "
                             "or false in [tables.NAME] of the metadata)", self._table())
        return None if stated is False else str(stated)

    def _column(self, node: exp.Column) -> str:
        """The column a reference names (its qualifier, if any, is the table), spelled as in the
        schema: resolved as the engine and the row checker resolve it, without case; a name that
        is no column (an alias) as written."""
        if node.table and node.table.lower() not in self.aliases:
            raise self.error(f"{node.table!r} is not the query's table", node)
        if node.args.get("db") or node.args.get("catalog"):
            raise self.error("a column is named by itself or by table.column", node)
        try:
            return resolve_column(node.name, self.columns, "the query") or node.name
        except BayesdpError as exc:
            raise self.error(_public(exc), node) from None

    def _column_metadata(self, table_node: exp.Table) -> dict[str, ColumnMetadata]:
        """The metadata's columns by the schema's names (the curator may spell them otherwise)."""
        out: dict[str, ColumnMetadata] = {}
        for name, meta in self.table_meta.columns.items():
            try:
                column = resolve_column(name, self.columns, "the metadata") or name
            except BayesdpError as exc:
                raise self.error(_public(exc), table_node) from None
            if column in out:
                raise self.error(f"the metadata describes column {column!r} twice, spelled in two "
                                 "ways: names are compared without case", table_node)
            out[column] = meta
        return out

    def _row_expression(self, node: exp.Expr, role: str) -> RowExpression:
        """`node` checked by `bayesdp.expressions`; refused when a column it reads, as the
        checker resolved it, is the privacy unit."""
        bare = node.copy()
        for col in bare.find_all(exp.Column):
            col.set("table", None)
        try:
            checked = row_expression(cast(exp.Expression, bare), self.columns, role=role)
        except BayesdpError as exc:
            raise self.error(self._as_written(_public(exc)), node) from None
        if self.unit in checked.columns:
            culprit = next(c for c in node.find_all(exp.Column) if self._column(c) == self.unit)
            raise self.error(f"{role} uses the privacy unit {self.unit!r}: the only function "
                             "of the privacy unit allowed is counting it, COUNT(DISTINCT unit)", culprit)
        return checked

    def _group_by(self) -> tuple[str, ...]:
        group = self.tree.args.get("group")
        if group is None:
            return ()
        for arg in ("rollup", "cube", "grouping_sets"):
            if group.args.get(arg):
                raise self.error(f"GROUP BY {arg.upper().replace('_', ' ')} is not supported", group)
        by: list[str] = []
        for item in group.expressions:
            node: exp.Expr = item
            if isinstance(node, exp.Rollup | exp.Cube | exp.GroupingSets):
                raise self.error(f"GROUP BY {node.key.upper().replace('GROUPINGSETS', 'GROUPING SETS')} "
                                 "is not supported", node)
            if isinstance(node, exp.Literal) and not node.is_string:
                items = self.tree.expressions
                position = int(node.this) if node.this.isdigit() else 0
                if not 1 <= position <= len(items):
                    raise self.error(f"GROUP BY {node.this} is not a position in the SELECT list", node)
                target = items[position - 1]
                node = target.this if isinstance(target, exp.Alias) else target
            if isinstance(node, exp.Column) and not node.table and self._column(node) not in self.columns:
                node = self._aliased(node)
            if not isinstance(node, exp.Column):
                raise self.error("GROUP BY takes columns of the table, not expressions", node)
            name = self._column(node)
            if name == self.unit:
                raise self.error("GROUP BY the privacy unit would release each person's values", node)
            if name not in self.columns:
                raise self.error(f"{name!r} is not a column of the table", node)
            by.append(name)
        return tuple(by)

    def _aliased(self, node: exp.Column) -> exp.Expr:
        """The SELECT item a GROUP BY name refers to when it is an alias, not a column."""
        for item in self.tree.expressions:
            if isinstance(item, exp.Alias) and fold(item.alias) == fold(node.name):
                return cast(exp.Expr, item.this)
        return node

    def _outputs(self, by: tuple[str, ...]) -> list[Output]:
        outputs = []
        for item in self.tree.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            alias = item.alias if isinstance(item, exp.Alias) else None
            if _aggregate_calls(node):
                name = alias or self.call(node)
                self._collect(node, name if _is_call(node) else None)
                for col in _outside_calls(node):
                    if self._column(col) not in by:
                        raise self.error(f"{col.name!r} is neither aggregated nor a group key", col)
                outputs.append(Output(name, node=node))
            elif isinstance(node, exp.Column) and self._column(node) in by:
                outputs.append(Output(alias or node.name, node=node, key=self._column(node)))
            elif isinstance(node, exp.Column):
                raise self.error(f"{node.name!r} is selected but is neither aggregated nor a group "
                                 "key (GROUP BY it, or aggregate it)", node)
            else:
                raise self.error("a SELECT item must be a group key or contain an aggregate", node)
        names = [o.name for o in outputs]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise self.error(f"the column name {name!r} is used twice: give distinct aliases",
                                 self.tree.expressions[i])
        return outputs

    def call(self, node: exp.Expr) -> str:
        return call_sql(node, self.dialect)

    def written(self, node: exp.Expr) -> str:
        """The query's own text of `node` (messages quote it: sqlglot renames functions, as
        STRING_AGG to GROUP_CONCAT), or its SQL when it has no position. An aggregate with named
        arguments is quoted whole."""
        if isinstance(node.parent, NamedArguments):
            node = node.parent
        start, end = span(node, self.tokens)
        if start is None or end is None:
            return self.call(node)
        for token in self.tokens:  # the parentheses the span leaves open close after it
            if token.start >= end and token.token_type == TokenType.R_PAREN \
                    and self.text.count("(", start, end) > self.text.count(")", start, end):
                end = token.end + 1
        return self.text[start:end]

    def _written_name(self, node: exp.Expr) -> str:
        """The function name as the query spells it."""
        start, _ = span(node, self.tokens)
        token = next((t for t in self.tokens if t.start == start), None)
        return token.text if token is not None else node.sql_name() if isinstance(node, exp.Func) \
            else node.key.upper()

    def _as_written(self, message: str) -> str:
        """The checker's message with each function it names (`function rand at line L, column
        C`) spelled as the query wrote it there (random)."""
        def own(match: re.Match[str]) -> str:
            line, col = int(match[2]), int(match[3])
            token = next((t for t in self.tokens if t.line == line and t.col == col), None)
            return f"function {token.text if token is not None else match[1]}{match[0][len(match[1]) + 9:]}"

        return re.sub(r"function (\S+) at line (\d+), column (\d+)", own, message)

    # -- aggregates -----------------------------------------------------------------------------

    def _collect(self, node: exp.Expr, name: str | None = None) -> None:
        for call in _aggregate_calls(node):
            if call in self.names:
                label = self.names[call]
                if name is not None and label in self.auto and call not in self.squared \
                        and name not in self.aggregates:
                    # first met inside an expression, now selected under an alias: take the alias
                    self.aggregates = {name if k == label else k: a for k, a in self.aggregates.items()}
                    self.names[call] = name
                continue
            agg, squared = self._aggregate(call)
            if name is not None and not squared:
                label = name
            else:
                label = self.call(call)
                while label in self.aggregates:
                    label += "'"
                self.auto.add(label)
            self.aggregates[label] = agg
            self.names[call] = label
            if squared:
                self.squared.add(call)

    def _aggregate(self, call: exp.Expr) -> tuple[Built, bool]:
        named: dict[str, exp.Expr] = {}
        agg = call
        if isinstance(call, NamedArguments):
            agg = call.this
            for kw in call.expressions:
                name = kw.this.name.lower()
                if name not in _BOUNDS:
                    raise self.error(f"named argument {name!r} is not supported; use one of "
                                     f"{list(_BOUNDS)}", kw)
                if named:
                    raise self.error("give one contribution bound per aggregate", kw)
                named[name] = kw.expression
        if isinstance(agg, exp.Filter):
            raise self.error("an aggregate FILTER clause is not supported: use WHERE", agg)
        if isinstance(agg, exp.WithinGroup):
            return self._within_group(agg, named), False
        if not isinstance(agg, _SUPPORTED):
            name = self._written_name(agg)
            raise self.error(f"{name} is not a supported private aggregate (supported: COUNT, SUM, "
                             "AVG, STDDEV, VARIANCE, MEDIAN, PERCENTILE_CONT, QUANTILE_CONT)", agg)
        for inner in agg.iter_expressions():
            if _aggregate_calls(inner):
                raise self.error("an aggregate inside an aggregate is not supported", inner)
        try:
            if isinstance(agg, exp.Count):
                return self._count_aggregate(agg, named), False
            column, bounds = self._argument(agg, agg.this, named)
            if isinstance(agg, exp.Sum):
                return self.make.sum(column, bounds), False
            if isinstance(agg, exp.Avg):
                return self.make.mean(column, bounds), False
            if isinstance(agg, (*_STD, *_VARIANCE)):
                return self.make.std(column, bounds), isinstance(agg, _VARIANCE)
            if isinstance(agg, exp.Median):
                return self.make.quantile(column, 0.5, bounds), False
            q = agg.args.get("expression")
            if q is None:
                raise self.error("PERCENTILE_CONT takes the column and the percentile", agg)
            return self.make.quantile(column, self._number(q, "percentile"), bounds), False
        except SqlError:
            raise
        except BayesdpError as exc:
            raise self.error(_public(exc), call) from None

    def _within_group(self, node: exp.WithinGroup, named: dict[str, exp.Expr]) -> Built:
        inner, order = node.this, node.expression
        if not isinstance(inner, exp.PercentileCont) or not isinstance(order, exp.Order) \
                or len(order.expressions) != 1 or order.expressions[0].args.get("desc"):
            raise self.error("WITHIN GROUP is supported as PERCENTILE_CONT(q) WITHIN GROUP "
                             "(ORDER BY column)", node)
        column, bounds = self._argument(node, order.expressions[0].this, named)
        try:
            built: Built = self.make.quantile(column, self._number(inner.this, "percentile"), bounds)
            return built
        except BayesdpError as exc:
            raise self.error(_public(exc), node) from None

    def _count_aggregate(self, agg: exp.Count, named: dict[str, exp.Expr]) -> Built:
        if self.per_unit:
            return self._unit_count(agg, named)
        arg = agg.this
        if "contribution_bounds_per_row" in named:
            raise self.error("COUNT takes contribution_bounds_per_group => (0, rows per unit)",
                             named["contribution_bounds_per_row"])
        if "contribution_bounds_per_group" in named:
            lo, hi = self._bounds(named["contribution_bounds_per_group"])
            if lo != 0 or hi != int(hi) or hi < 1:
                raise self.error("COUNT's contribution_bounds_per_group must be (0, k) with k a "
                                 "positive integer: each unit counts at most k rows per group",
                                 named["contribution_bounds_per_group"])
            self.max_rows.append((int(hi), named["contribution_bounds_per_group"]))
        if isinstance(arg, exp.Distinct):
            cols = arg.expressions
            if len(cols) == 1 and isinstance(cols[0], exp.Column) and self.unit is not None \
                    and self._column(cols[0]) == self.unit:
                if named:
                    raise self.error("COUNT(DISTINCT unit) takes no contribution bounds: each "
                                     "unit counts once", agg)
                return tables.count_units()
            raise self.error("COUNT(DISTINCT ...) is supported for the privacy unit only "
                             "(the number of people)", arg)
        if arg is None or isinstance(arg, exp.Star):
            return tables.count()
        if isinstance(arg, exp.Column) and self.unit is not None and self._column(arg) == self.unit:
            return tables.count()  # the unit is never null in a release (the builder checks)
        # COUNT(x) counts the rows where x is not null: the sum of a 0/1 indicator.
        present = exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=arg.copy(), expression=exp.Null())),
                                       true=exp.Literal.number(1))], default=exp.Literal.number(0))
        return tables.count_where(self._row_expression(present, f"the argument of {self.written(agg)}").text)

    def _unit_count(self, agg: exp.Count, named: dict[str, exp.Expr]) -> bigquery.UnitAggregate:
        """COUNT in the BigQuery clause: each unit's count (of rows, or of non-null values) in the
        group, clamped to contribution_bounds_per_group (learnt when absent)."""
        arg = agg.this
        if "contribution_bounds_per_row" in named:
            raise self.error("COUNT takes contribution_bounds_per_group => (low, high): the bounds of "
                             "each unit's count in a group", named["contribution_bounds_per_row"])
        bounds = self._bounds(named["contribution_bounds_per_group"]) if named else None
        if isinstance(arg, exp.Distinct):
            cols = arg.expressions
            if len(cols) == 1 and isinstance(cols[0], exp.Column) and self._column(cols[0]) == self.unit:
                if named:
                    raise self.error("COUNT(DISTINCT unit) takes no contribution bounds: each "
                                     "unit counts once", agg)
                return bigquery.Make.count_units()
            raise self.error("COUNT(DISTINCT ...) is supported for the privacy unit only "
                             "(the number of people)", arg)
        if arg is None or isinstance(arg, exp.Star) or \
                (isinstance(arg, exp.Column) and self._column(arg) == self.unit):
            return bigquery.Make.count(None, bounds)
        return bigquery.Make.count(self._row_expression(arg, f"the argument of {self.written(agg)}").text,
                                   bounds)

    def _argument(self, agg: exp.Expr, arg: exp.Expr | None, named: dict[str, exp.Expr]
                  ) -> tuple[str, tuple[float, float]]:
        if isinstance(arg, exp.Distinct):
            raise self.error("DISTINCT inside an aggregate is not supported (only COUNT(DISTINCT unit))", arg)
        if arg is None:
            raise self.error(f"{self.written(agg)} needs a column or a row expression", agg)
        if isinstance(arg, exp.Literal) and arg.is_string:
            quoted = f"`{arg.this}`" if self.dialect == "bigquery" else f'"{arg.this}"'
            where = "in BigQuery's SQL quotes, single or double, make" if self.dialect == "bigquery" \
                else "single quotes make"
            raise self.error(f"{self.written(arg)} is a string, not a column ({where} text): to name "
                             f"a column, quote it as {quoted}", arg)
        if not isinstance(arg, exp.Column):
            return self._expression_argument(agg, arg, named)
        name = self._column(arg)
        if name == self.unit:
            raise self.error(f"{self.written(agg)} is a function of the privacy unit: the only one "
                             "allowed is counting it, COUNT(DISTINCT unit)", arg)
        if named:
            return name, self._bounds(next(iter(named.values())))
        meta = self.column_meta.get(name)
        if self.per_unit and (isinstance(agg, exp.Sum) or meta is None or meta.bounds is None):
            return name, None  # type: ignore[return-value]  # learnt (`bigquery`): a row's bounds do not bound a unit's sum
        if meta is None or meta.bounds is None:
            raise self.error(f"{self.written(agg)} has no bounds: give contribution_bounds_per_group "
                             f"=> (low, high) or [tables.NAME.columns.{name}] bounds = [low, high] "
                             "in the metadata (public limits, not read from the data)", agg)
        return name, meta.bounds

    def _expression_argument(self, agg: exp.Expr, arg: exp.Expr, named: dict[str, exp.Expr]
                             ) -> tuple[str, tuple[float, float]]:
        """A row expression as an aggregate's value (checked by `bayesdp.expressions`; the builder
        checks its text again), with bounds from the query: the named contribution bounds, else
        [0, 1] for a condition, else the range of a CASE whose results are all number literals."""
        checked = self._row_expression(arg, f"the argument of {self.written(agg)}")
        if named:
            return checked.text, self._bounds(next(iter(named.values())))
        if self.per_unit and isinstance(agg, exp.Sum):
            return checked.text, None  # type: ignore[return-value]  # learnt (`bigquery`)
        if isinstance(arg, exp.Predicate | exp.Connector | exp.Not | exp.Between | exp.In | exp.Is):
            return checked.text, (0, 1)
        if isinstance(arg, exp.Case):
            results = [i.args.get("true") for i in arg.args.get("ifs", [])] + [arg.args.get("default")]
            numbers = [self._number(r, "a CASE result") for r in results
                       if r is not None and not isinstance(r, exp.Null)]
            lo, hi = min([*numbers, 0]), max([*numbers, 0])
            return checked.text, (lo, hi if hi > lo else lo + 1)
        if self.per_unit:
            return checked.text, None  # type: ignore[return-value]  # learnt (`bigquery`)
        raise self.error(f"{self.written(agg)} aggregates an expression, which has no bounds: give "
                         "contribution_bounds_per_group => (low, high), or write it as a condition or "
                         "a CASE whose results are numbers", arg)

    def _bounds(self, node: exp.Expr) -> tuple[float, float]:
        if not isinstance(node, exp.Tuple) or len(node.expressions) != 2:
            raise self.error("contribution bounds are a pair (low, high) of numbers", node)
        lo, hi = (self._number(n, "bound") for n in node.expressions)
        return lo, hi

    def _number(self, node: exp.Expr, what: str) -> float:
        sign = 1.0
        while isinstance(node, exp.Neg | exp.Paren):
            if isinstance(node, exp.Neg):
                sign = -sign
            node = node.this
        if isinstance(node, exp.Literal) and not node.is_string:
            value = float(node.this)
            return sign * (int(value) if value.is_integer() and "e" not in node.this.lower() else value)
        raise self.error(f"{what} must be a number", node)

    # -- keys, options --------------------------------------------------------------------------

    def _keys(self, by: tuple[str, ...], where: exp.Where | None) -> list[tuple[Any, ...]] | None:
        """Public keys: every group column's keys from the metadata, or from a top-level
        `WHERE column IN (...)` on a column the metadata declares public."""
        if not by:
            return None
        listed: dict[str, tuple[Any, ...]] = {}
        for conjunct in _conjuncts(where.this) if where is not None else []:
            if isinstance(conjunct, exp.In) and isinstance(conjunct.this, exp.Column) \
                    and not conjunct.args.get("query") and not conjunct.args.get("unnest"):
                col = self._column(conjunct.this)
                meta = self.column_meta.get(col)
                if meta is not None and meta.public and all(isinstance(v, exp.Literal | exp.Neg)
                                                            for v in conjunct.expressions):
                    listed[col] = tuple(self._literal(v) for v in conjunct.expressions)
        domains = []
        for col in by:
            meta = self.column_meta.get(col)
            if col in listed:
                domains.append(listed[col])
            elif meta is not None and meta.keys is not None:
                domains.append(meta.keys)
            else:
                return None
        return [tuple(k) for k in itertools.product(*domains)]

    def _literal(self, node: exp.Expr) -> Any:
        if isinstance(node, exp.Literal) and node.is_string:
            return node.this
        return self._number(node, "a key")

    def _options(self, clause: dict[str, tuple[Any, exp.Expr]], epsilon: float | None,
                 delta: float | None) -> dict[str, Any]:
        stated = self.table_meta.options
        out: dict[str, Any] = {k: stated[k] for k in ("epsilon", "delta", "max_groups_per_unit",
                                                      "max_rows_per_group", "alpha", "noise") if k in stated}
        renamed = {"max_groups_contributed": "max_groups_per_unit"}
        for name, (value, _) in clause.items():
            if name != "privacy_unit_column":
                out[renamed.get(name, name)] = value
        if clause and "max_groups_per_unit" not in out:
            out["max_groups_per_unit"] = 1  # BigQuery's documented default
        for name, given in (("epsilon", epsilon), ("delta", delta)):
            if given is None:
                continue
            if name in clause and clause[name][0] != given:
                raise self.error(f"{name}={given} is given as a parameter and {name} = "
                                 f"{clause[name][0]} in the query: give it once", clause[name][1])
            out[name] = given
        if "epsilon" not in out:
            raise SqlError("no epsilon: give epsilon= (or --epsilon), epsilon in the query's OPTIONS, "
                           "or epsilon in the metadata")
        rows = {k for k, _ in self.max_rows}
        if len(rows) > 1:
            raise self.error("COUNT contribution bounds differ: one number of rows per unit and "
                             "group applies to the whole release", self.max_rows[1][1])
        if rows:
            k = rows.pop()
            if out.get("max_rows_per_group", k) != k:
                raise self.error(f"COUNT's contribution bound {k} differs from max_rows_per_group = "
                                 f"{out['max_rows_per_group']}", self.max_rows[0][1])
            out["max_rows_per_group"] = k
        return out

    def _count(self, node: exp.Expr | None) -> int | None:
        if node is None:
            return None
        value = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
        number = self._number(value, "LIMIT and OFFSET") if value is not None else -1
        if number < 0 or number != int(number):
            raise self.error("LIMIT and OFFSET take a non-negative integer", value or node)
        return int(number)


def _public(exc: BaseException) -> str:
    return str(getattr(exc, "public_message", None) or exc)


def _is_call(node: exp.Expr) -> bool:
    """An aggregate call (with its named arguments, FILTER or WITHIN GROUP around it)."""
    return isinstance(node, exp.AggFunc | NamedArguments | exp.WithinGroup | exp.Filter)


def _aggregate_calls(node: exp.Expr) -> list[exp.Expr]:
    """The outermost aggregate calls in `node`."""
    if _is_call(node):
        return [node]
    return [c for child in node.iter_expressions() for c in _aggregate_calls(child)]


def _outside_calls(node: exp.Expr) -> list[exp.Column]:
    """The columns of `node` outside its aggregate calls."""
    if isinstance(node, exp.Column):
        return [node]
    if _is_call(node):
        return []
    return [c for child in node.iter_expressions() for c in _outside_calls(child)]


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


__all__ = ["Output", "Translation", "parse", "span", "translate"]
