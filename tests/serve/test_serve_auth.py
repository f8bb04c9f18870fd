"""Limits on failed authentications stop guessing without refusing valid tokens, refuse every
wrong token at the same cost, and trust X-Forwarded-For only from configured proxies."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import pytest
from serve_helpers import add_analyst, serve, write_service
from starlette.testclient import TestClient

from bayesdp.serve.app import create_app
from bayesdp.serve.config import load_config
from bayesdp.serve.state import State


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_failed_authentications_are_limited_per_address_but_a_valid_token_passes(tmp_path: Path) -> None:
    config_path = write_service(tmp_path, rate=3)
    token = add_analyst(config_path, "a")
    config = load_config(config_path)
    with TestClient(create_app(config)) as http:
        codes = [http.get("/v1/budget", headers=_bearer(f"garbage-{i}")).status_code for i in range(5)]
        assert codes == [401, 401, 401, 429, 429]
        r = http.get("/v1/budget", headers=_bearer(f"garbage-{5}"))
        assert int(r.headers["Retry-After"]) >= 1 and "failed authentications" in r.json()["error"]["message"]
        # The same address (behind a reverse proxy, every analyst's) still gets in with a valid token.
        assert [http.get("/v1/budget", headers=_bearer(token)).status_code for _ in range(3)] == [200] * 3
    state = State(config)
    refused = [row for row in state.audit_log() if row["status"] == "401"]
    assert len(refused) == 3  # not one per guess
    state.close()


def test_guesses_at_one_analyst_are_limited_across_addresses_and_never_refuse_them(tmp_path: Path) -> None:
    config_path = write_service(tmp_path, rate=3)
    token = add_analyst(config_path, "target")
    analyst_id = token.split("_")[1]
    app = create_app(load_config(config_path))
    # A client per address; outside `with`, so the app's state stays open between them.
    codes = [TestClient(app, client=(f"10.0.0.{i}", 4000)).get(
        "/v1/budget", headers=_bearer(f"bdp_{analyst_id}_guess{i}")).status_code for i in range(5)]
    assert codes == [401, 401, 401, 429, 429]
    http = TestClient(app, client=("10.0.0.9", 4000))
    assert http.get("/v1/budget", headers=_bearer(f"bdp_{analyst_id}_guess9")).status_code == 429
    assert http.get("/v1/budget", headers=_bearer(token)).status_code == 200


def _median_seconds(http: TestClient, token: str, repeats: int = 11) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        assert http.get("/v1/budget", headers=_bearer(token)).status_code == 401
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def test_a_wrong_secret_costs_what_an_unknown_analyst_costs(tmp_path: Path) -> None:
    """A slow hash for known ids only would tell which ids exist: both cost one HMAC, and
    the margin (twice the other's median plus 50 ms) is below one scrypt hash (130-180 ms here)."""
    config_path = write_service(tmp_path, rate=6000)
    analyst_id = add_analyst(config_path, "timed").split("_")[1]
    with TestClient(create_app(load_config(config_path))) as http:
        known = _median_seconds(http, f"bdp_{analyst_id}_{'w' * 43}")
        unknown = _median_seconds(http, f"bdp_0123456789ab_{'w' * 43}")
    assert known < 2 * unknown + 0.05 and unknown < 2 * known + 0.05, (known, unknown)


def test_wrong_tokens_never_reach_the_slow_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bayesdp.serve import auth

    config_path = write_service(tmp_path, rate=6000)
    token = add_analyst(config_path, "counted")
    analyst_id = token.split("_")[1]
    app = create_app(load_config(config_path))
    calls: list[str] = []
    slow = auth.hash_secret
    monkeypatch.setattr(auth, "hash_secret", lambda secret, salt: calls.append(secret) or slow(secret, salt))
    with TestClient(app) as http:
        for guess in (f"bdp_{analyst_id}_{'w' * 43}", f"bdp_0123456789ab_{'w' * 43}", "garbage", token[:-1]):
            assert http.get("/v1/budget", headers=_bearer(guess)).status_code == 401
        assert calls == []
        assert [http.get("/v1/budget", headers=_bearer(token)).status_code for _ in range(3)] == [200] * 3
    assert len(calls) == 1  # once per token and process


def test_a_token_issued_before_checks_were_stored_still_works_and_gets_one(tmp_path: Path) -> None:
    config_path = write_service(tmp_path, rate=6000)
    token = add_analyst(config_path, "veteran")
    config = load_config(config_path)
    state = State(config)
    with state._transaction() as conn:
        conn.execute("UPDATE analysts SET token_check = NULL")
    state.close()
    with TestClient(create_app(config)) as http:
        assert http.get("/v1/budget", headers=_bearer(token[:-1] + "x")).status_code == 401
        assert http.get("/v1/budget", headers=_bearer(token)).status_code == 200
    state = State(config)
    found = state.credentials(token.split("_")[1])
    assert found is not None and found[3] is not None
    state.close()


def test_forwarded_addresses_are_ignored_unless_the_proxy_is_trusted(tmp_path: Path) -> None:
    """Rotating X-Forwarded-For from 127.0.0.1 used to give every guess a fresh address."""
    server = serve(write_service(tmp_path, rate=3))
    try:
        with server.client() as http:
            codes = [http.get("/v1/budget", headers={**_bearer(f"garbage-{i}"),
                                                     "X-Forwarded-For": f"198.51.100.{i}"}).status_code
                     for i in range(5)]
    finally:
        server.stop()
    assert codes == [401, 401, 401, 429, 429]


def test_uvicorn_reads_forwarded_headers_only_from_configured_proxies(tmp_path: Path) -> None:
    from bayesdp.commands.serve import uvicorn_config

    args = argparse.Namespace(ssl_keyfile=None, ssl_certfile=None)
    config_path = write_service(tmp_path)
    assert uvicorn_config(None, load_config(config_path), args).proxy_headers is False
    config_path.write_text('trusted_proxies = ["10.1.2.3", "fd00::/8"]\n' + config_path.read_text())
    cfg = uvicorn_config(None, load_config(config_path), args)
    assert cfg.proxy_headers is True and cfg.forwarded_allow_ips == ["10.1.2.3", "fd00::/8"]
    config_path.write_text('trusted_proxies = ["proxy.local"]\n' + config_path.read_text().split("\n", 1)[1])
    with pytest.raises(ValueError, match=r"trusted_proxies='proxy\.local'"):
        load_config(config_path)



def test_the_failure_limiter_forgets_the_least_recent_keys_beyond_its_cap() -> None:
    """Guesses at random analyst ids each make a key: memory stays bounded."""
    from bayesdp.serve.auth import RateLimiter

    limiter = RateLimiter(1, max_keys=3)
    for key in "abcd":
        assert limiter.retry_after(key) == 0
    assert limiter.retry_after("d") > 0 and limiter.retry_after("b") > 0
    assert limiter.retry_after("a") == 0  # forgotten: the oldest of four keys with room for three
    assert len(limiter._buckets) == 3
