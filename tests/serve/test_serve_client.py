"""`bdp.connect`: the builder's verbs against the service return the same Release as locally."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from serve_helpers import Server, add_analyst

import bayesdp as bdp
from bayesdp.errors import BayesdpError, BudgetExceeded, InvalidParameter
from bayesdp.report import write_release_report
from bayesdp.serve import client as client_module
from bayesdp.serve.client import ServiceError, ServiceUnavailable


def test_remote_query_matches_the_local_one(server: Server, tmp_path: Path) -> None:
    db = bdp.connect(server.url, add_analyst(server.config_path, "notebook"))
    assert db.datasets() == ["visits", "people", "gaps"]
    aggs = {"users": bdp.count_units(), "avg": bdp.mean("spend", bounds=(0, 10)),
            "hist": bdp.histogram("spend", bins=2, bounds=(0, 10))}
    remote = db.table("visits").where("flag = 1").group_by("shop", keys=["a", "b", "c"]).agg(**aggs)
    data = pd.read_csv(server.config_path.parent / "visits.csv")
    local = bdp.table(data, "user").where("flag = 1").group_by("shop", keys=["a", "b", "c"]).agg(**aggs)
    options = {"max_groups_per_unit": 2, "max_rows_per_group": 2}  # the dataset's defaults
    # Previews use public parameters only, so the service's equals the local one exactly.
    with pytest.warns(UserWarning, match="noise is as wide as the bounds"):
        remote_preview = remote.preview(epsilon=0.5)
    with pytest.warns(UserWarning, match="noise is as wide as the bounds"):
        pd.testing.assert_frame_equal(remote_preview, local.preview(epsilon=0.5, **options))
    # and what the budget's filter would make of it, before anything is spent
    assert remote_preview.attrs["admitted"] and remote_preview.attrs["refused"] is None
    assert remote_preview.attrs["used"] == 0 and 0 < remote_preview.attrs["uses"] < 1
    r = remote.release(epsilon=0.5, label="notebook")
    assert isinstance(r, bdp.Release) and r.diagnostics is None
    assert r.guarantee == local.plan(0.5, **options).guarantee
    mine = local.release(epsilon=0.5, rng=bdp.rng_for_tests(0), **options).to_pandas()
    assert list(r.to_pandas().columns) == list(mine.columns)
    assert list(r.to_pandas()["shop"]) == ["a", "b", "c"]
    assert "How the budget was spent" in r.explain()
    assert write_release_report(r, tmp_path / "r.html").read_text().startswith("<")
    assert db.budget()["visits"].epsilon == pytest.approx(2.5)


def test_client_errors_are_bayesdp_errors(server: Server) -> None:
    db = bdp.connect(server.url, add_analyst(server.config_path, "careless"))
    with pytest.raises(InvalidParameter, match="public columns"):
        db.table("visits").agg(n=bdp.sum("secret", bounds=(0, 1))).release(epsilon=1.0)
    with pytest.raises(InvalidParameter, match="'user' at line 1, column 4 is not a column"):
        db.table("visits").agg(n=bdp.share("user > 400")).release(epsilon=0.1)
    # An expression over the public columns is an aggregate like a column (as in SQL).
    assert db.table("visits").agg(n=bdp.mean("spend * 0.5", bounds=(0, 5))).release(epsilon=0.1)
    with pytest.raises(BudgetExceeded, match="remaining"):
        db.table("visits").agg(n=bdp.count()).release(epsilon=5.0)
    with pytest.raises(InvalidParameter, match="one of the service's datasets"):
        db.table("nope")


def test_client_holdout_and_synthetic(server: Server) -> None:
    db = bdp.connect(server.url, add_analyst(server.config_path, "explorer"))
    [answer] = db.holdout_query("model", "spend > 5")
    assert answer.source in ("train", "holdout") and 0 <= answer.value <= 1
    assert list(db.holdout_train("model").columns) == ["shop", "spend"]
    first, again = db.synthetic("people"), db.synthetic("people")
    pd.testing.assert_frame_equal(first, again)
    assert len(first) == 300


class DropsFirstResponse(httpx.BaseTransport):
    """Delivers every request but loses the first response, as a network failure would."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner, self.dropped = inner, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST" and not self.dropped:
            response.read()
            self.dropped += 1
            raise httpx.ReadError("connection reset", request=request)
        return response


def test_a_release_retried_after_a_lost_response_is_the_same_release(server: Server) -> None:
    token = add_analyst(server.config_path, "flaky-network")
    db = bdp.connect(server.url, token)
    transport = DropsFirstResponse(db._http._transport)
    db._http._transport = transport
    r = db.table("visits").agg(n=bdp.count()).release(epsilon=0.5)
    assert transport.dropped == 1 and len(r) == 1
    ledger = server.config.state / "ledgers" / token.split("_")[1] / "visits.db"
    assert len(bdp.Ledger(ledger).history()) == 1  # the retry spent nothing and drew no noise


def test_earlier_releases_are_listed_and_fetched_without_spending(server: Server) -> None:
    db = bdp.connect(server.url, add_analyst(server.config_path, "returning"))
    first = db.table("visits").agg(n=bdp.count()).release(epsilon=0.5, label="first")
    second = db.sql("SELECT COUNT(*) AS n FROM visits", epsilon=0.25)
    spent = db.budget()["visits"]
    listed = db.releases()
    assert listed["label"][0] == "first" and listed["label"][1].startswith("sql: SELECT COUNT(*)")
    assert list(listed["dataset"]) == ["visits"] * 2
    assert [g.epsilon for g in listed["guarantee"]] == [0.5, 0.25]
    for rid, original in zip(listed["id"], (first, second), strict=True):
        again = db.get_release(rid)
        pd.testing.assert_frame_equal(again.to_pandas(), original.to_pandas())
        assert again.guarantee == original.guarantee and again.created == original.created
    assert db.budget()["visits"] == spent  # fetching again is not a release
    with pytest.raises(ServiceError, match="404"):
        db.get_release("rel_nope")


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/"


TOKEN = "bdp_0123456789ab_" + "s" * 43


def test_a_service_that_is_down_raises_a_bayesdp_error_after_bounded_backoff() -> None:
    start = time.monotonic()
    with pytest.raises(ServiceUnavailable, match="cannot reach") as info:
        bdp.connect(_closed_port_url(), TOKEN, retry_for=0.5)
    assert isinstance(info.value, BayesdpError) and info.value.status == 0
    assert time.monotonic() - start < 3.0


def _record_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the client's waits: `time.sleep` is patched process-wide, so only this thread's
    calls are recorded (another test's service may still run its load probe in a thread)."""
    sleeps: list[float] = []
    real, me = time.sleep, threading.current_thread()

    def sleep(seconds: float) -> None:
        if threading.current_thread() is me:
            sleeps.append(seconds)
        else:
            real(seconds)

    monkeypatch.setattr(client_module.time, "sleep", sleep)
    return sleeps


def test_transport_failures_are_retried_after_jittered_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) < 4:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"analyst": "x", "datasets": {}})

    sleeps = _record_sleeps(monkeypatch)
    db = client_module.Client("http://service.invalid/", TOKEN)
    db._http._transport = httpx.MockTransport(handler)
    assert db.budget() == {} and len(calls) == 4
    # Full jitter: the k-th wait is uniform on [0, 0.1·2^k].
    assert len(sleeps) == 3 and all(0 <= s <= 0.1 * 2**k for k, s in enumerate(sleeps))


def test_429_waits_for_retry_after_or_raises_when_too_far(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [httpx.Response(429, headers={"Retry-After": "2"}, json={"error": {"message": "slow down"}}),
               httpx.Response(200, json={"analyst": "x", "datasets": {}})]
    sleeps = _record_sleeps(monkeypatch)
    db = client_module.Client("http://service.invalid/", TOKEN, retry_for=5)
    db._http._transport = httpx.MockTransport(lambda request: answers.pop(0))
    assert db.budget() == {} and sleeps == [2.0]
    db._http._transport = httpx.MockTransport(lambda request: httpx.Response(
        429, headers={"Retry-After": "60"}, json={"error": {"message": "too many requests"}}))
    with pytest.raises(ServiceUnavailable, match="too many requests") as info:
        db.budget()
    assert info.value.status == 429 and info.value.retry_after == 60 and sleeps == [2.0]


@pytest.mark.parametrize("code", ["deadline", "stopped"])
def test_a_503_that_answers_the_request_is_not_sent_again(monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    # A release cut off at its deadline spent what it declared: sent again under the same
    # idempotency key it would be refused as used up, and the analyst would never read why.
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(503, json={"error": {"code": code, "message": f"the request: {code}"}})

    _record_sleeps(monkeypatch)  # no real waits in this thread
    db = client_module.Client("http://service.invalid/", TOKEN, retry_for=5)
    db._http._transport = httpx.MockTransport(handler)
    with pytest.raises(ServiceError, match=f"the request: {code}") as info:
        db.sql("SELECT COUNT(*) AS n FROM d", epsilon=1.0)
    assert info.value.status == 503 and len(calls) == 1


@pytest.mark.parametrize("token", ["", " ", "bdp_x", "bdp_0123_sec ret", None])
def test_a_malformed_token_is_refused_before_any_request(token: Any) -> None:
    with pytest.raises(InvalidParameter, match="token") as info:
        bdp.connect(_closed_port_url(), token, retry_for=0)
    assert "sec ret" not in str(info.value)


def test_connect_checks_the_token_and_the_repr_never_shows_it(server: Server) -> None:
    with pytest.raises(InvalidParameter, match="not accepted"):
        bdp.connect(server.url, "bdp_000000000000_" + "x" * 43)
    token = add_analyst(server.config_path, "shown")
    db = bdp.connect(server.url, token)
    # The check creates no ledger: the curator may still set this analyst's budgets.
    assert not (server.config.state / "ledgers" / token.split("_")[1]).exists()
    secret = token.split("_", 2)[2]
    for text in (repr(db), repr(db.table("visits")), str(db)):
        assert secret not in text and server.url.rstrip("/") in repr(db)
    assert token.split("_")[1] in repr(db)


def test_ids_are_sent_as_one_encoded_path_segment(server: Server) -> None:
    db = bdp.connect(server.url, add_analyst(server.config_path, "traveller"))
    for rid in ("../budget", "..", "rel_x?y=1", "a/b"):
        with pytest.raises(ServiceError) as info:
            db.get_release(rid)
        assert info.value.status == 404, rid
    with pytest.raises(ServiceError) as info:
        db.holdout_query("../../v1/budget", "spend > 1")
    assert info.value.status == 404


def test_group_by_without_keys_uses_the_published_keys(server: Server) -> None:
    # shop's keys are public in the service's schema: no δ for partition selection is needed.
    db = bdp.connect(server.url, add_analyst(server.config_path, "keyless"))
    r = db.table("visits").group_by("shop").agg(n=bdp.count()).release(epsilon=0.1)
    assert list(r.to_pandas()["shop"]) == ["a", "b", "c"] and r.guarantee.delta == 0
    both = db.table("visits").group_by(["shop", "flag"]).agg(n=bdp.count())
    assert both.spec.get("keys") is None  # flag has no published keys: partition selection
