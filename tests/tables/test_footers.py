"""A Spark source's rows and null units read from its Parquet footers: the same counts as a
query, or None whenever the footers cannot say."""

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_jobs import counted_jobs

from bayesdp.tables.engines import BoundingRequest, DuckDBEngine, Measure

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark


def _table(n: int, offset: int) -> pa.Table:
    """n rows; every 7th user is null."""
    users = [None if i % 7 == 3 else (i + offset) % 40 for i in range(n)]
    return pa.table({"user_id": pa.array(users, pa.int64()),
                     "grp": pa.array([(i * 5 + offset) % 9 for i in range(n)], pa.int64()),
                     "v": pa.array([float(i % 11) for i in range(n)])})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A directory of two Parquet files, several row groups each, with null units."""
    root = tmp_path_factory.mktemp("footers")
    (root / "data").mkdir()
    pq.write_table(_table(500, 0), root / "data" / "a.parquet", row_group_size=64)
    pq.write_table(_table(333, 17), root / "data" / "b.parquet", row_group_size=100)
    return root


def _queried(frame, unit):
    from pyspark.sql import functions as F

    rows, units = frame.agg(F.count(F.lit(1)), F.count(unit)).collect()[0]
    return rows, units


def test_a_bare_parquet_scan_is_counted_from_its_footers(spark, files):
    from bayesdp.tables.engines.footers import footer_counts

    frame = spark.read.parquet(str(files / "data"))
    assert footer_counts(frame, "user_id") == _queried(frame, "user_id") == (833, 833 - 71 - 48)
    assert footer_counts(frame, None) == (833, 833)


def test_anything_but_a_bare_parquet_scan_is_left_to_a_query(spark, files, tmp_path):
    from bayesdp.tables.engines.footers import footer_counts

    frame = spark.read.parquet(str(files / "data"))
    assert footer_counts(frame.where("v > 2"), "user_id") is None
    assert footer_counts(frame.select("user_id"), "user_id") is None
    assert footer_counts(spark.createDataFrame(frame.toPandas()), "user_id") is None
    frame.write.csv(str(tmp_path / "csv"), header=True)
    assert footer_counts(spark.read.csv(str(tmp_path / "csv"), header=True), "user_id") is None
    # No statistics, hence no null counts.
    pq.write_table(_table(50, 0), tmp_path / "bare.parquet", write_statistics=False)
    assert footer_counts(spark.read.parquet(str(tmp_path / "bare.parquet")), "user_id") is None
    # A file without the unit's column: its rows read as null units.
    (tmp_path / "merged").mkdir()
    pq.write_table(_table(50, 0), tmp_path / "merged" / "a.parquet")
    pq.write_table(_table(50, 0).drop(["user_id"]), tmp_path / "merged" / "b.parquet")
    merged = spark.read.option("mergeSchema", "true").parquet(str(tmp_path / "merged"))
    assert footer_counts(merged, "user_id") is None
    assert _queried(merged, "user_id")[1] == 50 - 7
    # The unit is a partition column: it is in the directory names, not in the files.
    frame.write.partitionBy("user_id").parquet(str(tmp_path / "parts"))
    parts = spark.read.parquet(str(tmp_path / "parts"))
    assert footer_counts(parts, "user_id") is None
    assert footer_counts(parts, "grp") is not None


def test_public_keys_on_parquet_count_the_source_as_duckdb_does(spark, files):
    from bayesdp.tables.engines.spark import SparkEngine

    req = BoundingRequest("user_id", ("grp",), 2, 1, seed=12345, public_keys=((1,), (4,), (99,)),
                          measures=(Measure("v", 0.0, 10.0),))
    d = SparkEngine(spark.read.parquet(str(files / "data"))).aggregate(req).diagnostics
    glob = str(files / "data" / "*.parquet")
    ref = DuckDBEngine(duckdb.connect().sql(f"SELECT * FROM read_parquet('{glob}')"))
    ref = ref.aggregate(req).diagnostics
    assert (d.rows, d.null_units, d.dropped_by_keys) == (ref.rows, ref.null_units, ref.dropped_by_keys) == \
        (833, 119, ref.dropped_by_keys)
    assert ref.dropped_by_keys > 0


def test_public_keys_on_parquet_run_no_count_job(spark, files):
    """The aggregate with public keys on a bare Parquet scan runs the broadcast of the keys and
    the aggregate itself: the source's rows and units need no job (a query of their own before)."""
    from bayesdp.tables.engines.spark import SparkEngine

    req = BoundingRequest("user_id", ("grp",), 2, 1, seed=7, public_keys=((1,), (4,)),
                          measures=(Measure("v", 0.0, 10.0),))
    engine = SparkEngine(spark.read.parquet(str(files / "data")))
    engine.check(req)
    exact, jobs = counted_jobs(spark, "footers", lambda: engine.aggregate(req))
    assert jobs == 2
    assert (exact.diagnostics.rows, exact.diagnostics.null_units) == (833, 119)


@pytest.mark.parametrize("max_groups", [1, 3])
def test_private_keys_on_parquet_count_as_duckdb_does(spark, files, max_groups):
    """Without public keys on a bare Parquet scan, the rows and null units come from the footers
    and the kept rows from the groups (no observation of every pair): the same diagnostics as
    DuckDB's, bounding included (one row per pair: a unit keeps min(its groups, max_groups))."""
    from bayesdp.tables.engines.spark import SparkEngine

    req = BoundingRequest("user_id", ("grp",), max_groups, 1, seed=11, measures=(Measure("v", 0.0, 10.0),))
    d = SparkEngine(spark.read.parquet(str(files / "data"))).aggregate(req).diagnostics
    glob = str(files / "data" / "*.parquet")
    ref = DuckDBEngine(duckdb.connect().sql(f"SELECT * FROM read_parquet('{glob}')"))
    ref = ref.aggregate(req).diagnostics
    fields = ("rows", "null_units", "dropped_by_keys", "kept_rows", "dropped_by_bounding", "nulls")
    assert [getattr(d, f) for f in fields] == [getattr(ref, f) for f in fields]
    assert (d.rows, d.null_units, d.dropped_by_keys) == (833, 119, 0) and d.dropped_by_bounding > 0
