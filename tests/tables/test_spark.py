"""The Spark engine against the DuckDB engine: same exact aggregates, same release.

Each engine chooses the kept rows with its own keyed hash (Spark's xxhash64, DuckDB's hash), so
the parity checks run on the users whose rows fit the bounds, which every choice keeps whole; on
all the data they check what no choice changes, and `test_bounded.py` checks that Spark's choice
has the distribution it must. One local Spark session (local[2], the `spark` fixture of
tests/conftest.py) serves the whole run: starting the JVM costs tens of seconds. Values are
multiples of 1/4, so every sum is exact in float64 whatever order either engine adds in, and the
parity checks can demand equality, not closeness.
"""

import dataclasses
import sys

import duckdb
import numpy as np
import pandas as pd
import pytest
from spark_jobs import counted_jobs
from test_release import AGGS  # the same aggregates as the DuckDB release tests

import bayesdp.tables as bdp
from bayesdp import rng_for_tests
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.expressions import row_expression
from bayesdp.privacy import Guarantee, Ledger
from bayesdp.tables.engines import Bins, BoundingRequest, Cells, DuckDBEngine, Measure
from bayesdp.tables.quantiles import QUANTILE_CELLS

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

MEASURE = Measure("revenue", 1.0, 100.0)  # lo > 0: a null must not count as lo in the sums
# A window of ±3 ranks around the 30th percentile: a few coarse bins per group, not all.
CELLS = Cells("revenue", 1.0, 100.0, QUANTILE_CELLS, 0.3, 3.0)
BINS = Bins("revenue", (0.0, 10.0, 50.0, 100.0))


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    """250 users with 1 to 12 rows, one heavy user with 400 rows; values in [-5, 130] step 1/4
    (some out of bounds), a few NaN; eight string campaigns and three integer regions."""
    rng = np.random.default_rng(99)
    users = np.concatenate([np.repeat(np.arange(250), rng.integers(1, 13, size=250)),
                            np.full(400, 999)])
    n = users.size
    revenue = rng.integers(-20, 521, size=n) / 4
    revenue[rng.random(n) < 0.03] = np.nan
    return pd.DataFrame({
        "user_id": users,
        "campaign": rng.choice([f"c{i}" for i in range(8)], size=n),
        "region": rng.integers(0, 3, size=n),
        "revenue": revenue,
    })


def _within(data: pd.DataFrame, keys: tuple[str, ...], max_groups: int, max_rows: int) -> pd.DataFrame:
    """The rows of the users with at most max_groups groups by `keys` and at most max_rows rows
    in each: bounding keeps all of them, whichever rows a hash would choose."""
    per_pair = data.groupby(["user_id", *keys]).size()
    per_user = per_pair.groupby(level="user_id").agg(["size", "max"])
    fit = per_user.index[(per_user["size"] <= max_groups) & (per_user["max"] <= max_rows)]
    assert len(fit) >= 20  # enough users for the checks to mean something
    return data[data["user_id"].isin(fit)].reset_index(drop=True)


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a.groups, b.groups, check_dtype=False)
    np.testing.assert_array_equal(a.units, b.units)
    np.testing.assert_array_equal(a.rows, b.rows)
    assert a.moments.keys() == b.moments.keys()
    for k in a.moments:
        np.testing.assert_array_equal(a.moments[k], b.moments[k])
    for k in b.cells:
        for f in dataclasses.fields(b.cells[k]):
            np.testing.assert_array_equal(getattr(a.cells[k], f.name), getattr(b.cells[k], f.name))
    for k in b.bins:
        np.testing.assert_array_equal(a.bins[k], b.bins[k])
    assert a.diagnostics == b.diagnostics


@pytest.mark.slow
@pytest.mark.parametrize(("keys", "public", "max_groups", "max_rows"), [
    (("campaign",), None, 2, 1),
    (("campaign",), (("c0",), ("c1",), ("c2",), ("zz",)), 2, 3),
    (("campaign", "region"), None, 3, 2),
    (("campaign", "region"), (("c0", 0), ("c3", 2), ("zz", 1)), 2, 1),
    ((), None, 1, 3),
])
def test_exact_aggregates_match_duckdb(spark, data, keys, public, max_groups, max_rows):
    from bayesdp.tables.engines.spark import SparkEngine

    req = BoundingRequest("user_id", keys, max_groups, max_rows, seed=2**100 + 2**64 * 7 + 12345,
                          public_keys=public, measures=(MEASURE,), cells=(CELLS,), bins=(BINS,))
    fit = _within(data, keys, max_groups, max_rows)
    _same(SparkEngine(spark.createDataFrame(fit)).aggregate(req),
          DuckDBEngine(duckdb.connect().from_df(fit)).aggregate(req))
    d = SparkEngine(spark.createDataFrame(data)).aggregate(req).diagnostics
    ref = DuckDBEngine(duckdb.connect().from_df(data)).aggregate(req).diagnostics
    assert (d.rows, d.null_units, d.dropped_by_keys) == (ref.rows, ref.null_units, ref.dropped_by_keys)
    if max_rows == 1:  # a unit keeps min(its groups, max_groups) rows, whichever it keeps
        assert d.kept_rows == ref.kept_rows
    # The bounds hold: the heavy user keeps at most max_groups x max_rows of its 400 rows.
    assert d.kept_rows <= 251 * max_groups * max_rows
    assert d.dropped_by_bounding + d.dropped_by_keys >= 400 - max_groups * max_rows


@pytest.mark.slow
@pytest.mark.parametrize("public", [None, (("c0",), ("c3",), ("zz",))])
def test_rows_as_units_match_duckdb(spark, data, public):
    """privacy_unit=None: every row kept, in both engines."""
    from bayesdp.tables.engines.spark import SparkEngine

    req = BoundingRequest(None, ("campaign",), 1, 1, seed=5, public_keys=public,
                          measures=(MEASURE,), cells=(CELLS,), bins=(BINS,))
    exact = SparkEngine(spark.createDataFrame(data)).aggregate(req)
    _same(exact, DuckDBEngine(duckdb.connect().from_df(data)).aggregate(req))
    d = exact.diagnostics
    assert d.dropped_by_bounding == 0 and d.kept_rows + d.dropped_by_keys == len(data)
    assert np.array_equal(exact.units, exact.rows)


@pytest.mark.slow
@pytest.mark.parametrize("keys", [None, ["c0", "c1", "c5", "zz"]])
def test_release_identical_to_duckdb(spark, data, keys):
    def release(source):
        q = bdp.table(source, "user_id").group_by("campaign", keys=keys).agg(**AGGS)
        return q.release(epsilon=4.0, delta=1e-3, max_groups_per_unit=2, max_rows_per_group=2,
                         rng=rng_for_tests(11))

    fit = _within(data, ("campaign",), 2, 2)
    on_spark, on_duckdb = release(spark.createDataFrame(fit)), release(fit)
    pd.testing.assert_frame_equal(on_spark.to_pandas(), on_duckdb.to_pandas())
    assert on_spark.diagnostics == on_duckdb.diagnostics
    assert on_spark.guarantee == on_duckdb.guarantee


@pytest.mark.slow
def test_expression_aggregates_identical_to_duckdb(spark, data):
    """Row expressions run in each engine from the one checked tree, giving the same values."""
    aggs = {"big": bdp.share("revenue > 50"), "twice": bdp.sum("revenue * 2", bounds=(0, 200)),
            "mix": bdp.mean("region + revenue / 4", bounds=(0, 40))}

    def release(source):
        q = bdp.table(source, "user_id").group_by("campaign", keys=["c0", "c1"]).agg(**aggs)
        return q.release(epsilon=4.0, max_groups_per_unit=2, max_rows_per_group=2,
                         rng=rng_for_tests(12))

    fit = _within(data, ("campaign",), 2, 2)
    on_spark, on_duckdb = release(spark.createDataFrame(fit)), release(fit)
    pd.testing.assert_frame_equal(on_spark.to_pandas(), on_duckdb.to_pandas())
    assert on_spark.diagnostics == on_duckdb.diagnostics


@pytest.mark.slow
def test_path_with_engine_spark_and_filters(spark, data, tmp_path):
    path = tmp_path / "events.parquet"
    _within(data, ("campaign",), 3, 1).to_parquet(path)
    t = bdp.table(str(path), "user_id", engine="spark", spark=spark).where("region = 1")
    q = t.group_by("campaign").agg(rows=bdp.count(), avg=bdp.mean("revenue", bounds=(0, 100)))
    kw = {"epsilon": 2.0, "delta": 1e-4, "max_groups_per_unit": 3}
    ref = bdp.table(str(path), "user_id").where("region = 1").group_by("campaign").agg(
        rows=bdp.count(), avg=bdp.mean("revenue", bounds=(0, 100)))
    pd.testing.assert_frame_equal(q.release(**kw, rng=rng_for_tests(3)).to_pandas(),
                                  ref.release(**kw, rng=rng_for_tests(3)).to_pandas())


@pytest.mark.slow
def test_bad_input_gives_the_duckdb_messages(spark, data, tmp_path):
    frame = spark.createDataFrame(data)
    with pytest.raises(DataError, match="did you mean 'user_id'"):
        bdp.table(frame, "userid")
    t = bdp.table(frame, "user_id")
    with pytest.raises(DataError, match="'campaign' of total holds string values, not numbers"):
        t.agg(total=bdp.sum("campaign", bounds=(0, 1)))
    with pytest.raises(DataError, match="did you mean 'revenue'"):
        t.agg(total=bdp.sum("revenu", bounds=(0, 1)))
    with pytest.raises(InvalidParameter, match="did you mean 'region'"):
        t.where("regio > 1")
    with pytest.raises(InvalidParameter, match="subquery"):
        t.where("(SELECT count(*) FROM bdp_source WHERE user_id = 42) > 0")
    with pytest.raises(DataError, match="does not exist"):
        bdp.table(str(tmp_path / "missing.parquet"), "user_id", engine="spark", spark=spark)
    with pytest.raises(InvalidParameter, match="engine='flink'"):
        bdp.table(data, "user_id", engine="flink")


def test_missing_pyspark_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.delitem(sys.modules, "bayesdp.tables.engines.spark", raising=False)
    with pytest.raises(InvalidParameter, match=r"pip install 'bayesdp\[spark\]'"):
        bdp.table("events.parquet", "user_id", engine="spark")


@pytest.mark.slow
def test_cli_release_on_spark(spark, data, tmp_path, capsys):
    from bayesdp.cli import main

    path, spec, out = tmp_path / "events.parquet", tmp_path / "spec.toml", tmp_path / "out.csv"
    data.to_parquet(path)
    spec.write_text('privacy_unit = "user_id"\ngroup_by = ["campaign"]\nkeys = ["c0", "c1", "zz"]\n'
                    'max_groups_per_unit = 2\nepsilon = 1.0\n[aggregates]\n'
                    'users = { kind = "count_units" }\n'
                    'avg = { kind = "mean", column = "revenue", bounds = [0, 100] }\n')
    code = main(["release", str(path), "--spec", str(spec), "--engine", "spark", "--out", str(out)])
    assert code == 0
    df = pd.read_csv(out)
    assert list(df["campaign"]) == ["c0", "c1", "zz"]
    assert {"users", "users_low", "avg_high"} <= set(df.columns)
    assert "ε=1 per user_id" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("public", [None, (("c0",), ("c1",), ("c2",), ("zz",))])
def test_measures_alone_are_one_query(spark, data, public):
    """Without grid cells or bins the aggregate is one Spark query, the totals of the
    diagnostics observed as it runs (the test session runs without adaptive execution, so a
    query and its shuffles are one job); with public keys, broadcasting them is one more and the
    source's rows and units are a query of their own (observed before the semi-join, every row
    of the source went through the observation). It gives what the path that persists the pairs
    for several passes gives for the same seed."""
    from bayesdp.tables.engines.spark import SparkEngine

    full = BoundingRequest("user_id", ("campaign",), 2, 2, seed=2**90 + 77, public_keys=public,
                           measures=(MEASURE,), cells=(CELLS,), bins=(BINS,))
    alone = dataclasses.replace(full, cells=(), bins=())
    engine = SparkEngine(spark.createDataFrame(data))
    engine.check(alone)
    one, jobs = counted_jobs(spark, f"measures-alone-{public is not None}", lambda: engine.aggregate(alone))
    assert jobs == 1 + 2 * (public is not None)
    several = engine.aggregate(full)
    _same(one, dataclasses.replace(several, cells={}, bins={}, diagnostics=dataclasses.replace(
        several.diagnostics, clipped={MEASURE: several.diagnostics.clipped[MEASURE]})))
    d = one.diagnostics
    assert d.rows == len(data) and d.rows == d.kept_rows + d.dropped_by_bounding + d.dropped_by_keys


@pytest.mark.slow
@pytest.mark.parametrize("public", [None, (("c0",), ("c1",), ("c2",), ("zz",))])
def test_a_bounded_table_answers_measures_alone_in_one_query(spark, data, public):
    """On a table bounded once, a request without cells or bins is one Spark query over the
    persisted rows (plus the keys' broadcast): the public keys select groups after aggregating.
    It gives what the path that persists the request's rows gives on the same bounded rows."""
    from bayesdp.tables.engines.base import Bounding
    from bayesdp.tables.engines.spark import SparkEngine

    bounded = SparkEngine(spark.createDataFrame(data)).bounded(Bounding("user_id", ("campaign",), 2, 2),
                                                               2**90 + 5, ())
    full = BoundingRequest("user_id", ("campaign",), 2, 2, seed=0, public_keys=public,
                           measures=(MEASURE,), cells=(CELLS,), bins=(BINS,))
    alone = dataclasses.replace(full, cells=(), bins=())
    several = bounded.aggregate(full)  # bounds the rows
    one, jobs = counted_jobs(spark, f"bounded-alone-{public is not None}", lambda: bounded.aggregate(alone))
    assert jobs == 1 + (public is not None)
    _same(one, dataclasses.replace(several, cells={}, bins={}, diagnostics=dataclasses.replace(
        several.diagnostics, clipped={MEASURE: several.diagnostics.clipped[MEASURE]})))
    if public is not None:
        assert one.diagnostics.dropped_by_keys > 0


@pytest.mark.slow
def test_public_keys_of_each_type_match_duckdb(spark):
    """Public keys of integer, text, float, boolean and date columns (integers and text sent as
    they are, the others as text cast on the cluster; a date key is text, as the query layer
    allows) select the rows DuckDB selects."""
    import datetime

    from bayesdp.tables.engines.spark import SparkEngine

    n = 60
    day = datetime.date(2026, 1, 1)
    frame = pd.DataFrame({"user_id": np.arange(n), "i": np.arange(n) % 5,
                          "s": [f"s{k % 4}" for k in range(n)], "f": (np.arange(n) % 6) / 10,
                          "b": np.arange(n) % 3 == 0,
                          "d": [day + datetime.timedelta(days=k % 3) for k in range(n)],
                          "revenue": np.arange(n) / 4})
    for key, public in (("i", ((1,), (3,), (7,))), ("s", (("s0",), ("s3",), ("t",))),
                        ("f", ((0.1,), (0.5,), (0.7,))), ("b", ((True,),)),
                        ("d", (("2026-01-01",), ("2026-01-03",))), ("i", ((2.0,), (4,)))):
        req = BoundingRequest("user_id", (key,), 1, 1, seed=3, public_keys=public, measures=(MEASURE,))
        on_spark = SparkEngine(spark.createDataFrame(frame)).aggregate(req)
        on_duckdb = DuckDBEngine(duckdb.connect().from_df(frame)).aggregate(req)
        assert on_spark.diagnostics.dropped_by_keys == on_duckdb.diagnostics.dropped_by_keys > 0, key
        # The engines hand dates to pandas as different types; the groups' order is the keys'.
        _same(on_spark, dataclasses.replace(on_duckdb, groups=on_spark.groups))
        assert len(on_spark.groups) == len(on_duckdb.groups), key


@pytest.mark.slow
def test_diagnostics_when_no_row_is_in_the_keys(spark, data):
    """With adaptive execution (Spark's default; the test session turns it off) a query stage
    that writes no rows is dropped from the final plan with the metrics it observed: the counts
    of the diagnostics come from a query then, and stay exact."""
    from bayesdp.tables.engines.spark import SparkEngine

    cases = [(("zz",),), (), (("c0",),)]
    filters = [(), (), (row_expression("revenue > 1000", list(data.columns)),)]
    spark.conf.set("spark.sql.adaptive.enabled", "true")
    try:
        for public, where in zip(cases, filters, strict=True):
            for cells in ((), (CELLS,)):
                req = BoundingRequest("user_id", ("campaign",), 2, 1, seed=5, public_keys=public,
                                      measures=(MEASURE,), cells=cells, where=where)
                d = SparkEngine(spark.createDataFrame(data)).aggregate(req).diagnostics
                assert d == DuckDBEngine(duckdb.connect().from_df(data)).aggregate(req).diagnostics
                assert d.kept_rows == 0 and d.rows == (0 if where else len(data))
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", "false")


@pytest.mark.parametrize("column", ["d", "t"])
def test_public_keys_on_a_date_column_find_their_rows_on_spark(spark, column):
    from test_release import DATED

    frame = spark.createDataFrame(duckdb.sql(DATED).df())
    keys = {"d": ["2024-01-01", "2024-01-02", "2024-01-03"],
            "t": ["2024-01-01 05:00", "2024-01-01T06:00:00", "2024-01-01 07:00"]}[column]
    if column == "d":
        frame = frame.withColumn("d", frame["d"].cast("date"))
    r = bdp.table(frame, privacy_unit="u").group_by(column, keys=keys).agg(n=bdp.count()) \
        .release(epsilon=1.0, max_groups_per_unit=1, rng=rng_for_tests(3))
    df = r.to_pandas()
    assert list(df[column]) == keys
    # Laplace(1) noise: P(|noise| > 100) = e^-100 per group.
    assert (df["n"].iloc[:2] > 100).all() and df["n"].iloc[2] < 100


# Implicit casts of text that ANSI mode makes raise on a malformed value; below, those that do not.
IMPLICIT = {
    "sum": lambda t: t.agg(s=bdp.sum("CASE WHEN code = 1 THEN x ELSE 0 END", bounds=(0, 10))),
    "count": lambda t: t.where("code > 1").agg(n=bdp.count()),
    "share": lambda t: t.agg(p=bdp.share("code BETWEEN 1 AND 2")),
    "quantile": lambda t: t.agg(q=bdp.quantile("month(day)", bounds=(1, 12))),
    "date": lambda t: t.where("date_trunc('month', day) < DATE '2020-06-01'").agg(n=bdp.count()),
}
TOTAL = {
    "explicit": lambda t: t.agg(s=bdp.sum("CASE WHEN CAST(code AS INT) = 1 THEN x ELSE 0 END",
                                          bounds=(0, 10))),
    "try_add": lambda t: t.where("code + 1 > 2").agg(n=bdp.count()),  # inside try_add: NULL
}


def test_implicit_casts_of_text_are_decided_from_the_schema(spark, tmp_path):
    """A pair: the same releases on a table and on it with a row holding 'abc' in text columns
    compared to a number or read as a date. Under ANSI mode the implicit cast of 'abc' would
    raise after the spend on one table only; each is refused before the spend on both, with the
    same message, and an explicit CAST or text in arithmetic (try_add) releases on both. The
    ledgers are charged alike."""
    rows = [(u, str(1 + u % 2), f"2020-0{1 + u % 9}-15", float(u % 7)) for u in range(40)]
    outcomes = []
    for name, extra in (("base", []), ("plus", [(40, "abc", "abc", 3.0)])):
        frame = spark.createDataFrame(rows + extra, "user_id BIGINT, code STRING, day STRING, x DOUBLE")
        table = bdp.table(frame, "user_id")
        led = Ledger(tmp_path / f"{name}.db", budget=Guarantee(100.0, unit="user_id"))
        seen = {}
        for kind, query in {**IMPLICIT, **TOTAL}.items():
            try:
                query(table).release(1.0, ledger=led, rng=rng_for_tests(0))
                seen[kind] = "released"
            except Exception as exc:  # the outcome: the error's kind and public message
                seen[kind] = (type(exc).__name__, getattr(exc, "public_message", str(exc)))
        outcomes.append((seen, led.spent().epsilon, len(led.history())))
    assert outcomes[0] == outcomes[1], outcomes
    seen, spent, spends = outcomes[0]
    assert all(seen[kind] == "released" for kind in TOTAL) and spends == len(TOTAL)
    assert spent == pytest.approx(len(TOTAL))
    for kind in IMPLICIT:
        assert seen[kind][0] == "InvalidParameter" and "write an explicit CAST(" in seen[kind][1], kind


def test_a_pair_holds_its_kept_rows_not_all_its_rows(spark, data):
    """With more than one row per pair, each (user, campaign) pair aggregates into a heap of its
    max_rows rows of smallest keyed hash (`min_by` with k, Spark 4.2+), not a list of all its
    rows: the memory of a pair follows max_rows, not the rows of its heaviest user."""
    from bayesdp.tables.engines.spark import _pairs, _top_k

    if not _top_k(spark):
        pytest.skip("min_by with k needs Spark 4.2")
    req = BoundingRequest("user_id", ("campaign",), 2, 3, 2**70 + 1, measures=(MEASURE,))
    plan = _pairs(spark.createDataFrame(data), req, ["revenue"], None)._jdf.queryExecution() \
        .optimizedPlan().toString()
    assert "min_by" in plan.lower() and "collect_list" not in plan.lower()
