"""The service's answer does not depend on the data except through DP values: an infinite value
only a matching row gives (over HTTP, spec and SQL), warnings raised while the data is read, the
synthesizer's spend and its failures on the data."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from serve_helpers import Server, add_analyst, write_service

from bayesdp import tables
from bayesdp.errors import DataError
from bayesdp.serve.config import load_config
from bayesdp.serve.service import AuditedLedger, Service
from bayesdp.serve.state import State

# Some of the 3,000 visits have spend >= 11.9 (uniform on [0, 12]); none has spend >= 1000.
ATTACK = "CASE WHEN spend >= {v} THEN exp(1000) ELSE 0 END"


def _shown(r: httpx.Response) -> tuple[Any, ...]:
    """What an analyst sees but the DP values: the status, an error, the warnings, the shape."""
    doc = r.json()
    if r.status_code != 201:
        return r.status_code, doc["error"]["message"]
    return r.status_code, doc["warnings"], doc["columns"], len(doc["rows"]), doc["keys"]


def test_an_infinite_value_only_a_matching_row_gives_answers_as_no_row(server: Server) -> None:
    """The issue's request, on a spec and in SQL: 400 when some row matched, 201 when none did."""
    http = server.client(add_analyst(server.config_path, "prober"))

    def spec(v: float) -> httpx.Response:
        return http.post("/v1/releases", json={"dataset": "visits", "spec": {
            "aggregates": {"x": {"kind": "sum", "column": ATTACK.format(v=v), "bounds": [0, 1]}},
            "epsilon": 0.1, "max_rows_per_group": 17}})

    def sql(v: float) -> httpx.Response:
        return http.post("/v1/releases", json={"dataset": "visits", "sql": (
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, privacy_unit_column = user) "
            "COUNT(*, contribution_bounds_per_group => (0, 5)) AS n, "
            f"SUM({ATTACK.format(v=v)}, contribution_bounds_per_row => (0, 1)) AS s "
            "FROM visits")})

    for ask in (spec, sql):
        some, none = _shown(ask(11.9)), _shown(ask(1000))
        assert some[0] == 201 and some == none, (some, none)


@pytest.fixture
def service(tmp_path: Path) -> Service:
    config = load_config(write_service(tmp_path))
    return Service(config, State(config))


def test_only_the_plans_warnings_reach_the_analyst(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warning raised while the data is read (numpy's, an engine's) may say something about
    it: the audit text gets it, the analyst only the warnings the plan decides."""
    release = tables.Query.release

    def reading(self: tables.Query, *args: Any, **kwargs: Any) -> Any:
        warnings.warn("overflow encountered in some row", RuntimeWarning, stacklevel=1)
        return release(self, *args, **kwargs)

    monkeypatch.setattr(tables.Query, "release", reading)
    spec = {"group_by": ["shop"], "epsilon": 1e-6, "delta": 1e-6, "max_groups_per_unit": 2,
            "aggregates": {"n": {"kind": "count"}}}
    doc, audit = service.release(service.config.datasets["visits"], {"spec": spec}, None)  # type: ignore[arg-type]
    assert "overflow encountered in some row" in audit
    assert doc["warnings"] and not any("overflow" in w for w in doc["warnings"])
    assert all("partition selection" in w for w in doc["warnings"])  # the plan's usefulness warning


def _ledger(service: Service) -> AuditedLedger:
    token = service.state.add_analyst("synthesist")
    analyst = next(a for a in service.state.analysts() if token.split("_")[1] == a.id)
    return AuditedLedger(service.state.ledger(analyst.id, "people"), service.state, "req_1")


def test_synthetic_data_is_spent_before_the_data_is_fitted(service: Service, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import bayesdp.synth

    ledger, fit = _ledger(service), bayesdp.synth.synthesize
    spent_at_fit = []

    def synthesize(*args: Any, **kwargs: Any) -> Any:
        spent_at_fit.append(len(ledger.ledger.history()))
        return fit(*args, **kwargs)

    monkeypatch.setattr(bayesdp.synth, "synthesize", synthesize)
    doc = service.synthesize(service.config.datasets["people"], ledger, tmp_path / "out.csv")
    assert spent_at_fit == [1] and len(ledger.ledger.history()) == 1
    assert doc["guarantee"]["epsilon"] == pytest.approx(1.0)


def test_a_synthesizer_that_cannot_fit_the_data_stops_the_service_at_start_up(tmp_path: Path) -> None:
    """Every shop outside the declared domain: the fit would fail on the data, for any request;
    the curator learns it at start-up, and no analyst can observe it."""
    path = write_service(tmp_path)
    people = pd.read_csv(tmp_path / "people.csv").assign(shop="z")
    people.to_csv(tmp_path / "people.csv", index=False)
    config = load_config(path)
    with pytest.raises(DataError, match="every row has a value outside the declared domains"):
        Service(config, State(config))
