"""The quantile's exponential mechanism: its output density moves by at most e^ε per unit."""

import numpy as np
import pandas as pd
import pytest

import bayesdp.tables as bdp
from bayesdp import rng_for_tests
from bayesdp.tables.engines.base import CellWindow
from bayesdp.tables.estimate import interval_scores, window_intervals
from bayesdp.tables.plan import make_plan

LO, HI, CELLS = 0.0, 1.0, 64
WIDTH = (HI - LO) / CELLS


def whole_grid(cells: np.ndarray, start: int = 0, stop: int = CELLS + 1) -> CellWindow:
    """One group's grid counts of the values at grid indices `cells`, read in [start, stop)."""
    cell, cnt = np.unique(cells, return_counts=True)
    inside = (cell >= start) & (cell < stop)
    one = lambda x: np.array([x], dtype=np.int64)  # noqa: E731
    return CellWindow(one(cnt.sum()), one(start), one(stop), one(cnt[cell < start].sum()),
                      np.zeros(int(inside.sum()), dtype=np.int64), cell[inside], cnt[inside])


def _density(cells: np.ndarray, level: float, offset: float, scale: float, probes: np.ndarray,
             probabilities) -> np.ndarray:
    """Output density at `probes` of the draw aimed at rank level·n + offset (exact, in float)."""
    intervals = window_intervals(LO, HI, WIDTH, whole_grid(cells), 0)
    p = probabilities(interval_scores(intervals, level * cells.size + offset, scale))
    i = np.searchsorted(intervals.left, probes, side="right") - 1
    return p[i] / intervals.width[i]


def _worst_log_ratio(q: float, max_rows: int, scale_factor: float = 1.0) -> tuple[float, float]:
    plan = make_plan({"p": bdp.quantile("x", q, bounds=(LO, HI))}, epsilon=1.0, delta=0.0,
                     noise="laplace", unit="row", max_groups=1, max_rows=max_rows,
                     private_keys=False)
    step, worst, eps = plan.steps["p"], 0.0, 0.0
    rng = rng_for_tests(7)  # data only; the densities are computed exactly
    for part in ("value", "low", "high"):
        mech = step.parts[part].mechanism
        eps = max(eps, mech.guarantee.epsilon)
        for _ in range(40):
            base = rng.integers(1, CELLS, size=int(rng.integers(3, 30)))
            added = rng.integers(1, CELLS, size=max_rows)
            probes = (np.arange(CELLS * 4) + 0.5) * WIDTH / 4  # inside every interval of both
            offset = float(rng.uniform(-5, 5))  # a public shift such as the rank slack
            scale = mech.scale * scale_factor
            d0 = _density(base, q, offset, scale, probes, mech.probabilities)
            d1 = _density(np.concatenate([base, added]), q, offset, scale, probes,
                          mech.probabilities)
            worst = max(worst, float(np.max(np.abs(np.log(d0) - np.log(d1)))))
    return worst, eps


@pytest.mark.parametrize("q,max_rows", [(0.5, 1), (0.5, 3), (0.9, 1), (0.2, 2)])
def test_quantile_draws_are_epsilon_dp_under_add_remove(q, max_rows):
    # Deterministic: the exact density ratio of the continuous exponential mechanism between a
    # data set and the same with one unit's rows added never exceeds e^ε of the part.
    worst, eps = _worst_log_ratio(q, max_rows)
    assert worst <= eps * (1 + 1e-9)


def test_half_the_scale_breaks_the_guarantee():
    # Control: with the scale halved (sensitivity understated by 2) some pair exceeds e^ε.
    worst, eps = _worst_log_ratio(0.5, 1, scale_factor=0.5)
    assert worst > eps * 1.2


def test_window_draws_follow_the_whole_grid_mechanism():
    # Statistical, seeded; false-failure probability 1e-7. A draw that proposes a stretch outside
    # a narrow window is settled by rejection against the whole grid: the draws must follow the
    # mechanism on the whole grid. Chi-square over the 64 grid cells.
    from scipy import stats

    from bayesdp.tables.estimate import _draw

    rng = rng_for_tests(11)
    values = rng.integers(0, CELLS + 1, size=300)
    plan = make_plan({"p": bdp.quantile("x", 0.5, bounds=(LO, HI))}, epsilon=0.1, delta=0.0,
                     noise="laplace", unit="row", max_groups=1, max_rows=1, private_keys=False)
    step = plan.steps["p"]
    mech = step.parts["value"].mechanism
    whole = window_intervals(LO, HI, WIDTH, whole_grid(values), 0)
    narrow = window_intervals(LO, HI, WIDTH, whole_grid(values, 30, 34), 0)
    target = 150.0
    p = mech.probabilities(interval_scores(whole, target, mech.scale))
    edges = np.arange(CELLS + 1) * WIDTH
    owner = np.searchsorted(whole.left, edges[:-1], side="right") - 1
    expected = p[owner] * WIDTH / whole.width[owner]
    outside = expected[(edges[:-1] < 30 * WIDTH) | (edges[:-1] >= 34 * WIDTH)].sum()
    assert outside > 0.2  # the rejection path runs for a good share of the draws
    n = 6_000
    draws = np.array([_draw(step, "value", narrow, target, rng, lambda: whole) for _ in range(n)])
    observed = np.bincount(np.minimum((draws / WIDTH).astype(int), CELLS - 1), minlength=CELLS)
    keep = expected * n >= 5
    o = np.append(observed[keep], observed[~keep].sum())
    e = np.append(expected[keep], expected[~keep].sum()) * n
    statistic = float(((o - e) ** 2 / e).sum())
    assert statistic < stats.chi2.isf(1e-7, o.size - 1)


def test_engine_window_is_the_whole_grid_near_the_quantile():
    # Deterministic: the cells read in each group's window are the whole grid's cells there, the
    # counts before it add up, and the window holds the ranks q·n ± margin.
    import duckdb

    from bayesdp.tables.engines import BoundingRequest, Cells, DuckDBEngine

    rng = rng_for_tests(5)
    size = 200_000
    frame = pd.DataFrame({"g": rng.choice(["a", "b", "c"], size=size, p=[0.7, 0.29, 0.01]),
                          "x": rng.gamma(2.0, 10.0, size=size)})
    spec = Cells("x", 0.0, 100.0, 1 << 22, 0.3, 40.0)
    full = Cells("x", 0.0, 100.0, 1 << 22, 0.3)
    req = BoundingRequest(None, ("g",), 1, 1, seed=3, cells=(spec, full))
    exact = DuckDBEngine(duckdb.connect().from_df(frame)).aggregate(req)
    win, whole = exact.cells[spec], exact.cells[full]
    np.testing.assert_array_equal(win.n, whole.n)
    assert win.group.size < whole.group.size / 4  # the window is much smaller than the grid
    for g in range(3):
        mine = win.group == g
        all_ = whole.group == g
        inside = all_ & (whole.cell >= win.start[g]) & (whole.cell < win.stop[g])
        np.testing.assert_array_equal(win.cell[mine], whole.cell[inside])
        np.testing.assert_array_equal(win.count[mine], whole.count[inside])
        assert win.below[g] == whole.count[all_ & (whole.cell < win.start[g])].sum()
        t = 0.3 * win.n[g]
        assert win.below[g] <= max(t - 40.0, 0.0)
        assert win.below[g] + win.count[mine].sum() >= min(t + 40.0, win.n[g])


def test_a_draw_outside_the_window_reads_the_whole_grid_again(monkeypatch):
    # Deterministic (seeded). With a window of ±1 rank (one coarse bin) the interval draws, aimed
    # hundreds of ranks away, land outside it: the release reads the whole grid once more through
    # the engine (same bounding seed) and returns values inside the bounds.
    import dataclasses

    import bayesdp.tables.estimate as est
    import bayesdp.tables.query as query

    wide = est.cells_of

    def narrow(step, alpha):
        return dataclasses.replace(wide(step, alpha), margin=1.0)

    monkeypatch.setattr(est, "cells_of", narrow)
    monkeypatch.setattr(query, "cells_of", narrow)
    rng = rng_for_tests(3)
    frame = pd.DataFrame({"u": np.arange(2000), "x": rng.uniform(0, 100, size=2000)})
    q = bdp.table(frame, "u").agg(p=bdp.quantile("x", 0.5, bounds=(0, 100)))
    calls = []
    engine = q.table.engine
    real = engine.aggregate
    monkeypatch.setattr(engine, "aggregate", lambda req: calls.append(req.cells) or real(req))
    out = q.release(0.05, rng=rng_for_tests(4)).to_pandas().iloc[0]
    assert len(calls) == 2 and calls[1][0].margin == est.FULL_GRID
    assert 0 <= out["p_low"] <= out["p"] <= out["p_high"] <= 100
