"""The service over real HTTP: tokens, isolation between analysts, concurrency, idempotency,
bad input and probes through every endpoint that takes an expression."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from serve_helpers import Server, add_analyst, write_service

from bayesdp.privacy import Ledger
from bayesdp.serve.config import Budget, load_config
from bayesdp.serve.state import State

SPEC = {"group_by": ["shop"], "keys": ["a", "b", "c"], "epsilon": 0.25,
        "aggregates": {"users": {"kind": "count_units"},
                       "spend": {"kind": "sum", "column": "spend", "bounds": [0, 10]}}}

# (method, path, JSON body) of every endpoint that needs a token.
ENDPOINTS: list[tuple[str, str, Any]] = [
    ("GET", "/v1/datasets", None),
    ("GET", "/v1/budget", None),
    ("POST", "/v1/preview", {"dataset": "visits", "spec": SPEC}),
    ("POST", "/v1/releases", {"dataset": "visits", "spec": SPEC}),
    ("GET", "/v1/releases", None),
    ("GET", "/v1/releases/rel_0", None),
    ("GET", "/v1/releases/rel_0/report", None),
    ("POST", "/v1/holdouts/model/queries", {"queries": ["spend > 5"]}),
    ("GET", "/v1/holdouts/model/train", None),
    ("POST", "/v1/synthetic/people", None),
    ("GET", "/v1/synthetic/people", None),
]


def ledger_spends(server: Server, token: str, dataset: str) -> int:
    path = server.config.state / "ledgers" / token.split("_")[1] / f"{dataset}.db"
    return len(Ledger(path).history()) if path.exists() else 0


def release(http: httpx.Client, spec: dict[str, Any] | None = None, key: str | None = None,
            dataset: str = "visits") -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return http.post("/v1/releases", json={"dataset": dataset, "spec": spec or SPEC}, headers=headers)


def test_health_needs_no_token(server: Server) -> None:
    assert server.client().get("/health").json() == {"status": "ok"}


def test_every_endpoint_refuses_missing_wrong_or_revoked_tokens(server: Server) -> None:
    token = add_analyst(server.config_path, "to-revoke")
    assert server.client(token).get("/v1/budget").status_code == 200
    state = State(server.config)
    state.revoke("to-revoke")
    state.close()
    analyst_id = token.split("_")[1]
    bad = [server.client(t) for t in (None, "wrong", f"bdp_{analyst_id}_not-the-secret",
                                      "bdp_000000000000_x", token)]
    for method, path, body in ENDPOINTS:
        for http in bad:
            r = http.request(method, path, json=body)
            assert r.status_code == 401, (method, path, http.headers.get("authorization"), r.text)
            assert r.json()["error"]["code"] == "unauthorized"
    assert ledger_spends(server, token, "visits") == 0


def test_analysts_see_and_spend_only_their_own(server: Server) -> None:
    a, b = add_analyst(server.config_path, "iso-a"), add_analyst(server.config_path, "iso-b")
    http_a, http_b = server.client(a), server.client(b)
    r = release(http_a)
    assert r.status_code == 201, r.text
    rid = r.json()["id"]
    assert http_a.get(f"/v1/releases/{rid}").json()["rows"] == r.json()["rows"]
    assert http_a.get(f"/v1/releases/{rid}/report").text.startswith("<")
    for path in (f"/v1/releases/{rid}", f"/v1/releases/{rid}/report"):
        assert http_b.get(path).status_code == 404
    assert http_b.get("/v1/releases").json()["releases"] == []
    assert [x["id"] for x in http_a.get("/v1/releases").json()["releases"]] == [rid]
    spent_b = http_b.get("/v1/budget").json()["datasets"]["visits"]["spent"]["epsilon"]
    spent_a = http_a.get("/v1/budget").json()["datasets"]["visits"]["spent"]["epsilon"]
    assert (spent_a, spent_b) == (0.25, 0.0)
    assert release(http_b, key="shared-key").status_code == 201
    assert ledger_spends(server, a, "visits") == 1 and ledger_spends(server, b, "visits") == 1
    # The same idempotency key from another analyst is that analyst's own request.
    assert release(http_a, key="shared-key").json()["id"] != release(http_b, key="shared-key").json()["id"]


@pytest.mark.slow
def test_concurrent_releases_spend_exactly_the_budget(server: Server) -> None:
    """64 concurrent requests, 32 from each of two analysts whose budgets allow 10 releases."""
    tokens = [add_analyst(server.config_path, f"busy-{i}") for i in range(2)]
    state = State(server.config)
    for i in range(2):
        state.set_budget(f"busy-{i}", "visits", Budget(2.5, 0.0, "basic"))
    state.close()
    statuses: dict[str, list[int]] = {t: [] for t in tokens}
    clients = {t: server.client(t, timeout=120) for t in tokens}  # httpx clients are thread-safe
    lock = threading.Lock()

    def one(token: str) -> None:
        code = release(clients[token]).status_code
        with lock:
            statuses[token].append(code)

    threads = [threading.Thread(target=one, args=(tokens[i % 2],)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not any(t.is_alive() for t in threads), "a request hung"
    for token in tokens:
        assert sorted(statuses[token]) == [201] * 10 + [403] * 22, statuses[token]
        path = server.config.state / "ledgers" / token.split("_")[1] / "visits.db"
        assert Ledger(path).spent().epsilon == 2.5
    budget = server.client(tokens[0]).get("/v1/budget").json()["datasets"]["visits"]
    assert budget["remaining"]["epsilon"] == 0.0 and budget["releases"] == 10


def test_a_retried_release_returns_the_stored_one_and_spends_nothing(server: Server) -> None:
    token = add_analyst(server.config_path, "retry")
    http = server.client(token)
    key = str(uuid.uuid4())
    first, again = release(http, key=key), release(http, key=key)
    assert first.status_code == 201 and again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert ledger_spends(server, token, "visits") == 1
    reused = release(http, {**SPEC, "epsilon": 0.5}, key=key)
    assert reused.status_code == 422 and "different request" in reused.json()["error"]["message"]
    assert release(http, key=str(uuid.uuid4())).json()["rows"] != first.json()["rows"]
    assert ledger_spends(server, token, "visits") == 2


def test_releases_carry_values_intervals_guarantee_explanation_and_budget(server: Server) -> None:
    token = add_analyst(server.config_path, "reader")
    doc = release(server.client(token), {**SPEC, "where": ["flag = 1"], "label": "flagged"}).json()
    table = pd.DataFrame(doc["rows"], columns=doc["columns"])
    assert list(table["shop"]) == ["a", "b", "c"]
    assert (table["spend_low"] <= table["spend"]).all() and (table["spend"] <= table["spend_high"]).all()
    assert doc["guarantee"]["epsilon"] == 0.25 and doc["guarantee"]["unit"] == "user"
    assert doc["remaining"]["epsilon"] == 2.75
    assert "ε=0.25 per user" in doc["explain"]
    # Exact bounding counts are the curator's: they are in the audit log, not in the response.
    assert "Bounding kept" not in doc["explain"] and "were clipped" not in doc["explain"]
    state = State(server.config)
    audit = [r for r in state.audit_log(token.split("_")[1]) if r["result"] == doc["id"]]
    state.close()
    assert len(audit) == 1 and "Bounding kept" in audit[0]["detail"]
    assert audit[0]["spend_epsilon"] == 0.25


def test_the_curator_warning_goes_to_the_audit_log_not_the_analyst(server: Server) -> None:
    """3,000 visits of 800 users bounded to one row each: bounding drops most rows, an exact fact."""
    token = add_analyst(server.config_path, "bounded")
    spec = {**SPEC, "max_groups_per_unit": 1, "max_rows_per_group": 1, "label": "tight"}
    doc = release(server.client(token), spec).json()
    assert not any("dropped" in w for w in doc["warnings"])
    state = State(server.config)
    audit = [r for r in state.audit_log(token.split("_")[1]) if r["result"] == doc["id"]]
    state.close()
    assert "curator only" in audit[0]["detail"] and "contribution bounding dropped" in audit[0]["detail"]


def test_bad_input_gets_a_clear_4xx_without_a_trace(server: Server) -> None:
    token = add_analyst(server.config_path, "clumsy")
    http = server.client(token)
    cases = [
        (http.post("/v1/releases", content=b"{not json", headers={"Content-Type": "application/json"}),
         400, "not valid JSON"),
        (http.post("/v1/releases", json=[1, 2]), 400, "JSON object"),
        (release(http, {**SPEC, "colour": "red"}), 400, "unknown key(s) ['colour']"),
        (release(http, {**SPEC, "epsilon": -1}), 400, "epsilon=-1"),
        (release(http, {**SPEC, "group_by": ["secret"]}), 400, "public columns"),
        (release(http, {**SPEC, "aggregates": {"x": {"kind": "sum", "column": "secret",
                                                     "bounds": [0, 1]}}}), 400, "public columns"),
        (release(http, {**SPEC, "aggregates": {"x": {"kind": "share", "condition": "\"user\" > 400"}}}),
         400, "column 6 is not a column of the table"),
        (release(http, {**SPEC, "aggregates": {"x": {"kind": "mean", "column": "(SELECT 1)",
                                                     "bounds": [0, 1]}}}), 400, "subquer"),
        (release(http, {**SPEC, "aggregates": {"x": {"kind": "median"}}}), 400, "kind one of"),
        (release(http, dataset="nope"), 404, "no dataset named 'nope'"),
        (http.post("/v1/releases", content=b"x" * 10_000_000), 413, "limit"),
        (http.get("/v1/synthetic/visits"), 404, "no synthetic data"),
        (http.post("/v1/holdouts/none/queries", json={"queries": ["spend > 1"]}), 404, "no holdout"),
        (http.post("/v1/holdouts/model/queries", json={"queries": []}), 400, "queries"),
    ]
    for r, status, message in cases:
        assert r.status_code == status, (message, r.text)
        assert message in r.json()["error"]["message"], r.text
        assert "Traceback" not in r.text and "File \"" not in r.text
    assert ledger_spends(server, token, "visits") == 0


def test_whether_a_holdout_query_fails_does_not_depend_on_the_holdout(server: Server) -> None:
    """A value outside [0, 1] or NULL on some holdout row would otherwise refuse the query: one
    free bit about those rows. Values are clipped into [0, 1] and NULL counts as 0."""
    http = server.client(add_analyst(server.config_path, "nosy"))
    queries = ["CASE WHEN spend > 11.9 THEN 2 ELSE 0 END", "CASE WHEN spend > 11.9 THEN NULL ELSE 1 END",
               "spend / 10", "shop"]
    r = http.post("/v1/holdouts/model/queries", json={"queries": queries})
    assert r.status_code == 200, r.text
    # Answered, not refused. The holdout's budget is shared by every test on this server, so an
    # answer may also say the budget is exhausted: that depends on earlier queries, not on rows.
    answers = r.json()["answers"]
    assert len(answers) == 4
    assert all((a["source"] in ("train", "holdout") and a["value"] is not None)
               or (a["source"] == "exhausted" and a["value"] is None) for a in answers)


def test_rows_with_a_null_unit_are_left_out_at_start_up_not_in_a_request(server: Server) -> None:
    """gaps.csv has three rows with a null unit: the curator is told once, at start-up; a
    request answers as on any data and its audit detail does not mention them."""
    token = add_analyst(server.config_path, "gappy")
    r = release(server.client(token), dataset="gaps")
    assert r.status_code == 201, r.text
    assert r.json()["warnings"] == []
    state = State(server.config)
    [row] = [x for x in state.audit_log(token.split("_")[1]) if x["path"] == "/v1/releases"]
    state.close()
    assert "null" not in row["detail"]
    log = (server.config_path.parent / "server.log").read_text()
    assert "datasets.gaps: 3 rows with a null privacy unit 'user' belong to nobody" in log


PROBES = [
    "(SELECT 1) = 1",
    "spend IN (SELECT spend FROM visits)",
    "EXISTS (SELECT * FROM read_csv('/etc/passwd'))",
    "length(read_text('/etc/passwd')) > 0",
    "(SELECT count(*) FROM read_csv_auto('visits.csv')) > 0",
    "spend > (SELECT max(spend) FROM ds_visits)",
    "(SELECT count(*) FROM glob('/etc/*')) > 0",
    "secret > 5",
    "getenv('HOME') = ''",
    "spend > 1; DROP TABLE ds_visits",
    "spend > 1 UNION SELECT 1",
]


@pytest.mark.parametrize("probe", PROBES)
def test_probes_are_refused_by_every_endpoint_that_takes_an_expression(server: Server, probe: str) -> None:
    token = add_analyst(server.config_path, f"probe-{uuid.uuid4().hex[:8]}")
    http = server.client(token)
    responses = [
        release(http, {**SPEC, "where": [probe]}),
        http.post("/v1/preview", json={"dataset": "visits", "spec": {**SPEC, "where": probe}}),
        http.post("/v1/holdouts/model/queries", json={"queries": [probe]}),
        http.post("/v1/holdouts/model/queries", json={"queries": ["spend > 1", probe]}),
    ]
    for r in responses:
        assert r.status_code == 400, (probe, r.text)
        assert "Traceback" not in r.text
    assert ledger_spends(server, token, "visits") == 0


def test_holdout_answers_and_training_download(server: Server) -> None:
    token = add_analyst(server.config_path, "modeller")
    http = server.client(token)
    r = http.post("/v1/holdouts/model/queries", json={"queries": ["spend > 5", "shop = 'a'"]})
    assert r.status_code == 200, r.text
    answers = r.json()["answers"]
    assert [a["source"] in ("train", "holdout") for a in answers] == [True, True]
    assert all(0 <= a["value"] <= 1 for a in answers)
    train = pd.read_csv(server.config_path.parent / "train.csv")
    downloaded = http.get("/v1/holdouts/model/train")
    assert downloaded.headers["content-type"].startswith("text/csv")
    pd.testing.assert_frame_equal(pd.read_csv(__import__("io").StringIO(downloaded.text)), train)


def test_synthetic_data_is_released_once_then_free(server: Server) -> None:
    token = add_analyst(server.config_path, "synth")
    http = server.client(token)
    first = http.post("/v1/synthetic/people")
    assert first.status_code == 201, first.text
    again = http.post("/v1/synthetic/people")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert ledger_spends(server, token, "people") == 1
    rows = pd.read_csv(__import__("io").StringIO(http.get("/v1/synthetic/people").text))
    assert list(rows.columns) == ["shop", "spend"] and len(rows) == 300
    assert http.post("/v1/synthetic/visits").status_code == 404
    other = server.client(add_analyst(server.config_path, "other"))
    assert other.get("/v1/synthetic/people").status_code == 404
    # The budget says when it was released and what it cost (the console charts every spend).
    budgets = http.get("/v1/budget").json()["datasets"]
    assert budgets["people"]["synthetic"] == {k: first.json()[k] for k in ("created", "guarantee")}
    assert budgets["visits"]["synthetic"] is None
    assert other.get("/v1/budget").json()["datasets"]["people"]["synthetic"] is None


def test_openapi_and_docs(server: Server) -> None:
    http = server.client()
    schema = http.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.") and "/v1/releases" in schema["paths"]
    assert "/v1/releases/{id}" in http.get("/docs").text


def test_the_rate_limit_is_per_analyst_and_configurable(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from bayesdp.serve.app import create_app

    config_path = write_service(tmp_path, rate=3)
    a, b = add_analyst(config_path, "a"), add_analyst(config_path, "b")
    with TestClient(create_app(load_config(config_path))) as http:
        as_a = {"Authorization": f"Bearer {a}"}
        assert [http.get("/v1/budget", headers=as_a).status_code for _ in range(4)] == [200, 200, 200, 429]
        r = http.get("/v1/budget", headers=as_a)
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        assert http.get("/v1/budget", headers={"Authorization": f"Bearer {b}"}).status_code == 200


def test_an_internal_error_returns_only_an_error_id_and_logs_the_trace(server: Server) -> None:
    token = add_analyst(server.config_path, "unlucky")
    http = server.client(token)
    rid = release(http).json()["id"]
    state = State(server.config)
    with state._transaction() as conn:  # a stored result damaged on disk
        conn.execute("UPDATE results SET response = '{}' WHERE id = ?", (rid,))
    state.close()
    r = http.get(f"/v1/releases/{rid}")
    assert r.status_code == 500
    error = r.json()["error"]
    assert error["message"] == f"internal error {error['id']}"
    assert "Traceback" not in r.text and "KeyError" not in r.text
    log = (server.config_path.parent / "server.log").read_text()
    assert error["id"] in log and "Traceback" in log


def test_keep_alive_requests_do_not_wait_for_delayed_acks(server: Server) -> None:
    """With Nagle's algorithm on, each response on a kept-alive connection waited about 40 ms for
    the client's delayed ACK; /health does no work, so its fastest round trip stays far below
    (the fastest, not the median, so that a loaded machine's slow requests cannot fail it)."""
    with server.client() as http:
        times = []
        for _ in range(20):
            start = time.perf_counter()
            assert http.get("/health").status_code == 200
            times.append(time.perf_counter() - start)
    assert min(times[1:]) < 0.025, times
