"""Every guarantee the service gives names the dataset's `unit_name`, never the column that holds
the unit; state directories whose ledgers were created naming the column keep counting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from serve_helpers import add_analyst, write_service
from starlette.testclient import TestClient

from bayesdp.errors import InvalidParameter
from bayesdp.privacy import Guarantee, Ledger
from bayesdp.serve.app import create_app
from bayesdp.serve.config import load_config
from bayesdp.serve.state import State

SPEC = {"group_by": "shop", "aggregates": {"n": {"kind": "count_units"}}, "epsilon": 0.5, "delta": 1e-7,
        "max_groups_per_unit": 2, "max_rows_per_group": 2}
SQL = "SELECT shop, COUNT(*) AS n FROM visits GROUP BY shop"


def _config(tmp_path: Path) -> Path:
    path = write_service(tmp_path)
    path.write_text(path.read_text().replace('unit_name = "user"', 'unit_name = "shopper"'))
    return path


def _units(doc: Any) -> list[str]:
    """Every unit a JSON answer names, with the explanations' text."""
    if isinstance(doc, dict):
        own = [doc["unit"]] if isinstance(doc.get("unit"), str) else []
        return own + [u for v in doc.values() for u in _units(v)]
    if isinstance(doc, list):
        return [u for v in doc for u in _units(v)]
    return []


def test_every_guarantee_names_the_unit_name(tmp_path: Path) -> None:
    config = _config(tmp_path)
    token = add_analyst(config, "ann")
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(load_config(config))) as http:
        answers = [http.post("/v1/releases", json={"dataset": "visits", "spec": SPEC}, headers=auth),
                   http.post("/v1/releases", json={"sql": SQL, "epsilon": 0.5}, headers=auth),
                   http.post("/v1/preview", json={"sql": SQL, "epsilon": 0.5}, headers=auth),
                   http.post("/v1/preview", json={"dataset": "visits", "spec": SPEC}, headers=auth),
                   http.get("/v1/budget", headers=auth), http.get("/v1/datasets", headers=auth),
                   http.post("/v1/synthetic/people", headers=auth)]
        for r in answers:
            assert r.status_code in (200, 201), r.text
        docs = [r.json() for r in answers]
        # The dataset "gaps" names no unit_name: its unit is called after its column, "user".
        docs[4]["datasets"].pop("gaps")
        docs[5]["datasets"] = [d for d in docs[5]["datasets"] if d["name"] != "gaps"]
        for doc in docs[:2]:
            assert "per shopper" in doc["explain"] and "per user" not in doc["explain"]
        units = _units(docs)
        assert set(units) == {"shopper", "person"}, units
        assert all(u == "person" for u in _units(docs[-1]))  # privacy_unit = false: unit_name's default
        assert "user" not in str(docs[4]["datasets"]["visits"]["remaining"])


def test_a_ledger_created_naming_the_column_still_opens_and_keeps_counting(tmp_path: Path) -> None:
    config = _config(tmp_path)
    token = add_analyst(config, "ann")
    state = State(load_config(config))
    path = state.ledger_path(token.split("_")[1], "visits")
    state.close()
    path.parent.mkdir(parents=True)
    # As the service used to create it: its budget and spends per "user", the column's name.
    with Ledger(path, budget=Guarantee(3.0, delta=1e-6, unit="user")) as old:
        old.spend(Guarantee(1.0, unit="user"), "an earlier release")
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(load_config(config))) as http:
        r = http.post("/v1/releases", json={"dataset": "visits", "spec": SPEC}, headers=auth)
        assert r.status_code == 201, r.text
        budget = http.get("/v1/budget", headers=auth).json()["datasets"]["visits"]
    assert budget["releases"] == 2
    assert budget["spent"]["epsilon"] == 1.5 and budget["remaining"]["epsilon"] == 1.5
    assert {budget[k]["unit"] for k in ("budget", "spent", "remaining")} == {"shopper"}


def test_the_unit_name_is_used_as_given_and_its_plural_only_when_configured(tmp_path: Path) -> None:
    config = _config(tmp_path)
    config.write_text(config.read_text().replace('unit_name = "shopper"',
                                                 'unit_name = "shopper"\nunit_plural = "customers"'))
    token = add_analyst(config, "ann")
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(load_config(config))) as http:
        released = http.post("/v1/releases", json={"dataset": "visits", "spec": SPEC}, headers=auth)
        assert released.status_code == 201, released.text
        datasets = {d["name"]: d for d in http.get("/v1/datasets", headers=auth).json()["datasets"]}
    # δ > 0 without n: the guarantee says for how many units it means something, never "shoppers".
    assert "privacy units (each one shopper)" in released.json()["explain"]
    assert "shoppers" not in released.text
    assert datasets["visits"]["unit_plural"] == "customers" and datasets["people"]["unit_plural"] is None
    config.write_text(config.read_text().replace('unit_plural = "customers"', 'unit_plural = ""'))
    with pytest.raises(InvalidParameter, match=r"datasets\.visits\.unit_plural"):
        load_config(config)
