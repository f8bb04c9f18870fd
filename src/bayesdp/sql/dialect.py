"""sqlglot's BigQuery dialect, extended with the differential privacy clause.

`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (name = value, ...)` (BigQuery's query syntax, "Differential
privacy clause") and the named contribution-bound arguments of its aggregates
(`SUM(x, contribution_bounds_per_group => (0, 100))`, "Differentially private aggregate
functions") are parsed by sqlglot's own BigQuery parser, subclassed here: the options become a
`DifferentialPrivacy` node under the `Select`'s "differential_privacy" argument, and an aggregate
with named arguments becomes a `NamedArguments` node around the aggregate sqlglot builds from the
positional arguments.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.bigquery import BigQuery
from sqlglot.tokenizer_core import TokenType

# BigQuery's differentially private aggregates (and the ones bayesdp adds) that take named arguments.
NAMED_ARGUMENT_FUNCTIONS = ("AVG", "COUNT", "SUM", "PERCENTILE_CONT", "QUANTILE_CONT", "MEDIAN",
                            "STDDEV", "STDDEV_POP", "STDDEV_SAMP", "VARIANCE", "VAR_POP", "VAR_SAMP")


class DifferentialPrivacy(exp.Expression):
    """The OPTIONS of `SELECT WITH DIFFERENTIAL_PRIVACY`: `expressions` are `EQ(name, value)` nodes."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": False}


class NamedArguments(exp.Expression, exp.Func):
    """An aggregate call with named arguments: `this` is the aggregate built from the positional
    arguments, `expressions` the `Kwarg(name, value)` nodes."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": True}
    is_var_len_args = True


def _with_named(build: Any) -> Any:
    def builder(args: list[Any], dialect: Any = None) -> exp.Expr:
        positional = [a for a in args if not isinstance(a, exp.Kwarg)]
        named = [a for a in args if isinstance(a, exp.Kwarg)]
        try:
            node = build(positional)
        except TypeError:
            node = build(positional, dialect=dialect)
        return NamedArguments(this=node, expressions=named) if named else node

    return builder


class Parser(BigQuery.Parser):  # type: ignore[misc,valid-type]
    FUNCTIONS: ClassVar[dict[str, Any]] = {
        **BigQuery.Parser.FUNCTIONS,
        **{name: _with_named(BigQuery.Parser.FUNCTIONS[name]) for name in NAMED_ARGUMENT_FUNCTIONS
           if name in BigQuery.Parser.FUNCTIONS},
    }

    def _parse_projections(self) -> Any:
        # Right after SELECT: `WITH DIFFERENTIAL_PRIVACY OPTIONS (...)` comes before the list.
        if self._curr and self._curr.token_type == TokenType.WITH and self._next \
                and self._next.text.upper() == "DIFFERENTIAL_PRIVACY":
            start = self._curr
            self._advance(2)
            options: list[exp.Expr] = []
            if self._match_text_seq("OPTIONS"):
                options = self._parse_wrapped_csv(self._parse_assignment, optional=True)
            clause = DifferentialPrivacy(expressions=options).update_positions(start)
            projections, exclude = super()._parse_projections()
            return [clause, *projections], exclude
        return super()._parse_projections()

    def _parse_select_query(self, *args: Any, **kwargs: Any) -> Any:
        query = super()._parse_select_query(*args, **kwargs)
        if isinstance(query, exp.Select) and query.expressions \
                and isinstance(query.expressions[0], DifferentialPrivacy):
            clause = query.expressions[0]
            query.set("expressions", query.expressions[1:])
            query.set("differential_privacy", clause)
        return query

    def validate_expression(self, expression: Any, args: list[Any] | None = None) -> Any:
        if isinstance(expression, NamedArguments):
            positional = [a for a in args or [] if not isinstance(a, exp.Kwarg)]
            super().validate_expression(expression.this, positional)
            return expression
        return super().validate_expression(expression, args)


def _named_arguments_sql(generator: Any, expression: NamedArguments) -> str:
    call = generator.sql(expression, "this")
    named = ", ".join(generator.sql(k) for k in expression.expressions)
    return f"{call[:-1]}, {named})"


class Generator(BigQuery.Generator):  # type: ignore[misc,valid-type]
    TRANSFORMS: ClassVar[dict[Any, Any]] = {**BigQuery.Generator.TRANSFORMS,
                                             NamedArguments: _named_arguments_sql}


class BigQueryDP(BigQuery):
    """BigQuery SQL with the differential privacy clause and named aggregate arguments."""

    Parser = Parser
    Generator = Generator
