"""Per-analyst dataset access: a dataset an analyst may not use is absent from their listing
and refused exactly as a dataset that does not exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from serve_helpers import add_analyst, write_service
from starlette.testclient import TestClient

from bayesdp.cli import main
from bayesdp.errors import InvalidParameter
from bayesdp.serve.app import create_app
from bayesdp.serve.config import load_config
from bayesdp.serve.service import Service
from bayesdp.serve.state import State

SPEC = {"epsilon": 0.1, "aggregates": {"n": {"kind": "count"}}}


def _service(root: Path) -> Path:
    path = write_service(root)
    text = path.read_text().replace("[datasets.people]\n", '[datasets.people]\nanalysts = ["ann"]\n')
    path.write_text(text)
    return path


def _requests(name: str) -> list[tuple[str, str, Any]]:
    return [("POST", "/v1/releases", {"dataset": name, "spec": SPEC}),
            ("POST", "/v1/preview", {"dataset": name, "spec": SPEC}),
            ("POST", "/v1/releases", {"sql": f"SELECT COUNT(*) AS n FROM {name}", "epsilon": 0.1}),
            ("POST", "/v1/preview", {"sql": f"SELECT COUNT(*) AS n FROM {name}", "epsilon": 0.1}),
            ("POST", f"/v1/synthetic/{name}", None), ("GET", f"/v1/synthetic/{name}", None)]


def test_a_dataset_an_analyst_may_not_use_is_absent_and_refused_like_a_missing_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _service(tmp_path)
    ann, carl = add_analyst(config, "ann"), add_analyst(config, "carl")
    assert main(["serve", "analysts", "add", "bob", "--datasets", "visits", "--config", str(config)]) == 0
    bob = capsys.readouterr().out.strip().splitlines()[-1]
    with TestClient(create_app(load_config(config))) as http:
        def listed(token: str) -> list[str]:
            auth = {"Authorization": f"Bearer {token}"}
            names = [d["name"] for d in http.get("/v1/datasets", headers=auth).json()["datasets"]]
            assert list(http.get("/v1/budget", headers=auth).json()["datasets"]) == names
            return names

        assert listed(ann) == ["visits", "people", "gaps"]
        assert listed(carl) == ["visits", "gaps"]
        assert listed(bob) == ["visits"]
        for token, hidden in ((carl, "people"), (bob, "gaps"), (bob, "people")):
            auth = {"Authorization": f"Bearer {token}"}
            absent = "z" * len(hidden)  # as long, so that SQL refusals point at the same span
            for (method, path, body), (_, missing_path, missing_body) in zip(
                    _requests(hidden), _requests(absent), strict=True):
                r = http.request(method, path, json=body, headers=auth)
                missing = http.request(method, missing_path, json=missing_body, headers=auth)
                assert r.status_code == missing.status_code and r.status_code in (400, 404), (path, r.text)
                shown, expected = r.json()["error"], missing.json()["error"]
                shown["message"] = shown["message"].replace(hidden, absent)
                assert shown == expected
        assert main(["serve", "analysts", "list", "--config", str(config)]) == 0
        listing = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()
                   if line.split()[1:2] in (["ann"], ["bob"], ["carl"])}
        assert "visits, people, gaps" in listing["ann"] and "visits, gaps" in listing["carl"]
        assert "gaps" not in listing["bob"]
        assert main(["serve", "analysts", "datasets", "bob", "--all", "--config", str(config)]) == 0
        assert "visits, gaps" in capsys.readouterr().out
        assert listed(bob) == ["visits", "gaps"]
        assert main(["serve", "analysts", "datasets", "ann", "gaps", "--config", str(config)]) == 0
        assert listed(ann) == ["gaps"]
    assert main(["serve", "analysts", "add", "dan", "--datasets", "nope", "--config", str(config)]) == 2
    assert "dataset='nope'" in capsys.readouterr().err


def test_a_holdout_an_analyst_may_not_use_is_absent_and_refused_like_a_missing_one(tmp_path: Path) -> None:
    config = write_service(tmp_path)
    config.write_text(config.read_text().replace("budget = 5\n", 'budget = 5\nanalysts = ["ann"]\n'))
    ann, carl = add_analyst(config, "ann"), add_analyst(config, "carl")
    with TestClient(create_app(load_config(config))) as http:
        def holdouts(token: str) -> list[str]:
            doc = http.get("/v1/datasets", headers={"Authorization": f"Bearer {token}"}).json()
            return [h["name"] for h in doc["holdouts"]]

        assert (holdouts(ann), holdouts(carl)) == (["model"], [])
        auth = {"Authorization": f"Bearer {carl}"}
        for name in ("model", "zzzzz"):
            train = http.get(f"/v1/holdouts/{name}/train", headers=auth)
            asked = http.post(f"/v1/holdouts/{name}/queries", json={"queries": ["spend > 1"]}, headers=auth)
            assert (train.status_code, asked.status_code) == (404, 404)
            assert train.json()["error"] == asked.json()["error"] == {
                "code": "not_found", "message": f"no holdout named {name!r}; the holdouts are []"}
        r = http.get("/v1/holdouts/model/train", headers={"Authorization": f"Bearer {ann}"})
        assert r.status_code == 200


@pytest.mark.parametrize(("column", "expected"), [
    ('ok = { domain = ["yes", "no"] }', "datasets.flags.columns.ok.domain=['yes', 'no'] is not allowed"),
    ('n = { domain = [1, "2"] }', "['2'] are not"),
    ('n = { domain = [1, 2.5] }', "[2.5] are not"),
    ('label = { bounds = [0, 1] }', "datasets.flags.columns.label.bounds=[0.0, 1.0]"),
    ('day = { domain = ["2024-01-01", "someday"] }', "['someday'] are not"),
])
def test_the_schema_is_checked_against_the_data_types(tmp_path: Path, column: str, expected: str) -> None:
    (tmp_path / "flags.csv").write_text("ok,n,label,day\ntrue,1,x,2024-01-01\nfalse,2,y,2024-01-02\n")
    config = tmp_path / "service.toml"
    head = 'state = "state"\n[datasets.flags]\nsource = "flags.csv"\nprivacy_unit = false\n' \
           'budget = { epsilon = 1.0 }\n[datasets.flags.columns]\n'
    config.write_text(head + column + "\n")
    with pytest.raises(InvalidParameter) as info:
        create_app(load_config(config))
    assert expected in str(info.value)
    kind = {"ok": "BOOLEAN", "n": "BIGINT", "label": "VARCHAR", "day": "DATE"}[column.split()[0]]
    assert f"type {kind} (as DuckDB reads flags.csv)" in str(info.value)
    config.write_text(head + 'ok = { domain = [true, false] }\nn = { domain = [1, 2, 3] }\n'
                      'label = { domain = ["x", "y"] }\nday = { domain = [2024-01-01, "2024-01-02"] }\n')
    with TestClient(create_app(load_config(config))) as http:
        assert http.get("/health").status_code == 200


def test_one_analyst_cannot_exhaust_the_shared_holdout(tmp_path: Path) -> None:
    config_path = write_service(tmp_path)
    config_path.write_text(config_path.read_text().replace(
        "threshold = 0.04\nsigma = 0.01", "threshold = 0.5\nsigma = 0.001\nshare = 2"))
    pd.DataFrame({"shop": ["a"] * 50, "spend": [1.0] * 50}).to_csv(tmp_path / "train.csv", index=False)
    pd.DataFrame({"shop": ["a"] * 50, "spend": [9.0] * 50}).to_csv(tmp_path / "holdout.csv", index=False)
    greedy, patient = add_analyst(config_path, "greedy"), add_analyst(config_path, "patient")
    config = load_config(config_path)

    def ask(http: TestClient, token: str, n: int) -> list[tuple[str, int]]:
        r = http.post("/v1/holdouts/model/queries", json={"queries": ["spend > 5"] * n},
                      headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        return [(a["source"], a["budget_left"]) for a in r.json()["answers"]]

    # A gap of 1 always overflows the threshold 0.5 (the noise, of scale 0.004 at most, exceeds
    # 0.25 with probability below 1e-20 per query), so each answer spends one overflow.
    with TestClient(create_app(config)) as http:
        assert ask(http, greedy, 4) == [("holdout", 1), ("holdout", 0), ("exhausted", 0), ("exhausted", 0)]
        assert ask(http, patient, 1) == [("holdout", 1)]
        assert http.get("/v1/datasets", headers={"Authorization": f"Bearer {patient}"}).json()[
            "holdouts"][0]["budget_left"] == 2
    state = State(config)
    h = Service(config, state).holdouts["model"]  # restarted: the shares are kept
    assert [a.source for a in h.query(["spend > 5"], greedy.split("_")[1])] == ["exhausted"]
    assert [a.source for a in h.query(["spend > 5"], patient.split("_")[1])] == ["holdout"]
    state.close()


def test_a_holdout_share_must_fit_its_budget(tmp_path: Path) -> None:
    config_path = write_service(tmp_path)
    config_path.write_text(config_path.read_text().replace("budget = 5\n", "budget = 5\nshare = 6\n"))
    with pytest.raises(InvalidParameter, match=r"holdouts\.model\.share=6 .* at most the holdout's budget"):
        load_config(config_path)
