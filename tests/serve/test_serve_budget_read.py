"""Reading a budget changes nothing: no ledger is created, and the curator can still set it."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_helpers import add_analyst, write_service
from starlette.testclient import TestClient

from bayesdp.privacy import Guarantee
from bayesdp.privacy.ledger import Ledger
from bayesdp.serve.app import create_app
from bayesdp.serve.config import Budget, load_config
from bayesdp.serve.state import State


def test_reading_the_budget_creates_no_ledger_and_reports_what_a_new_one_would(tmp_path: Path) -> None:
    config_path = write_service(tmp_path)
    token = add_analyst(config_path, "ann")
    config = load_config(config_path)
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(config)) as http:
        before = http.get("/v1/budget", headers=auth).json()["datasets"]
    state = State(config)
    try:
        ann = state.analyst("ann").id
        assert before and not any(state.ledger_path(ann, name).exists() for name in before)
        state.set_budget("ann", "visits", Budget(0.5, 1e-7, "zcdp"))  # still the curator's to change
        for name in before:
            state.ledger(ann, name)  # now created, nothing spent
        with TestClient(create_app(config)) as http:
            after = http.get("/v1/budget", headers=auth).json()["datasets"]
    finally:
        state.close()
    assert after.pop("visits")["budget"]["epsilon"] == 0.5
    before.pop("visits")
    assert before and after == before  # the same answer with or without the ledger files


def test_the_budget_is_the_filters_total_and_its_spends_are_counted_unread(tmp_path: Path,
                                                                            monkeypatch) -> None:
    # Under zCDP the spends' ε do not add up: what is spent is the filter's total, named with it.
    config_path = write_service(tmp_path)
    token = add_analyst(config_path, "ann")
    config = load_config(config_path)
    state = State(config)
    try:
        state.set_budget("ann", "visits", Budget(4.0, 1e-6, "zcdp"))
        ledger = state.ledger(state.analyst("ann").id, "visits")
        for i in range(3):
            ledger.spend(Guarantee.zcdp(0.02, delta=1e-7, unit=ledger.budget.unit), f"r{i}")
        spent, used = ledger.spent(), ledger.used()
    finally:
        state.close()
    with TestClient(create_app(config)) as http:  # its start reads the history once; a budget, never
        monkeypatch.setattr(Ledger, "history", lambda self: pytest.fail("the budget read every spend"))
        got = http.get("/v1/budget", headers={"Authorization": f"Bearer {token}"}).json()["datasets"]
    got = got["visits"]
    assert got["releases"] == 3 and got["accounting"] == "zcdp"
    assert got["spent"]["epsilon"] == spent.epsilon < 3 * Guarantee.zcdp(0.02, delta=1e-7).epsilon
    assert got["filter"] == "zCDP / Rényi filter (Feldman & Zrnic 2021, Thm 3.1)" and got["used"] == used > 0
