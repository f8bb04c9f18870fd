"""A preview says whether the analyst's privacy filter admits its spends now and what share of the
budget they would use: under zCDP a release's own ε says neither (ρ adds, ε does not)."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import pytest
from serve_helpers import add_analyst, write_service
from starlette.testclient import TestClient

from bayesdp.privacy import Guarantee, Ledger
from bayesdp.privacy.filters import filter_for
from bayesdp.serve.app import create_app
from bayesdp.serve.config import Budget, Config, load_config
from bayesdp.serve.state import State

# Laplace noise under zCDP costs ρ = ε²/2: at ε = 0.5 far more than the budget's ρ, though ε < 1.
LAPLACE = {"epsilon": 0.5, "noise": "laplace", "aggregates": {"n": {"kind": "count"}}}
# Gaussian noise stated at δ = 1e-12 has ε > 1, yet its ρ is within the budget's.
GAUSSIAN = {"epsilon": 1.3, "delta": 1e-12, "noise": "gaussian", "aggregates": {"n": {"kind": "count"}}}


# BigQuery's clause learns bounds first: two spends of ε = 0.5 each, not one of ε = 1.
LEARNT = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user, "
          "max_groups_contributed = 2) shop, SUM(spend) AS total FROM visits GROUP BY shop")


def _service(tmp_path: Path, budget: Budget) -> tuple[Config, dict[str, str]]:
    """The test service with analyst ann's budget on visits, and ann's authorization header."""
    config_path = write_service(tmp_path)
    token = add_analyst(config_path, "ann")
    config = load_config(config_path)
    state = State(config)
    try:
        state.set_budget("ann", "visits", budget)
    finally:
        state.close()
    return config, {"Authorization": f"Bearer {token}"}


def _preview(http: TestClient, auth: dict[str, str], spec: dict) -> dict:
    """The preview of `spec` on visits, answered."""
    r = http.post("/v1/preview", json={"dataset": "visits", "spec": spec}, headers=auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_the_preview_decides_by_the_filter_where_comparing_epsilon_gets_it_wrong(tmp_path: Path) -> None:
    config, auth = _service(tmp_path, Budget(1.0, 1e-6, "zcdp"))
    with TestClient(create_app(config)) as http:
        preview = partial(_preview, http, auth)
        remaining = http.get("/v1/budget", headers=auth).json()["datasets"]["visits"]["remaining"]
        laplace, gaussian = preview(LAPLACE), preview(GAUSSIAN)
        # What comparing ε with the largest next spend concludes, wrongly both ways:
        assert laplace["guarantee"]["epsilon"] <= remaining["epsilon"] < gaussian["guarantee"]["epsilon"]
        assert not laplace["admitted"] and "would exceed the budget" in laplace["refused"]
        assert laplace["used"] == 0 and laplace["uses"] == 1
        assert gaussian["admitted"] and gaussian["refused"] is None and 0.5 < gaussian["uses"] < 1
        # The previews said what the releases do, and nothing was spent by them.
        assert http.get("/v1/budget", headers=auth).json()["datasets"]["visits"]["releases"] == 0
        refused = http.post("/v1/releases", json={"dataset": "visits", "spec": LAPLACE}, headers=auth)
        assert refused.status_code == 403, refused.text
        released = http.post("/v1/releases", json={"dataset": "visits", "spec": GAUSSIAN}, headers=auth)
        assert released.status_code == 201, released.text
        budget = http.get("/v1/budget", headers=auth).json()["datasets"]["visits"]
        assert budget["used"] == gaussian["uses"]
        after = preview(GAUSSIAN)
        assert (after["admitted"], after["used"]) == (False, budget["used"])


def test_the_preview_weighs_each_spend_of_the_release_apart(tmp_path: Path) -> None:
    """Under advanced composition Σε² is charged: the learnt bounds' spend and the aggregates'
    use 0.5² + 0.5², half of what their composition (ε = 1) would; the preview says what the
    release then uses."""
    config, auth = _service(tmp_path, Budget(8.0, 1e-6, "advanced"))
    with TestClient(create_app(config)) as http:
        preview = http.post("/v1/preview", json={"sql": LEARNT}, headers=auth).json()
        assert preview["admitted"] and preview["guarantee"]["epsilon"] == 1
        released = http.post("/v1/releases", json={"sql": LEARNT}, headers=auth)
        assert released.status_code == 201, released.text
        budget = http.get("/v1/budget", headers=auth).json()["datasets"]["visits"]
    assert budget["releases"] == 2 and budget["used"] == pytest.approx(preview["uses"], rel=1e-12)
    assert Ledger(tmp_path / "whole.db", budget=Guarantee(8.0, delta=1e-6), accounting="advanced").propose(
        [Guarantee(1.0)]).uses == pytest.approx(2 * preview["uses"])


def test_a_specs_largest_epsilon_is_where_the_filter_stops_admitting_it(tmp_path: Path) -> None:
    """The preview's `largest_epsilon` (the console's slider): under zCDP a Laplace count of ε
    costs ρ = ε²/2, so the largest is √(2ρ), far below the budget's ε; Gaussian noise at a tiny δ
    reaches an ε above it. At that ε the spec is admitted, a hair above it refused."""
    config, auth = _service(tmp_path, Budget(1.0, 1e-6, "zcdp"))
    with TestClient(create_app(config)) as http:
        preview = partial(_preview, http, auth)
        rho = filter_for("zcdp", Guarantee(1.0, delta=1e-6)).rho
        laplace, gaussian = preview(LAPLACE)["largest_epsilon"], preview(GAUSSIAN)["largest_epsilon"]
        assert laplace == pytest.approx(math.sqrt(2 * rho), rel=1e-12)
        assert gaussian > 1.0 and preview({**GAUSSIAN, "epsilon": 1.0})["largest_epsilon"] == gaussian
        for spec, top in ((LAPLACE, laplace), (GAUSSIAN, gaussian)):
            assert preview({**spec, "epsilon": top})["admitted"]
            assert not preview({**spec, "epsilon": top * (1 + 1e-9)})["admitted"]
        sql = http.post("/v1/preview", json={"dataset": "visits", "sql": "SELECT COUNT(*) FROM visits",
                                             "epsilon": 0.1}, headers=auth)
        assert sql.status_code == 200 and "largest_epsilon" not in sql.json()


def test_the_budget_says_what_the_filter_makes_of_the_synthetic_data(tmp_path: Path) -> None:
    """/v1/budget's `synthetic_spend` is the synthetic data's spend as the filter would take it
    now: the share it uses is what asking for them then uses, and once released, nothing."""
    config, auth = _service(tmp_path, Budget(1.0, 1e-6, "zcdp"))
    with TestClient(create_app(config)) as http:
        def people() -> dict:
            return http.get("/v1/budget", headers=auth).json()["datasets"]["people"]

        before = people()
        spend = before["synthetic_spend"]
        assert spend["admitted"] and spend["used"] == 0 and 0 < spend["uses"] < 1
        assert "synthetic_spend" not in http.get("/v1/budget", headers=auth).json()["datasets"]["visits"]
        r = http.post("/v1/synthetic/people", headers={**auth, "Idempotency-Key": "people"})
        assert r.status_code == 201, r.text
        after = people()
        assert after["used"] == pytest.approx(spend["uses"], rel=1e-12)
        nothing = {"admitted": True, "used": after["used"], "uses": 0.0, "refused": None}
        assert after["synthetic_spend"] == nothing
