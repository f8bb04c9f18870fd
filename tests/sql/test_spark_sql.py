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
