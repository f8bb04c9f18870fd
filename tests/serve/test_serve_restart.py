"""SIGKILL in the middle of releases, then a restart: the ledger and the audit log agree and no
spend is lost (each spend is in the ledger before its release is computed)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import httpx
import pandas as pd
import pytest
from serve_helpers import add_analyst, serve, write_service
from test_serve_api import SPEC

from bayesdp.privacy import Guarantee, Ledger
from bayesdp.serve.config import load_config
from bayesdp.serve.service import AuditedLedger, HoldoutService, Service
from bayesdp.serve.state import State

REQUESTS = 24


def spends(path: Path) -> int:
    return len(Ledger(path).history()) if path.exists() else 0


@pytest.mark.slow
def test_sigkill_mid_release_loses_no_spend(tmp_path: Path) -> None:
    config_path = write_service(tmp_path)
    token = add_analyst(config_path, "crash")
    ledger_path = load_config(config_path).state / "ledgers" / token.split("_")[1] / "visits.db"
    server = serve(config_path)
    answered: list[int] = []
    failed: list[str] = []

    http = server.client(token, timeout=30)

    def one() -> None:
        try:
            r = http.post("/v1/releases", json={"dataset": "visits", "spec": {**SPEC, "epsilon": 0.05}},
                          headers={"Idempotency-Key": str(uuid.uuid4())})
            answered.append(r.status_code)
        except httpx.TransportError as exc:
            failed.append(type(exc).__name__)

    threads = [threading.Thread(target=one) for _ in range(REQUESTS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and spends(ledger_path) < 3:
        time.sleep(0.01)
    server.kill()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert failed, "the server was killed after every request had its answer: nothing was interrupted"

    restarted = serve(config_path)
    try:
        state = State(load_config(config_path))
        audit = state.audit_log(token.split("_")[1])
        state.close()
        assert not [r for r in audit if r["status"] == "pending"]
        ledger = {s.label.split(" ", 1)[0]: s.guarantee.epsilon for s in Ledger(ledger_path).history()}
        audited = {r["request"]: r["spend_epsilon"] for r in audit if r["spend_epsilon"] is not None}
        assert ledger == audited
        # Every release an analyst received has its spend in both (a release finished just before
        # the kill may not have reached its client).
        released = [r for r in audit if r["status"] == "201"]
        assert len(released) >= answered.count(201)
        assert all(r["request"] in ledger for r in released)
        budget = restarted.client(token).get("/v1/budget").json()["datasets"]["visits"]
        assert abs(budget["spent"]["epsilon"] - sum(ledger.values())) < 1e-12
    finally:
        restarted.stop()


def test_a_restarted_holdout_keeps_its_spent_budget(tmp_path: Path) -> None:
    """Overflows survive a restart; an open run of training answers is charged as one overflow."""
    config_path = write_service(tmp_path)
    config_path.write_text(config_path.read_text().replace("threshold = 0.04\nsigma = 0.01",
                                                           "threshold = 0.5\nsigma = 0.001"))
    pd.DataFrame({"shop": ["a"] * 50, "spend": [1.0] * 50}).to_csv(tmp_path / "train.csv", index=False)
    pd.DataFrame({"shop": ["a"] * 50, "spend": [9.0] * 50}).to_csv(tmp_path / "holdout.csv", index=False)
    config = load_config(config_path)

    def restarted() -> HoldoutService:
        return Service(config, State(config)).holdouts["model"]

    # Noise scales are σ = 0.001 (answers), 0.002 (threshold) and 0.004 (comparison): a gap of 1
    # always overflows the threshold 0.5 and a gap of 0 never does, except when the noise exceeds
    # 0.25, with probability below 1e-20 per query.
    h = restarted()
    assert [a.source for a in h.query(["spend > 5", "spend > 5"], "a")] == ["holdout", "holdout"]
    h = restarted()
    assert h.metadata()["budget_left"] == 3
    assert [a.source for a in h.query(["spend >= 0"], "a")] == ["train"]
    h = restarted()
    assert h.metadata()["budget_left"] == 2
    assert h.metadata()["epsilon_spent"] == pytest.approx(3 * h.epsilon_per_overflow)


def test_recovery_rebuilds_lost_audit_rows_from_the_ledger(tmp_path: Path) -> None:
    """service.db may lose its last rows to a power failure; the ledgers are synced, so the
    audit log is rebuilt from them."""
    config = load_config(write_service(tmp_path))
    state = State(config)
    state.add_analyst("lost")
    analyst = state.analyst("lost")
    state.audit_begin("req_1", analyst.id, "POST", "/v1/releases", "visits")
    AuditedLedger(state.ledger(analyst.id, "visits"), state, "req_1").spend(Guarantee(0.5, unit="user"), "x")
    with state._transaction() as conn:  # what a power failure could leave
        conn.execute("DELETE FROM audit")
    assert state.recover() == 0
    [row] = state.audit_log(analyst.id)
    assert (row["request"], row["status"], row["spend_epsilon"]) == ("req_1", "recovered", 0.5)
    state.close()
