"""The service's configuration checks, the curator's commands and `bayesdp serve --demo`."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_helpers import start, write_service

from bayesdp.cli import main
from bayesdp.errors import InvalidParameter
from bayesdp.serve.config import load_config, parse_config


def _doc(root: Path) -> dict[str, Any]:
    return tomllib.loads(write_service(root).read_text())


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("state"), "state is missing"),
    (lambda d: d.update(colour=1), "unknown key(s) ['colour'] in the configuration"),
    (lambda d: d["datasets"]["visits"]["budget"].update(epsilon=-1), "datasets.visits.budget.epsilon=-1"),
    (lambda d: d["datasets"]["visits"]["budget"].update(accounting="rdp"),
     "datasets.visits.budget.accounting"),
    (lambda d: d["datasets"]["visits"]["budget"].update(accounting="gdp"),
     "datasets.visits.budget.accounting='gdp' is not allowed"),
    (lambda d: d["datasets"]["visits"]["budget"].update(accounting="pld"),
     "datasets.visits.budget.accounting: accounting='pld' is not allowed for a ledger or a service "
     "budget"),
    (lambda d: d["datasets"]["visits"]["columns"]["spend"].update(bounds=[5, 1]),
     "datasets.visits.columns.spend.bounds"),
    (lambda d: d["datasets"]["visits"].update(source="missing.csv"), "datasets.visits.source"),
    (lambda d: d["datasets"]["visits"].update(synthetic={"epsilon": 1.0, "rows": 10}),
     "datasets.visits.synthetic needs privacy_unit = false"),
    (lambda d: d["holdouts"]["model"].update(sigma=0), "holdouts.model.sigma=0"),
    (lambda d: d["holdouts"]["model"].pop("budget"), "holdouts.model.budget is missing"),
    (lambda d: d.update(rate_per_minute=0), "rate_per_minute=0"),
])
def test_configuration_errors_name_the_key(tmp_path: Path, change: Any, message: str) -> None:
    doc = _doc(tmp_path)
    change(doc)
    with pytest.raises(InvalidParameter) as info:
        parse_config(doc, tmp_path)
    assert message in str(info.value)


def test_an_analysts_budget_is_a_filter_the_service_can_keep(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = str(write_service(tmp_path))
    assert main(["serve", "analysts", "add", "ann", "--config", config]) == 0
    budget = ["serve", "--config", config, "analysts", "budget", "ann", "visits", "--epsilon", "0.5",
              "--delta", "1e-6", "--accounting"]
    assert main([*budget, "gdp"]) == 2  # the service's Gaussian releases are discrete
    assert "accounting='gdp' is not allowed" in capsys.readouterr().err
    assert main([*budget, "advanced"]) == 0


def test_the_curator_adds_lists_budgets_and_revokes_analysts(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = str(write_service(tmp_path))
    assert main(["serve", "analysts", "add", "ann", "--config", config]) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1]
    assert token.startswith("bdp_")
    assert main(["serve", "--config", config, "analysts", "budget", "ann", "visits", "--epsilon", "0.5"]) == 0
    assert main(["serve", "analysts", "budget", "ann", "--config", config]) == 0
    assert "ε=0.5" in capsys.readouterr().out
    assert main(["serve", "analysts", "revoke", "ann", "--config", config]) == 0
    assert main(["serve", "analysts", "list", "--config", config]) == 0
    assert "revoked" in capsys.readouterr().out
    assert main(["serve", "analysts", "add", "ann", "--config", config]) == 2
    assert "a name no other analyst has" in capsys.readouterr().err
    assert main(["serve", "audit", "--config", config]) == 0
    from bayesdp.serve.auth import Gate, Refused
    from bayesdp.serve.state import State

    state = State(load_config(config))
    try:
        with pytest.raises(Refused):
            Gate(state, 10).authenticate(token, "127.0.0.1")
        # Only a slow hash of the secret is stored, never the token.
        assert token.encode() not in (tmp_path / "state" / "service.db").read_bytes()
    finally:
        state.close()


@pytest.mark.slow
def test_demo_prints_the_url_and_a_working_token(tmp_path: Path) -> None:
    process, lines = start(["--demo"], tmp_path)
    try:
        assert [ln.split(": ")[0] for ln in lines[-2:]] == ["URL", "Token"]
        url, token = lines[-2][5:], lines[-1][7:]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        doc = httpx.get(url + "v1/datasets", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
        names = [d["name"] for d in doc["datasets"]]
        assert names == ["hie", "hie_persons"]
    finally:
        process.terminate()
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


def test_the_demo_says_what_each_column_holds(tmp_path: Path) -> None:
    from bayesdp.serve.demo import demo_config

    datasets = demo_config(tmp_path).datasets
    described = {c.name: c.description for ds in datasets.values() for c in ds.columns.values()}
    assert all(described.values()), [name for name, text in described.items() if not text]
    assert described["meddol"] == "medical expenses in the year, in dollars"
