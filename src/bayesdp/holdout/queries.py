"""Statistical queries written as row expressions, evaluated inside DuckDB (only means leave it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bayesdp.expressions import RowExpression


def statistical_means(relation: Any, queries: Sequence[RowExpression]) -> list[float]:
    """Mean over the rows of each query's value, read as a number with NULL or non-numeric as 0
    and clipped into [0, 1], in one scan: every expression is a statistical query (Dwork et al.
    2015, Sec. 2), so whether one can be answered never depends on the rows it reads."""
    values = ", ".join(f"avg(least(greatest(coalesce(TRY_CAST({q.sql('duckdb')} AS DOUBLE), 0), 0), 1))"
                       for q in queries)
    return [float(v) for v in relation.aggregate(values).fetchall()[0]]
