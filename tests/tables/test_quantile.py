"""The quantile (quantiles.py): the closed-rank exponential mechanism moves its output
probabilities by at most e^ε per unit, ties are drawn exactly, and the intervals cover
`numpy.quantile(..., method="inverted_cdf")` at the stated rate."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesdp as bdp_root
import bayesdp.tables as bdp
from bayesdp import rng_for_tests
from bayesdp.tables.engines.base import CellWindow
from bayesdp.tables.estimate import estimate
from bayesdp.tables.plan import make_plan
from bayesdp.tables.quantiles import (
    Runs,
    candidate_spacing,
    closed_ranks,
    draws,
    far_margin,
    grid_cells,
    group_runs,
    levels,
    rank_margin,
    run_mass,
    run_scores,
    value_spacing,
    window_runs,
)

CELLS = 64


def draw(step, part: str, runs: Runs, aim: float, whole, *, rng) -> int:
    """One candidate grid value of a single group's `runs` (the release's `draws`, one group)."""
    return int(draws(step, part, runs, np.array([aim]), whole, rng=rng)[0])


def closed_rank(runs: Runs, j: int, whole) -> tuple[float, float]:
    """(B(j), A(j)) of a single group's `runs` (the release's `closed_ranks`, one group)."""
    low, high = closed_ranks(runs, np.array([j]), whole)
    return float(low[0]), float(high[0])


def whole_grid(cells: np.ndarray, start: int = 0, stop: int = CELLS + 1) -> CellWindow:
    """One group's grid counts of the values at grid indices `cells`, read in [start, stop)."""
    cell, cnt = np.unique(cells, return_counts=True)
    inside = (cell >= start) & (cell < stop)
    one = lambda x: np.array([x], dtype=np.int64)  # noqa: E731
    return CellWindow(one(cnt.sum()), one(start), one(stop), one(cnt[cell < start].sum()),
                      np.zeros(int(inside.sum()), dtype=np.int64), cell[inside], cnt[inside])


def _run_probabilities(mech, scores: np.ndarray) -> np.ndarray:
    """Selection probabilities of the runs; 0 for a run without candidates (score -inf)."""
    p = np.zeros(scores.size)
    some = np.isfinite(scores)
    p[some] = mech.probabilities(scores[some])
    return p


def _probabilities(cells: np.ndarray, aim: float, mech, spacing=(0, 0)) -> np.ndarray:
    """Exact output probability of each candidate grid value of 0..CELLS of a draw aimed at `aim`
    (every value, or every 2^bits-th with `spacing`)."""
    runs = group_runs(CELLS, whole_grid(cells), 0)
    p = _run_probabilities(mech, run_scores(runs, aim, mech.scale, spacing))
    values = np.arange(CELLS + 1)
    owner = np.searchsorted(runs.first, values, side="right") - 1
    weight = _weights(spacing)
    candidate = weight > 0
    mass = run_mass(runs, spacing)[owner]
    return np.asarray(p[owner][candidate] * weight[candidate] / mass[candidate])


def _weights(spacing) -> np.ndarray:
    """The base measure of each grid value 0..CELLS, from its definition (`levels`)."""
    bits, origin, top, floor = levels(spacing)
    j = np.arange(CELLS + 1) + origin
    return sum(((j % (1 << level)) == 0) * (1 << (level - bits))
               for level in (bits, *range(max(floor, bits + 1), top + 1)))


def _plan(q: float, max_rows: int, epsilon: float = 1.0):
    plan = make_plan({"p": bdp.quantile("x", q, bounds=(0.0, 1.0))}, epsilon=epsilon, delta=0.0,
                     noise="laplace", unit="row", max_groups=1, max_rows=max_rows,
                     private_keys=False)
    return plan.steps["p"]


def _neighbours(rng, max_rows: int):
    """A tied data set (few distinct grid values) and the same plus one unit's rows, often on a tie."""
    support = rng.choice(CELLS + 1, size=int(rng.integers(1, 6)), replace=False)
    base = rng.choice(support, size=int(rng.integers(1, 40)))
    extra = np.append(support, rng.integers(0, CELLS + 1))
    added = rng.choice(extra, size=int(rng.integers(1, max_rows + 1)))
    return base, np.concatenate([base, added])


def _unused():
    raise AssertionError("the whole grid was read already")


def _worst_log_ratio(q: float, max_rows: int, scale_factor: float = 1.0) -> tuple[float, float]:
    step, worst, eps = _plan(q, max_rows), 0.0, 0.0
    rng = rng_for_tests(7)  # data only; the probabilities are computed exactly
    for part, spacing in (("value", (0, 0, 7)), ("value", (0, 3, 4)), ("low", (2, 1)), ("high", (3, 0)),
                          ("high", (1, 1, 4, 4))):
        mech = step.parts[part].mechanism
        eps = max(eps, mech.guarantee.epsilon)
        if scale_factor != 1.0:
            mech = type(mech)(mech.epsilon / scale_factor, sensitivity=mech.sensitivity)
        for _ in range(60):
            d0, d1 = _neighbours(rng, max_rows)
            offset = float(rng.uniform(-5, 5))  # a public shift such as the rank margin
            p0 = _probabilities(d0, q * d0.size + offset, mech, spacing)
            p1 = _probabilities(d1, q * d1.size + offset, mech, spacing)
            worst = max(worst, float(np.max(np.abs(np.log(p0) - np.log(p1)))))
    return worst, eps


@pytest.mark.parametrize("q,max_rows", [(0.5, 1), (0.5, 3), (0.9, 1), (0.2, 2)])
def test_quantile_draws_are_epsilon_dp_under_add_remove_on_tied_data(q, max_rows):
    # Deterministic: the exact output probabilities of the closed-rank mechanism on a tied data set
    # and on the same with one unit's rows added differ by at most e^ε of the part.
    worst, eps = _worst_log_ratio(q, max_rows)
    assert worst <= eps * (1 + 1e-9)


def test_half_the_scale_breaks_the_guarantee():
    # Control: with the scale halved (sensitivity understated by 2) some pair exceeds e^ε.
    worst, eps = _worst_log_ratio(0.5, 1, scale_factor=0.5)
    assert worst > eps * 1.2


@pytest.mark.parametrize("q,max_rows", [(0.5, 1), (0.3, 3)])
def test_checked_ranks_move_by_at_most_their_sensitivity(q, max_rows):
    # Deterministic: B(j) - q·n and A(j) - q·n, the values the rank checks add noise to, move by at
    # most the checks' sensitivity when a unit is added, at every grid value.
    step = _plan(q, max_rows)
    sens = step.parts["low_rank"].sensitivity
    assert sens == step.parts["high_rank"].sensitivity
    rng = rng_for_tests(8)
    for _ in range(100):
        d0, d1 = _neighbours(rng, max_rows)
        r0, r1 = (group_runs(CELLS, whole_grid(d), 0) for d in (d0, d1))
        assert r0.exact.all() and r1.exact.all()  # the whole grid: no second read
        for j in range(CELLS + 1):
            (b0, a0), (b1, a1) = closed_rank(r0, j, _unused), closed_rank(r1, j, _unused)
            assert abs((b1 - q * d1.size) - (b0 - q * d0.size)) <= sens + 1e-12
            assert abs((a1 - q * d1.size) - (a0 - q * d0.size)) <= sens + 1e-12


def test_window_draws_follow_the_whole_grid_mechanism():
    # Statistical, seeded; false-failure probability 1e-7. A draw that proposes a stretch outside
    # a narrow window is settled by rejection against the whole grid: the draws must follow the
    # mechanism on the whole grid. Chi-square over the 65 grid values.
    rng = rng_for_tests(11)
    values = rng.integers(0, 20, size=300) * 3  # ties: 20 occupied values
    step = _plan(0.5, 1, epsilon=0.1)
    mech = step.parts["value"].mechanism
    whole = group_runs(CELLS, whole_grid(values), 0)
    narrow = group_runs(CELLS, whole_grid(values, 27, 33), 0)
    target = 150.0
    expected = _probabilities(values, target, mech)
    outside = expected[np.r_[0:27, 33:CELLS + 1]].sum()
    assert outside > 0.2  # the rejection path runs for a good share of the draws
    n = 6_000
    draws = np.array([draw(step, "value", narrow, target, lambda: whole, rng=rng) for _ in range(n)])
    observed = np.bincount(draws, minlength=CELLS + 1)
    keep = expected * n >= 5
    o = np.append(observed[keep], observed[~keep].sum())
    e = np.append(expected[keep], expected[~keep].sum()) * n
    statistic = float(((o - e) ** 2 / e).sum())
    assert statistic < stats.chi2.isf(1e-7, o.size - 1)


def test_integer_bounds_put_integers_on_the_grid():
    # Deterministic: the grid's width is a power of two dividing hi - lo, so every integer inside
    # integer bounds is a grid value (released exactly); other bounds keep 2^24 cells.
    for lo, hi in [(15, 49), (0, 100), (-3, 4), (0, 1)]:
        cells = grid_cells(lo, hi)
        width = (hi - lo) / cells
        assert cells <= 1 << 24 and width == 2.0 ** np.round(np.log2(width))
        ints = np.arange(lo, hi + 1, dtype=np.float64)
        assert np.all(lo + np.round((ints - lo) / width) * width == ints)
    assert grid_cells(0.0, 0.1) == 1 << 24


def _releases(frame: pd.DataFrame, q: float, epsilon: float, runs: int, seed: int,
              bounds=(0.0, 100.0), alpha: float = 0.05, max_rows: int | None = None):
    """`runs` independent releases of the q-quantile of `frame.x` (a row per person, or per unit
    `frame.u` with `max_rows` rows each), and the truth."""
    unit = None if max_rows is None else "u"
    query = bdp.table(frame, unit).agg(p=bdp.quantile("x", q, bounds=bounds))
    plan = query.plan(epsilon, max_rows_per_group=max_rows)
    rng = rng_for_tests(seed)
    request = query._request(plan, alpha, int(rng.integers(0, 2**62)))
    engine = query.table.engine
    exact = engine.aggregate(request)

    def full_grid(cells):
        return engine.aggregate(replace(request, measures=(), cells=(cells,), bins=())).cells[cells]

    est = estimate(plan.steps["p"], exact, np.zeros(runs, dtype=np.int64), alpha, rng=rng,
                   full_grid=full_grid)
    truth = float(np.quantile(np.clip(frame["x"], *bounds), q, method="inverted_cdf"))
    return est, truth, plan.steps["p"]


def _ages(n: int, rng) -> pd.DataFrame:
    """Integer ages 15-49, about 10% of them at 31 (the median), as in a census extract."""
    ages = np.where(rng.random(n) < 0.1, 31, rng.integers(15, 50, size=n))
    return pd.DataFrame({"x": ages.astype(np.float64)})


# Misses allowed in R runs when each run misses with probability at most α = 0.05:
# P(Binomial(R, 0.05) > k) <= 1e-6 (false-failure probability of each coverage assertion).
R = 300
MISSES = int(stats.binom.isf(1e-6, R, 0.05))


@pytest.mark.parametrize("case", ["ages", "ages-20", "ages-200", "mass", "continuous",
                                  "continuous-20", "continuous-200", "q90"])
def test_intervals_cover_the_inverted_cdf_quantile(case):
    # Statistical, seeded: each assertion fails by chance with probability <= 1e-6 (MISSES).
    rng = rng_for_tests(20 + len(case))
    q, bounds = 0.5, (0.0, 100.0)
    if case.startswith("ages"):
        frame = _ages(int(case.split("-")[1]) if "-" in case else 10_000, rng)
    elif case == "mass":  # a point mass at the median: 20% of the rows at exactly 50
        x = np.where(rng.random(2_000) < 0.2, 50.0, rng.uniform(0, 100, size=2_000))
        frame = pd.DataFrame({"x": x})
    elif case == "q90":
        frame, q = pd.DataFrame({"x": rng.integers(0, 10, size=1_000).astype(np.float64)}), 0.9
    else:
        n = int(case.split("-")[1]) if "-" in case else 2_000
        frame = pd.DataFrame({"x": rng.gamma(3.0, 8.0, size=n)})
    est, truth, _ = _releases(frame, q, 1.0, R, seed=len(case), bounds=bounds)
    misses = int(np.sum((est.low > truth) | (est.high < truth)))
    assert misses <= MISSES, (case, truth, misses)


def test_a_tied_median_is_released_exactly():
    # Statistical, seeded. Ages with 10% at 31, n = 10,000, ε = 1: the value holding rank q·n
    # scores 0; every other grid value is at least d ranks away, so a draw misses 31 with
    # probability at most (cells + 1)·e^(-d/scale), asserted below 1e-9 per run.
    rng = rng_for_tests(30)
    frame = _ages(10_000, rng)
    est, truth, step = _releases(frame, 0.5, 1.0, 100, seed=31, bounds=(15.0, 49.0))
    x = frame["x"].to_numpy()
    t = 0.5 * x.size
    d = min(t - np.sum(x < 31), np.sum(x <= 31) - t)
    assert grid_cells(15.0, 49.0) * np.exp(-d / step.parts["value"].scale) < 1e-9
    assert truth == 31.0 and np.all(est.value == 31.0)


@pytest.mark.parametrize("max_rows", [1, 5, 10, 50])
def test_a_tied_median_is_released_exactly_at_user_level(max_rows):
    # Ratings 1-5 by 400 users with `max_rows` each, 25% of them 4 (the median) and q·n 10·max_rows
    # ranks (6.5 noise scales) above the tie's first rank: the tie block is 32 scales wide.
    # Deterministic: the value draw's exact probability of 4 on the whole grid is above 0.99 (the
    # empty values between 3 and 4, weighed by the counting measure alone, took it below 1e-3).
    # Statistical, seeded: misses in 200 releases exceed binom.isf(1e-6, 200, 0.01) with
    # probability below 1e-6.
    per = 20 * max_rows
    x = np.repeat([1.0, 2.0, 3.0, 4.0, 5.0], [4 * per, 2 * per, 3 * per, 5 * per, 6 * per])
    frame = pd.DataFrame({"u": np.arange(x.size) % 400, "x": rng_for_tests(70).permutation(x)})
    lo, hi = 0.0, 5.0
    cells = grid_cells(lo, hi)
    est, truth, step = _releases(frame, 0.5, 1.0, 200, seed=71, bounds=(lo, hi), max_rows=max_rows)
    mech = step.parts["value"].mechanism
    grid, count = np.unique(np.round(x / (hi / cells)).astype(np.int64), return_counts=True)
    one = lambda v: np.array([v], dtype=np.int64)  # noqa: E731
    win = CellWindow(one(x.size), one(0), one(cells + 1), one(0), np.zeros(grid.size, np.int64), grid, count)
    runs = group_runs(cells, win, 0)
    p = _run_probabilities(mech, run_scores(runs, 0.5 * x.size, mech.scale, value_spacing(lo, hi, cells)))
    tie = runs.first == round(4.0 / (hi / cells))
    assert truth == 4.0 and p[tie & (runs.size == 1)].sum() > 0.99
    assert np.sum(est.value != 4.0) <= stats.binom.isf(1e-6, 200, 0.01)


def _tied_runs(x: np.ndarray, lo: float, hi: float, epsilon: float):
    """One group's runs of `x` on the whole grid over [lo, hi], and the step of its median alone at
    `epsilon`, rows as units."""
    cells = grid_cells(lo, hi)
    cell, cnt = np.unique(np.round((x - lo) / ((hi - lo) / cells)).astype(np.int64), return_counts=True)
    one = lambda v: np.array([v], dtype=np.int64)  # noqa: E731
    win = CellWindow(one(x.size), one(0), one(cells + 1), one(0), np.zeros(cell.size, np.int64),
                     cell, cnt)
    step = make_plan({"p": bdp.quantile("x", 0.5, bounds=(lo, hi))}, epsilon=epsilon, delta=0.0,
                     noise="laplace", unit="row", max_groups=1, max_rows=1,
                     private_keys=False).steps["p"]
    return group_runs(cells, win, 0), step


def test_interval_candidates_land_on_a_tie_not_past_it():
    # Deterministic (exact probabilities). Ages with 10% at 31, n = 10,000, a quantile at ε = 1/4:
    # the low candidate aims inside 31's block of ranks. A candidate past the block fails its check
    # and the end falls back to the bound; with candidates every 2^bits grid values that chance is
    # below 1%, with every grid value a candidate (the empty values outweighing the tie) above 5%.
    x = _ages(10_000, rng_for_tests(60))["x"].to_numpy()
    lo, hi = 15.0, 49.0
    cells = grid_cells(lo, hi)
    runs, step = _tied_runs(x, lo, hi, 0.25)
    mech = step.parts["low"].mechanism
    aim = 0.5 * x.size - rank_margin(step, 0.05)
    tie = int(np.round((31 - lo) / ((hi - lo) / cells)))
    past = runs.first > tie
    assert np.sum(x < 31) < aim < np.sum(x <= 31)
    spaced = _run_probabilities(mech, run_scores(runs, aim, mech.scale, candidate_spacing(lo, hi, cells)))
    every = _run_probabilities(mech, run_scores(runs, aim, mech.scale))
    assert spaced[past].sum() < 0.01 and every[past].sum() > 0.05


# Vocabulary scores 0-10 of the 5,285 respondents with under 12 years of schooling in carData
# GSSvocab (their counts per score): the median 5 holds ranks 2576-3630, q·n = 2642.5.
VOCAB = np.repeat(np.arange(11.0), [108, 294, 490, 733, 951, 1054, 916, 444, 175, 90, 30])


def test_the_high_candidate_lands_on_a_tied_integer_not_below_it():
    # Deterministic (exact probabilities). At ε = 0.5 the high candidate aims rank_margin (about
    # 113 ranks, 5 of its noise scales) above q·n, 7.8 scales inside 5's block. The 8,191 empty
    # candidates between 4 and 5 (ln 8191 = 9 scales of weight) took the draw there, below q·n,
    # with probability above 1/2: its check failed and the end fell back to the far candidate.
    # With integers weighing as much as the candidates between two of them, below 1%.
    lo, hi = 0.0, 10.0
    runs, step = _tied_runs(VOCAB, lo, hi, 0.5)
    mech = step.parts["high"].mechanism
    aim = 0.5 * VOCAB.size + rank_margin(step, 0.05)
    assert np.sum(VOCAB < 5) < 0.5 * VOCAB.size < aim < np.sum(VOCAB <= 5)
    spacing = candidate_spacing(lo, hi, grid_cells(lo, hi))
    p = _run_probabilities(mech, run_scores(runs, aim, mech.scale, spacing))
    below = runs.rank_hi < 0.5 * VOCAB.size  # candidates whose check cannot hold: A(j) < q·n
    assert p[below].sum() < 0.01


def test_a_large_tied_group_gets_a_tight_interval():
    # Statistical, seeded; the reported case (VOCAB above, the median alone at ε = 0.5, bounds
    # 0..10). The interval is [4, 5] up to half a grid cell unless an end falls back to its far
    # candidate (0.5% of 4,000 releases); before integers weighed more among the candidates, 37%
    # were wider than 2. At a true rate of 2%, P(Binomial(400, 0.02) > k) <= 1e-6 for the k
    # below; coverage misses likewise at α = 0.05. False-failure probability <= 2e-6 in all.
    est, truth, _ = _releases(pd.DataFrame({"x": VOCAB}), 0.5, 0.5, 400, seed=90, bounds=(0.0, 10.0))
    assert truth == 5.0
    assert np.sum(est.high - est.low > 2.0) <= stats.binom.isf(1e-6, 400, 0.02)
    assert np.sum((est.low > truth) | (est.high < truth)) <= stats.binom.isf(1e-6, 400, 0.05)
    assert np.all((est.low <= est.value) & (est.value <= est.high))


def test_intervals_are_narrower_than_the_bounds_for_a_few_hundred_rows():
    # The reported case: 545 rows per group, ε = 1/4 per aggregate, values in [0, 4]. Statistical,
    # seeded: on continuous data a run is narrower than 80% of the bounds unless a candidate fails
    # its check (about 1% per end, bench/quantile_coverage.py) or the margin passes the data's
    # ends; P(Binomial(100, 0.8) < 50) < 1e-10 at the least likely rate allowed here.
    rng = rng_for_tests(40)
    frame = pd.DataFrame({"x": rng.normal(1.65, 0.53, size=545)})
    est, _, step = _releases(frame, 0.5, 0.25, 100, seed=41, bounds=(0.0, 4.0))
    assert rank_margin(step, 0.05) < 0.5 * 545
    assert np.sum(est.high - est.low < 0.8 * 4.0) >= 50


def test_audit_passes_on_neighbouring_tied_data():
    # The auditor on the released point for a tied data set and the same plus one row on the tie:
    # alpha=1e-6, so a correct claim is refuted with probability at most 1e-6.
    step = _plan(0.5, 1, epsilon=2.0)
    d0 = np.array([10] * 6 + [20] * 5 + [40] * 4)
    d1 = np.append(d0, 20)
    runs = [group_runs(CELLS, whole_grid(d), 0) for d in (d0, d1)]

    def mechanism(which: int, size: int, rng) -> np.ndarray:
        r, t = runs[which], 0.5 * (d0.size + which)
        return np.array([draw(step, "value", r, t, lambda: r, rng=rng) for _ in range(size)])

    claim = step.parts["value"].mechanism.guarantee.epsilon
    ok = bdp_root.audit(mechanism, 0, 1, epsilon=claim, samples=10_000, alpha=1e-6,
                        rng=rng_for_tests(52))
    assert ok.passed, ok


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

    import bayesdp.tables.quantiles as qt

    wide = qt.cells_of

    def narrow(step, alpha):
        return dataclasses.replace(wide(step, alpha), margin=1.0)

    monkeypatch.setattr(qt, "cells_of", narrow)
    rng = rng_for_tests(3)
    frame = pd.DataFrame({"u": np.arange(2000), "x": rng.uniform(0, 100, size=2000)})
    q = bdp.table(frame, "u").agg(p=bdp.quantile("x", 0.5, bounds=(0, 100)))
    calls = []
    engine = q.table.engine
    real = engine.aggregate
    monkeypatch.setattr(engine, "aggregate", lambda req: calls.append(req.cells) or real(req))
    out = q.release(0.05, rng=rng_for_tests(4)).to_pandas().iloc[0]
    assert len(calls) == 2 and calls[1][0].margin == qt.FULL_GRID
    assert 0 <= out["p_low"] <= out["p"] <= out["p_high"] <= 100


@pytest.mark.parametrize(("part", "spacing"), [("value", (0, 0)), ("value", (0, 5, 7)), ("low", (1, 1)),
                                               ("high", (1, 1, 4, 4))])
def test_draws_for_many_groups_follow_the_mechanism(part, spacing):
    # Statistical, seeded; false-failure probability 1e-7 per case. 20,000 groups holding the same
    # tied values draw at once; their draws must follow the exact probabilities (chi-square over
    # the candidates). A good share of the mass sits in runs the envelope counts as far, which are
    # proposed less often and kept more often: a wrong correction there shows.
    rng = rng_for_tests(13)
    values = rng.choice(rng.choice(CELLS + 1, size=5, replace=False), size=200)
    step = _plan(0.5, 1, epsilon=0.2)
    mech = step.parts[part].mechanism
    n, target = 20_000, 100.0
    runs = window_runs(CELLS, whole_grid(values), np.zeros(n, dtype=np.int64))
    one = group_runs(CELLS, whole_grid(values), 0)
    scores = run_scores(one, target, mech.scale, spacing)
    gaps = (scores.max() - scores[np.isfinite(scores)]) / mech.scale
    far = _run_probabilities(mech, scores)[np.isfinite(scores)][gaps > np.log1p(gaps.size)].sum()
    assert far > 0.05
    got = draws(step, part, runs, np.full(n, target), _unused, spacing, rng=rng)
    expected = _probabilities(values, target, mech, spacing)
    candidates = np.flatnonzero(_weights(spacing))
    observed = np.bincount(np.searchsorted(candidates, got), minlength=candidates.size)
    assert np.isin(got, candidates).all()
    keep = expected * n >= 5  # the rare candidates pooled (none here for the low end)
    o, e = observed[keep], expected[keep] * n
    if not keep.all():
        o, e = np.append(o, observed[~keep].sum()), np.append(e, expected[~keep].sum() * n)
    statistic = float(((o - e) ** 2 / e).sum())
    assert statistic < stats.chi2.isf(1e-7, o.size - 1)


@pytest.mark.parametrize("kind", ["uniform", "gamma", "integers"])
def test_the_previews_quantile_bound_holds(kind):
    # Statistical, seeded. The preview's half-width (quantile levels) bounds how far each interval
    # end lies from q·n when its first candidate is kept, with probability >= 1 - α per end: on
    # continuous data (where the first candidate is kept but in about 1.5% of ends) 300 releases
    # exceed it at most binom.isf(1e-6, 300, 0.05) times (false-failure probability < 1e-6).
    # ±rank_margin alone was exceeded in most runs. On integers q·n can sit at the start of a tie
    # block, the first candidate fails and the far one holds the end: every end not at a bound
    # lies within the far reach (far_margin plus scale·ln(2M/α)), as often.
    g = rng_for_tests(80)
    n = 20_000
    x = {"uniform": g.uniform(0, 100, n), "gamma": g.gamma(3.0, 8.0, n),
         "integers": g.integers(0, 100, n).astype(np.float64)}[kind]
    frame = pd.DataFrame({"x": x})
    est, _, step = _releases(frame, 0.5, 1.0, 300, seed=81)
    stated = bdp.table(frame, None).agg(p=bdp.quantile("x", 0.5, bounds=(0, 100))).preview(
        1.0, group_size=n).iloc[0]["half_width"]
    cells = grid_cells(0.0, 100.0)
    reach = (far_margin(step, 0.05) + step.parts["low_far"].scale * np.log(2 * (cells + 1) / 0.05)) / n
    xs = np.sort(x)
    below = (n / 2 - np.searchsorted(xs, est.low, "left")) / n
    above = (np.searchsorted(xs, est.high, "right") - n / 2) / n
    kept = (est.low > 0) & (est.high < 100)
    far = np.maximum(below, above)[kept]
    assert np.sum(far > reach) <= stats.binom.isf(1e-6, 300, 0.05)
    if kind != "integers":
        assert np.sum(far > stated) <= stats.binom.isf(1e-6, 300, 0.05)


def _bursts(n: int, rng) -> pd.DataFrame:
    """Timestamps (seconds) in 40 bursts of about an hour at random times in 2015-2020."""
    starts = rng.uniform(1.42e9, 1.58e9, size=40)
    return pd.DataFrame({"x": starts[rng.integers(0, 40, size=n)] + rng.exponential(600.0, size=n)})


def test_clustered_data_ends_do_not_fall_back_to_the_bounds():
    # Statistical, seeded. The median of timestamps in bursts under bounds spanning 63 years, at
    # ε = 0.1: a first candidate aimed inside a burst lands in the empty stretch after it, past
    # q·n, and fails its check; the far candidate is kept instead. An end falls back to a bound
    # in at most binom.isf(1e-6, 100, 0.1) of 100 runs unless a run's chance exceeds 10% (it was
    # 99%; uniform data: 2-4%), false-failure probability < 1e-6; coverage as above (MISSES for
    # 100 runs).
    frame = _bursts(50_000, rng_for_tests(91))
    bounds = (0.0, 2.0e9)
    est, truth, _ = _releases(frame, 0.5, 0.1, 100, seed=91, bounds=bounds)
    at_bound = (est.low == bounds[0]) | (est.high == bounds[1])
    assert np.sum(at_bound) <= stats.binom.isf(1e-6, 100, 0.1)
    assert np.sum((est.low > truth) | (est.high < truth)) <= stats.binom.isf(1e-6, 100, 0.05)
    assert np.all((est.low <= est.value) & (est.value <= est.high))
