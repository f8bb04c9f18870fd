"""End-to-end releases: formats, public and private keys, intervals, ledger, Gaussian noise."""

import datetime

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from scipy import stats

import bayesdp.tables as bdp
from bayesdp import rng_for_tests
from bayesdp.errors import BudgetExceeded, InvalidParameter, ResourceError

AGGS = {
    "users": bdp.count_units(),
    "rows": bdp.count(),
    "revenue": bdp.sum("revenue", bounds=(0, 100)),
    "avg": bdp.mean("revenue", bounds=(0, 100)),
    "sd": bdp.std("revenue", bounds=(0, 100)),
    "p50": bdp.quantile("revenue", 0.5, bounds=(0, 100)),
    "hist": bdp.histogram("revenue", bins=[0, 10, 50, 100]),
}


def _release(source, **kw):
    t = bdp.table(source, privacy_unit="user_id")
    q = t.group_by("campaign", keys=["alpha", "beta", "gamma", "zeta"]).agg(**AGGS)
    return q.release(epsilon=2.0, max_groups_per_unit=2, max_rows_per_group=2, rng=rng_for_tests(5), **kw)


def test_same_result_for_every_input_format(events, tmp_path):
    csv, parquet = tmp_path / "e.csv", tmp_path / "e.parquet"
    events.to_csv(csv, index=False)
    events.to_parquet(parquet)
    sources = [events, pl.from_pandas(events), pa.Table.from_pandas(events), str(csv), parquet,
               duckdb.connect().from_df(events)]
    frames = [_release(s).to_pandas() for s in sources]
    for f in frames[1:]:
        pd.testing.assert_frame_equal(f, frames[0])
    assert list(frames[0]["campaign"]) == ["alpha", "beta", "gamma", "zeta"]
    assert {"avg", "avg_low", "avg_high", "hist[0, 10)", "hist[50, 100]_high"} <= set(frames[0].columns)


def test_public_keys_release_empty_groups(events):
    r = _release(events)
    df = r.to_pandas()
    zeta = df[df["campaign"] == "zeta"].iloc[0]
    assert zeta["users_low"] == 0 and zeta["users_high"] > 0
    assert r.guarantee.epsilon == pytest.approx(2.0) and r.guarantee.delta == 0
    assert r.diagnostics.dropped_by_keys == 0 and r.diagnostics.kept_rows <= r.diagnostics.rows
    assert "clipped" in " ".join(r.curator_notes()) and "Bounding kept" not in r.explain()
    assert r.to_arrow().num_rows == 4 and r.to_polars().columns == list(df.columns)
    assert [row["aggregate"] for row in r.plan.table()][:2] == ["users", "rows"]


def test_public_keys_on_a_float32_column_find_their_rows():
    # float32(0.1) != 0.1: the keys must be compared in the column's own type, or every
    # public key reads as a group without data.
    frame = pd.DataFrame({"u": np.arange(400), "g": np.repeat(np.float32([0.1, 0.2]), 200)})
    r = bdp.table(frame, privacy_unit="u").group_by("g", keys=[0.1, 0.2]).agg(n=bdp.count()).release(
        epsilon=1.0, max_groups_per_unit=1, rng=rng_for_tests(3))
    df = r.to_pandas()
    assert list(df["g"]) == [0.1, 0.2]
    # Laplace(1) noise: P(|noise| > 100) = e^-100 per group.
    assert (df["n"] > 100).all()


@pytest.mark.parametrize("dtype", [np.uint64, np.uint8, np.int16])
def test_public_keys_on_an_integer_column_of_any_width_find_their_rows(dtype):
    frame = pd.DataFrame({"u": np.arange(400), "g": np.repeat(np.array([0, 7], dtype=dtype), 200)})
    r = bdp.table(frame, privacy_unit="u").group_by("g", keys=[7, 0, 3]).agg(n=bdp.count()).release(
        epsilon=1.0, max_groups_per_unit=1, rng=rng_for_tests(3))
    df = r.to_pandas()
    assert list(df["g"]) == [7, 0, 3]
    # Laplace(1) noise: P(|noise| > 100) = e^-100 per group.
    assert (df["n"].iloc[:2] > 100).all() and df["n"].iloc[2] < 100


DATED = "SELECT range AS u, DATE '2024-01-01' + CAST(range % 2 AS INTEGER) AS d, " \
        "TIMESTAMP '2024-01-01 05:00' + INTERVAL (range % 2) HOUR AS t, " \
        "TIMESTAMPTZ '2024-01-01 05:00+00' + INTERVAL (range % 2) HOUR AS z FROM range(400)"


@pytest.mark.parametrize(("column", "keys"), [
    ("d", ["2024-01-01", "2024-01-02", "2024-01-03"]),
    ("d", [datetime.date(2024, 1, 1), datetime.date(2024, 1, 2), datetime.date(2024, 1, 3)]),
    ("d", [pd.Timestamp("2024-01-01 09:30"), pd.Timestamp("2024-01-02"), pd.Timestamp("2024-01-03")]),
    ("t", ["2024-01-01 05:00", "2024-01-01T06:00:00", "2024-01-01 07:00"]),
    ("z", ["2024-01-01 05:00+00", "2024-01-01 07:00+01", "2024-01-01 07:00+00"]),
])
def test_public_keys_on_a_date_column_find_their_rows(column, keys):
    # Strings against the engine's dates made the merge fail after the budget was spent.
    con = duckdb.connect()
    r = bdp.table(con.sql(DATED), privacy_unit="u").group_by(column, keys=keys).agg(n=bdp.count()) \
        .release(epsilon=1.0, max_groups_per_unit=1, rng=rng_for_tests(3))
    df = r.to_pandas()
    assert list(df[column]) == keys
    # Laplace(1) noise: P(|noise| > 100) = e^-100 per group.
    assert (df["n"].iloc[:2] > 100).all() and df["n"].iloc[2] < 100


def test_a_date_key_no_one_can_read_is_refused_before_spending():
    con = duckdb.connect()
    with pytest.raises(InvalidParameter, match=r"keys='soon' is not allowed: keys must be a date"):
        bdp.table(con.sql(DATED), privacy_unit="u").group_by("d", keys=["2024-01-01", "soon"])


def test_private_keys_release_only_selected(events):
    t = bdp.table(events, privacy_unit="user_id").where("revenue >= 0")
    r = t.group_by("campaign").agg(users=bdp.count_units()).release(
        epsilon=1.0, delta=1e-6, max_groups_per_unit=1, rng=rng_for_tests(1))
    # Each campaign has about 300 users, far above the ~25-unit threshold at ε=1/2, δ=1e-6.
    assert set(r.to_pandas()["campaign"]) == {"alpha", "beta", "gamma"}
    assert r.guarantee.delta == pytest.approx(1e-6)
    assert r.plan.selection is not None and r.plan.selection.threshold() < 100
    rare = pd.DataFrame({"user_id": [1], "campaign": ["solo"]})
    solo = bdp.table(rare, "user_id").group_by("campaign").agg(n=bdp.count())
    hits = sum(len(solo.release(1.0, 0.01, max_groups_per_unit=1, rng=rng_for_tests(s)))
               for s in range(20))
    # Each release keeps the single-unit key w.p. exactly δ = 0.01: P(Binomial(20, 0.01) >= 6) < 4e-8.
    assert hits <= 5


@pytest.mark.slow
def test_intervals_cover_at_the_stated_rate():
    rng = np.random.default_rng(8)
    n, trials, alpha = 3000, 150, 0.1
    x = rng.uniform(0, 120, size=n)
    df = pd.DataFrame({"user_id": np.arange(n), "revenue": x})
    c = np.clip(x, 0, 100)
    truth = {"rows": n, "revenue": c.sum(), "avg": c.mean(), "sd": c.std(), "p50": np.median(c)}
    q = bdp.table(df, "user_id").agg(rows=bdp.count(), revenue=bdp.sum("revenue", bounds=(0, 100)),
                                      avg=bdp.mean("revenue", bounds=(0, 100)),
                                      sd=bdp.std("revenue", bounds=(0, 100)),
                                      p50=bdp.quantile("revenue", 0.5, bounds=(0, 100)))
    misses = dict.fromkeys(truth, 0)
    for s in range(trials):
        out = q.release(epsilon=1.0, alpha=alpha, rng=rng_for_tests(100 + s)).to_pandas().iloc[0]
        for k, v in truth.items():
            misses[k] += not (out[f"{k}_low"] <= v <= out[f"{k}_high"])
    # Misses ~ Binomial(150, <= 0.1): the exact 1 - 1e-7 quantile fails w.p. < 1e-7 each.
    limit = stats.binom.ppf(1 - 1e-7, trials, alpha)
    assert all(m <= limit for m in misses.values()), misses


class Recorder:
    def __init__(self, fail: bool = False):
        self.spent, self.fail = [], fail

    def spend(self, guarantee, label):
        if self.fail:
            raise BudgetExceeded("budget exhausted")
        self.spent.append((guarantee, label))


def test_ledger_records_the_spend_before_results(events):
    led = Recorder()
    r = _release(events, ledger=led)
    assert led.spent == [(r.guarantee, led.spent[0][1])] and "campaign" in led.spent[0][1]
    with pytest.raises(BudgetExceeded):
        _release(events, ledger=Recorder(fail=True))


def test_real_ledger_refuses_the_second_release(events, tmp_path):
    from bayesdp import Guarantee, Ledger

    led = Ledger(tmp_path / "budget.db", budget=Guarantee(1.5, unit="user_id"))
    q = bdp.table(events, "user_id").agg(n=bdp.count())
    q.release(1.0, ledger=led, rng=rng_for_tests(1))
    with pytest.raises(BudgetExceeded):
        q.release(1.0, ledger=led, rng=rng_for_tests(2))


def test_gaussian_noise_composes_in_zcdp(events):
    t = bdp.table(events, "user_id").group_by("campaign")
    r = t.agg(users=bdp.count_units(), avg=bdp.mean("revenue", bounds=(0, 100))).release(
        epsilon=1.0, delta=1e-5, max_groups_per_unit=3, noise="gaussian", rng=rng_for_tests(2))
    g = r.guarantee
    assert g.epsilon <= 1.0 + 1e-9 and g.delta <= 1e-5 + 1e-15
    assert {type(p.mechanism).__name__ for s in r.plan.steps.values() for p in s.parts.values()} \
        == {"DiscreteGaussian", "Gaussian"}


def test_budget_overrides(events):
    q = bdp.table(events, "user_id").agg(a=bdp.count(epsilon=0.2), b=bdp.sum("revenue", (0, 1), weight=3),
                                         c=bdp.count())
    plan = q.plan(1.0)
    assert plan.steps["a"].epsilon == pytest.approx(0.2)
    assert plan.steps["b"].epsilon == pytest.approx(0.6) and plan.steps["c"].epsilon == pytest.approx(0.2)


def test_preview_reads_no_data(events):
    q = bdp.table(events, "user_id").group_by("campaign").agg(avg=bdp.mean("revenue", (0, 100)))
    with pytest.warns(UserWarning, match="no group will be released"):
        p = q.preview(epsilon=0.001, delta=1e-9, max_groups_per_unit=10)
    assert p.loc[0, "units_to_keep_group_50%"] > 100_000
    fine = q.preview(epsilon=5.0, delta=1e-6, max_groups_per_unit=1, group_size=10_000)
    assert fine.loc[0, "half_width"] < 1.0


@pytest.mark.slow
def test_a_file_larger_than_the_memory_limit_streams(tmp_path):
    """DuckDB capped at 64 MB bounds, aggregates and ranks 5M rows by spilling to disk, and releases
    what the uncapped run releases. In memory a row is 32 bytes (BIGINT, inline VARCHAR, DOUBLE):
    the rows the bounding sort must hold take twice the limit."""
    path = tmp_path / "big.parquet"
    duckdb.sql(f"""COPY (SELECT i // 3 AS user_id, 'c' || (i * 7 % 11) AS campaign,
                   (i * 37 % 1000) / 10.0 AS revenue FROM range(5000000) t(i))
                   TO '{path}' (FORMAT parquet)""")
    limit = 64 * 2**20
    capped = duckdb.connect(config={"memory_limit": f"{limit}B", "threads": 1,
                                    "temp_directory": str(tmp_path / "spill")})

    def run(con):
        t = bdp.table(str(path), privacy_unit="user_id", connection=con)
        q = t.group_by("campaign").agg(rows=bdp.count(), avg=bdp.mean("revenue", bounds=(0, 100)),
                                       p50=bdp.quantile("revenue", 0.5, bounds=(0, 100)))
        return q.release(epsilon=1.0, delta=1e-6, max_groups_per_unit=2, rng=rng_for_tests(3))

    no_spill = duckdb.connect(config={"memory_limit": f"{limit}B", "threads": 1, "temp_directory": ""})
    with pytest.raises(ResourceError, match="Out of Memory"):  # the limit binds: it must spill
        run(no_spill)
    small = run(capped)
    assert small.diagnostics.rows == 5_000_000 and small.diagnostics.rows * 32 >= 2 * limit
    assert len(small.to_pandas()) == 11
    pd.testing.assert_frame_equal(small.to_pandas(), run(duckdb.connect()).to_pandas(), rtol=1e-9)


def test_rows_as_units_release_what_a_unique_id_releases(events):
    """privacy_unit=None keeps every row, as a unique id column does under the same seed."""
    frame = events.assign(row_id=np.arange(len(events)))

    def run(unit):
        q = bdp.table(frame, privacy_unit=unit).group_by("campaign", keys=["alpha", "beta", "zeta"])
        return q.agg(**AGGS).release(epsilon=2.0, max_groups_per_unit=1, rng=rng_for_tests(8))

    rows, ids = run(None), run("row_id")
    pd.testing.assert_frame_equal(rows.to_pandas(), ids.to_pandas())
    d = rows.diagnostics
    assert d == ids.diagnostics and d.dropped_by_bounding == 0
    assert d.kept_rows + d.dropped_by_keys == len(events)
    assert rows.guarantee.unit == "row"
    with pytest.raises(InvalidParameter, match=r"max_groups_per_unit=2 and max_rows_per_group=1: "
                       r"without a privacy unit \(privacy_unit=None"):
        bdp.table(frame, None).group_by("campaign").agg(n=bdp.count()).release(1.0, 1e-6,
                                                                           max_groups_per_unit=2)


def test_a_release_without_groups_says_so_and_what_a_group_needs():
    # 90 counties of one person each, groups from the data: partition selection keeps none. The
    # number of groups released is a DP output, so saying it is zero leaks nothing more.
    df = pd.DataFrame({"u": np.arange(90), "county": np.arange(90)})
    q = bdp.table(df, "u").group_by("county").agg(n=bdp.count())
    with pytest.warns(UserWarning, match="no group was released: partition selection releases a "
                                         "group with probability 1/2 when it has about 175 privacy "
                                         r"units \(each one u\)"):
        r = q.release(1.0, 1e-6, max_groups_per_unit=7, rng=rng_for_tests(1))
    assert len(r) == 0
    assert "No group was released: partition selection releases a group with probability 1/2 " \
           "when it has about 175 privacy units (each one u), and 95% at 207." in r.explain()


def test_intervals_that_are_the_whole_bounds_are_named(tmp_path):
    # 20 people per group at ε = 0.3: every mean interval is [0, 10], and explain() and the
    # report say so (from the released values alone, so it costs nothing).
    from bayesdp.report import write_release_report

    df = pd.DataFrame({"u": range(40), "g": ["a", "b"] * 20, "x": np.arange(40.0) % 7})
    r = bdp.table(df, "u").group_by("g", keys=["a", "b"]).agg(
        m=bdp.mean("x", bounds=(0, 10)), n=bdp.count()).release(0.3, max_groups_per_unit=1,
                                                                rng=rng_for_tests(1))
    out = r.to_pandas()
    assert (out["m_low"] == 0).all() and (out["m_high"] == 10).all()
    note = "2 of 2 intervals of m are the whole bounds [0, 10]"
    assert note in r.explain() and "intervals of n" not in r.explain()
    assert note in write_release_report(r, tmp_path / "r.html").read_text()
