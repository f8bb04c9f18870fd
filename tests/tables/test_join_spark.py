"""Joins on Spark: the same joined rows and the same release as on DuckDB for the same noise."""

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark


def test_spark_and_duckdb_release_the_same_joins(spark):
    # Each user rates one item and has one profile row, so bounding keeps every joined row.
    gen = np.random.default_rng(3)
    ratings = pd.DataFrame({"user": np.arange(500), "item": gen.integers(0, 20, 500),
                            "stars": gen.integers(1, 6, 500)})
    profiles = pd.DataFrame({"user": np.arange(500), "age": gen.integers(18, 80, 500)})
    items = pd.DataFrame({"item": np.arange(20), "genre": [f"g{i % 4}" for i in range(20)]})
    out = []
    for make in (lambda f: f, spark.createDataFrame):
        t = bdp.table(make(ratings), "user").join_public(items, "item")
        t = t.join(bdp.table(make(profiles), "user"), "user")
        # Off the unit, with a truncation that drops nothing (one row per user and item).
        t = t.join(bdp.table(make(ratings.rename(columns={"stars": "again"})), "user"), "item",
                   max_rows_per_key=2)
        q = t.group_by("genre", keys=items["genre"]).agg(n=bdp.count(), age=bdp.mean("age", (18, 80)))
        out.append(q.release(1.0, max_groups_per_unit=1, rng=bdp.rng_for_tests(2)).to_pandas())
    pd.testing.assert_frame_equal(out[0], out[1])


def test_spark_checks_unique_public_keys_as_duckdb_does(spark):
    ratings = spark.createDataFrame(pd.DataFrame({"item": [10, 11]}))
    nulls = pd.DataFrame({"item": [10.0, 11.0, None, None], "shelf": range(4)})
    assert bdp.table(ratings, None).join_public(nulls, "item").engine.frame.count() == 2
    with pytest.raises(bdp.errors.InvalidParameter, match=r"such as \(10,\)"):
        bdp.table(ratings, None).join_public(pd.DataFrame({"item": [10, 10]}), "item")
