"""Statistical queries: the fast SQL gives, query by query, the mean of
least(greatest(coalesce(TRY_CAST(value AS DOUBLE), 0), 0), 1), NULL, NaN and infinities included."""

from __future__ import annotations

import duckdb
import pytest

from bayesdp.expressions import row_expression
from bayesdp.holdout import statistical_means, table_means

COLUMNS = ["x", "i", "d", "s", "b"]
ROWS = """(VALUES (0.5, 3, 0.25::DECIMAL(6, 2), '0.7', true), (NULL, NULL, NULL, NULL, NULL),
    ('nan'::DOUBLE, -2, 1.50, 'abc', false), ('inf'::DOUBLE, 1, -0.50, 'nan', true),
    ('-inf'::DOUBLE, 0, 0.00, '2', NULL), (-0.0, 7, 0.99, '-1', false), (1.0, 1, 1.00, NULL, true),
    (0.999, 2, 0.01, '1e-3', false)) AS t(x, i, d, s, b)"""

QUERIES = [
    # conditions (counted with count_if)
    "x > 0.4", "i = 1", "x <> 1", "i >= 1", "x <= 0.5", "i < 2", "x IS NULL", "s IS NOT NULL",
    "x IS DISTINCT FROM 0.5", "x IS NOT DISTINCT FROM NULL", "i IN (1, 2, 3)", "s NOT IN ('abc')",
    "x BETWEEN 0 AND 1", "s LIKE '%a%'", "s ILIKE 'A%'", "s NOT LIKE '1%'", "b", "NOT b",
    "b AND x > 0", "b OR i > 1", "TRUE", "FALSE", "x / 0 > 1",
    # everything else (clipped with CASE)
    "x", "i", "d", "s", "x * 2", "i / 4", "-x", "CASE WHEN b THEN 2 ELSE NULL END", "NULL",
    "CAST(s AS DOUBLE)", "x % 0", "sqrt(i - 1)", "ln(i)", "coalesce(x, 0.3)", "starts_with(s, '0')",
]


def reference(con: duckdb.DuckDBPyConnection, sql: str) -> float:
    return float(con.sql(f"SELECT avg(least(greatest(coalesce(TRY_CAST({sql} AS DOUBLE), 0), 0), 1)) "
                         f"FROM {ROWS}").fetchall()[0][0])


def test_each_query_gives_the_mean_of_its_clipped_values() -> None:
    con = duckdb.connect()
    checked = [row_expression(q, COLUMNS, role="holdout query") for q in QUERIES]
    means = statistical_means(con.sql(f"SELECT * FROM {ROWS}"), checked)
    for q, c, mean in zip(QUERIES, checked, means, strict=True):
        assert mean == reference(con, c.sql("duckdb")), q


def test_several_tables_in_one_statement_in_order() -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE one AS SELECT * FROM {ROWS}")
    con.execute("CREATE TABLE two AS SELECT * FROM one WHERE i > 0")
    checked = [row_expression(q, COLUMNS) for q in ["x > 0.4", "i / 4"]]
    assert table_means(con, ["two", "one"], checked) == [
        statistical_means(con.table(name), checked) for name in ("two", "one")]


@pytest.mark.parametrize("rows", [10**5])
def test_a_condition_counts_exactly(rows: int) -> None:
    """A share of true rows is count / n exactly, as the mean of 0/1 values is."""
    con = duckdb.connect()
    rel = con.sql(f"SELECT range AS k FROM range({rows})")
    [mean] = statistical_means(rel, [row_expression("k % 7 = 0 AND k % 3 <> 0", ["k"])])
    assert mean == len([k for k in range(0, rows, 7) if k % 3]) / rows
