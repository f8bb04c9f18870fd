"""Each refused construct: a SqlError naming it, pointing at its text in the query."""

import pytest

import bayesdp as bdp
from bayesdp.sql import SqlError

BQ = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
      "privacy_unit_column = user_id) ")

# (query, words the message must contain, the text the caret must start under)
REFUSED = [
    ("SELECT campaign, COUNT(*) FROM events JOIN other ON events.user_id = other.user_id "
     "GROUP BY campaign", "JOIN", "other"),
    ("SELECT COUNT(*) FROM events, other", "JOIN", "other"),
    ("SELECT COUNT(*) FROM (SELECT * FROM events) AS e", "subquery", "(SELECT"),
    ("SELECT COUNT(*) FROM events WHERE revenue > (SELECT AVG(revenue) FROM events)", "subquery",
     "(SELECT"),
    ("SELECT COUNT(*) FROM events WHERE EXISTS (SELECT 1 FROM events)", "subquery", "EXISTS"),
    ("WITH e AS (SELECT * FROM events) SELECT COUNT(*) FROM e", "WITH", "e AS"),
    ("SELECT campaign, SUM(revenue) OVER (PARTITION BY campaign) FROM events", "window", "SUM"),
    ("SELECT COUNT(*) FROM events UNION ALL SELECT COUNT(*) FROM events", "UNION", "SELECT COUNT"),
    ("SELECT COUNT(*) FROM events INTERSECT SELECT COUNT(*) FROM events", "INTERSECT", "SELECT"),
    ("SELECT * FROM events", "SELECT *", "*"),
    ("SELECT campaign, country, COUNT(*) FROM events GROUP BY campaign", "neither aggregated nor a group key",
     "country"),
    ("SELECT COUNT(*) + revenue FROM events", "neither aggregated nor a group key", "revenue"),
    ("SELECT SUM(user_id) FROM events", "privacy unit", "user_id"),
    ("SELECT COUNT(*) FROM events WHERE user_id = 42", "privacy unit", "user_id"),
    ("SELECT user_id, COUNT(*) FROM events GROUP BY user_id", "privacy unit", "user_id"),
    ("SELECT COUNT(DISTINCT campaign) FROM events", "privacy unit only", "DISTINCT"),
    ("SELECT SUM(region) FROM events", "no bounds", "SUM"),
    ("SELECT MIN(revenue) FROM events", "MIN is not a supported private aggregate", "MIN"),
    ("SELECT SUM(revenue * 2) FROM events", "an expression, which has no bounds", "revenue * 2"),
    (BQ + "SUM(user_id + 1, contribution_bounds_per_group => (0, 9)) FROM events", "privacy unit",
     "user_id"),
    ("SELECT SUM(CASE WHEN revenue > 1 THEN 'x' ELSE 0 END) FROM events", "must be a number", "'x'"),
    ("SELECT COUNT(*) FILTER (WHERE revenue > 1) FROM events", "FILTER", "COUNT"),
    ("SELECT SUM(DISTINCT revenue) FROM events", "DISTINCT", "DISTINCT"),
    ("SELECT SUM(SUM(revenue)) FROM events", "inside an aggregate", "SUM(revenue)"),
    ("SELECT DISTINCT campaign FROM events", "SELECT DISTINCT", "DISTINCT"),
    ("SELECT campaign, COUNT(*) FROM events GROUP BY ROLLUP (campaign)", "ROLLUP", "ROLLUP"),
    ("SELECT COUNT(*) FROM events GROUP BY revenue > 10", "not expressions", "revenue"),
    ("SELECT UPPER(campaign) FROM events GROUP BY campaign", "group key or contain an aggregate", "UPPER"),
    ("SELECT 1 FROM events", "group key or contain an aggregate", "1"),
    ("SELECT COUNT(*) FROM read_csv('secret.csv')", "FROM must name one table", "read_csv"),
    ("SELECT COUNT(*) FROM nowhere", "not one of the tables", "nowhere"),
    ("SELECT COUNT(*) FROM events; DROP TABLE events", "several statements", "DROP"),
    ("DELETE FROM events", "only SELECT", "DELETE"),
    ("SELECT COUNT(*) FROM events QUALIFY COUNT(*) > 1", "QUALIFY", "COUNT"),
    ("SELECT COUNT(*) AS n, SUM(revenue) AS n FROM events", "used twice", "SUM"),
    ("SELECT COUNT(*) FROM events HAVING LN(COUNT(*)) > 1", "LN on released values", "LN"),
    ("SELECT COUNT(*) FROM events HAVING COUNT(*) > '1'", "cannot be compared", "COUNT(*) > '1'"),
    ("SELECT campaign, COUNT(*) + campaign FROM events GROUP BY campaign", "numbers on both sides",
     "COUNT(*) + campaign"),
    (BQ.replace("epsilon = 1", "epsilon = 1, group_selection_strategy = PUBLIC_GROUPS")
     + "COUNT(*) FROM events", "option 'group_selection_strategy'", "group_selection_strategy"),
    (BQ.replace("epsilon = 1", "epsilon = 1, max_groups_contributed = NULL") + "COUNT(*) FROM events",
     "NULL", "max_groups_contributed"),
    (BQ + "SUM(revenue, contribution_bounds => (0, 1)) FROM events", "named argument", "contribution_bounds"),
    (BQ.replace("user_id", "campaign") + "COUNT(*) FROM events", "differs from the metadata", "campaign"),
    ("SELECT COUNT(*) FROM events e WHERE other.revenue > 1", "not the query's table", "other"),
    ("SELECT COUNT(*) FROM events LIMIT -1", "LIMIT", "-1"),
    ("SELECT COUNT(*) AS n, SUM(campaign) AS s FROM events", "not numbers", "SUM(campaign)"),
    ("SELECT COUNT(*) FROM events WHERE read_csv('x') IS NULL", "table function", "read_csv"),
    ("SELECT campaign, COUNT(*) FROM events GROUP BY campaign ORDER BY 5", "position", "5"),
    ("SELECT COUNT(*), SUM(revenue FROM events", "cannot be read", "FROM"),
    # Clauses of FROM that change what is read are refused, in both dialects, not ignored.
    ("SELECT COUNT(*) FROM events TABLESAMPLE 10%", "TABLESAMPLE", "10%"),
    ("SELECT COUNT(*) FROM events USING SAMPLE 10 ROWS", "TABLESAMPLE", "10"),
    ("SELECT COUNT(*) FROM events AT (VERSION => 1)", "AT/BEFORE", "1)"),
    ("SELECT COUNT(*) FROM events AS e(a, b)", "renaming columns", "a, b"),
    (BQ + "COUNT(*) FROM events TABLESAMPLE SYSTEM (10 PERCENT)", "TABLESAMPLE", "10"),
    (BQ + "COUNT(*) FROM events FOR SYSTEM_TIME AS OF TIMESTAMP '2020-01-01'", "FOR SYSTEM_TIME",
     "'2020"),
    # Nesting that would exhaust Python's stack is refused before anything runs.
    ("SELECT COUNT(*) FROM events WHERE " + "(" * 100 + "revenue > 1" + ")" * 100, "nested too deeply",
     "SELECT"),
    ("SELECT COUNT(*) FROM events WHERE " + "NOT " * 2000 + "revenue > 1", "nested too deeply", "SELECT"),
    ("SELECT " + " + ".join(["COUNT(*)"] * 1000) + " FROM events", "nested too deeply", "SELECT"),
    (BQ + "COUNT(*) FROM events WHERE " + "(" * 500 + "revenue > 1" + ")" * 500, "nested too deeply",
     "SELECT"),
]


@pytest.mark.parametrize(("query", "words", "at"), REFUSED, ids=[r[1] for r in REFUSED])
def test_refused_with_construct_and_position(events, meta, query, words, at):
    with pytest.raises(SqlError) as info:
        bdp.sql(query, {"events": events}, metadata=meta, epsilon=1.0, rng=bdp.rng_for_tests(1))
    exc = info.value
    assert words in exc.message
    assert exc.start is not None, exc.message
    assert query[exc.start:].startswith(at), (query[exc.start:exc.end], exc.message)
    lines = str(exc).splitlines()
    assert lines[-1].strip().startswith("^")  # the caret line under the offending text


def test_refusals_are_invalid_parameters(events, meta):
    with pytest.raises(bdp.errors.InvalidParameter):
        bdp.sql("SELECT * FROM events", {"events": events}, metadata=meta, epsilon=1.0)


def test_no_privacy_unit_stated(events):
    with pytest.raises(SqlError, match=r"privacy unit .* is not stated"):
        bdp.sql("SELECT COUNT(*) FROM events", {"events": events}, epsilon=1.0)


def test_epsilon_given_twice_differently(events):
    with pytest.raises(SqlError, match="give it once"):
        bdp.sql(BQ + "COUNT(*) FROM events", {"events": events}, epsilon=2.0)


def test_no_epsilon(events, meta):
    with pytest.raises(SqlError, match="no epsilon"):
        bdp.sql("SELECT COUNT(*) FROM events", {"events": events}, metadata=meta)


def test_caret_window_on_long_lines(events, meta):
    query = "SELECT " + ", ".join(f"SUM(revenue) AS s{i}" for i in range(30)) + " FROM events JOIN x"
    with pytest.raises(SqlError) as info:
        bdp.sql(query, {"events": events}, metadata=meta, epsilon=1.0)
    text, caret = str(info.value).splitlines()[-2:]
    assert len(text) < 90
    assert text[caret.index("^"):].startswith("x")


def test_a_refused_post_processing_spends_nothing(events, meta, tmp_path):
    ledger = bdp.Ledger(tmp_path / "budget.db", budget=bdp.Guarantee(1.0, delta=1e-5, unit="user_id"))
    with pytest.raises(SqlError, match="LN on released values"):
        bdp.sql("SELECT campaign, COUNT(*) FROM events GROUP BY campaign HAVING LN(COUNT(*)) > 1",
                {"events": events}, metadata=meta, epsilon=0.5, ledger=ledger)
    assert ledger.spent().epsilon == 0


@pytest.mark.parametrize(("query", "text"), [
    ("SELECT COUNT(*) FROM read_csv('secret.csv')", "read_csv('secret.csv')"),
    ("SELECT COUNT(*) FROM read_csv('secret.csv') WHERE revenue > 1", "read_csv('secret.csv')"),
    ("SELECT COUNT(*) FROM (SELECT * FROM events)", "(SELECT * FROM events)"),
])
def test_caret_covers_the_whole_construct(events, meta, query, text):
    with pytest.raises(SqlError) as info:
        bdp.sql(query, {"events": events}, metadata=meta, epsilon=1.0)
    assert query[info.value.start:info.value.end] == text


@pytest.mark.parametrize(("query", "hint"), [
    ("SELECT union, COUNT(*) FROM events GROUP BY union", 'quote it as "union"'),
    ("SELECT COUNT(*), AVG(union) FROM events", 'quote it as "union"'),
    (BQ + "union, COUNT(*) FROM events GROUP BY union", "quote it as `union`"),
    ("SELECT COUNT(*) FROM events WHERE", None),
    ("SELECT COUNT(*), SUM(revenue FROM events", None),
])
def test_a_column_named_like_a_keyword_gets_a_hint_to_quote_it(events, meta, query, hint):
    with pytest.raises(SqlError, match="cannot be read") as info:
        bdp.sql(query, {"events": events}, metadata=meta, epsilon=1.0)
    assert (hint in info.value.message) if hint else ("quote it" not in info.value.message)
