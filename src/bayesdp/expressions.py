"""Row-local SQL expressions: the one checker every user expression passes before an engine sees it.

`row_expression(text, columns)` parses the text with sqlglot (DuckDB syntax) and accepts only an
expression whose value on a row depends on that row alone: literals, the table's own columns,
arithmetic, comparisons, boolean logic, BETWEEN, IN and LIKE with literals, IS [NOT] NULL,
IS [NOT] DISTINCT FROM, CASE, casts to scalar types, COALESCE/NULLIF and the deterministic scalar
functions in `FUNCTIONS`. Everything else is refused with an `InvalidParameter` naming the
construct: statements and `;`, subqueries and EXISTS, table functions (read_csv, query, ...),
aggregates, window functions, `*`, parameters, lambdas, element and field access, other tables'
columns, and every function not on the list (random, now, getenv, current_setting, nextval, ...).

Engines run `RowExpression.sql(dialect)`, rendered from the checked tree (identifiers quoted,
comments dropped), never the user's text. A name is resolved here once, as DuckDB and Spark
resolve it (quoted or not, without case: `resolve_column`; a name that matches several columns
is refused), and rendered in the schema's spelling; `RowExpression.columns` holds the columns
so resolved, for checks on what an expression reads (the privacy unit, the public columns).

What is promised (and what is not):

- The expression reads only the current row of the table it filters: no other table, file,
  setting, sequence or random state, and no other row (no aggregate or window).
- Errors: no outcome an analyst can observe (status, error kind, message, warnings, which
  groups appear, the number of rows) may depend on the data except through DP values, or a
  row on which the expression would raise tells the analyst one bit about that row. So an
  expression never fails on a value; it gives a defined value instead. Casts are rendered as
  TRY_CAST (a failed cast is NULL). On DuckDB the whole expression is wrapped in `TRY(...)`, so
  any error a row's values can cause (integer overflow, an implicit cast of bad text, an invalid
  date) makes the expression NULL on that row; `/` and `%` by zero are NULL (as Spark has them);
  ln(0) is -inf, ln or sqrt of a negative NaN, exp(1000) and power overflow +inf. On Spark
  arithmetic is rendered with try_add, try_subtract, try_multiply and try_divide, `%` and abs
  guarded, so overflow and division by zero give NULL under ANSI mode too; ln and log of 0 or
  of a negative are NULL; the INT arguments of substring, left and right are TRY_CAST to INT;
  floor and ceil beyond BIGINT's range are the value itself. Then, in an aggregate, NaN is
  NULL (left out, as NULLs are) and +inf or -inf is clipped into the bounds like any value
  (their exact counts go to the curator only: `Release.curator_notes`, CuratorWarning).
  On Spark the implicit casts ANSI mode applies when text meets a number or a date function
  (`text_col = 1`, `month(text_col)`), which raise on a malformed value, are refused from the
  schema before anything is spent (the Spark engine's `check`); write an explicit CAST
  (rendered as TRY_CAST) there. Integer results beyond BIGINT are NULL on Spark; DuckDB may
  compute an expression with a literal (`i * 2`) on a wider type and return the exact value.
- Time: DuckDB evaluates a chunk of rows in which some row raises again row by row, which is
  much slower; the time of a query can show that such a row exists. Casts, `/` and `%` are
  rendered so that they never raise, so only overflow and implicit casts of text take that path.
- Errors a constant causes (a bad literal, an unknown date part) do not depend on the data and
  are reported as they are.
- Cost: `RowExpression.cost` bounds the work per row from the expression's structure alone
  (public), in units of one scalar operation or one pass over a string as long as the longest
  value of the columns read (`_Cost`). Strings can grow only by a bounded factor: an expression
  whose string may become more than `MAX_STRING_GROWTH` times as long as the columns it reads,
  or longer than `MAX_STRING_CHARS` characters of literals (nested `replace`, repeated `||`),
  is refused. CASE counts every branch, so the bound holds whichever branch a row takes. The
  service pads each request to a deadline computed from this bound (`bayesdp.serve.timing`).
- Not promised: the time (see above) or memory an expression takes outside that service, and
  anything about values a filter keeps: a filter is public, so choose it before looking at the
  data, and each release spends its own budget.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError
from sqlglot.tokens import TokenType  # type: ignore[attr-defined]

from bayesdp.errors import InvalidParameter, invalid

Dialect = Literal["duckdb", "spark"]

MAX_LENGTH = 10_000  # characters of expression text; longer input is refused before parsing
MAX_STRING_GROWTH = 16  # a string built per row: at most this many times the columns' length ...
MAX_STRING_CHARS = 4_096  # ... plus at most this many characters (from literals and numbers)

# Operators and structure whose children are checked like any other node.
_STRUCTURE: frozenset[type[exp.Expression]] = frozenset({
    exp.Paren, exp.Neg, exp.Not, exp.And, exp.Or,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.DPipe,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ,
    exp.Between, exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Null, exp.Boolean,
    exp.Try,  # DuckDB's TRY(x), as in a rendered expression; dropped by _normalize
})

# The deterministic scalar functions, by sqlglot node, with the name users write. Each has the
# same meaning in DuckDB and Spark (log with one argument is base 10 in both, see _normalize).
FUNCTIONS: dict[type[exp.Expression], str] = {
    exp.Abs: "abs", exp.Round: "round", exp.Floor: "floor", exp.Ceil: "ceil", exp.Sign: "sign",
    exp.Sqrt: "sqrt", exp.Cbrt: "cbrt", exp.Ln: "ln", exp.Log: "log", exp.Exp: "exp",
    exp.Pow: "power", exp.IsNan: "isnan", exp.Least: "least", exp.Greatest: "greatest",
    exp.Lower: "lower", exp.Upper: "upper", exp.Length: "length", exp.Trim: "trim",
    exp.Substring: "substring", exp.StartsWith: "starts_with", exp.EndsWith: "ends_with",
    exp.Contains: "contains", exp.Replace: "replace", exp.Left: "left", exp.Right: "right",
    exp.Year: "year", exp.Quarter: "quarter", exp.Month: "month", exp.Day: "day",
    exp.Hour: "hour", exp.Minute: "minute", exp.Extract: "extract / date_part",
    exp.TimestampTrunc: "date_trunc", exp.DateTrunc: "date_trunc",
}

# Date parts whose numbering agrees in DuckDB and Spark (day of week and seconds do not).
DATE_PARTS = frozenset({"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE"})
TRUNC_UNITS = frozenset({"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"})
INTERVAL_UNITS = frozenset({"YEAR", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"})

_T = exp.DataType.Type
CAST_TYPES = frozenset({
    _T.BOOLEAN, _T.TINYINT, _T.SMALLINT, _T.INT, _T.BIGINT, _T.FLOAT, _T.DOUBLE, _T.DECIMAL,
    _T.VARCHAR, _T.TEXT, _T.CHAR, _T.DATE, _T.TIMESTAMP, _T.TIMESTAMPNTZ,
})

# Tokens that already read as a name or a literal; any other token spelled like a column may be one.
_NAME_TOKENS = frozenset({TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER})

_TABLE_FUNCTIONS = ("read_", "query", "glob", "parquet_", "sniff_", "iceberg_", "delta_scan",
                    "range", "generate_series", "unnest", "duckdb_", "pragma_", "sql_")


def fold(name: str) -> str:
    """`name` without case, as broadly as DuckDB (ASCII letters) or Spark (any letter, as Java's
    equalsIgnoreCase) ignores it: two names either engine may confuse fold to the same text."""
    return name.upper().casefold()


def resolve_column(name: str, columns: Collection[str], role: str) -> str | None:
    """The column of `columns` that the identifier `name` reads, spelled as in the schema: DuckDB
    and Spark resolve identifiers, quoted or not, without case. None when no column has that
    name; refused when several differ only in case (the engines may pick either, or fail);
    `role` names the name in that refusal."""
    return _resolve(name, _by_fold(columns), role)


def _by_fold(columns: Collection[str]) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for c in columns:
        index.setdefault(fold(c), []).append(c)
    return index


def _resolve(name: str, index: dict[str, list[str]], role: str) -> str | None:
    matches = index.get(fold(name), [])
    if len(matches) > 1:
        raise InvalidParameter(f"{role}: {name!r} names {len(matches)} columns that differ only in case "
                               f"({', '.join(repr(c) for c in matches)}): DuckDB and Spark ignore "
                               "case in names, so rename one of them")
    return matches[0] if matches else None


def _named(node: exp.Expression) -> str:
    """What the refused construct is, in words an analyst recognizes."""
    if isinstance(node, exp.Window):
        return "window function"
    if isinstance(node, exp.Exists):
        return "EXISTS subquery"
    if isinstance(node, exp.Subquery | exp.Query | exp.Any | exp.All):
        return "subquery"
    if isinstance(node, exp.ReadCSV | exp.ReadParquet | exp.Unnest | exp.Explode):
        return f"table function {node.sql_name().lower()}"
    if isinstance(node, exp.AggFunc):
        return f"aggregate {node.sql_name().lower()}"
    if isinstance(node, exp.Anonymous):
        name = str(node.name).lower()
        kind = "table function" if name.startswith(_TABLE_FUNCTIONS) else "function"
        return f"{kind} {name}"
    if isinstance(node, exp.Star):
        return "*"
    if isinstance(node, exp.Placeholder | exp.Parameter | exp.SessionParameter):
        return "parameter placeholder"
    if isinstance(node, exp.Lambda):
        return "lambda"
    if isinstance(node, exp.Bracket):
        return "element access [...]"
    if isinstance(node, exp.Dot):
        return "field access"
    if isinstance(node, exp.Alias):
        return "alias (AS)"
    if isinstance(node, exp.ByteString | exp.RawString | exp.HexString | exp.National |
                  exp.UnicodeString):
        return "escape-string literal"
    if isinstance(node, exp.Func):
        return f"function {node.sql_name().lower()}"
    if isinstance(node, exp.Command | exp.DDL | exp.DML):
        return "statement"
    return f"{node.key.upper()} expression"


def _where(node: exp.Expression) -> str:
    """' at line L, column C' from the first position sqlglot recorded in the node's subtree."""
    for n in node.walk():
        meta = n.meta
        if "line" in meta and "col" in meta:
            return f" at line {meta['line']}, column {meta['col']}"
    return ""


@dataclass(frozen=True)
class RowExpression:
    """A checked row-local expression: `text` its canonical DuckDB form, `columns` the columns it
    reads, spelled as in the schema (`resolve_column`); `sql(dialect)` what an engine runs."""

    text: str
    columns: frozenset[str]
    tree: exp.Expression = field(repr=False, compare=False)
    cost: float = field(default=1.0, compare=False)  # per-row work bound (see the module docstring)

    def sql(self, dialect: Dialect = "duckdb") -> str:
        """The checked tree as SQL for `dialect`, in parentheses, with errors made NULL (see the
        module docstring)."""
        if dialect == "duckdb":
            return f"(TRY({_generate(_bottom_up(self.tree.copy(), _guard_zero), 'duckdb')}))"
        if dialect == "spark":
            return f"({_generate(_bottom_up(self.tree.copy(), _spark_total), 'spark')})"
        raise invalid("dialect", dialect, "'duckdb' or 'spark'")

    def __str__(self) -> str:
        return self.text


def _generate(tree: exp.Expression, dialect: str) -> str:
    return tree.sql(dialect=dialect, identify=True, comments=False, unsupported_level=ErrorLevel.RAISE)


def _bottom_up(node: exp.Expression, fun: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """Apply `fun` to every node, children first (sqlglot's transform skips a replaced subtree)."""
    for child in list(node.iter_expressions()):
        key, index = child.arg_key, child.index  # read first: `fun` may re-parent the child
        new = _bottom_up(child, fun)
        if new is not child and key is not None:
            node.set(key, new, index=index)
    return fun(node)


def _try(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _guard_zero(node: exp.Expression) -> exp.Expression:
    """x % 0 and x / 0 are NULL in both engines: DuckDB raises on % 0 (TRY would catch it, but
    row by row: slowly) and gives inf for / 0 where Spark gives NULL."""
    if not isinstance(node, exp.Mod | exp.Div):
        return node
    zero = exp.EQ(this=node.expression.copy(), expression=exp.Literal.number(0))
    guard = node.parent
    guarded = isinstance(guard, exp.Case) and guard.args.get("default") is node and \
        [i.this for i in guard.args.get("ifs", [])] == [zero]
    if guarded:  # a rendered expression checked again
        return node
    return exp.Case(ifs=[exp.If(this=zero, true=exp.Null())], default=node)


# Spark reads these arguments as INT and raises on a larger value: each is TRY_CAST to INT.
_SPARK_INT_ARGS: dict[type[exp.Expression], tuple[str, ...]] = {
    exp.Substring: ("start", "length"), exp.Left: ("expression",), exp.Right: ("expression",)}


def _spark_total(node: exp.Expression) -> exp.Expression:
    """Spark's ANSI mode raises on overflow and division by zero: use its NULL-returning forms.
    floor and ceil of a DOUBLE are a BIGINT in Spark (a DECIMAL with decimals) and raise beyond
    its range: beyond 9.2e18 (1e15 with decimals, or decimals outside [-15, 15]) they are the
    value itself, as a DOUBLE is there already whole in DuckDB (NaN sorts above every number in
    Spark, so it stays NaN)."""
    for key in _SPARK_INT_ARGS.get(type(node), ()):
        arg = node.args.get(key)
        if arg is not None:
            node.set(key, exp.TryCast(this=arg, to=exp.DataType.build("INT"), safe=True))
    if isinstance(node, exp.Floor | exp.Ceil):
        decimals = node.args.get("decimals")
        fits = _between(node.this, 9.2e18 if decimals is None else 1e15)
        if decimals is not None:
            fits = exp.And(this=fits, expression=_between(decimals, 15))
        return exp.Case(ifs=[exp.If(this=fits, true=node)], default=node.this.copy())
    binary: dict[type[exp.Expression], str] = {
        exp.Add: "try_add", exp.Sub: "try_subtract", exp.Mul: "try_multiply", exp.Div: "try_divide"}
    if type(node) in binary:
        return _try(binary[type(node)], node.this, node.expression)
    if isinstance(node, exp.Mod):  # try_mod needs Spark 4
        return _guard_zero(node)
    if isinstance(node, exp.Neg) and not isinstance(node.this, exp.Literal):
        return _try("try_subtract", exp.Literal.number(0), node.this)
    if isinstance(node, exp.Abs):
        neg = exp.LT(this=node.this.copy(), expression=exp.Literal.number(0))
        return exp.Case(ifs=[exp.If(this=neg, true=_try("try_subtract", exp.Literal.number(0),
                                                             node.this.copy()))],
                        default=node.this)
    return node


def _between(x: exp.Expression, limit: float) -> exp.Expression:
    return exp.Between(this=x.copy(), low=exp.Literal.number(-limit), high=exp.Literal.number(limit))


def row_expression(source: str | exp.Expression | RowExpression, columns: Collection[str], *,
                   role: str = "expression") -> RowExpression:
    """Check that `source` (DuckDB SQL text or a sqlglot node) is a row-local expression over
    `columns`; `role` names it in errors (e.g. "condition", "holdout query line 3")."""
    cols = list(columns)
    if isinstance(source, RowExpression):
        tree = source.tree.copy()
    elif isinstance(source, exp.Expression):
        tree = source.copy()
    elif isinstance(source, str):
        tree = _parse(source, role, cols)
    else:
        raise invalid(role, source, "a SQL expression (text) over the table's columns")
    try:
        checker = _Checker(cols, role)
        checker.check(tree)
        cost = _Cost(role).total(tree)
        tree = _bottom_up(tree, _normalize)
        while isinstance(tree, exp.Paren):
            tree = tree.this
        text = _generate(tree, "duckdb")
    except RecursionError:
        raise InvalidParameter(f"{role}: the expression is nested too deeply") from None
    except SqlglotError as exc:
        raise InvalidParameter(f"{role}: cannot render the expression: {exc}") from None
    return RowExpression(text, frozenset(checker.used), tree, cost)


def _parse(text: str, role: str, columns: Collection[str] = ()) -> exp.Expression:
    if not text.strip():
        raise invalid(role, text, "a non-empty SQL expression over the table's columns")
    if len(text) > MAX_LENGTH:
        raise invalid(role, f"{text[:40]}...", f"an expression of at most {MAX_LENGTH:,} characters")
    try:
        dialect = sqlglot.Dialect.get_or_raise("duckdb")
        tokens = dialect.tokenize(text)
        semicolon = next((t for t in tokens if t.token_type == TokenType.SEMICOLON), None)
        if semicolon is not None:
            raise InvalidParameter(f"{role}: ';' at line {semicolon.line}, column {semicolon.col} is "
                                   "not allowed: give one expression, not statements")
        try:
            trees = dialect.parser().parse(tokens, text)
        except SqlglotError:
            # A column named like a keyword (`union = 'yes'`): read such words as names and try
            # once more; the tree is checked as any other, and a second failure reports the first.
            names = {c.lower() for c in columns}
            renamed = [t for t in tokens if t.token_type not in _NAME_TOKENS and t.text.lower() in names]
            if not renamed:
                raise
            for t in renamed:
                t.token_type = TokenType.VAR
            trees = dialect.parser().parse(tokens, text)
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidParameter(f"{role}: cannot parse {text!r} as a SQL expression: {first}") from None
    except RecursionError:
        raise InvalidParameter(f"{role}: the expression is nested too deeply") from None
    tree = trees[0] if len(trees) == 1 else None
    if not isinstance(tree, exp.Expression):
        raise invalid(role, text, "exactly one SQL expression")
    return tree


def _normalize(node: exp.Expression) -> exp.Expression:
    """Casts become TRY_CAST (a bad value gives NULL, not an error that tells about the row);
    log(x) becomes log(10, x) (DuckDB's meaning; sqlglot would render Spark's natural log);
    date_part('unit', x) becomes EXTRACT(unit FROM x); TRY(x) becomes x, so that a rendered
    expression checks again to the same tree."""
    if type(node) is exp.Cast:  # safe=True: Spark's generator writes CAST for an unsafe TryCast
        return exp.TryCast(this=node.this, to=node.args["to"], safe=True)
    if type(node) is exp.Log and node.expression is None:
        return exp.Log(this=exp.Literal.number(10), expression=node.this)
    if isinstance(node, exp.Try):  # the DuckDB rendering wraps the whole expression in TRY again
        inner: exp.Expression = node.this
        return inner
    _parenthesize(node)
    return _date_part(node) or node


def _is_operator(node: exp.Expression) -> bool:
    return isinstance(node, exp.Binary | exp.Unary | exp.Between | exp.In) and not isinstance(node, exp.Paren)


def _parenthesize(node: exp.Expression) -> None:
    """Operands that are operators go in parentheses, so that the text an engine parses has the
    checked tree's structure whatever its precedence rules (`a LIKE 'x' LIKE 'y'` does not parse
    in DuckDB; `(a LIKE 'x') LIKE 'y'` does)."""
    if not _is_operator(node) or isinstance(node, exp.Escape):
        return
    for key in ("this", "expression", "low", "high"):
        child = node.args.get(key)
        if isinstance(child, exp.Expression) and _is_operator(child):
            node.set(key, exp.Paren(this=child))


class _Checker:
    def __init__(self, columns: list[str], role: str) -> None:
        self.columns, self.index = columns, _by_fold(columns)
        self.role = role
        self.used: set[str] = set()
        self.special: dict[type[exp.Expression], Callable[[exp.Expression], None]] = {
            exp.Column: self._column, exp.Literal: self._literal, exp.Cast: self._cast,
            exp.TryCast: self._cast, exp.In: self._in, exp.Like: self._like, exp.ILike: self._like,
            exp.Escape: self._escape, exp.Is: self._is, exp.Interval: self._interval,
            exp.Extract: self._extract, exp.TimestampTrunc: self._trunc, exp.DateTrunc: self._trunc,
            exp.Anonymous: self._anonymous,
        }

    def refuse(self, node: exp.Expression, what: str | None = None, hint: str = "") -> InvalidParameter:
        what = what or _named(node)
        if isinstance(node, exp.Func) and not hint:
            hint = f"; the functions allowed are {', '.join(sorted(set(FUNCTIONS.values())))}"
        return InvalidParameter(
            f"{self.role}: {what}{_where(node)} is not allowed: a row expression may use only "
            f"this row's columns, literals, operators, CASE, CAST and deterministic scalar "
            f"functions{hint}")

    def check(self, node: exp.Expression) -> None:
        kind = type(node)
        if kind in self.special:
            self.special[kind](node)
            return
        if kind not in _STRUCTURE and kind not in FUNCTIONS:
            raise self.refuse(node)
        missing = [k for k, required in node.arg_types.items() if required and node.args.get(k) is None]
        if missing and kind not in (exp.Null, exp.Boolean):
            raise self.refuse(node, f"{_named(node)} with a missing operand")
        for child in node.iter_expressions():
            self.check(child)

    def _children(self, node: exp.Expression, *skip: str) -> None:
        for key, value in node.args.items():
            if key in skip:
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, exp.Expression):
                    self.check(child)

    def _column(self, node: exp.Expression) -> None:
        assert isinstance(node, exp.Column)
        if any(node.args.get(k) for k in ("table", "db", "catalog")):
            raise self.refuse(node, f"reference to another table ({node.sql('duckdb')})")
        if not isinstance(node.this, exp.Identifier):
            raise self.refuse(node.this)
        written = str(node.this.this)
        name = _resolve(written, self.index, f"{self.role}{_where(node)}")
        if name is None:
            raise self._unknown(node, written)
        node.set("this", exp.to_identifier(name, quoted=True))  # the engine reads the schema's name
        self.used.add(name)

    def _unknown(self, node: exp.Expression, name: str) -> InvalidParameter:
        close = difflib.get_close_matches(name, self.columns, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        shown = ", ".join(repr(c) for c in self.columns[:20]) + (" ..." if len(self.columns) > 20 else "")
        return InvalidParameter(f"{self.role}: {name!r}{_where(node)} is not a column of the table"
                                f"{hint} (columns: {shown})")

    def _literal(self, node: exp.Expression) -> None:
        return None  # numbers and strings; escape strings are other node types

    def _cast(self, node: exp.Expression) -> None:
        to = node.args.get("to")
        extra = [k for k in ("format", "action", "default") if node.args.get(k) is not None]
        if extra or not isinstance(to, exp.DataType) or to.this not in CAST_TYPES or \
                any(not (isinstance(p, exp.DataTypeParam) and isinstance(p.this, exp.Literal)
                         and not p.this.is_string) for p in to.expressions):
            shown = to.sql("duckdb") if isinstance(to, exp.Expression) else str(to)
            raise self.refuse(node, f"cast to {shown}",
                              "; casts go to BOOLEAN, integer, DOUBLE, DECIMAL, VARCHAR, DATE or TIMESTAMP")
        self.check(node.this)

    def _in(self, node: exp.Expression) -> None:
        for key in ("query", "unnest", "field"):
            if node.args.get(key) is not None:
                raise self.refuse(node.args[key], "subquery" if key == "query" else f"IN {key}")
        items = node.expressions
        if not items:
            raise self.refuse(node, "IN with an empty list")
        for item in items:
            if not _is_constant(item):
                raise self.refuse(item, f"IN list item {item.sql('duckdb')}", "; IN takes a list of literals")
        self.check(node.this)
        for item in items:
            self.check(item)

    def _like(self, node: exp.Expression) -> None:
        if not (isinstance(node.expression, exp.Literal) and node.expression.is_string):
            raise self.refuse(node.expression, "LIKE with a pattern that is not a string literal")
        self._children(node)

    def _escape(self, node: exp.Expression) -> None:
        if type(node.this) not in (exp.Like, exp.ILike) or not (
                isinstance(node.expression, exp.Literal) and node.expression.is_string):
            raise self.refuse(node, "ESCAPE other than a string literal after LIKE")
        self._children(node)

    def _is(self, node: exp.Expression) -> None:
        if not isinstance(node.expression, exp.Null | exp.Boolean):
            raise self.refuse(node, "IS other than IS [NOT] NULL / TRUE / FALSE")
        self._children(node)

    def _unit(self, node: exp.Expression, unit: exp.Expression | None, allowed: frozenset[str],
              what: str) -> None:
        name = unit.name.upper() if isinstance(unit, exp.Var | exp.Literal) else None
        if name not in allowed:
            shown = unit.sql("duckdb") if isinstance(unit, exp.Expression) else "no unit"
            raise self.refuse(node, f"{what} {shown}", f"; units: {', '.join(sorted(allowed))}")

    def _interval(self, node: exp.Expression) -> None:
        self._unit(node, node.args.get("unit"), INTERVAL_UNITS, "interval unit")
        if not (isinstance(node.this, exp.Literal)):
            raise self.refuse(node, "interval of a non-literal length")

    def _extract(self, node: exp.Expression) -> None:
        self._unit(node, node.this, DATE_PARTS, "date part")
        self.check(node.expression)

    def _trunc(self, node: exp.Expression) -> None:
        self._unit(node, node.args.get("unit"), TRUNC_UNITS, "date_trunc unit")
        self._children(node, "unit")

    def _anonymous(self, node: exp.Expression) -> None:
        """Only date_part('unit', x), which sqlglot leaves unparsed (_normalize makes it EXTRACT)."""
        if _date_part(node) is None:
            raise self.refuse(node)
        self._unit(node, node.expressions[0], DATE_PARTS, "date part")
        self.check(node.expressions[1])


def _date_part(node: exp.Expression) -> exp.Extract | None:
    """EXTRACT(unit FROM x) for date_part('unit', x), else None."""
    args = node.expressions
    if isinstance(node, exp.Anonymous) and str(node.name).lower() == "date_part" and \
            len(args) == 2 and isinstance(args[0], exp.Literal) and args[0].is_string:
        return exp.Extract(this=exp.var(args[0].name.upper()), expression=args[1])
    return None


def _is_constant(node: exp.Expression) -> bool:
    """A literal, NULL, TRUE/FALSE, a negated number or a typed literal (DATE '2020-01-01')."""
    if isinstance(node, exp.Literal | exp.Null | exp.Boolean):
        return True
    if isinstance(node, exp.Neg | exp.Paren):
        return _is_constant(node.this)
    return isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal)


# Nodes whose value is one of their operands' strings, or a part of it.
_SAME_STRING: frozenset[type[exp.Expression]] = frozenset({
    exp.Paren, exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Least, exp.Greatest, exp.Try,
    exp.Lower, exp.Upper, exp.Trim,
})
_PREFIX_STRING: frozenset[type[exp.Expression]] = frozenset({exp.Substring, exp.Left, exp.Right})
_NUMBER_CHARS = 40  # the longest text of a number, date or boolean cast to VARCHAR
_STRING_UNIT = 64  # characters of literal text counted as one pass of cost


@dataclass(frozen=True)
class _Length:
    """A bound on the length of a string value: `growth` times the longest value of the columns
    read, plus `chars` characters."""

    growth: float
    chars: float

    def __or__(self, other: _Length) -> _Length:  # either of the two
        return _Length(max(self.growth, other.growth), max(self.chars, other.chars))

    def __add__(self, other: _Length) -> _Length:  # both, one after the other
        return _Length(self.growth + other.growth, self.chars + other.chars)

    @property
    def passes(self) -> float:
        return self.growth + self.chars / _STRING_UNIT


_SCALAR = _Length(0.0, _NUMBER_CHARS)


class _Cost:
    """The cost pass: a bound on each node's string length, and the work of the whole tree.

    A node costs one operation plus one pass over each string it reads or builds (scanning,
    comparing, copying), so the total bounds the per-row work by the tree's size and the
    strings' lengths, not by which CASE branch a row takes (Haeberlen, Pierce and Narayan,
    "Differential Privacy Under Fire", USENIX Security 2011, section 5: a per-row time bound)."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.work = 0.0

    def total(self, tree: exp.Expression) -> float:
        self.length(tree)
        return self.work

    def length(self, node: exp.Expression) -> _Length | None:
        """The node's string length bound (None: not a string), adding its work to the total."""
        children = [] if isinstance(node, exp.Column) else \
            [c for c in node.iter_expressions() if not isinstance(c, exp.DataType)]
        lengths = [self.length(c) for c in children]
        out = self._out(node, children, lengths)
        self.work += 1 + sum(x.passes for x in [out, *lengths] if x is not None)
        if out is not None and (out.growth > MAX_STRING_GROWTH or out.chars > MAX_STRING_CHARS):
            size = "grow without bound" if out.growth == float("inf") else \
                f"be {out.growth:g} times as long as the columns it reads plus {out.chars:,.0f} characters"
            raise InvalidParameter(
                f"{self.role}: {_named(node)}{_where(node)} builds a string that can {size}; "
                f"the limits are {MAX_STRING_GROWTH} times and {MAX_STRING_CHARS:,} "
                "characters (a string that grows per row makes the time of a query tell about "
                "the row)")
        return out

    def _out(self, node: exp.Expression, children: list[exp.Expression],
             lengths: list[_Length | None]) -> _Length | None:
        strings = [x or _SCALAR for x in lengths]
        if isinstance(node, exp.Column):
            return _Length(1.0, 0.0)
        if isinstance(node, exp.Literal):
            return _Length(0.0, len(node.name)) if node.is_string else None
        if isinstance(node, exp.DPipe):
            return strings[0] + strings[1]
        if isinstance(node, exp.Cast | exp.TryCast):
            to = node.args.get("to")
            text = isinstance(to, exp.DataType) and to.this in (_T.VARCHAR, _T.TEXT, _T.CHAR)
            return (strings[0] | _SCALAR) if text else None
        if isinstance(node, exp.Replace):
            of = dict(zip(map(id, children), strings, strict=True))
            return _replace(node, *(of.get(id(node.args.get(k)), _SCALAR)
                                    for k in ("this", "replacement")))
        if type(node) in _PREFIX_STRING:
            return lengths[0]
        if type(node) in _SAME_STRING:
            found = [x for x in lengths if x is not None]
            return None if not found else _union(found)
        return None


def _replace(node: exp.Expression, s: _Length, b: _Length) -> _Length:
    """replace(s, a, b) is at most len(s) * max(1, len(b) / len(a)) long (each match of `a` becomes
    `b`): `a` counts as one character unless it is a string literal; a `b` that grows with the
    columns makes the bound quadratic in their length, so it counts as unbounded."""
    if b.growth > 0:
        return _Length(float("inf"), float("inf"))
    pattern = node.expression
    least = len(pattern.name) if isinstance(pattern, exp.Literal) and pattern.is_string else 1
    factor = max(1.0, b.chars / max(least, 1))
    return _Length(s.growth * factor, s.chars * factor)


def _union(lengths: list[_Length]) -> _Length:
    out = lengths[0]
    for x in lengths[1:]:
        out = out | x
    return out
