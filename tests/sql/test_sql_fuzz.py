"""Random SQL text and random identifiers (quotes, semicolons, comments): bdp.sql gives a
bayesdp error or a release, never another exception, and the only statements reaching DuckDB
are the release's own (DuckDB's query log, on the connection the table lives on, proves it)."""

import re

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import bayesdp as bdp
from bayesdp.errors import BayesdpError
from bayesdp.sql import release_translation, translate
from bayesdp.sql.postprocess import rehearse

WEIRD = 'we"ird;--col'
rng = np.random.default_rng(5)
DATA = pd.DataFrame({"user_id": rng.integers(0, 40, 200), "campaign": rng.choice(["a", "b'; DROP", "c"], 200),
                     "revenue": rng.uniform(0, 120, 200), WEIRD: rng.uniform(0, 5, 200)})
META = {"tables": {"events": {"privacy_unit": "user_id", "max_groups_per_unit": 2, "delta": 1e-5,
                              "columns": {"revenue": {"bounds": [0, 100]}, WEIRD: {"bounds": [0, 5]},
                                          "campaign": {"public": True}}}}}
# The statements the engine issues: its view of the source, its queries, its temporary tables,
# its count of the rows and null units.
ENGINE = ('CREATE TEMPORARY VIEW "bdp_source" AS ', 'DROP VIEW IF EXISTS "bdp_source"',
          "WITH bdp_source AS NOT MATERIALIZED (", "CREATE TEMP TABLE bdp_", "DROP TABLE IF EXISTS bdp_",
          "SELECT count(*), count(*) - count(", "WITH bdp_per_unit AS (",
          # a query on the BigQuery clause's per-unit relation, which DuckDB names so
          'WITH "__duckdb_s0" AS NOT MATERIALIZED (\nWITH bdp_source AS NOT MATERIALIZED (')
# (and the secret seed of the BigQuery clause's per-unit rows, drawn when a query is translated)
NAMES = re.compile(r"__duckdb_source_[0-9a-f]+_\d+|df_[0-9a-f]+|bdp_[0-9a-f]{32}|\d+::UBIGINT")

ident = st.text(st.sampled_from(list("ab_1 \"';-/*\n\\`")), min_size=1, max_size=10)
column = st.sampled_from(["campaign", "revenue", "user_id", WEIRD, "nope"]) | ident
quoted = column.map(lambda c: '"' + c.replace('"', '""') + '"')
literal = ident.map(lambda s: "'" + s.replace("'", "''") + "'") | ident.map(lambda s: f"'{s}'")
name = quoted | column
templates = st.one_of(
    st.builds("SELECT COUNT(*) AS {} FROM events".format, name),
    st.builds("SELECT {0}, COUNT(*) AS n FROM events GROUP BY {0}".format, name),
    st.builds("SELECT SUM({}) AS s, AVG(revenue) FROM events".format, name),
    st.builds("SELECT campaign, COUNT(*) FROM events WHERE campaign IN ({}, 'a') GROUP BY campaign".format,
              literal),
    st.builds("SELECT COUNT(*) FROM events WHERE {} = {}".format, name, literal),
    st.builds("SELECT MEDIAN({}) FROM events HAVING COUNT(*) > {}".format, name, literal),
    st.builds(("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, "
               "privacy_unit_column = {}) COUNT(*) AS n FROM events").format, name),
)
fragment = st.sampled_from(["SELECT", "COUNT(*)", "SUM(revenue)", "FROM events", "WHERE", "GROUP BY campaign",
                            ";", "--", "/*", "*/", "'", '"', "(", ")", ",", "UNION", "JOIN", "DROP TABLE x",
                            "1", "=", "read_csv('x')", "user_id",
                            "WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1)",
                            "ATTACH 'x.db'", "COPY events TO 'out.csv'", "PRAGMA", "$1", "?"])
text = st.lists(fragment | ident, max_size=14).map(" ".join)


def logged(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute("SELECT message FROM duckdb_logs WHERE type = 'QueryLog'").fetchall()
    return [m for (m,) in rows]


def same(a: list[str], b: list[str]) -> bool:
    """The same statements up to the names of sources and temporary tables."""
    return [NAMES.sub("_", s) for s in a] == [NAMES.sub("_", s) for s in b]


def connection() -> tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyRelation]:
    con = duckdb.connect()
    con.execute("CALL enable_logging('QueryLog')")
    rel = con.from_df(DATA)
    con.execute("CALL truncate_duckdb_logs()")
    return con, rel


def outcome(run):
    try:
        return run()
    except BayesdpError as exc:  # anything else fails the test
        return type(exc)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=templates | text)
@example(query="SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, "
               "privacy_unit_column = user_id) campaign, COUNT(*) AS n, PERCENTILE_CONT(revenue, 0.5) "
               "AS p FROM events GROUP BY campaign")
def test_random_sql_gives_a_release_or_a_bayesdp_error_and_only_engine_statements(query):
    con, rel = connection()
    got = outcome(lambda: bdp.sql(query, {"events": rel}, metadata=META, epsilon=1.0,
                                  rng=bdp.rng_for_tests(0)))
    event("release" if not isinstance(got, type) else got.__name__)
    statements = logged(con)
    assert all(s.startswith(ENGINE) for s in statements), statements
    # The same statements as the builder's release of the translated Query, and none without one.
    con2, rel2 = connection()
    t = outcome(lambda: translate(query, {"events": rel2}, metadata=META, epsilon=1.0))
    if not isinstance(t, type):
        t = outcome(lambda: rehearse(t)) or t
    if isinstance(t, type):
        assert got is t and statements == []
        return
    # The BigQuery clause's release is its per-unit table's (and its bounds', when learnt).
    again = outcome(lambda: release_translation(t, rng=bdp.rng_for_tests(0)) if t.per_unit
                    else t.query.release(rng=bdp.rng_for_tests(0), **t.options))
    t = None  # its table and engine go, as bdp.sql's did on return (an engine drops its key table)
    assert same(statements, logged(con2))
    if isinstance(got, type):
        assert again is got
    else:
        assert not isinstance(again, type)
