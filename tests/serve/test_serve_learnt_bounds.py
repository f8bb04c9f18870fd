"""Bounds the BigQuery clause learns in the service: the analyst is told them (DP values) after a
release, and a preview says they are unknown until then instead of showing a placeholder's figures."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from serve_helpers import write_service

from bayesdp.serve.config import load_config
from bayesdp.serve.service import Service
from bayesdp.serve.state import State
from bayesdp.serve.wire import release_from_json

LEARNT = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user, "
          "max_groups_contributed = 2) shop, COUNT(*) AS n, SUM(spend) AS total FROM {table} GROUP BY shop")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Service:
    """The test service, with `visit2`: `visits` and one more user (a neighbouring table)."""
    root = tmp_path_factory.mktemp("learnt")
    path = write_service(root)
    visits = pd.read_csv(root / "visits.csv")
    pd.concat([visits, visits.tail(1).assign(user=10**6, spend=1e9)]).to_csv(root / "visit2.csv", index=False)
    text = path.read_text()
    block = text[text.index("[datasets.visits]"):text.index("[datasets.people]")]
    path.write_text(text + "\n" + block.replace("visits", "visit2"))
    config = load_config(path)
    return Service(config, State(config))


def _seen(service: Service, table: str) -> tuple[list[str], list[str]]:
    """The analyst's columns and warnings (numbers removed) of the release of LEARNT on `table`."""
    doc, _ = service.release(service.config.datasets[table], {"sql": LEARNT.format(table=table)},
                             None)  # type: ignore[arg-type]
    return doc["columns"], [re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", w) for w in doc["warnings"]]


def test_the_analyst_is_told_the_learnt_bounds_alike_on_a_neighbouring_table(service: Service) -> None:
    seen = _seen(service, "visits")
    assert any("bounds learnt privately" in w and "n in [#, #], total in [#, #]" in w for w in seen[1]), seen
    assert _seen(service, "visit2") == seen


def test_a_preview_does_not_pretend_to_know_the_learnt_bounds(service: Service) -> None:
    doc = service.preview(service.config.datasets["visits"], {"sql": LEARNT.format(table="visits")})
    rows = pd.DataFrame(doc["rows"], columns=doc["columns"]).set_index("aggregate")
    assert not rows["what"].str.contains(r"\(0, 1\)").any(), rows["what"]
    assert rows.loc["total", "what"].endswith("per unit of max(|low|, |high|) of them")
    # ε = 1 over two aggregates (public keys): each had 1/2, half of it to its bounds.
    assert rows.loc["total", "epsilon"] == pytest.approx(0.25)
    assert rows.loc["total (bounds)", "epsilon"] == pytest.approx(0.25)
    assert doc["guarantee"]["epsilon"] == pytest.approx(1.0)


def test_per_unit_sql_shows_the_analysts_expressions_never_internal_columns(service: Service) -> None:
    """Each unit's values per group are columns of an internal table: previews and releases
    describe them by what the analyst wrote, and the client rebuilds the release from that."""
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user, "
           "max_groups_contributed = 2) shop, COUNT(*) AS n, SUM(spend * 2) AS total, "
           "STDDEV(spend, contribution_bounds_per_row => (0, 10)) AS sd FROM visits GROUP BY shop")
    ds = service.config.datasets["visits"]
    preview = service.preview(ds, {"sql": sql})
    doc, _ = service.release(ds, {"sql": sql}, None)  # type: ignore[arg-type]
    for shown in (preview, doc):
        assert "bdp_" not in json.dumps(shown), shown
    what = {row[0]: row[1] for row in preview["rows"]}
    assert what["n"].startswith("sum('COUNT(*) per user', bounds learnt at release)")
    assert what["total"].startswith("sum('SUM(spend * 2) per user', bounds learnt at release)")
    assert what["sd"] == "std('spend', bounds=(0, 10))"
    columns = {n: a["column"] for n, a in doc["plan"]["aggregates"].items()}
    assert columns == {"n": "COUNT(*) per user", "total": "SUM(spend * 2) per user", "sd": "spend"}
    assert "bdp_" not in release_from_json(doc).explain()
