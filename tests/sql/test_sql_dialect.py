"""sqlglot's BigQuery dialect, extended: the differential privacy clause and named arguments."""

import sqlglot
from sqlglot import exp

from bayesdp.sql import translate
from bayesdp.sql.dialect import BigQueryDP, DifferentialPrivacy, NamedArguments

QUERY = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, max_groups_contributed = 5, "
         "privacy_unit_column = user_id) campaign, COUNT(*) AS n, "
         "SUM(revenue, contribution_bounds_per_group => (0, 100)) AS rev FROM events GROUP BY campaign")


def test_clause_becomes_an_argument_of_the_select():
    tree = sqlglot.parse_one(QUERY, dialect=BigQueryDP)
    clause = tree.args["differential_privacy"]
    assert isinstance(clause, DifferentialPrivacy)
    assert [(e.this.name, e.expression.sql()) for e in clause.expressions] == [
        ("epsilon", "1"), ("delta", "1e-6"), ("max_groups_contributed", "5"),
        ("privacy_unit_column", "user_id")]
    assert [e.alias_or_name for e in tree.expressions] == ["campaign", "n", "rev"]


def test_named_arguments_wrap_the_aggregate_and_render_back():
    rev = sqlglot.parse_one(QUERY, dialect=BigQueryDP).expressions[2].this
    assert isinstance(rev, NamedArguments) and isinstance(rev.this, exp.Sum)
    assert rev.expressions[0].this.name == "contribution_bounds_per_group"
    assert rev.sql(dialect=BigQueryDP) == "SUM(revenue, contribution_bounds_per_group => (0, 100))"


def test_nested_selects_keep_their_own_clause():
    tree = sqlglot.parse_one("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM "
                             "(SELECT a FROM t) AS s", dialect=BigQueryDP)
    assert "differential_privacy" in tree.args
    assert "differential_privacy" not in tree.find(exp.Subquery).this.args


def test_bigquery_itself_is_unchanged():
    assert sqlglot.parse_one("SELECT SUM(x) FROM t", dialect="bigquery").find(NamedArguments) is None
    assert BigQueryDP.Parser is not sqlglot.Dialect.get_or_raise("bigquery").parser_class


def test_translating_a_query_over_a_duckdb_relation_opens_no_connection(monkeypatch):
    """A relation brings its connection: reading the query's schema opens none (each costs
    tens of milliseconds, more than the rest of a translation)."""
    import duckdb

    import bayesdp.tables.query as query_module
    import bayesdp.tables.source as source

    rel = duckdb.connect().sql("SELECT range AS uid, range % 3 AS g, range * 1.5 AS x FROM range(20)")

    def refused(*_: object, **__: object) -> None:
        raise AssertionError("a new DuckDB connection was opened")

    for module in (source, query_module):
        monkeypatch.setattr(module, "connect", refused)
    for query in ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = uid) "
                  "g, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY g",
                  "SELECT g, COUNT(*) AS n FROM t GROUP BY g"):
        meta = {"tables": {"t": {"privacy_unit": "uid", "max_groups_per_unit": 1, "epsilon": 1}}}
        assert translate(query, {"t": rel}, metadata=meta).query.aggregates
