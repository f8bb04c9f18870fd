"""What one request may cost the service: refused from the request alone before any spend, its
engine work stopped when the client leaves, slow bodies dropped, a bounded pool, a memory cap."""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
import tomllib
import warnings
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import duckdb
import numpy as np
import pandas as pd
import pytest
from serve_helpers import Server, add_analyst, serve, write_service

import bayesdp as bdp
from bayesdp.errors import InvalidParameter
from bayesdp.serve.config import parse_config
from bayesdp.serve.limits import Interrupted, Limits, Work, cursor, interruptible, parse_limits, working
from bayesdp.serve.wire import release_json

BIG_ROWS = 1_000_000
PROCESS_MEMORY_MB = 2000
EXTRA = f"""
[datasets.visit2]
source = "visit2.csv"
privacy_unit = "user"
max_groups_per_unit = 2
max_rows_per_group = 2
budget = {{ epsilon = 3.0, delta = 1e-6 }}
[datasets.visit2.columns]
shop = {{ domain = ["a", "b", "c"] }}
spend = {{ bounds = [0, 10] }}
flag = {{ bounds = [0, 1] }}

[datasets.big]
source = "big.parquet"
privacy_unit = "user"
max_groups_per_unit = 1
max_rows_per_group = 1
budget = {{ epsilon = 3.0, delta = 1e-6 }}
[datasets.big.columns]
shop = {{ domain = ["a", "b", "c"] }}
spend = {{ bounds = [0, 10] }}

[limits]
body_seconds = 2
max_seconds = 30
memory_limit = "256MB"
threads = 1
process_memory = "{PROCESS_MEMORY_MB}MB"
workers = 1
queue = 1
"""


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    root = tmp_path_factory.mktemp("limits")
    config = write_service(root)
    rng = np.random.default_rng(3)
    pd.DataFrame({"user": np.arange(BIG_ROWS), "shop": rng.choice(["a", "b", "c"], BIG_ROWS),
                  "spend": rng.uniform(0, 10, BIG_ROWS)}).to_parquet(root / "big.parquet", index=False)
    visits = pd.read_csv(root / "visits.csv")  # and one more user: a neighbouring table
    pd.concat([visits, visits.tail(1).assign(user=10**6)]).to_csv(root / "visit2.csv", index=False)
    config.write_text(config.read_text() + EXTRA)
    s = serve(config)
    yield s, add_analyst(config, "mallory")
    s.stop()


def spec(dataset: str = "visits", **kw: Any) -> dict[str, Any]:
    return {"dataset": dataset, "spec": {"epsilon": 0.01, "aggregates": {"n": {"kind": "count"}}, **kw}}


def slow(filters: int) -> dict[str, Any]:
    """A release whose `filters` distinct filters cost four string functions each on each of the
    big dataset's rows (32 of them: over 8 s on a 2-core machine)."""
    where = [f"length(lower(upper(lower(upper(shop || '{i}'))))) > 0" for i in range(filters)]
    return spec("big", where=where)


HOSTILE = {
    "a million bins": spec(aggregates={"h": {"kind": "histogram", "column": "spend", "bins": 1_000_000,
                                             "bounds": [0, 10]}}),
    "60,000 edges": spec(aggregates={"h": {"kind": "histogram", "column": "spend",
                                           "bins": list(range(60_001))}}),
    "2,000 filters": spec(where=["spend > 1"] * 2000),
    "30,000 ANDs": {"dataset": "visits", "epsilon": 0.01,
                    "sql": "SELECT COUNT(*) FROM visits WHERE " + " AND ".join(["spend > 1"] * 30_000)},
    "bins × public keys": spec(group_by="shop", keys=list("abc") + [f"k{i}" for i in range(20_000)],
                               aggregates={"h": {"kind": "histogram", "column": "spend", "bins": 100,
                                                 "bounds": [0, 10]}}),
}


def spent(http: Any) -> float:
    return float(http.get("/v1/budget").json()["datasets"]["visits"]["spent"]["epsilon"])


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_costly_request_is_refused_before_it_runs_or_spends(limited: tuple[Server, str], name: str) -> None:
    server, token = limited
    http = server.client(token, timeout=20)
    before = spent(http)
    start = time.monotonic()
    r = http.post("/v1/releases", json=HOSTILE[name])
    assert time.monotonic() - start < 5
    assert r.status_code == 413, r.text
    message = r.json()["error"]["message"]
    assert "the service allows at most" in message and "limits." in message
    assert spent(http) == before


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_refusal_for_cost_is_the_same_on_a_neighbouring_table(limited: tuple[Server, str],
                                                                name: str) -> None:
    server, token = limited
    http = server.client(token, timeout=20)
    body = json.loads(json.dumps(HOSTILE[name]).replace('"visits"', '"visit2"').replace(
        "FROM visits", "FROM visit2"))
    answers = [http.post("/v1/releases", json=b) for b in (HOSTILE[name], body)]
    assert [(r.status_code, r.json()["error"]) for r in answers] == \
        [(answers[0].status_code, answers[0].json()["error"])] * 2


def test_ten_thousand_holdout_queries_are_refused_before_any_is_answered(limited: tuple[Server, str]) -> None:
    server, token = limited
    http = server.client(token, timeout=20)
    left = http.get("/v1/datasets").json()["holdouts"][0]["budget_left"]
    r = http.post("/v1/holdouts/model/queries", json={"queries": ["spend > 1"] * 10_000})
    assert r.status_code == 413 and "max_holdout_queries" in r.json()["error"]["message"]
    assert http.get("/v1/datasets").json()["holdouts"][0]["budget_left"] == left


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks of 1/100 s


def peak_rss_mb(pid: int) -> float:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(status["VmHWM"].split()[0]) / 1024


def test_a_client_that_leaves_stops_its_engine_work(limited: tuple[Server, str]) -> None:
    server, token = limited
    http = server.client(token, timeout=1.0)
    with pytest.raises(Exception, match="timed out"):  # over 8 s of engine work: the client leaves
        http.post("/v1/releases", json=slow(32))
    http.close()
    time.sleep(1.0)
    before = cpu_seconds(server.process.pid)
    time.sleep(2.0)
    assert cpu_seconds(server.process.pid) - before < 0.5  # idle again


def test_a_body_shorter_than_its_length_is_dropped_within_seconds(limited: tuple[Server, str]) -> None:
    server, token = limited
    url = urlparse(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=15) as s:
        s.sendall(f"POST /v1/releases HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"dataset\"".encode())
        start, data = time.monotonic(), b""
        while chunk := s.recv(65536):  # until the server closes the connection
            data += chunk
        assert time.monotonic() - start < 5
    assert data.startswith(b"HTTP/1.1 408")


def test_headers_that_never_end_do_not_hold_a_connection(limited: tuple[Server, str]) -> None:
    url = urlparse(limited[0].url)
    with socket.create_connection((url.hostname, url.port), timeout=15) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        start = time.monotonic()
        assert s.recv(100) == b""  # closed by the server, without an answer
        assert time.monotonic() - start < 5


def test_health_answers_fast_while_every_worker_is_busy(limited: tuple[Server, str]) -> None:
    server, token = limited
    statuses: list[tuple[int, str | None]] = []

    def release() -> None:
        with server.client(token, timeout=60) as http:
            r = http.post("/v1/releases", json=slow(4))
            statuses.append((r.status_code, r.headers.get("retry-after")))

    threads = [threading.Thread(target=release) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    waits = []
    for _ in range(10):
        start = time.monotonic()
        assert server.client().get("/health").status_code == 200
        waits.append(time.monotonic() - start)
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert statistics.median(waits) < 0.5, waits  # on a loaded 2-core machine; 1.2 s before the pool
    # One computing, one waiting: the others are told to come back.
    assert sorted(statuses) == [(201, None), (201, None), (503, "1"), (503, "1")], statuses


def test_memory_stays_under_the_cap_through_a_hostile_battery(limited: tuple[Server, str]) -> None:
    server, token = limited
    http = server.client(token, timeout=30)
    bodies = [*HOSTILE.values(),
              spec(where=["length(" + "replace(" * 6 + "shop, 'a', '" + "a" * 40 + "')" * 6 + ") > 0"]),
              spec(aggregates={"h": {"kind": "histogram", "column": "spend", "bins": 10_000,
                                     "bounds": [0, 10]}}),
              spec(aggregates={f"n{i}": {"kind": "count"} for i in range(1000)}),
              spec(where=["x" * 20_000])]
    for body in bodies:
        r = http.post("/v1/releases", json=body)
        assert r.status_code in (201, 400, 413, 503), r.text
    assert http.get("/v1/datasets").status_code == 200
    assert peak_rss_mb(server.process.pid) < PROCESS_MEMORY_MB


def test_a_time_limit_interrupts_the_engine() -> None:
    db = duckdb.connect()
    start = time.monotonic()
    with pytest.raises(duckdb.InterruptException), working(Work(), 0.5) as work:
        work.cursor(db).execute("SELECT count(*) FROM range(1000000000000)").fetchall()
    assert time.monotonic() - start < 5
    with pytest.raises(InvalidParameter, match=r"ran past 0\.5 s"):
        work.cursor(db)  # and it starts no new query


def test_an_engine_failure_after_an_interruption_is_reported_as_the_interruption() -> None:
    def release(db: duckdb.DuckDBPyConnection) -> None:  # a library release, its error a DataError
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bdp.table(cursor(db).sql("SELECT u, x FROM range(100000000) r(u), (SELECT 1.0 AS x)"), "u").agg(
                s=bdp.sum("x * x * x", bounds=(0, 1))).release(1.0, rng=bdp.rng_for_tests(1))

    db = duckdb.connect()
    with working(Work(), 0.5), pytest.raises(Interrupted, match="ran past"):
        interruptible(release)(db)


@pytest.mark.parametrize(("limits", "message"), [
    ({"max_bins": 0}, "limits.max_bins=0"), ({"memory_limit": "lots"}, "limits.memory_limit='lots'"),
    ({"max_seconds": float("inf")}, "limits.max_seconds=inf"), ({"bins": 3}, r"unknown key\(s\) \['bins'\]"),
])
def test_limits_in_the_configuration_are_checked(tmp_path: Path, limits: dict[str, Any],
                                                  message: str) -> None:
    doc = tomllib.loads(write_service(tmp_path).read_text())
    with pytest.raises(InvalidParameter, match=message):
        parse_config({**doc, "limits": limits}, tmp_path)


def test_the_serving_guide_shows_the_default_limits() -> None:
    guide = (Path(__file__).parents[2] / "docs" / "guide" / "serving.md").read_text(encoding="utf-8")
    block = guide.split("```toml\n[limits]\n", 1)[1].split("```", 1)[0]
    assert parse_limits(tomllib.loads(block)) == Limits()
    assert {line.split()[0] for line in block.splitlines()} == {f.name for f in fields(Limits)}


@pytest.mark.timeout(30)
def test_a_wide_histogram_becomes_a_table_and_json_in_linear_time() -> None:
    frame = pd.DataFrame({"x": np.random.default_rng(1).uniform(0, 10, 500)})
    r = bdp.table(frame, None).agg(h=bdp.histogram("x", bins=100_000, bounds=(0, 10))).release(
        1.0, rng=bdp.rng_for_tests(1))
    assert r.to_pandas().shape == (1, 300_000)
    doc = json.loads(json.dumps(release_json(r, {}, {})))
    assert len(doc["rows"][0]) == 300_000 and len(doc["estimates"]["h"]["value"][0]) == 100_000
