"""SQL through the service: `POST /v1/releases` and `/v1/preview` take the queries of `bayesdp sql`
(the dataset's public schema is their metadata), the client's `sql()` returns the same Release as
`bdp.sql`, and refused SQL is a 4xx that points at the text, never a trace or a spend."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pandas as pd
import pytest
from serve_helpers import Server, add_analyst
from test_serve_api import ledger_spends

import bayesdp as bdp
from bayesdp.report import write_release_report
from bayesdp.serve.config import load_config
from bayesdp.serve.state import State
from bayesdp.sql import SqlError

GROUPED = "SELECT shop, COUNT(*) AS n, AVG(spend) AS avg_spend FROM visits GROUP BY shop"
BIGQUERY = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6, privacy_unit_column "
            "= user, max_groups_contributed = 2) shop, SUM(spend) AS total FROM visits GROUP BY shop")


def post(http: httpx.Client, body: dict[str, object], path: str = "/v1/releases",
         key: str | None = None) -> httpx.Response:
    return http.post(path, json=body, headers={"Idempotency-Key": key} if key else {})


def audit_rows(server: Server, token: str) -> list[dict[str, object]]:
    state = State(server.config)
    try:
        return state.audit_log(token.split("_")[1])
    finally:
        state.close()


def test_plain_sql_with_the_datasets_metadata(server: Server) -> None:
    token = add_analyst(server.config_path, "sql-plain")
    http = server.client(token)
    r = post(http, {"sql": GROUPED, "epsilon": 1.0})
    assert r.status_code == 201, r.text
    doc = r.json()
    table = pd.DataFrame(doc["rows"], columns=doc["columns"])
    # The domain of shop is public in the configuration: every key is released, in order.
    assert list(table["shop"]) == ["a", "b", "c"]
    assert list(table.columns) == ["shop", "n", "n_low", "n_high", "avg_spend", "avg_spend_low",
                                   "avg_spend_high"]
    assert ((table["avg_spend"] >= 0) & (table["avg_spend"] <= 10)).all()  # the configured bounds
    assert doc["guarantee"]["epsilon"] == 1.0 and doc["guarantee"]["unit"] == "user"
    assert doc["spec"] == {"sql": GROUPED} and doc["label"] == "sql: " + GROUPED
    assert "Bounding kept" not in doc["explain"]
    assert ledger_spends(server, token, "visits") == 1
    [row] = [x for x in audit_rows(server, token) if x["result"] == doc["id"]]
    assert row["dataset"] == "visits" and row["spend_epsilon"] == 1.0
    assert "Bounding kept" in str(row["detail"])
    listed = http.get("/v1/releases").json()["releases"]
    assert [x["label"] for x in listed] == ["sql: " + GROUPED]


def test_bigquery_clause_derived_values_and_preview(server: Server) -> None:
    http = server.client(add_analyst(server.config_path, "sql-bq"))
    r = post(http, {"sql": BIGQUERY})
    assert r.status_code == 201, r.text
    assert r.json()["guarantee"]["epsilon"] == 0.5
    derived = ("SELECT shop, ROUND(SUM(spend) / COUNT(*), 2) AS per_row FROM visits GROUP BY shop "
               "ORDER BY shop DESC")
    doc = post(http, {"dataset": "visits", "sql": derived, "epsilon": 0.5}).json()
    assert doc["columns"] == ["shop", "per_row", "per_row_low", "per_row_high"]
    assert [row[0] for row in doc["rows"]] == ["c", "b", "a"]
    assert "computed from released values" in doc["derived"]["per_row"]
    preview = post(http, {"sql": GROUPED, "epsilon": 1.0}, "/v1/preview")
    assert preview.status_code == 200, preview.text
    assert [row[0] for row in preview.json()["rows"]] == ["n", "avg_spend"]


def test_a_retried_sql_release_returns_the_stored_one(server: Server) -> None:
    token = add_analyst(server.config_path, "sql-retry")
    http = server.client(token)
    key = str(uuid.uuid4())
    first, again = post(http, {"sql": GROUPED, "epsilon": 0.5}, key=key), post(
        http, {"sql": GROUPED, "epsilon": 0.5}, key=key)
    assert first.status_code == 201 and again.status_code == 200 and again.json() == first.json()
    assert ledger_spends(server, token, "visits") == 1


# (query, status, part of the message, the text the caret is under or None)
REFUSED = [
    ("SELECT COUNT(*) FROM visits WHERE spend IN (SELECT spend FROM visits)", 400, "subquery",
     "(SELECT spend FROM visits)"),
    ("SELECT COUNT(*) FROM (SELECT * FROM visits)", 400, "subquery", "(SELECT * FROM visits)"),
    ("SELECT COUNT(*) FROM read_csv('/etc/passwd')", 400, "no table functions", None),
    ("SELECT COUNT(*) FROM read_text('/etc/passwd')", 400, "no table functions", None),
    ("SELECT COUNT(*) FROM 'visits.csv'", 400, "not one of the tables given", "'visits.csv'"),
    ("SELECT COUNT(*) FROM ds_visits", 400, "not one of the tables given", "ds_visits"),
    ("SELECT COUNT(*) FROM visits WHERE length(read_text('/etc/passwd')) > 0", 400, "not allowed", None),
    ("SELECT COUNT(*) FROM visits WHERE getenv('HOME') = ''", 400, "not allowed", None),
    ("SELECT COUNT(*) FROM visits JOIN people ON TRUE", 400, "not supported", None),
    ("WITH v AS (SELECT * FROM visits) SELECT COUNT(*) FROM v", 400, "not supported", None),
    ("SELECT COUNT(*) FROM visits UNION SELECT COUNT(*) FROM people", 400, "not supported", None),
    ("SELECT * FROM visits", 400, "SELECT * is not supported", "*"),
    ("SELECT SUM(secret) FROM visits", 400, "secret", None),
    ("SELECT COUNT(*) FROM visits; DROP TABLE ds_visits", 400, "several statements", None),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = shop) COUNT(*) "
     "FROM visits", 400, "differs from the metadata's privacy unit 'user'", "shop"),
    ("SELECT shop, SUM(spend) FROM", 400, "", None),
]


@pytest.mark.parametrize(("query", "status", "message", "caret"), REFUSED)
def test_refused_sql_is_a_4xx_that_points_at_the_text(server: Server, query: str, status: int, message: str,
                                                      caret: str | None) -> None:
    token = add_analyst(server.config_path, f"sql-probe-{uuid.uuid4().hex[:8]}")
    http = server.client(token)
    for path in ("/v1/releases", "/v1/preview"):
        r = post(http, {"sql": query, "epsilon": 0.5}, path)
        assert r.status_code == status, (path, r.text)
        error = r.json()["error"]
        assert message in error["message"], r.text
        assert "Traceback" not in r.text and 'File "' not in r.text
        if caret is not None:
            assert query[error["sql"]["start"]:error["sql"]["end"]] == caret
            assert "^" in error["message"] and "line 1, column" in error["message"]
    assert ledger_spends(server, token, "visits") == 0
    assert all(row["status"] == str(status) for row in audit_rows(server, token))


def test_a_sql_body_takes_only_its_own_keys(server: Server) -> None:
    http = server.client(add_analyst(server.config_path, "sql-keys"))
    r = post(http, {"sql": GROUPED, "epsilon": 0.5, "spec": {"aggregates": {"n": {"kind": "count"}}}})
    assert r.status_code == 400 and "['spec']" in r.json()["error"]["message"]
    r = post(http, {"dataset": "people", "sql": GROUPED, "epsilon": 0.5})
    assert r.status_code == 400 and "not one of the tables given" in r.json()["error"]["message"]


@pytest.mark.filterwarnings("ignore::bayesdp.errors.CuratorWarning")
def test_the_client_answers_sql_with_the_release_bdp_sql_gives(server: Server) -> None:
    db = bdp.connect(server.url, add_analyst(server.config_path, "sql-notebook"))
    query = "SELECT shop, COUNT(*) AS n, SUM(spend) / COUNT(*) AS per_row FROM visits GROUP BY shop"
    remote = db.sql(query, epsilon=0.5)
    data = pd.read_csv(server.config_path.parent / "visits.csv")
    local = bdp.sql(query, {"visits": data}, epsilon=0.5, rng=bdp.rng_for_tests(1),
                    metadata=load_config(server.config_path).datasets["visits"].sql_metadata())
    assert isinstance(remote, bdp.Release) and remote.diagnostics is None
    assert remote.columns == local.columns == ("shop", "n", "per_row")
    assert remote.derived == local.derived and remote.label == local.label
    assert remote.guarantee == local.guarantee
    assert list(remote.to_pandas().columns) == list(local.to_pandas().columns)
    assert remote.plan.table() == local.plan.table()
    with pytest.raises(SqlError, match="subquery") as refused:
        db.sql("SELECT COUNT(*) FROM visits WHERE spend IN (SELECT 1)", epsilon=0.5)
    assert refused.value.start is not None


def test_the_client_sql_release_reports(server: Server, tmp_path: Path) -> None:
    db = bdp.connect(server.url, add_analyst(server.config_path, "sql-report"))
    r = db.sql(BIGQUERY)
    assert write_release_report(r, tmp_path / "r.html").read_text().startswith("<")
