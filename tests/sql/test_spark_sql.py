"""SQL on Spark releases what the builder releases on Spark, for the same seed (both dialects)."""

import pandas as pd
import pytest
from test_sql_parity import CASES

import bayesdp as bdp

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

@pytest.mark.parametrize(("query", "with_meta", "builder", "options"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_sql_on_spark_releases_what_the_builder_releases(spark, events, meta, query, with_meta, builder,
                                                         options):
    frame = spark.createDataFrame(events)
    got = bdp.sql(query, {"events": frame}, metadata=meta if with_meta else None,
                  epsilon=1.0 if with_meta else None, rng=bdp.rng_for_tests(11)).to_pandas()
    want = builder(frame).release(rng=bdp.rng_for_tests(11), **options).to_pandas()
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_the_cli_answers_on_spark_what_it_answers_on_duckdb(spark, events, tmp_path, capsys):
    from test_cli_sql import META

    from bayesdp.cli import main

    data, meta = tmp_path / "events.parquet", tmp_path / "meta.toml"
    events.to_parquet(data)
    meta.write_text(META)
    query = "SELECT campaign, COUNT(*) AS n, AVG(revenue) AS avg_rev FROM events GROUP BY campaign"
    outs = {}
    for engine in ("duckdb", "spark"):
        outs[engine] = tmp_path / f"{engine}.csv"
        assert main(["sql", query, "--table", f"events={data}", "--metadata", str(meta),
                     "--engine", engine, "--out", str(outs[engine])]) == 0
    duck, spk = pd.read_csv(outs["duckdb"]), pd.read_csv(outs["spark"])
    assert list(spk.columns) == list(duck.columns) and list(spk["campaign"]) == list(duck["campaign"])
    # Same public keys and bounds: the same interval widths (the noise is not seeded here).
    pd.testing.assert_series_equal(spk["n_high"] - spk["n_low"], duck["n_high"] - duck["n_low"])
    assert "per user_id" in capsys.readouterr().out


def test_the_bigquery_clause_aggregates_each_units_rows_on_spark(spark):
    """As on DuckDB (`test_bigquery_semantics`): per-unit values clamped, at most 5 rows per unit
    for a percentile, learnt bounds; each value in its interval at α = 1e-8 (false failure <= 2e-7)."""
    from test_bigquery_semantics import CLAUSE, bigquery, check, make_panel

    panel = make_panel()
    query = CLAUSE + ("g, COUNT(*, contribution_bounds_per_group => (0, 10)) AS n, "
                      "COUNT(x, contribution_bounds_per_group => (0, 8)) AS c, "
                      "SUM(x, contribution_bounds_per_group => (0, 40)) AS s, "
                      "AVG(x, contribution_bounds_per_group => (0, 15)) AS a, COUNT(DISTINCT uid) AS u, "
                      "PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (0, 100)) AS p, "
                      "SUM(x) AS learnt FROM panel GROUP BY g")
    frame = spark.createDataFrame(panel)
    with pytest.warns(UserWarning, match="bounds learnt privately"):
        release = bdp.sql(query, {"panel": frame}, rng=bdp.rng_for_tests(1))
    check(release.to_pandas(), bigquery(panel), ["n", "c", "s", "a", "u"])
    # Without a per-row aggregate, one row per unit and group (a GROUP BY, not a window).
    per_unit_only = query.replace(", PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (0, 100)) AS p, "
                                  "SUM(x) AS learnt", "")
    assert "PERCENTILE" not in per_unit_only
    release = bdp.sql(per_unit_only, {"panel": frame}, rng=bdp.rng_for_tests(2))
    check(release.to_pandas(), bigquery(panel), ["n", "c", "s", "a", "u"])
    assert not spark.catalog.listTables()  # the per-unit step's view is gone


def test_the_bigquery_clauses_per_unit_table_is_computed_once_per_release_on_spark(spark):
    """The per-unit table is persisted for the release's passes (learnt bounds, then the
    aggregates) and unpersisted after; a seeded release is the one read from the source."""
    import gc
    from dataclasses import replace

    from test_bigquery_semantics import CLAUSE, make_panel

    from bayesdp.sql import release_translation, translate
    from bayesdp.sql.postprocess import finish
    from bayesdp.tables.per_unit import materialized

    query = CLAUSE + ("g, COUNT(*, contribution_bounds_per_group => (0, 10)) AS n, "
                      "AVG(x, contribution_bounds_per_group => (0, 15)) AS a, "
                      "PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (0, 100)) AS p "
                      "FROM panel GROUP BY g")
    t = translate(query, {"panel": spark.createDataFrame(make_panel())})
    table = materialized(t.query.table)
    frame = table.engine.frame
    assert frame.is_cached and not t.query.table.engine.frame.is_cached
    got = release_translation(t, rng=bdp.rng_for_tests(8)).to_pandas()
    want = finish(t, t.query.release(rng=bdp.rng_for_tests(8), **t.options)).to_pandas()
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    again = replace(t.query, table=table).release(rng=bdp.rng_for_tests(8), **t.options)
    pd.testing.assert_frame_equal(finish(t, again).to_pandas(), want, check_exact=True)
    del table, again
    gc.collect()
    assert not frame.is_cached
