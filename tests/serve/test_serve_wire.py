"""A Release through the wire (JSON, as the service sends it) comes back with everything publishable
an in-process release carries: keys, estimates, plan, guarantee, derived columns, column order,
label, dataset and time; never its diagnostics."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.report import write_release_report
from bayesdp.serve.wire import release_from_json, release_json
from bayesdp.tables import Release

# Bounding's exact counts stay with the curator; these tests look only at what is published.
pytestmark = pytest.mark.filterwarnings("ignore::bayesdp.errors.CuratorWarning")

AGGREGATES = {"users": bdp.count_units(), "rows": bdp.count(weight=2.0),
              "total": bdp.sum("spend", bounds=(0, 10), epsilon=0.2),
              "avg": bdp.mean("spend", bounds=(0, 10)), "big": bdp.share("spend > 5"),
              "sd": bdp.std("spend", bounds=(0, 10)), "p50": bdp.quantile("spend", 0.5, bounds=(0, 10)),
              "hist": bdp.histogram("spend", bins=[0, 2.5, 5, 10])}


def visits() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 2000
    return pd.DataFrame({"user": rng.integers(0, 500, n), "shop": rng.choice(["a", "b"], n),
                         "spend": rng.uniform(0, 12, n)})


def through_the_wire(release: Release, request: dict[str, object], options: dict[str, object]) -> Release:
    return release_from_json(json.loads(json.dumps(release_json(release, request, options))))


def assert_same_public_release(back: Release, release: Release) -> None:
    public = release.public()
    assert back.diagnostics is None
    for f in fields(Release):
        mine, theirs = getattr(back, f.name), getattr(public, f.name)
        if f.name == "keys":
            pd.testing.assert_frame_equal(mine, theirs, check_dtype=False)
        elif f.name == "estimates":
            assert mine.keys() == theirs.keys()
            for name in mine:
                for part in ("value", "low", "high"):
                    np.testing.assert_array_equal(getattr(mine[name], part), getattr(theirs[name], part))
        elif f.name == "plan":
            assert mine.table() == theirs.table() and mine.guarantee == theirs.guarantee
            assert {n: s.aggregate for n, s in mine.steps.items()} == \
                {n: s.aggregate for n, s in theirs.steps.items()}
        else:
            assert mine == theirs, f.name
    pd.testing.assert_frame_equal(back.to_pandas(), public.to_pandas(), check_dtype=False)
    assert back.explain() == public.explain()


@pytest.mark.parametrize("keys", [["a", "b"], None])
def test_a_builder_release_round_trips(keys: list[str] | None) -> None:
    query = bdp.table(visits(), "user").group_by("shop", keys=keys).agg(**AGGREGATES)
    options = {"epsilon": 2.0, "delta": 1e-6, "max_groups_per_unit": 2, "max_rows_per_group": 3,
               "selection_weight": 0.5, "alpha": 0.1}
    release = query.release(rng=bdp.rng_for_tests(5), label="shops", **options)
    back = through_the_wire(release, {"aggregates": {}}, options)
    assert_same_public_release(back, release)
    assert back.label == "shops" and (back.plan.selection is None) == (keys is not None)


def test_a_sql_release_round_trips_its_derived_columns(tmp_path: Path) -> None:
    meta = {"tables": {"visits": {"privacy_unit": "user", "max_groups_per_unit": 2,
                                  "columns": {"spend": {"bounds": [0, 10]}, "shop": {"keys": ["a", "b"]}}}}}
    query = ("SELECT shop, COUNT(*) AS n, ROUND(SUM(spend) / COUNT(*), 1) AS per_row FROM visits "
             "GROUP BY shop ORDER BY per_row DESC")
    release = bdp.sql(query, {"visits": visits()}, metadata=meta, epsilon=1.0, rng=bdp.rng_for_tests(2))
    assert release.derived and release.columns == ("shop", "n", "per_row")
    back = through_the_wire(release, {"sql": query}, {"epsilon": 1.0})
    assert_same_public_release(back, release)
    assert write_release_report(back, tmp_path / "r.html").read_text().startswith("<")


def test_a_bigquery_per_unit_release_round_trips_its_sensitivities() -> None:
    """Each unit's count, sum and mean move by one unit's bound whatever the rows a per-row
    aggregate keeps: the rebuilt plan states the noise the release drew, not five rows' worth."""
    meta = {"tables": {"visits": {"privacy_unit": "user", "columns": {"shop": {"keys": ["a", "b"]}}}}}
    query = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 2, delta = 1e-6, "
             "privacy_unit_column = user, max_groups_contributed = 2) shop, "
             "COUNT(*, contribution_bounds_per_group => (0, 3)) AS n, "
             "SUM(spend, contribution_bounds_per_group => (0, 10)) AS total, "
             "AVG(spend, contribution_bounds_per_group => (0, 10)) AS avg, "
             "STDDEV(spend, contribution_bounds_per_row => (0, 10)) AS sd FROM visits GROUP BY shop")
    release = bdp.sql(query, {"visits": visits()}, metadata=meta, rng=bdp.rng_for_tests(3))
    assert release.plan.max_rows == 5  # STDDEV keeps up to 5 rows per unit and group
    back = through_the_wire(release, {"sql": query}, {"epsilon": 2.0})
    assert_same_public_release(back, release)
