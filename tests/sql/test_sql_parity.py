"""The same query through SQL (both dialects) and through the builder, with the same seed,
releases the same numbers: SQL adds no privacy logic, it builds the builder's Query."""

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.sql import translate

BQ = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, max_groups_contributed = 3, "
      "privacy_unit_column = user_id) ")
B = (0, 100)  # revenue's bounds, in the metadata and in the BigQuery queries


def unit(df):
    return bdp.table(df, "user_id")


# (id, sql, uses the metadata, the builder's query, its release options)
CASES = [
    ("bigquery: the issue's query",
     BQ + "campaign, COUNT(*) AS n, SUM(revenue, contribution_bounds_per_group => (0, 100)) AS rev, "
          "AVG(revenue, contribution_bounds_per_group => (0, 100)) AS avg_rev, "
          "PERCENTILE_CONT(revenue, 0.5, contribution_bounds_per_row => (0, 100)) AS p50 "
          "FROM events WHERE country = 'FR' GROUP BY campaign", False,
     lambda df: unit(df).where("country = 'FR'").group_by("campaign").agg(
         n=bdp.count(), rev=bdp.sum("revenue", B), avg_rev=bdp.mean("revenue", B),
         p50=bdp.quantile("revenue", 0.5, B)),
     {"epsilon": 1.0, "delta": 1e-6, "max_groups_per_unit": 3}),
    ("bigquery: unit counts, spread, median, default max_groups_contributed",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-5, privacy_unit_column = user_id) "
     "region, COUNT(DISTINCT user_id) AS users, STDDEV_POP(revenue, contribution_bounds_per_row => (0, 100)) "
     "AS sd, MEDIAN(revenue, contribution_bounds_per_row => (0, 100)) AS med FROM events GROUP BY region",
     False,
     lambda df: unit(df).group_by("region").agg(users=bdp.count_units(), sd=bdp.std("revenue", B),
                                                med=bdp.quantile("revenue", 0.5, B)),
     {"epsilon": 0.5, "delta": 1e-5, "max_groups_per_unit": 1}),
    ("bigquery: COUNT's bound sets the rows per unit and group, no GROUP BY",
     BQ + "COUNT(*, contribution_bounds_per_group => (0, 4)) AS n, "
          "SUM(revenue, contribution_bounds_per_group => (0, 100)) AS s FROM events", False,
     lambda df: unit(df).agg(n=bdp.count(), s=bdp.sum("revenue", B)),
     {"epsilon": 1.0, "delta": 1e-6, "max_groups_per_unit": 3, "max_rows_per_group": 4}),
    ("bigquery: aggregates of row expressions, their bounds from the query",
     BQ + "campaign, SUM(CASE WHEN revenue > 10 THEN 1 ELSE 0 END) AS big, AVG(country = 'FR') AS fr, "
          "COUNT(revenue) AS known, SUM(revenue * 2, contribution_bounds_per_group => (0, 200)) AS r2 "
          "FROM events GROUP BY campaign", False,
     lambda df: unit(df).group_by("campaign").agg(
         big=bdp.sum("CASE WHEN revenue > 10 THEN 1 ELSE 0 END", (0, 1)),
         fr=bdp.mean("country = 'FR'", (0, 1)),
         known=bdp.tables.count_where("CASE WHEN revenue IS NOT NULL THEN 1 ELSE 0 END"),
         r2=bdp.sum("revenue * 2", (0, 200))),
     {"epsilon": 1.0, "delta": 1e-6, "max_groups_per_unit": 3}),
    ("plain: public keys from the metadata",
     "SELECT campaign, COUNT(*), SUM(revenue), AVG(revenue) FROM events GROUP BY campaign", True,
     lambda df: unit(df).group_by("campaign", keys=["spring", "summer", "fall", "winter"]).agg(
         **{"COUNT(*)": bdp.count(), "SUM(revenue)": bdp.sum("revenue", B),
            "AVG(revenue)": bdp.mean("revenue", B)}),
     {"epsilon": 1.0, "delta": 1e-6, "max_groups_per_unit": 3, "max_rows_per_group": 2}),
    ("plain: two group columns, keys from the metadata and from WHERE IN on a public column",
     "SELECT country, region, COUNT(DISTINCT user_id) AS users, QUANTILE_CONT(revenue, 0.25) AS q1 "
     "FROM events WHERE country IN ('FR', 'DE') GROUP BY country, region", True,
     lambda df: unit(df).where("country IN ('FR', 'DE')").group_by(
         ["country", "region"], keys=[("FR", 1), ("FR", 2), ("DE", 1), ("DE", 2)]).agg(
         users=bdp.count_units(), q1=bdp.quantile("revenue", 0.25, B)),
     {"epsilon": 1.0, "delta": 1e-6, "max_groups_per_unit": 3, "max_rows_per_group": 2}),
    ("plain: private keys, WITHIN GROUP, STDDEV",
     "SELECT country, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY revenue) AS p90, STDDEV(revenue) AS sd "
     "FROM events GROUP BY country", True,
     lambda df: unit(df).group_by("country").agg(p90=bdp.quantile("revenue", 0.9, B),
                                                 sd=bdp.std("revenue", B)),
     {"epsilon": 1.0, "delta": 1e-6, "max_groups_per_unit": 3, "max_rows_per_group": 2}),
]


def _sql(df, query, meta, seed):
    return bdp.sql(query, {"events": df}, metadata=meta, epsilon=1.0 if meta else None,
                   rng=bdp.rng_for_tests(seed))


@pytest.mark.parametrize(("query", "with_meta", "builder", "options"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_sql_releases_what_the_builder_releases(events, meta, query, with_meta, builder, options):
    got = _sql(events, query, meta if with_meta else None, 7).to_pandas()
    want = builder(events).release(rng=bdp.rng_for_tests(7), **options).to_pandas()
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_translation_is_the_builders_query(events, meta):
    """The plan (budget split, mechanisms, guarantee) is the builder's, touching no data."""
    _, query, _, builder, options = CASES[0]
    t = translate(query, {"events": events})
    assert t.options == options
    got = t.query.plan(1.0, 1e-6, max_groups_per_unit=3)
    want = builder(events).plan(1.0, 1e-6, max_groups_per_unit=3)
    assert got.describe() == want.describe()
    assert got.guarantee == want.guarantee


def test_post_processing_on_released_values(events, meta):
    """Arithmetic, ROUND, aliases, HAVING, ORDER BY and LIMIT are applied to the builder's
    released values and their intervals (interval arithmetic)."""
    query = ("SELECT campaign, ROUND(SUM(revenue) / COUNT(*), 1) AS per_row, COUNT(*) AS n, "
             "VARIANCE(revenue) AS var, SUM(revenue) - 10 * n AS excess FROM events GROUP BY campaign "
             "HAVING n > 0 AND campaign <> 'fall' ORDER BY n DESC LIMIT 2")
    query = query.replace("10 * n", "10 * COUNT(*)")
    got = _sql(events, query, meta, 3).to_pandas()
    aggs = {"SUM(revenue)": bdp.sum("revenue", B), "n": bdp.count(),
            "VARIANCE(revenue)": bdp.std("revenue", B)}
    want = unit(events).group_by("campaign", keys=["spring", "summer", "fall", "winter"]).agg(**aggs).release(
        1.0, 1e-6, max_groups_per_unit=3, max_rows_per_group=2, rng=bdp.rng_for_tests(3)).to_pandas()
    s, n, sd = (want[[c, c + "_low", c + "_high"]].to_numpy() for c in aggs)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_row = np.round(np.stack([s[:, 0] / n[:, 0], s[:, 1] / n[:, 2], s[:, 2] / n[:, 1]], axis=1), 1)
    excess = np.stack([s[:, 0] - 10 * n[:, 0], s[:, 1] - 10 * n[:, 2], s[:, 2] - 10 * n[:, 1]], axis=1)
    expected = pd.DataFrame({"campaign": want["campaign"]})
    for name, v in (("per_row", per_row), ("n", n), ("var", sd ** 2), ("excess", excess)):
        expected[name], expected[name + "_low"], expected[name + "_high"] = v[:, 0], v[:, 1], v[:, 2]
    expected = expected[(expected["n"] > 0) & (expected["campaign"] != "fall")]
    expected = expected.sort_values("n", ascending=False, kind="stable").head(2).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_derived_columns_are_described(events, meta):
    release = _sql(events, "SELECT SUM(revenue) / COUNT(*) AS r, COUNT(*) AS n FROM events", meta, 1)
    assert "covers with probability ≥ 90%" in release.describe("r")
    assert release.describe("n") == "count()"
    assert list(release.to_pandas().columns) == ["r", "r_low", "r_high", "n", "n_low", "n_high"]


def test_select_order_is_kept(events, meta):
    release = _sql(events, "SELECT COUNT(*) AS n, campaign AS c FROM events GROUP BY c", meta, 1)
    assert list(release.to_pandas().columns) == ["n", "n_low", "n_high", "c"]


def test_ledger_records_the_spend(events, meta, tmp_path):
    ledger = bdp.Ledger(tmp_path / "budget.db", budget=bdp.Guarantee(1.0, delta=1e-5, unit="user_id"))
    bdp.sql("SELECT COUNT(*) FROM events", {"events": events}, metadata=meta, epsilon=0.25,
            ledger=ledger, rng=bdp.rng_for_tests(1))
    assert ledger.spent().epsilon == pytest.approx(0.25)
