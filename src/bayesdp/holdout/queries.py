"""Statistical queries written as row expressions, evaluated inside DuckDB (only means leave it).

A row's value is the expression read as a number (TRY_CAST to DOUBLE), NULL or non-numeric as 0,
clipped into [0, 1]: every expression is a statistical query (Dwork et al. 2015, Sec. 2), so
whether one can be answered never depends on the rows it reads. The SQL is chosen from the
expression's syntax alone, never from data: a condition is 1 where it holds and 0 elsewhere
(NULL included), so its mean is the count of rows where it holds over n; any other expression is
clipped by a CASE that equals least(greatest(coalesce(v, 0), 0), 1) row for row (NaN sorts above
every number in DuckDB, so both give 1), at a fraction of those functions' cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from bayesdp.expressions import RowExpression

# Root nodes whose value is always BOOLEAN in DuckDB.
_CONDITIONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ,
               exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.And, exp.Or, exp.Not, exp.Boolean)


def mean_select(queries: Sequence[RowExpression]) -> tuple[str, str]:
    """The projection (columns v0, v1, ...) and the aggregates of the queries' clipped means."""
    project, aggregate = [], []
    for i, q in enumerate(queries):
        if isinstance(q.tree, _CONDITIONS):
            project.append(f"{q.sql('duckdb')} AS v{i}")
            aggregate.append(f"coalesce(count_if(v{i}), 0) / count(*)")
        else:
            project.append(f"TRY_CAST({q.sql('duckdb')} AS DOUBLE) AS v{i}")
            aggregate.append(f"avg(CASE WHEN v{i} > 0 THEN (CASE WHEN v{i} < 1 THEN v{i} ELSE 1 END) "
                             "ELSE 0 END)")
    return ", ".join(project), ", ".join(aggregate)


def statistical_means(relation: Any, queries: Sequence[RowExpression]) -> list[float]:
    """Mean over the rows of each query's value, in one scan of a DuckDB relation."""
    project, aggregate = mean_select(queries)
    return [float(v) for v in relation.project(project).aggregate(aggregate).fetchall()[0]]


def table_means(connection: Any, tables: Sequence[str],
                queries: Sequence[RowExpression]) -> list[list[float]]:
    """`statistical_means` of the same queries on several tables (quoted names) of one DuckDB
    connection, in one statement whose scans run in parallel; one list per table, in order."""
    project, aggregate = mean_select(queries)
    sql = " UNION ALL ".join(f"SELECT {i} AS part, {aggregate} FROM (SELECT {project} FROM {table})"
                             for i, table in enumerate(tables))
    rows = sorted(connection.execute(sql).fetchall())
    return [[float(v) for v in row[1:]] for row in rows]
