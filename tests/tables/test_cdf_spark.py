"""The hierarchical CDF on Spark: the same release as on DuckDB for the same noise."""

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark


def test_spark_and_duckdb_release_the_same_cdf(spark):
    # Every user has one row, so bounding keeps all of them on either engine.
    gen = np.random.default_rng(4)
    df = pd.DataFrame({"user": np.arange(3000), "g": gen.choice(["x", "y"], 3000),
                       "v": gen.integers(0, 200, 3000) / 2})
    releases = [
        bdp.table(source, "user").group_by("g", keys=["x", "y"]).cdf("v", bounds=(0, 100), bins=200)
        .release(1.0, max_groups_per_unit=1, rng=bdp.rng_for_tests(9))
        for source in (df, spark.createDataFrame(df))
    ]
    duck, spk = (r.to_pandas() for r in releases)
    pd.testing.assert_frame_equal(duck, spk)
    assert releases[0].quantiles([0.5]).equals(releases[1].quantiles([0.5]))
