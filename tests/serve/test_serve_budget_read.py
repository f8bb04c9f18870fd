"""Reading a budget changes nothing: no ledger is created, and the curator can still set it."""

from __future__ import annotations

from pathlib import Path

from serve_helpers import add_analyst, write_service
from starlette.testclient import TestClient

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
