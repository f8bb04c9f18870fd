"""The DuckDB engine's per-group reads: quantile grids by group number, sums of squares only when
asked, and public keys on a bounded table chosen after aggregating. Exact checks, no noise."""

import duckdb
import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.tables.engines import BoundingRequest, DuckDBEngine, Measure
from bayesdp.tables.engines.base import COARSE_SHIFT, FULL_GRID, Cells, distinct_measures
from bayesdp.tables.engines.grids import CountedGrid

CELLS = 1 << 20  # 16 coarse bins of 2^16 cells over [0, 1]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    """Every row its own unit; groups "a" (3,000 values), "b" (40), "e" (only nulls), null (500)."""
    rng = np.random.default_rng(7)
    g = np.repeat(np.array(["a", "b", "e", None], dtype=object), [3000, 40, 5, 500])
    v = rng.beta(2, 5, g.size)
    v[g == "e"] = np.nan
    v[:30] = np.nan
    v[30:40] = 1.5  # clipped to the top cell
    return pd.DataFrame({"u": np.arange(g.size), "g": g, "v": v})


def _window(frame: pd.DataFrame, margin: float):
    cells = Cells("v", 0.0, 1.0, CELLS, 0.5, margin)
    eng = DuckDBEngine(duckdb.connect().from_df(frame))
    out = eng.aggregate(BoundingRequest("u", ("g",), 1, 1, 3, cells=(cells,)))
    return out, out.cells[cells], cells


def _grid(frame: pd.DataFrame, groups: list) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per group (in the engine's order) its occupied grid cells and their counts, by numpy."""
    out = []
    for key in groups:
        v = frame.loc[frame["g"].isna() if key is None else frame["g"] == key, "v"].dropna()
        cell = np.round(np.clip(v.to_numpy(), 0.0, 1.0) / (1.0 / CELLS)).astype(np.int64)
        out.append(np.unique(cell, return_counts=True))
    return out


def test_the_whole_grid_is_read_by_group_number(frame):
    out, win, spec = _window(frame, FULL_GRID)
    groups = [None if pd.isna(k) else k for k in out.groups["g"]]
    assert groups == ["a", "b", "e", None]  # key order, nulls last
    for k, (cell, count) in enumerate(_grid(frame, groups)):
        mine = win.group == k
        np.testing.assert_array_equal(win.cell[mine], cell)
        np.testing.assert_array_equal(win.count[mine], count)
        assert win.n[k] == count.sum() and win.below[k] == 0
        if count.size:
            assert win.start[k] == (cell[0] >> COARSE_SHIFT) << COARSE_SHIFT
            assert win.stop[k] == ((cell[-1] >> COARSE_SHIFT) + 1) << COARSE_SHIFT
        else:
            assert win.start[k] == win.stop[k] == 0
    assert out.diagnostics.clipped[spec] == 10 and out.diagnostics.nulls == {"v": 35}


def test_a_window_covering_every_bin_equals_the_whole_grid(frame):
    _, whole, _ = _window(frame, FULL_GRID)
    # A margin of the largest group's values: the windowed read, every bin inside.
    _, covering, _ = _window(frame, float(whole.n.max()))
    for field in ("n", "start", "stop", "below", "group", "cell", "count"):
        np.testing.assert_array_equal(getattr(covering, field), getattr(whole, field))


def test_a_narrow_window_holds_the_bins_around_the_quantile(frame):
    out, win, _ = _window(frame, 50.0)
    groups = [None if pd.isna(k) else k for k in out.groups["g"]]
    for k, (cell, count) in enumerate(_grid(frame, groups)):
        if not count.size:
            continue
        inside = (cell >= win.start[k]) & (cell < win.stop[k])
        mine = win.group == k
        np.testing.assert_array_equal(win.cell[mine], cell[inside])
        np.testing.assert_array_equal(win.count[mine], count[inside])
        assert win.below[k] == count[cell < win.start[k]].sum()
        # The window holds the median's rank: values below it, then at most n/2 + 50 below its end.
        n = count.sum()
        assert win.below[k] < n / 2 + 50 and win.below[k] + count[inside].sum() > n / 2 - 50
    assert win.stop[0] - win.start[0] < CELLS  # group "a": fewer bins than the grid's 16


def test_sums_of_squares_only_where_a_measure_asks():
    assert Measure("v", 0.0, 1.0, squares=False) == Measure("v", 0.0, 1.0)
    merged = distinct_measures([Measure("v", 0.0, 1.0, squares=False), Measure("v", 0.0, 2.0),
                                Measure("v", 0.0, 1.0)])
    assert [(m.hi, m.squares) for m in merged] == [(1.0, True), (2.0, True)]
    df = pd.DataFrame({"u": range(4), "v": [0.5, 2.0, None, 1.0]})
    eng = DuckDBEngine(duckdb.connect().from_df(df))
    plain, squared = Measure("v", 0.0, 1.0, squares=False), Measure("v", -1.0, 1.0)
    out = eng.aggregate(BoundingRequest("u", (), 1, 1, 3, measures=(plain, squared)))
    n, s, q = out.moments[plain][0]
    assert (n, s) == (3, 2.5) and np.isnan(q)
    np.testing.assert_array_equal(out.moments[squared][0], [3, 2.5, 2.25])
    assert out.diagnostics.nulls == {"v": 1} and out.diagnostics.clipped == {plain: 1, squared: 1}


def test_a_mean_and_a_std_of_one_column_share_its_measure_with_squares():
    # Statistical, seeded: at ε = 600 (at least 50 per noisy part) each Laplace scale is at most
    # 0.02 on a count of 4,000 and on sums of about 1,000, so moving the std by 0.02 needs a
    # draw beyond 40 scales: probability below 1e-17.
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"u": range(4000), "v": rng.uniform(0, 1, 4000)})
    r = bdp.table(df, "u").agg(m=bdp.mean("v", bounds=(0, 1)), sd=bdp.std("v", bounds=(0, 1))) \
        .release(600.0, rng=bdp.rng_for_tests(5)).to_pandas()
    assert abs(r["sd"].iloc[0] - df["v"].std(ddof=0)) < 0.02


def test_public_keys_on_a_bounded_table_count_only_the_kept_groups():
    # Bounds above every unit's rows: bounding keeps every row, so the counts are exact.
    df = pd.DataFrame({"u": [1, 1, 2, 3, 4, 5], "g": ["a", "b", "b", "c", None, "a"],
                       "v": [0.5, np.nan, 7.0, np.nan, 9.0, -1.0]})
    t = bdp.table(df, "u").bounded("g", max_groups_per_unit=2, max_rows_per_group=1,
                                   rng=bdp.rng_for_tests(1))
    r = t.group_by("g", keys=["a", "b", "z"]).agg(n=bdp.count(), s=bdp.sum("v", bounds=(0, 1))) \
        .release(1.0, rng=bdp.rng_for_tests(2))
    d = r.diagnostics
    assert (d.rows, d.kept_rows, d.dropped_by_keys, d.dropped_by_bounding) == (6, 4, 2, 0)
    assert d.nulls == {"v": 1} and list(d.clipped.values()) == [2]
    assert r.to_pandas()["g"].tolist() == ["a", "b", "z"]


@pytest.mark.parametrize("epsilon", [0.5, 500.0])  # windows the whole grid, then a narrow one
def test_a_bounded_table_reads_a_grid_counted_once_as_its_rows_give_it(frame, epsilon):
    # A filter keeping every row makes the release read the rows themselves; without it the
    # release reads the grid counted at the first request. Same exact grid: same release.
    t = bdp.table(frame.assign(h=frame.index % 3), "u").bounded(
        ["g", "h"], max_groups_per_unit=1, max_rows_per_group=1, rng=bdp.rng_for_tests(4))
    aggs = dict(md=bdp.quantile("v", 0.5, bounds=(0, 1)), q9=bdp.quantile("v", 0.9, bounds=(0, 1)))
    runs = [q.agg(**aggs).release(epsilon, 1e-6, rng=bdp.rng_for_tests(6)).to_pandas()
            for q in (t.group_by(["g", "h"]), t.group_by(["g", "h"]), t.where("u >= 0").group_by(["g", "h"]),
                      t.group_by(["g", "h"], keys=[("a", 0), ("e", 1), ("z", 2)]))]
    pd.testing.assert_frame_equal(runs[0], runs[1])
    pd.testing.assert_frame_equal(runs[0], runs[2])
    assert len(t.engine.grids) == 1  # one column, one pair of bounds: one grid
    keyed = runs[3].set_index(["g", "h"])
    assert keyed.loc[("z", 2), "md"] >= 0.0 and len(keyed) == 3


@pytest.mark.parametrize("margin", [FULL_GRID, 3000.0, 50.0, 3.0])
@pytest.mark.parametrize("sorted_together", [1 << 24, 500])  # one sort; counts of 500 rows merged
def test_a_grid_counted_in_numpy_gives_the_windows_duckdb_gives(frame, margin, sorted_together, monkeypatch):
    # The same rows' packed keys, in uneven batches, then each group's window.
    monkeypatch.setattr("bayesdp.tables.engines.grids.BATCH_ROWS", sorted_together)
    out, win, spec = _window(frame, margin)
    groups = [None if pd.isna(k) else k for k in out.groups["g"]]
    assert groups[-1] is None  # nulls last
    rows = frame[frame["v"].notna()]
    number = {k: i for i, k in enumerate(groups[:-1])}
    g = rows["g"].map(number).fillna(len(groups) - 1).to_numpy(np.int64)
    cell = np.round(np.clip(rows["v"].to_numpy(), 0.0, 1.0) / (1.0 / CELLS)).astype(np.int64)
    packed = g * (CELLS + 1) + cell
    grid = CountedGrid.of(np.array_split(packed[::-1], [7, 1000, 1001]), CELLS + 1)
    mine = grid.window(np.arange(len(groups)), win.n, spec)
    for field in ("n", "start", "stop", "below", "group", "cell", "count"):
        np.testing.assert_array_equal(getattr(mine, field), getattr(win, field))
    # A request without group "a" (-1) and the others renumbered: the same windows for them.
    fewer = grid.window(np.array([-1, 0, 1, 2]), win.n[1:], spec)
    other = win.group != 0
    np.testing.assert_array_equal(fewer.group, win.group[other] - 1)
    np.testing.assert_array_equal(fewer.cell, win.cell[other])
    np.testing.assert_array_equal(fewer.below, win.below[1:])
