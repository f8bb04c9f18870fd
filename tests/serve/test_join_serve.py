"""The service's datasets name public tables in the configuration, which their SQL may JOIN."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from serve_helpers import write_service

from bayesdp.errors import InvalidParameter
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


def test_public_tables_are_refused_with_deadlines_on(tmp_path: Path) -> None:
    # A deadline is measured on made-up rows of the dataset alone: a JOIN would overrun it.
    path = write_service(tmp_path)
    pd.DataFrame({"shop": ["a"]}).to_csv(tmp_path / "shops.csv", index=False)
    text = path.read_text().replace("timing = { pad = false }", "timing = { pad = true }")
    path.write_text(text + '\n[datasets.visits.public_tables]\nshops = "shops.csv"\n')
    with pytest.raises(InvalidParameter, match="pad = false"):
        load_config(path)
