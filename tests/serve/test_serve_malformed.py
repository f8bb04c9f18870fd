"""Malformed and hostile requests through the app, in process: each gets a 4xx that names what is
wrong, before anything is spent; never a 500. Failures to record (a full disk, a read-only ledger)
are the curator's: a 503 that reveals no path."""

from __future__ import annotations

import copy
import json
import os
import random
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import add_analyst, write_service
from starlette.testclient import TestClient
from test_serve_api import SPEC

from bayesdp.privacy import Guarantee
from bayesdp.serve.app import create_app
from bayesdp.serve.config import load_config
from bayesdp.serve.service import AuditedLedger
from bayesdp.serve.state import State

SQL = "SELECT shop, COUNT(*) AS n FROM visits GROUP BY shop"


def client(config_path: Path, name: str) -> TestClient:
    token = add_analyst(config_path, name)
    return TestClient(create_app(load_config(config_path)), raise_server_exceptions=False,
                      headers={"Authorization": f"Bearer {token}"})


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with client(write_service(tmp_path_factory.mktemp("malformed")), "hostile") as c:
        yield c


def releases_spent(http: TestClient) -> int:
    """How many spends the analyst's ledgers hold, over every dataset."""
    return sum(d["releases"] for d in http.get("/v1/budget").json()["datasets"].values())


def post(http: TestClient, path: str, body: Any) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http.post(path, content=raw, headers={"Content-Type": "application/json"})


def post_with_key(http: TestClient, body: Any, key: str) -> Any:
    return http.post("/v1/releases", json=body, headers={"Idempotency-Key": key})


def refused(http: TestClient, body: Any, words: str, status: int = 400) -> None:
    """Both the preview and the release refuse `body` naming `words`, and nothing is spent."""
    before = releases_spent(http)
    for path in ("/v1/preview", "/v1/releases"):
        r = post(http, path, body)
        assert r.status_code == status, (path, r.text)
        assert words in r.json()["error"]["message"], (path, r.text)
    assert releases_spent(http) == before


def spec_body(**changes: Any) -> dict[str, Any]:
    return {"dataset": "visits", "spec": {**SPEC, **changes}}


@pytest.mark.parametrize(("raw", "words"), [
    (b'{"dataset": "visits", "spec": {"label": NaN, "epsilon": 0.1, "group_by": ["shop"], '
     b'"keys": ["a"], "aggregates": {"n": {"kind": "count"}}}}', "NaN is not allowed"),
    (b'{"dataset": "visits", "spec": {"max_groups_per_unit": NaN, "epsilon": 0.1, '
     b'"aggregates": {"n": {"kind": "count"}}}}', "NaN is not allowed"),
    (b'{"dataset": "visits", "spec": {"epsilon": Infinity, "aggregates": {"n": {"kind": "count"}}}}',
     "Infinity is not allowed"),
    (b'{"dataset": "visits", "spec": {"epsilon": 0.1, "aggregates": {"s": {"kind": "sum", '
     b'"column": "spend", "bounds": [-Infinity, 1]}}}}', "Infinity is not allowed"),
    (b'{"dataset": "visits", "spec": {"epsilon": 1e999, "aggregates": {"n": {"kind": "count"}}}}',
     "spec.epsilon=inf"),
    (b'{"dataset": "visits", "sql": "' + SQL.encode() + b'", "epsilon": NaN}', "NaN is not allowed"),
])
def test_non_finite_numbers_are_refused_before_the_spend(http: TestClient, raw: bytes, words: str) -> None:
    refused(http, raw, words)


@pytest.mark.parametrize(("body", "words"), [
    (spec_body(label=7), "label=7"),
    (spec_body(label="x" * 10_000), "at most 200 characters"),
    (spec_body(label=["a"]), "label=['a']"),
    (spec_body(keys=[{"a": 1}]), "keys="),
    (spec_body(aggregates={"": {"kind": "count"}}), "aggregate's name"),
    ({**spec_body(), "colour": "red"}, "request keys=['colour']"),
    ({**spec_body(), "group_size": "many"}, "group_size='many'"),
    ({"dataset": "visits", "sql": SQL, "epsilon": 0.1, "group_size": 0}, "group_size=0"),
])
def test_every_field_is_checked_before_the_spend(http: TestClient, body: Any, words: str) -> None:
    """Fields no release path checked (a label, the request's own keys) are checked too."""
    refused(http, body, words)


@pytest.mark.parametrize(("body", "words"), [
    (spec_body(epsilon=10**400), "spec.epsilon is a number of 401 digits"),
    (spec_body(delta=10**400), "spec.delta is a number"),
    (spec_body(alpha=-(10**400)), "spec.alpha is a number"),
    (spec_body(selection_weight=10**400), "spec.selection_weight is a number"),
    (spec_body(aggregates={"s": {"kind": "sum", "column": "spend", "bounds": [0, 10**400]}}),
     "spec.aggregates.s.bounds[1] is a number"),
    ({**spec_body(), "group_size": 10**400}, "group_size is a number"),
    ({"dataset": "visits", "sql": SQL, "epsilon": 10**400}, "epsilon is a number"),
    ({"dataset": "visits", "sql": SQL, "epsilon": 0.1, "delta": 10**400}, "delta is a number"),
])
def test_integers_beyond_a_float_are_refused_naming_the_parameter(http: TestClient, body: Any,
                                                                    words: str) -> None:
    refused(http, body, words)


@pytest.mark.parametrize(("raw", "words"), [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"dataset": ' + b"[" * 40 + b"]" * 40 + b"}", "nested too deeply"),
    (b'{"dataset": "\\ud800", "spec": {}}', "dataset="),
    (b'{"dataset": "visits", "spec": {"\\ud800": 1}}', "a key of spec"),
    (json.dumps(spec_body(where="shop = '\ud800'")).encode(), "spec.where="),
    (json.dumps({"dataset": "visits", "sql": "SELECT COUNT(*) AS n FROM visits WHERE shop = '\udfff'",
                 "epsilon": 0.1}).encode(), "sql="),
])
def test_deep_nesting_and_lone_surrogates_get_a_400(http: TestClient, raw: bytes, words: str) -> None:
    refused(http, raw, words)


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) AS n FROM visits WHERE " + "(" * 150 + "spend > 1" + ")" * 150,
    "SELECT COUNT(*) AS n FROM visits WHERE " + "NOT " * 2000 + "spend > 1",
    "SELECT " + "+".join(["COUNT(*)"] * 1000) + " AS n FROM visits",
])
def test_sql_too_deep_for_the_stack_is_refused_before_the_spend(http: TestClient, sql: str) -> None:
    refused(http, {"dataset": "visits", "sql": sql, "epsilon": 0.1}, "nested too deeply")
    refused(http, {"sql": sql, "epsilon": 0.1}, "nested too deeply")  # the dataset read from the SQL


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT shop, COUNT(*) AS n FROM visits TABLESAMPLE 10% GROUP BY shop", "TABLESAMPLE"),
    ("SELECT shop, COUNT(*) AS n FROM visits AT (VERSION => 1) GROUP BY shop", "AT/BEFORE"),
])
def test_clauses_the_translator_ignores_are_refused(http: TestClient, sql: str, words: str) -> None:
    refused(http, {"dataset": "visits", "sql": sql, "epsilon": 0.1}, words)


def test_a_stored_release_holding_nan_does_not_break_the_listing(tmp_path: Path) -> None:
    """An earlier version stored releases labelled NaN; the listing then failed for ever."""
    config_path = write_service(tmp_path)
    with client(config_path, "stored") as http:
        rid = post(http, "/v1/releases", spec_body()).json()["id"]
        state = State(load_config(config_path))
        with state._transaction() as conn:
            doc = json.loads(conn.execute("SELECT response FROM results WHERE id = ?", (rid,)).fetchone()[0])
            doc["label"] = float("nan")
            conn.execute("UPDATE results SET response = ? WHERE id = ?", (json.dumps(doc), rid))
        state.close()
        listing = http.get("/v1/releases")
        assert listing.status_code == 200, listing.text
        assert [r["label"] for r in listing.json()["releases"]] == [None]
        assert http.get(f"/v1/releases/{rid}").json()["label"] is None


def test_a_release_stopped_before_its_spend_can_be_retried(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill -9 between the claim of an idempotency key and the spend: after the restart the
    retry runs (nothing was spent); stopped after the spend, the retry is refused (409)."""
    config_path = write_service(tmp_path)
    token = add_analyst(config_path, "killed")
    request = {"dataset": "visits", "spec": SPEC}

    def killed_before(ds: Any, body: Any, ledger: AuditedLedger) -> Any:
        raise RuntimeError("killed")

    def killed_after(ds: Any, body: Any, ledger: AuditedLedger) -> Any:
        ledger.spend(Guarantee(0.25, unit="user"), "x")
        raise RuntimeError("killed")

    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(load_config(config_path)), raise_server_exceptions=False,
                    headers=headers) as http:
        service = http.app.state.service
        monkeypatch.setattr(service.state, "abandon", lambda *args: None)  # nothing runs after a kill
        for key, stop in (("k-before", killed_before), ("k-after", killed_after)):
            monkeypatch.setattr(service, "release", stop)
            post_with_key(http, request, key)
    monkeypatch.undo()
    with TestClient(create_app(load_config(config_path)), raise_server_exceptions=False,
                    headers=headers) as http:  # the restart recovers
        again = post_with_key(http, request, "k-before")
        assert again.status_code == 201, again.text
        stopped = post_with_key(http, request, "k-after")
        assert stopped.status_code == 409 and "after its spend was recorded" in stopped.text
        assert releases_spent(http) == 2


def test_a_read_only_ledger_is_the_curators_problem(tmp_path: Path) -> None:
    """SQLite's own read-only error (the ledger opened read-only, as a read-only file or mount
    would; chmod does not stop root): a 503 that names no path, logged for the curator."""
    config_path = write_service(tmp_path)
    with client(config_path, "readonly") as http:
        assert post(http, "/v1/releases", spec_body()).status_code == 201
        ledger = http.app.state.service.state.ledger(http.headers["authorization"].split("_")[1], "visits")
        ledger.close()
        ledger._conn = sqlite3.connect(f"file:{ledger.path}?mode=ro", uri=True, isolation_level=None,
                                       check_same_thread=False)
        ledger._pid = os.getpid()
        r = post(http, "/v1/releases", spec_body())
        assert r.status_code == 503, r.text
        message = r.json()["error"]["message"]
        assert message.startswith("the service cannot record spends;") and "curator" in message
        assert str(tmp_path) not in message and "ledger" not in message
        health = http.get("/health")
        assert health.status_code == 503 and str(tmp_path) not in health.text
        ledger.close()
        assert post(http, "/v1/releases", spec_body()).status_code == 201
        assert http.get("/health").status_code == 200
        assert releases_spent(http) == 2


def test_a_full_disk_is_a_503_health_says_so_and_nothing_is_half_written(tmp_path: Path) -> None:
    """The state on a 1 MB tmpfs filled by another file (as root, which CI is); where mounting
    is not allowed, service.db is capped at its size with SQLite's max_page_count instead. Both
    make SQLite fail with SQLITE_FULL, "database or disk is full"."""
    config_path = write_service(tmp_path)
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = mount_tmpfs(disk)
    config_path.write_text(config_path.read_text().replace('state = "state"', f'state = "{disk}/state"'))
    filler = disk / "filler"
    try:
        with client(config_path, "full") as http:
            assert post(http, "/v1/releases", spec_body()).status_code == 201
            conn = http.app.state.service.state._conn
            if mounted:
                fill(filler)
            else:
                conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
            statuses = []
            while 503 not in statuses and len(statuses) < 200:
                statuses.append(post(http, "/v1/releases", spec_body(epsilon=0.01)).status_code)
            assert set(statuses) <= {201, 503} and statuses[-1] == 503, statuses
            r = post(http, "/v1/releases", spec_body(epsilon=0.01))
            assert r.status_code == 503
            assert r.json()["error"]["message"] == "the service cannot record spends: disk full"
            health = http.get("/health")
            assert health.status_code == 503
            assert health.json()["reason"] == "the service cannot record spends: disk full"
            if mounted:
                filler.unlink()
            else:
                conn.execute("PRAGMA max_page_count = 1000000")
            assert http.get("/health").status_code == 200
            assert post(http, "/v1/releases", spec_body(epsilon=0.01)).status_code == 201
        state = State(load_config(config_path))  # a restart settles what the full disk left pending
        state.recover()
        [ledger_path] = (disk / "state").glob("ledgers/*/visits.db")
        spends = {s.label.split(" ", 1)[0] for s in state.ledger(ledger_path.parent.name, "visits").history()}
        audit = state.audit_log()
        with state._db() as db:
            pending = db.execute("SELECT count(*) FROM results WHERE status = 'pending'").fetchone()[0]
        state.close()
        assert spends == {r["request"] for r in audit if r["spend_epsilon"] is not None}
        assert pending == 0
        assert statuses.count(201) + 2 <= len(spends)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], check=False)


def mount_tmpfs(folder: Path) -> bool:
    """Whether a 1 MB tmpfs could be mounted on `folder` (root only)."""
    try:
        return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                              capture_output=True).returncode == 0
    except OSError:
        return False


def fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 65536)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- a hostile battery: random malformed bodies over the request schema ---------------------------

VALID = [
    {"dataset": "visits", "spec": {"group_by": ["shop"], "keys": ["a", "b", "c"], "epsilon": 0.01,
                                   "label": "battery", "max_groups_per_unit": 2,
                                   "where": ["spend > 1"],
                                   "aggregates": {"n": {"kind": "count_units"},
                                                  "s": {"kind": "sum", "column": "spend", "bounds": [0, 10]},
                                                  "q": {"kind": "quantile", "column": "spend", "q": 0.5,
                                                        "bounds": [0, 10]}}}},
    {"dataset": "visits", "sql": SQL, "epsilon": 0.01, "delta": 0.0},
    {"dataset": "people", "spec": {"epsilon": 0.01, "aggregates": {"m": {"kind": "mean", "column": "spend",
                                                                         "bounds": [0, 10]}}},
     "group_size": 100},
]
HOSTILE: list[Any] = [
    float("nan"), float("inf"), float("-inf"), 10**400, -(10**30), 2**63, "", "\ud800", "x" * 5000,
    [], {}, None, True, 1.5, -1, 0, "'; DROP TABLE ds_visits; --", "(SELECT 1)", "spend > 1",
    {"kind": "count"}, ["a", None], [[["deep"]]], {"\udc00": 1},
]


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


def _hostile(rng: random.Random, depths: list[int]) -> Any:
    """A fresh hostile value (never one shared with another place in the body), or a nesting."""
    i = rng.randrange(len(HOSTILE) + 1)
    return _deep(rng.choice(depths)) if i == len(HOSTILE) else copy.deepcopy(HOSTILE[i])


def _paths(value: Any) -> list[tuple[Any, ...]]:
    out, stack = [], [((), value)]
    while stack:
        path, item = stack.pop()
        out.append(path)
        if isinstance(item, dict):
            stack.extend(((*path, k), v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend(((*path, i), v) for i, v in enumerate(item))
    return out


def _mutate(body: Any, rng: random.Random) -> Any:
    """One to three random changes: a value replaced by a hostile one, a key dropped or added."""
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(_paths(body))
        if not path:
            body = _hostile(rng, [40, 5000])
            continue
        parent = body
        for step in path[:-1]:
            parent = parent[step]
        what = rng.random()
        if what < 0.6:
            parent[path[-1]] = _hostile(rng, [3, 40])
        elif what < 0.8 and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[rng.choice(["colour", "kind", "epsilon", "\ud800", "__proto__", "x" * 300])] = \
                copy.deepcopy(rng.choice(HOSTILE))
    return body


def _raw(body: Any, rng: random.Random) -> bytes:
    try:
        text = json.dumps(body).encode()  # NaN and Infinity as Python writes them; \\ud800 escaped
    except RecursionError:
        text = b"[" * 5000 + b"]" * 5000
    cut = rng.random()
    if cut < 0.05:
        return text[: rng.randrange(len(text) + 1)]  # truncated
    if cut < 0.08:
        i = rng.randrange(len(text) + 1)
        return text[:i] + bytes([rng.randrange(128, 256)]) + text[i:]  # not UTF-8
    return text


def test_a_battery_of_malformed_bodies_gets_no_5xx_and_spends_only_on_releases(http: TestClient) -> None:
    """240 requests mutated from valid ones with a fixed seed: every answer is below 500 without a
    trace, and the ledgers hold exactly one spend per release answered (none for a refusal)."""
    rng = random.Random(20260)
    before = releases_spent(http)
    released = 0
    statuses: dict[int, int] = {}
    for i in range(120):
        raw = _raw(_mutate(json.loads(json.dumps(VALID[i % len(VALID)])), rng), rng)
        for path in ("/v1/preview", "/v1/releases"):
            r = post(http, path, raw)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            assert r.status_code < 500, (raw[:300], r.text)
            assert "Traceback" not in r.text and 'File "' not in r.text
            released += path == "/v1/releases" and r.status_code == 201
    assert releases_spent(http) - before == released
    assert statuses.get(400, 0) > 150, statuses  # the battery is hostile, not mostly valid
