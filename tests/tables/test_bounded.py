"""Bound once, query many: `Table.bounded` against releases with the same bounds on the raw table.

Each of N units has three rows in group "a" (values 0, 1, 2) and one in group "b" (value 10).
With one group and one row per unit, a unit keeps "a" or "b" with probability 1/2 and, in "a",
each of its three values with probability 1/3: the count of "a" is Binomial(N, 1/2) and its mean
is that of uniform {0, 1, 2}. Both paths are checked against that distribution, so they are equal
in distribution up to the stated tolerances. Hoeffding: P(|count - N/2| >= 160) <= 2e^(-2*160²/N)
< 1e-7 and P(|mean - 1| >= 0.2) <= 2e^(-2*0.2²*n/4) < 1e-7 for n >= 900 values of "a"; the
Laplace noise (ε = 40 over two aggregates, scale 0.05 for the count) exceeds 1 with probability
e^-20 < 1e-8. Each assertion fails falsely with probability below 1e-6.
"""

import numpy as np
import pandas as pd
import pytest

import bayesdp.tables as bdp
from bayesdp import Guarantee, Ledger, rng_for_tests
from bayesdp.errors import BudgetExceeded, InvalidParameter

N = 2000
COUNT_TOL, MEAN_TOL = 160, 0.2


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    units = np.repeat(np.arange(N), 4)
    frame = pd.DataFrame({"user": units, "g": np.tile(["a", "a", "a", "b"], N),
                          "v": np.tile([0.0, 1.0, 2.0, 10.0], N)})
    return frame.sample(frac=1.0, random_state=3).reset_index(drop=True)


def _source(engine, frame, spark):
    return spark.createDataFrame(frame) if engine == "spark" else frame


def _query(t):
    return t.group_by("g", keys=["a", "b"]).agg(n=bdp.count(), avg=bdp.mean("v", bounds=(0, 10)))


def _check(r) -> None:
    out = r.to_pandas().set_index("g")
    assert abs(out.loc["a", "n"] - N / 2) < COUNT_TOL and abs(out.loc["b", "n"] - N / 2) < COUNT_TOL
    assert abs(out.loc["a", "avg"] - 1.0) < MEAN_TOL
    assert r.diagnostics.kept_rows == N  # one row per unit, whichever group it keeps


ENGINES = ["duckdb", pytest.param("spark", marks=[pytest.mark.spark, pytest.mark.slow])]


@pytest.fixture
def spark_or_none(request):
    return request.getfixturevalue("spark") if "spark" in request.node.name else None


@pytest.mark.parametrize("engine", ENGINES)
def test_releases_on_a_bounded_table_match_the_raw_table(engine, pairs, spark_or_none):
    src = _source(engine, pairs, spark_or_none)
    for seed in range(3):
        raw = _query(bdp.table(src, "user")).release(40.0, max_groups_per_unit=1,
                                                     rng=rng_for_tests(seed))
        _check(raw)
        t = bdp.table(src, "user").bounded("g", max_groups_per_unit=1, rng=rng_for_tests(100 + seed))
        _check(_query(t).release(40.0, rng=rng_for_tests(seed)))


@pytest.mark.parametrize("engine", ENGINES)
def test_releases_reuse_the_rows_bounded_once(engine, pairs, spark_or_none):
    """With up to three rows per group a unit keeps 3 rows ("a") or 1 ("b"): the kept count
    varies with the bounding seed, and stays the same over releases on one bounded table."""
    t = bdp.table(_source(engine, pairs, spark_or_none), "user").bounded(
        "g", max_groups_per_unit=1, max_rows_per_group=3, rng=rng_for_tests(7))
    first = _query(t).release(40.0, rng=rng_for_tests(1)).diagnostics
    again = t.where("v < 5").group_by("g").agg(s=bdp.sum("v", bounds=(0, 10))).release(
        4.0, 1e-3, rng=rng_for_tests(2)).diagnostics
    in_a = (first.kept_rows - N) // 2  # units that kept "a": 3 rows instead of 1
    assert abs(in_a - N / 2) < COUNT_TOL
    assert again.kept_rows == 3 * in_a  # the filter after bounding keeps the rows of "a"
    assert (again.rows, again.dropped_by_bounding) == (first.rows, first.dropped_by_bounding)
    for d in (first, again):  # every row is counted once: kept, dropped by a step, null unit
        assert d.rows == (d.kept_rows + d.dropped_by_bounding + d.dropped_by_keys
                          + d.dropped_by_filter + d.null_units)
    assert again.dropped_by_filter == first.kept_rows - again.kept_rows  # the rows of "b"


@pytest.mark.parametrize("engine", ENGINES)
def test_where_on_a_bounded_table_filters_after_bounding(engine, pairs, spark_or_none):
    src = _source(engine, pairs, spark_or_none)
    before = bdp.table(src, "user").where("g = 'a'")
    after = bdp.table(src, "user").bounded("g", max_groups_per_unit=1,
                                            rng=rng_for_tests(5)).where("g = 'a'")
    kw = {"epsilon": 40.0, "rng": rng_for_tests(3)}
    assert _query(before).release(max_groups_per_unit=1, **kw).diagnostics.kept_rows == N
    assert abs(_query(after).release(**kw).diagnostics.kept_rows - N / 2) < COUNT_TOL


def test_each_release_is_charged_and_bounding_is_free(pairs, tmp_path):
    led = Ledger(tmp_path / "budget.db", budget=Guarantee(2.5, unit="user"))
    t = bdp.table(pairs, "user").bounded("g", max_groups_per_unit=1, rng=rng_for_tests(0))
    assert led.spent().epsilon == 0
    for i in range(2):
        _query(t).release(1.0, ledger=led, rng=rng_for_tests(i))
        assert led.spent().epsilon == pytest.approx(1.0 * (i + 1))
    with pytest.raises(BudgetExceeded):
        _query(t).release(1.0, ledger=led)


def test_other_bounds_are_refused_by_name(pairs):
    t = bdp.table(pairs, "user").bounded("g", max_groups_per_unit=1, max_rows_per_group=2)
    q = t.group_by("g").agg(n=bdp.count())
    with pytest.raises(InvalidParameter, match="max_groups_per_unit=2: this table was bounded with "
                                               "max_groups_per_unit=1"):
        q.release(1.0, 1e-6, max_groups_per_unit=2)
    with pytest.raises(InvalidParameter, match=r"max_rows_per_group=1: .* bounded with max_rows_per_group=2"):
        q.preview(1.0, 1e-6, max_rows_per_group=1)
    with pytest.raises(InvalidParameter, match="bounded for groups by g"):
        t.agg(n=bdp.count()).release(1.0)
    q.release(1.0, 1e-6, max_groups_per_unit=1, max_rows_per_group=2)  # the same bounds: accepted
    with pytest.raises(InvalidParameter, match="max_groups_per_unit is required"):
        bdp.table(pairs, "user").bounded("g")
    with pytest.raises(InvalidParameter, match="already bounded"):
        t.bounded("g", max_groups_per_unit=1)
    with pytest.raises(InvalidParameter, match="privacy unit"):
        bdp.table(pairs, None).bounded("g", max_groups_per_unit=1)


def test_whole_table_bounds(pairs):
    """Without group columns a unit keeps max_rows_per_group rows of the table."""
    t = bdp.table(pairs, "user").bounded(max_rows_per_group=2, rng=rng_for_tests(4))
    r = t.agg(n=bdp.count()).release(40.0, rng=rng_for_tests(1))
    assert r.diagnostics.kept_rows == 2 * N and abs(r.to_pandas().loc[0, "n"] - 2 * N) < 1
