"""The service's datasets name public tables in the configuration, which their SQL may JOIN."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from serve_helpers import add_analyst, write_service
from starlette.testclient import TestClient

from bayesdp.errors import InvalidParameter
from bayesdp.serve import timing
from bayesdp.serve.app import create_app
from bayesdp.serve.config import load_config
from bayesdp.serve.service import Service
from bayesdp.serve.state import State
from bayesdp.sql import SqlError

JOINED = ("SELECT shop, COUNT(*) AS n FROM visits JOIN shops AS s USING (shop) WHERE s.open = 1 "
          "GROUP BY shop")


def _service(tmp_path: Path) -> Service:
    path = write_service(tmp_path)
    pd.DataFrame({"shop": ["a", "b", "c"], "open": [1, 0, 1]}).to_csv(tmp_path / "shops.csv", index=False)
    path.write_text(path.read_text() + '\n[datasets.visits.public_tables]\nshops = "shops.csv"\n')
    config = load_config(path)
    return Service(config, State(config))


def test_sql_joins_a_configured_public_table(tmp_path: Path) -> None:
    service = _service(tmp_path)
    visits = service.config.datasets["visits"]
    doc, _ = service.release(visits, {"sql": JOINED, "epsilon": 1.0}, None)  # type: ignore[arg-type]
    table = pd.DataFrame(doc["rows"], columns=doc["columns"])
    # Shop b is closed: its rows leave with the join; the public keys a, b, c are all released
    # (b about 0 against about 800 rows for a: noise of scale 4 would need to exceed 250).
    assert list(table["shop"]) == ["a", "b", "c"]
    assert table.loc[1, "n"] < table.loc[0, "n"] / 3
    # Another dataset does not see the table.
    with pytest.raises(SqlError, match="not one of the tables"):
        service.translation(service.config.datasets["gaps"],
                            {"sql": "SELECT COUNT(*) FROM gaps JOIN shops USING (shop)", "epsilon": 1.0})


def test_a_public_table_must_be_named_and_exist(tmp_path: Path) -> None:
    path = write_service(tmp_path)
    path.write_text(path.read_text() + '\n[datasets.visits.public_tables]\nshops = "missing.csv"\n')
    with pytest.raises(InvalidParameter, match=r"public_tables\.shops"):
        load_config(path)


def _padded(root: Path, extra_row: bool) -> Path:
    """A service with deadlines on whose dataset joins a public table; `extra_row`: its
    neighbour, with one more row of a new user. Returns its configuration."""
    root.mkdir()
    path = write_service(root)
    if extra_row:
        visits = pd.read_csv(root / "visits.csv")
        new = {"user": 10**6, "shop": "b", "spend": 9.5, "flag": 1, "secret": 1}
        pd.concat([visits, pd.DataFrame([new])]).to_csv(root / "visits.csv", index=False)
    pd.DataFrame({"shop": ["a", "b", "c"], "open": [1, 0, 1]}).to_csv(root / "shops.csv", index=False)
    # Wide slacks: the answers are compared, not the deadlines, on machines running other tests.
    text = path.read_text().replace("timing = { pad = false }",
                                    "timing = { runs = 2, slack = 0.5, slack_alone = 0.5 }")
    path.write_text(text + '\n[datasets.visits.public_tables]\nshops = "shops.csv"\n')
    return path


def test_a_join_with_deadlines_on_answers_alike_on_neighbouring_tables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The JOIN's deadline is timed on made-up rows joined with the public table itself: that
    # timing runs the whole release (a failure there would pass unseen in the service).
    monkeypatch.setattr(timing, "_attempt", lambda run: run())
    timed = []  # the stand-ins of joins (services of other tests may re-time their own shapes)
    stand_in = timing.Releases._stand_in

    def recorded(self: timing.Releases, query: Any, made_up: Any) -> Any:
        made = stand_in(self, query, made_up)
        if made_up is not None:
            timed.append(made.table.columns)
        return made

    monkeypatch.setattr(timing.Releases, "_stand_in", recorded)
    shapes = []
    for name, extra_row in (("one", False), ("two", True)):
        config = _padded(tmp_path / name, extra_row)
        auth = {"Authorization": f"Bearer {add_analyst(config, 'ann')}"}
        with TestClient(create_app(load_config(config))) as http:
            answers = [http.post("/v1/releases", json={"sql": sql, "epsilon": 1.0}, headers=auth)
                       for sql in (JOINED, JOINED.replace("s.open = 1", "s.open = 1 AND spend > 9"),
                                   JOINED.replace("USING (shop)", "USING (nowhere)"))]
        shapes.append([(r.status_code, r.json().get("columns"), len(r.json().get("rows", [])),
                        r.json().get("error")) for r in answers])
        assert [r.status_code for r in answers] == [201, 201, 400], [r.text for r in answers]
        assert [row[0] for row in answers[0].json()["rows"]] == ["a", "b", "c"]
    assert shapes[0] == shapes[1]
    assert timed and all("open" in columns for columns in timed)
