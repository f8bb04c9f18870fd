"""Refusals speak of the query as written: the user's own function names and quotes."""

import pytest

import bayesdp as bdp
from bayesdp.sql import SqlError

BQ = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
      "privacy_unit_column = user_id) ")


def refusal(events, meta, query: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        bdp.sql(query, {"events": events}, metadata=meta, epsilon=1.0)
    return info.value


def test_a_double_quoted_name_in_bigquery_is_a_string_and_backticks_are_suggested(events, meta):
    query = BQ + 'AVG("revenue", contribution_bounds_per_group => (0, 10)) FROM events'
    exc = refusal(events, meta, query)
    assert "is a string" in exc.message and "`revenue`" in exc.message
    assert "CAST" not in exc.message
    assert query[exc.start:exc.end] == '"revenue"'


def test_a_single_quoted_name_in_plain_sql_suggests_double_quotes(events, meta):
    exc = refusal(events, meta, "SELECT SUM('revenue') FROM events")
    assert "is a string" in exc.message and '"revenue"' in exc.message


def test_a_cte_before_the_clause_is_refused_as_a_cte_not_blamed_on_the_clause(events, meta):
    query = "WITH e AS (SELECT * FROM events) " + BQ + "COUNT(*) FROM e"
    exc = refusal(events, meta, query)
    assert "common table expression" in exc.message
    assert "cannot be read" not in exc.message
    assert query[exc.start:].startswith("e AS")


@pytest.mark.parametrize("prefix", ["SELECT ", BQ])
def test_an_unsupported_aggregate_is_named_as_written(events, meta, prefix):
    exc = refusal(events, meta, prefix + "STRING_AGG(campaign) FROM events")
    assert exc.message.startswith("STRING_AGG is not a supported private aggregate")
    assert "GROUP_CONCAT" not in exc.message


@pytest.mark.parametrize(("query", "quoted"), [
    ("SELECT COUNT(*) FROM events WHERE random() > 0.5", "function random at"),
    (BQ + "SUM(random(), contribution_bounds_per_group => (0, 1)) FROM events",
     "the argument of SUM(random(), contribution_bounds_per_group => (0, 1)): function random at"),
])
def test_a_refused_function_is_quoted_as_written(events, meta, query, quoted):
    exc = refusal(events, meta, query)
    assert quoted in exc.message
    assert "rand " not in exc.message and "RAND()" not in exc.message
