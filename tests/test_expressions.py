"""The row-local expression checker: what it accepts, what it refuses, and what the engines run."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayesdp.errors import InvalidParameter
from bayesdp.expressions import RowExpression, row_expression

COLUMNS = ["a", "b", "s", "d", "user_id", "Revenue", 'we"ird']
SECRET = "SENTINEL-TABLE-5c1e"
FILE_SECRET = "SENTINEL-FILE-91c2"


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A file no expression may read."""
    path = tmp_path_factory.mktemp("sentinel") / "secret.csv"
    path.write_text(f"v\n{FILE_SECRET}\n")
    return str(path)


# Edge values: the largest BIGINT, zero, negatives, NaN, NULLs, text that is not a number.
ROWS = pd.DataFrame({
    "a": np.array([1, -3, 0, 9223372036854775807, 5], dtype=np.int64),
    "b": [2.5, 0.0, -1.5, 4.0, np.nan],
    "s": ["abc", "x'y", None, "12", "A%b"],
    "d": [date(2020, 1, 15), date(2021, 6, 30), None, date(2019, 12, 31), date(2020, 2, 29)],
    "user_id": [7, 42, 42, 8, 9],
    "Revenue": [10.0, None, 3.5, 0.0, 100.0],
    'we"ird': [1, 2, 3, 4, 5],
})


@pytest.fixture(scope="module")
def con() -> Any:
    """ROWS as table t, and a sentinel table no expression may read."""
    c = duckdb.connect()
    c.register("rows_frame", ROWS)
    c.sql("CREATE TABLE t AS SELECT * FROM rows_frame")
    c.sql(f"CREATE TABLE bdp_secret AS SELECT '{SECRET}' AS v")
    return c


def rows(con: Any, condition: str) -> list[int]:
    return [r[0] for r in con.sql(f'SELECT "we""ird" FROM t WHERE {condition} ORDER BY 1').fetchall()]


ACCEPTED = [
    "a - 1 > 0", "a - b * 2 / 4 <= 3", "a % 2 = 1", "-a < 0", "s || '!' = 'abc!'",
    "a = 1 OR b <> 0", "NOT (a > 0) AND b IS NOT NULL", "a BETWEEN 0 AND 5",
    "a NOT BETWEEN 0 AND 5", "s IN ('abc', '12')", "a NOT IN (1, -3)", "s LIKE 'a%'",
    "s ILIKE 'A%'", "s NOT LIKE '%y'", "s LIKE 'A!%%' ESCAPE '!'", "d IS NULL", "b IS DISTINCT FROM 0",
    "b IS NOT DISTINCT FROM NULL", "CASE WHEN a > 0 THEN 'pos' WHEN a < 0 THEN 'neg' ELSE 'zero' END = 'pos'",
    "CASE a WHEN 1 THEN TRUE ELSE FALSE END", "CAST(s AS INTEGER) = 12", "s::INT = 12",
    "TRY_CAST(s AS DOUBLE) > 1", "CAST(b AS DECIMAL(10, 2)) > 1", "coalesce(b, 0) >= 0",
    "nullif(a, 0) IS NULL", "abs(a) = 3", "round(b, 1) = 2.5", "floor(b) = 2", "ceil(b) = 3",
    "sign(a) = -1", "sqrt(abs(b)) > 1", "ln(abs(b) + 1) > 0", "log(100) = 2", "log(2, 8) = 3",
    "exp(b) > 1", "power(b, 2) > 1", "b ** 2 > 1", "least(a, 2) = 1", "greatest(a, 2) = 2",
    "lower(s) = 'abc'", "upper(s) = 'ABC'", "length(s) = 3", "trim(s) = 'abc'",
    "substring(s, 1, 2) = 'ab'", "starts_with(s, 'a')", "ends_with(s, 'c')", "contains(s, 'b')",
    "replace(s, 'a', 'z') = 'zbc'", "left(s, 1) = 'a'", "isnan(b)",
    "year(d) = 2020", "month(d) = 1", "day(d) = 15", "quarter(d) = 1",
    "date_part('year', d) = 2020", "extract(month FROM d) = 6", "date_trunc('month', d) = DATE '2020-01-01'",
    "d + INTERVAL 1 DAY > DATE '2020-03-01'", "d < TIMESTAMP '2020-06-01 00:00:00'", "revenue > 5",
    '"Revenue" > 5', '"we""ird" = 1', "TRUE", "NULL IS NULL", "(a > 0) IS TRUE", "user_id = 42",
    "a /* comment */ > 0 -- trailing comment",
    # Rows on which the plain SQL raises or overflows: NULL there in both engines. (DuckDB computes
    # `a * 2` on a wider type and gets the exact value where Spark overflows, so none is here.)
    "a % (a - 1) = 0", "a * a > 0", "a + a > 0", "-a - a < 0", "abs(a - 10) > 4",
    "CAST(s AS INTEGER) > 0", "CAST(b AS INTEGER) = 2", "log(2, b + 10) > 3.5", "round(b, 0) = 3",
    "s NOT IN ('12')", "s LIKE '%!%%' ESCAPE '!'", "right(s, 1) = 'b'", "coalesce(s, 'none') = 'none'",
    "s IS NOT NULL AND b IS DISTINCT FROM 0", "CASE WHEN a > 0 THEN b ELSE -b END > 1",
    "extract(week FROM d) = 1", "date_trunc('month', d) = DATE '2020-02-01'", "NOT (b > 0 OR a = 0)",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_accepted_expressions_select_the_same_rows_when_rendered(con, text):
    checked = row_expression(text, COLUMNS, role="condition")
    assert isinstance(checked, RowExpression)
    assert checked.columns <= set(COLUMNS)
    rendered = checked.sql("duckdb")
    assert rendered.startswith("(") and rendered.endswith(")")
    assert "comment" not in rendered
    try:
        expected = rows(con, f"({text})")
    except duckdb.Error:  # the original raises on some row; the rendering must not
        expected = None
    got = rows(con, rendered)
    if expected is not None:
        assert got == expected


REFUSED = [
    ("(SELECT count(*) FROM bdp_source WHERE user_id = 42) > 0", "subquery"),
    ("EXISTS (SELECT 1 FROM bdp_secret)", "EXISTS subquery"),
    ("a IN (SELECT 1)", "subquery"),
    ("a = ANY (SELECT 1)", "subquery"),
    ("(SELECT avg(a) FROM read_csv('hold.csv')) > 0", "subquery"),
    ("read_csv('hold.csv') IS NULL", "table function read_csv"),
    ("read_parquet('x.parquet') IS NULL", "table function read_parquet"),
    ("query('SELECT 1') IS NULL", "table function query"),
    ("sum(a) > 0", "aggregate sum"),
    ("count(*) > 0", "aggregate count"),
    ("sum(a) OVER () > 0", "window function"),
    ("row_number() OVER (ORDER BY a) = 1", "window function"),
    ("*", "*"),
    ("a = ?", "parameter"),
    ("a = $1", "parameter"),
    ("t.a > 0", "reference to another table"),
    ("bdp_secret.v = 'x'", "reference to another table"),
    ("main.t.a > 0", "reference to another table"),
    ("random() < 0.5", "function rand"),
    ("now() > d", "function now"),
    ("getenv('HOME') = 'x'", "function getenv"),
    ("current_setting('threads') = '1'", "function current_setting"),
    ("nextval('seq') > 0", "function nextval"),
    ("hash(a) > 0", "function hash"),
    ("list_transform([1], x -> x + a) IS NULL", "function transform"),
    ("s[1] = 'a'", "element access"),
    ("a // 2 = 0", "INTDIV"),
    ("aa > 1", "not a column"),
    ("no_such = 1", "not a column"),
    ("a IN (b)", "IN list item"),
    ("s LIKE s", "LIKE with a pattern"),
    ("CAST(a AS INT[]) IS NULL", "cast to INT[]"),
    ("CAST(a AS JSON) IS NULL", "cast to JSON"),
    ("date_part('dow', d) = 1", "date part"),
    ("0x10", "alias"),
    ("a > 0; DROP TABLE t", "';'"),
    ("a > 0;", "';'"),
    ("a >", "cannot parse"),
    ("@", "function abs with a missing operand"),
    ("", "non-empty"),
    ("E'x' = s", "escape-string literal"),
    ("'a' COLLATE nocase = s", "collate"),
    ("repeat(s, 1000000000) = s", "function repeat"),
    ("a" + " + a" * 20_000, "at most"),
    ("(" * 4000 + "a" + ")" * 4000, "nested too deeply"),
]


@pytest.mark.parametrize(("text", "named"), REFUSED)
def test_refused_constructs_are_named(text, named):
    with pytest.raises(InvalidParameter) as info:
        row_expression(text, COLUMNS, role="condition")
    message = str(info.value)
    assert named.lower() in message.lower()
    assert message.startswith("condition")


def test_refusal_says_where():
    with pytest.raises(InvalidParameter, match="line 1, column"):
        row_expression("a > 0 AND getenv('HOME') = 'x'", COLUMNS)


def test_unknown_column_suggests_the_closest():
    with pytest.raises(InvalidParameter, match="did you mean 'user_id'"):
        row_expression("userid = 1", COLUMNS)


def test_sqlglot_nodes_are_checked_too():
    node = sqlglot.parse_one("a + (SELECT 1)", read="duckdb")
    with pytest.raises(InvalidParameter, match="subquery"):
        row_expression(node, COLUMNS)
    checked = row_expression(sqlglot.parse_one("a + 1", read="duckdb"), COLUMNS)
    assert checked.text == '"a" + 1' and checked.columns == {"a"}
    assert row_expression(checked, ["a"]) == checked
    with pytest.raises(InvalidParameter, match="not a column"):
        row_expression(checked, ["b"])


@pytest.mark.parametrize("text", ACCEPTED)
def test_a_rendered_expression_checks_again_to_itself(text):
    """So a layer that passes rendered SQL on (the service's filters) changes nothing."""
    checked = row_expression(text, COLUMNS)
    again = row_expression(checked.sql("duckdb"), COLUMNS)
    assert again.sql("duckdb") == checked.sql("duckdb") and again.columns == checked.columns


def test_text_and_columns_are_canonical():
    checked = row_expression("revenue > 1 AND CAST(s AS INT) = 2 and log(b) > 0", COLUMNS)
    assert checked.columns == {"Revenue", "s", "b"}
    assert checked.text == '(("Revenue" > 1) AND (TRY_CAST("s" AS INT) = 2)) AND (LOG(10, "b") > 0)'


def test_spark_rendering_guards_arithmetic_and_casts():
    sql = row_expression("a + b * 2 - a / b > abs(a) AND CAST(s AS INT) % 2 = 0", COLUMNS).sql("spark")
    for name in ("TRY_ADD", "TRY_MULTIPLY", "TRY_SUBTRACT", "TRY_DIVIDE", "TRY_CAST"):
        assert name in sql
    assert "`a`" in sql and "CASE WHEN 2 = 0 THEN NULL" in sql
    assert row_expression("log(b)", COLUMNS).sql("spark") == "(" + "LOG(10, `b`)" + ")"
    with pytest.raises(InvalidParameter, match="dialect"):
        row_expression("a > 0", COLUMNS).sql("sqlite")  # type: ignore[arg-type]


@pytest.mark.spark
@pytest.mark.slow
def test_spark_keeps_the_same_rows_as_duckdb(con, spark):
    """Each accepted expression, rendered for each engine from the same checked tree, keeps the
    same rows, including those on which the plain SQL would raise (overflow, / 0, bad text)."""
    frame = spark.createDataFrame(ROWS)
    for text in [*ACCEPTED, DIVISION]:
        checked = row_expression(text, COLUMNS)
        on_spark = sorted(r[0] for r in frame.where(checked.sql("spark")).select('`we"ird`').collect())
        assert on_spark == rows(con, checked.sql("duckdb")), (text, checked.sql("spark"))


DIVISION = "b / (a - 1) > 0"  # a = 1: b / 0


def test_division_by_zero_is_null(con):
    """DuckDB gives inf for b / 0 and keeps row 1; Spark gives NULL. Rendered, both give NULL."""
    assert rows(con, f"({DIVISION})") == [1, 3, 4]
    assert rows(con, row_expression(DIVISION, COLUMNS).sql("duckdb")) == [3, 4]


RAISING = ["CAST(s AS INT) > 0", "a + a > 0", "a * a > 0", "a % 0 = 0", "-a - a < 0", "s = 1",
           "CAST(s AS DATE) > DATE '2000-01-01'", "power(a, 2)::BIGINT > 0"]


@pytest.mark.parametrize("text", RAISING)
def test_an_expression_that_raises_on_a_row_is_null_there(con, text):
    """Each raises in DuckDB on one of the rows (bad text, the largest BIGINT, % 0); rendered, the
    query runs and the row is dropped, so no error tells the analyst about it."""
    with pytest.raises(duckdb.Error):
        rows(con, f"({text})")
    assert len(rows(con, row_expression(text, COLUMNS).sql("duckdb"))) < 5


def _tables_in(con: Any, query: str) -> list[str]:
    """Every FROM source DuckDB's own parser sees in `query` (an independent check of the text)."""
    tree = json.loads(con.sql("SELECT json_serialize_sql(?)", params=[query]).fetchall()[0][0])
    assert not tree["error"], tree
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("BASE_TABLE", "TABLE_FUNCTION", "SUBQUERY", "JOIN", "EXPRESSION_LIST"):
                found.append(node.get("table_name") or node["type"])
            if node.get("class") == "SUBQUERY":
                found.append("SUBQUERY")
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(tree["statements"])
    return found


_NASTY = [
    "(SELECT count(*) FROM bdp_secret)", "(SELECT v FROM bdp_secret)",
    "EXISTS (SELECT 1 FROM bdp_secret WHERE v LIKE 'S%')", "bdp_secret", "bdp_secret.v", "t.a",
    "getenv('HOME')", "query('SELECT 1')", "sum(a)", "OVER ()", "SELECT", "FROM", "WHERE", ";",
    "--", "/*", "*/", "\n", "'", '"', "''", '""', "'it''s'", '"we""ird"', '"a"', "`a`", "$1", "?",
    "[1]", ".", "::", "->", "x -> x", "CAST(", "AS", "INT)", "IN", "LIKE", "CASE", "WHEN", "THEN",
    "ELSE", "END", "(", ")", ",",
]


PATH = "@SENTINEL_PATH@"  # replaced by the sentinel file's path in the test


def _fragments() -> st.SearchStrategy[str]:
    nasty = [*_NASTY, f"read_csv('{PATH}')", f"(SELECT * FROM read_csv('{PATH}'))", f"'{PATH}'"]
    benign = ["a", "b", "s", "d", "user_id", "1", "0", "-2.5", "'abc'", "NULL", "TRUE", "+", "-",
              "*", "/", "%", "=", "<", ">=", "AND", "OR", "NOT", "IS NULL", "abs(a)", "lower(s)",
              "coalesce(b, 0)", "a BETWEEN 0 AND 5", "s IN ('abc', '12')", "CAST(s AS INT)"]
    ident = st.text(alphabet="abcxyz_\"'`;-/*() ", min_size=1, max_size=8)
    return st.one_of(st.sampled_from(nasty), st.sampled_from(benign), ident)


def _structured() -> st.SearchStrategy[str]:
    """Well-formed expressions that carry the same hazards inside literals, comments and names."""
    junk = st.one_of(_fragments(), st.text(max_size=12))
    quoted = junk.map(lambda x: "'" + x.replace("'", "''") + "'")
    named = junk.map(lambda x: '"' + x.replace('"', '""') + '"')
    atoms = st.one_of(st.sampled_from(["a", "b", "s", "user_id", "revenue", "1", "NULL", "'x'"]),
                      quoted, named)

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        ops = st.sampled_from(["+", "-", "*", "/", "%", "||", "=", "<>", "<", "AND", "OR"])
        return st.one_of(
            st.tuples(inner, ops, inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
            st.tuples(inner, junk.filter(lambda x: "\n" not in x)).map(lambda t: f"{t[0]} -- {t[1]}\n"),
            st.tuples(inner, junk.filter(lambda x: "*/" not in x)).map(lambda t: f"{t[0]} /* {t[1]} */"),
            inner.map(lambda x: f"CAST({x} AS INT)"), inner.map(lambda x: f"coalesce({x}, 0)"),
            st.tuples(inner, quoted).map(lambda t: f"{t[0]} LIKE {t[1]}"),
            st.tuples(inner, st.sampled_from(_NASTY)).map(lambda t: f"{t[0]} {t[1]}"),
        )

    return st.recursive(atoms, grow, max_leaves=6)


EXPRESSIONS = st.one_of(st.lists(_fragments(), min_size=1, max_size=8).map(" ".join), _structured())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generated=EXPRESSIONS)
def test_generated_expressions_are_refused_or_row_local(con, sentinel, generated):
    """Random mixes of subqueries, table functions, comments, quotes, semicolons and names: each
    is refused with InvalidParameter, or its rendering reads table t only (DuckDB's own parser
    finds no other source) and what it returns shows neither sentinel."""
    text = generated.replace(PATH, sentinel)
    try:
        checked = row_expression(text, COLUMNS, role="condition")
    except InvalidParameter:
        return
    rendered = checked.sql("duckdb")
    query = f"SELECT * FROM t WHERE {rendered}"
    assert _tables_in(con, query) == ["t"]
    assert checked.columns <= set(COLUMNS)
    try:
        out = str(con.sql(query).fetchall())
    except duckdb.Error as exc:  # a type error found when binding (it does not depend on the rows)
        assert isinstance(exc, duckdb.BinderException | duckdb.ConversionException), exc
        out = str(exc)
    assert SECRET not in out and FILE_SECRET not in out


def test_the_parser_of_the_independent_check_sees_subqueries(con):
    """The check above would notice: DuckDB's parser reports the sentinel table and the file."""
    assert "bdp_secret" in _tables_in(con, "SELECT * FROM t WHERE (SELECT count(*) FROM bdp_secret) > 0")
    assert len(_tables_in(con, f"SELECT * FROM t WHERE a IN (SELECT 1 FROM read_csv('{Path('x')}'))")) > 1


def test_a_column_named_like_a_keyword_reads_as_the_column():
    """`union = 'yes'` over a column named union: the word is read as the name (and checked),
    where it is a column; elsewhere the keyword still refuses, and a real UNION is a subquery."""
    assert row_expression("union = 'yes'", ["union", "year"]).text == "\"union\" = 'yes'"
    with pytest.raises(InvalidParameter, match="cannot parse"):
        row_expression("union = 'yes'", ["x"])
    with pytest.raises(InvalidParameter, match="subquery"):
        row_expression("x = 1 union select 1", ["x", "union"])
