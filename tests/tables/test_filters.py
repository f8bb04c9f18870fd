"""Table.where: a filter is a checked row-local expression, never SQL spliced into the engine's query."""

import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp import Guarantee, Ledger, rng_for_tests
from bayesdp.errors import InvalidParameter
from bayesdp.expressions import row_expression


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.DataFrame({"user_id": [42, 42, 7, 8, 9], "g": ["a", "b", "a", "b", "a"],
                         "v": [1.0, 2.0, 3.0, 4.0, 5.0], "code": ["1", "2", "x", "4", "5"]})


def test_a_subquery_over_the_private_table_is_refused(frame):
    """The probe's bypass: a filter that asks whether user 42 is present, answered exactly."""
    t = bdp.table(frame, "user_id")
    with pytest.raises(InvalidParameter, match="subquery"):
        t.where("(SELECT count(*) FROM bdp_source WHERE user_id = 42) > 0")


@pytest.mark.parametrize(("condition", "named"), [
    ("v > (SELECT avg(v) FROM bdp_source)", "subquery"),
    ("EXISTS (SELECT 1 FROM bdp_source WHERE user_id = 42)", "EXISTS"),
    ("user_id IN (SELECT user_id FROM bdp_source)", "subquery"),
    ("(SELECT count(*) FROM read_csv('/etc/passwd')) > 0", "subquery"),
    ("read_csv('/etc/passwd') IS NULL", "table function read_csv"),
    ("v > avg(v) OVER ()", "window function"),
    ("getenv('HOME') IS NOT NULL", "function getenv"),
    ("bdp_source.v > 0", "reference to another table"),
    ("v > 0; SELECT 1", "';'"),
    ("vv > 0", "did you mean 'v'"),
])
def test_filters_that_are_not_row_local_are_refused(frame, condition, named):
    with pytest.raises(InvalidParameter, match=named):
        bdp.table(frame, "user_id").where(condition)


def test_a_filter_is_checked_against_the_tables_own_columns(frame):
    t = bdp.table(frame, "user_id").where("V >= 2 AND g = 'a' -- a comment")
    assert t.filters == (row_expression("v >= 2 AND g = 'a'", t.columns),)
    assert t.filters[0].columns == {"v", "g"}
    other = bdp.table(pd.DataFrame({"u": [1], "w": [1.0]}), "u")
    with pytest.raises(InvalidParameter, match="not a column"):
        other.where(t.filters[0])
    assert other.where(row_expression("w > 0", ["w"])).filters[0].text == '"w" > 0'
    with pytest.raises(InvalidParameter, match="condition"):
        other.where(3)  # type: ignore[arg-type]


def test_a_filter_keeps_the_rows_it_names(frame):
    def total(t):
        r = t.agg(n=bdp.count()).release(700.0, rng=rng_for_tests(2))  # P(|noise| > 0.5) = e^-350
        return round(float(r.to_pandas()["n"].iloc[0]))

    t = bdp.table(frame, None)
    assert total(t.where("v >= 2").where("g = 'a'")) == 2
    assert total(t.where("g IN ('a') AND NOT v BETWEEN 2 AND 4")) == 2


def test_a_filter_that_would_fail_on_a_value_drops_that_row(frame, tmp_path):
    """CAST('x' AS INTEGER) raises in DuckDB: the error would tell the analyst that some row holds
    text. Rendered as TRY_CAST, the row is dropped and the release goes on."""
    led = Ledger(tmp_path / "budget.db", budget=Guarantee(1000.0, unit="row"))
    t = bdp.table(frame, None).where("CAST(code AS INTEGER) > 0")
    r = t.agg(n=bdp.count()).release(700.0, ledger=led, rng=rng_for_tests(3))  # P(|noise| > 0.5) = e^-350
    assert round(float(r.to_pandas()["n"].iloc[0])) == 4
    assert len(led.history()) == 1
