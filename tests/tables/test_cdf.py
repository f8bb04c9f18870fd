"""The hierarchical CDF: exact least squares and spreads, accuracy against a flat histogram,
coverage of range and quantile intervals, the guarantee and its audit, bad input."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesdp as bdp
from bayesdp import audit
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.mechanisms import DiscreteLaplace
from bayesdp.privacy import Guarantee, Ledger
from bayesdp.tables.cdf import Cdf, CdfRelease
from bayesdp.tables.cdf.tree import Tree
from bayesdp.tables.estimate import estimate


def _incidence(tree: Tree) -> np.ndarray:
    rows = []
    for s in tree.sizes:
        for m in range(tree.padded // s):
            r = np.zeros(tree.padded)
            r[m * s:(m + 1) * s] = 1
            rows.append(r)
    return np.array(rows)


@pytest.mark.parametrize(("bins", "branching"), [(10, 3), (16, 2), (7, 16), (1, 16), (27, 3)])
def test_consistent_leaves_and_spreads_are_the_least_squares_ones(bins, branching):
    tree = Tree(bins, branching)
    a = _incidence(tree)
    assert a.shape == (tree.nodes, tree.padded)
    noisy = np.random.default_rng(1).normal(size=(3, tree.nodes))
    assert np.allclose(tree.consistent(noisy), np.linalg.lstsq(a, noisy.T, rcond=None)[0].T[:, :bins])
    inverse = np.linalg.inv(a.T @ a)
    start = np.array([0, 1 % bins, bins // 2, bins - 1, 0])
    stop = np.array([bins, min(3, bins), bins, bins, 1])
    norm2, top = tree.weights(start, stop)
    for i, (s, e) in enumerate(zip(start, stop, strict=True)):
        c = np.zeros(tree.padded)
        c[s:e] = 1
        w = a @ inverse @ c
        assert norm2[i] == pytest.approx(c @ inverse @ c) and top[i] >= np.abs(w).max() - 1e-12
    leaves = np.random.default_rng(2).integers(0, 9, size=(2, bins))
    assert np.allclose(tree.consistent(tree.counts(leaves)), leaves)  # no noise: exact


def test_the_tree_has_the_depth_it_is_charged_for():
    tree = Tree(4096, 16)
    assert (tree.depth, tree.nodes) == (3, 4096 + 256 + 16)
    # The weight bound is attained: by the leaf of a one-bin range, 1 + μ_1/16 + μ_2/256.
    assert tree.top == pytest.approx(1 + (1 / 17 - 1) / 16 + (1 / 273 - 1 / 17) / 256)
    plan = bdp.table({"u": np.arange(4), "v": np.ones(4)}, "u").cdf(
        "v", bounds=(0, 1), bins=4096).plan(1.0, max_rows_per_group=2)
    part = plan.steps["cdf"].parts["tree"]
    assert part.sensitivity == 6 and part.scale == 6.0  # depth 3 x 2 rows, ε = 1
    assert plan.guarantee == Guarantee(1.0, unit="u")


VALUES = np.random.default_rng(7).normal(50.0, 15.0, 100_000)


def test_wide_ranges_are_several_times_more_accurate_than_a_flat_histogram():
    # 100,000 values, 4,096 bins, ε = 1; 40 ranges of 2,048 to 4,000 bins, 8 releases of each.
    # Exact variances (tree.weights): the flat sum's error is 3.5 to 4 times the tree's (RMS);
    # a ratio under 2.5 over 320 errors each has probability far below 1e-6.
    t = bdp.table({"v": VALUES}, None)
    edges = np.linspace(0, 100, 4097)
    exact = np.histogram(np.clip(VALUES, 0, 100), edges)[0]
    gen = np.random.default_rng(3)
    start = gen.integers(0, 4096 - 2048, size=40)
    stop = np.minimum(start + gen.integers(2048, 4001, size=40), 4096)
    truth = np.array([exact[a:b].sum() for a, b in zip(start, stop, strict=True)])
    tree_err, flat_err = [], []
    for seed in range(8):
        r = t.cdf("v", bounds=(0, 100), bins=4096).release(1.0, rng=bdp.rng_for_tests(seed))
        tree_err += [r.range(edges[a], edges[b])[0] - x for a, b, x in zip(start, stop, truth, strict=True)]
        # The flat bins unclamped (a release clamps them at 0, which biases wide sums further).
        counts = DiscreteLaplace(1.0).release(exact, rng=bdp.rng_for_tests(100 + seed))
        flat_err += [counts[a:b].sum() - x for a, b, x in zip(start, stop, truth, strict=True)]
    ratio = math.sqrt(np.mean(np.square(flat_err)) / np.mean(np.square(tree_err)))
    assert ratio > 2.5, ratio


def _grouped_release(noise: str, groups: int, *, seed: int) -> tuple[CdfRelease, pd.DataFrame]:
    gen = np.random.default_rng(seed)
    df = pd.DataFrame({"g": np.repeat(np.arange(groups), 150),
                       "v": np.round(gen.gamma(3.0, 8.0, size=groups * 150))})
    q = bdp.table(df, None).group_by("g", keys=list(range(groups))).cdf("v", bounds=(0, 64), bins=64,
                                                                       branching=4)
    delta = 1e-6 if noise == "gaussian" else 0.0
    return q.release(0.5, delta, noise=noise, alpha=0.05, rng=bdp.rng_for_tests(seed)), df


def _misses_allowed(trials: int, alpha: float) -> int:
    """Most misses of intervals covering at >= 1 - α, but for probability 1e-6."""
    return int(stats.binom.isf(1e-6, trials, alpha))


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_range_and_quantile_intervals_cover(noise):
    # 3,000 groups: 3,000 independent trees; each range's misses, and the quantile band's
    # (all of q = 0.1, ..., 0.9 at once), stay under the 1e-6 binomial quantile at α = 0.05.
    r, df = _grouped_release(noise, 3000, seed=11)
    clipped = df.assign(v=df["v"].clip(0, 64))
    for a, b in [(0, 64), (10, 30), (17, 18), (40, 64)]:
        # The last bin is closed: it holds the values clipped to 64.
        inside = (clipped["v"] >= a) & ((clipped["v"] < b) | (b == 64))
        truth = inside.groupby(clipped["g"]).sum().reindex(range(3000), fill_value=0).to_numpy()
        got = r.range(a, b)
        missed = ((truth < got["low"]) | (truth > got["high"])).sum()
        assert missed <= _misses_allowed(3000, 0.05), (a, b, missed)
    qs = np.arange(1, 10) / 10
    found = r.quantiles(qs)
    ok = np.ones(3000, dtype=bool)
    for q in qs:
        exact = clipped.groupby("g")["v"].quantile(q, interpolation="lower").to_numpy()
        row = found[found["q"] == q]
        ok &= (row["low"].to_numpy() <= exact) & (exact <= row["high"].to_numpy())
    assert (~ok).sum() <= _misses_allowed(3000, 0.05)


def test_release_answers_ranges_quantiles_and_the_frame():
    r = bdp.table({"v": VALUES}, None).cdf("v", bounds=(0, 100), bins=4096).release(
        1.0, rng=bdp.rng_for_tests(5))
    est, low, high = r.range(20, 35)
    assert low <= est <= high and abs(est - ((VALUES >= 20) & (VALUES < 35)).sum()) < 200
    value, qlow, qhigh = r.quantile(0.5)
    assert qlow <= value <= qhigh and abs(value - np.median(VALUES)) < 0.5
    frame = r.to_pandas()
    assert list(frame.columns) == ["bin_low", "bin_high", "count", "count_low", "count_high",
                                   "cumulative", "cumulative_low", "cumulative_high"]
    assert len(frame) == 4096 and np.allclose(frame["cumulative"], np.cumsum(frame["count"]))
    assert r.range()[0] == pytest.approx(frame["count"].sum())
    assert r.range(30, 30) == (0.0, 0.0, 0.0)


def test_grouped_private_keys_release_one_tree_per_group():
    df = pd.DataFrame({"user": np.arange(6000), "g": np.repeat(["a", "b", "c"], 2000),
                       "v": np.tile(np.arange(2000) % 100, 3)})
    r = bdp.table(df, "user").group_by("g").cdf("v", bounds=(0, 100), bins=100).release(
        1.0, 1e-6, max_groups_per_unit=1, rng=bdp.rng_for_tests(8))
    assert sorted(r.keys["g"]) == ["a", "b", "c"]
    counts = r.range(0, 50)
    assert list(counts.columns) == ["g", "estimate", "low", "high"]
    assert np.all(np.abs(counts["estimate"] - 1000) < 100)
    assert len(r.quantiles([0.25, 0.75])) == 6


def test_release_spends_once_in_the_ledger(tmp_path):
    led = Ledger(tmp_path / "budget.db", budget=Guarantee(1.5, unit="row"))
    r = bdp.table({"v": VALUES[:1000]}, None).cdf("v", bounds=(0, 100), bins=256).release(1.0, ledger=led)
    r.range(10, 20), r.quantiles([0.1, 0.9]), r.to_pandas()  # post-processing: free
    assert led.spent().epsilon == pytest.approx(1.0)


def test_bad_input_is_refused_before_anything_is_spent():
    t = bdp.table({"v": VALUES[:100]}, None)
    with pytest.raises(InvalidParameter, match="branching"):
        t.cdf("v", bounds=(0, 1), bins=8, branching=1)
    with pytest.raises(InvalidParameter, match="bounds"):
        t.cdf("v", bins=8)
    with pytest.raises(DataError, match="not a column"):
        t.cdf("w", bounds=(0, 1))
    r = t.cdf("v", bounds=(0, 100), bins=8).release(1.0, rng=bdp.rng_for_tests(1))
    with pytest.raises(InvalidParameter, match="q"):
        r.quantile(1.0)
    with pytest.raises(InvalidParameter, match="b=10"):
        r.range(50, 10)


def _mechanism(sensitivity_forgets_depth: bool):
    # One row in bin 0 of 4 (branching 2: depth 2) added to the neighbour; the output is the
    # consistent count of bin 0, one entry per tree.
    agg = Cdf("v", bounds=(0.0, 4.0), edges=(0.0, 1.0, 2.0, 3.0, 4.0), branching=2)

    def run(which: int, size: int, rng: np.random.Generator) -> np.ndarray:
        values = [0.5, 1.5, 2.5, 3.5] + [0.5] * which
        q = bdp.table({"v": np.array(values)}, None).agg(cdf=agg)
        plan = q.plan(1.0)
        if sensitivity_forgets_depth:
            plan = bdp.table({"v": np.array(values)}, None).agg(
                cdf=bdp.histogram("v", [0.0, 1.0, 2.0, 3.0, 4.0])).plan(1.0)
            step = plan.steps["cdf"]
            plan.steps["cdf"] = type(step)("cdf", agg, step.epsilon, step.rho,
                                           {"tree": step.parts["counts"]}, step.max_rows)
        exact = q.table.engine.aggregate(q._request(plan, 0.05, 1))
        est = estimate(plan.steps["cdf"], exact, np.zeros(size, dtype=np.int64), 0.05, rng=rng)
        return est.value[:, 0]

    return run


def test_the_tree_passes_its_audit_and_one_charged_for_one_level_fails():
    ok = audit(_mechanism(False), 0, 1, epsilon=1.0, samples=100_000, alpha=1e-6,
               rng=bdp.rng_for_tests(3))
    assert ok.passed, ok
    # Noise scaled to one level instead of two: the same claim is refuted (confidence 1 - 1e-6).
    bad = audit(_mechanism(True), 0, 1, epsilon=1.0, samples=100_000, alpha=1e-6,
                rng=bdp.rng_for_tests(4))
    assert not bad.passed and bad.epsilon_lower > 1.0


def test_neighbouring_tables_differ_only_in_the_released_values():
    # Security pair: one unit (with rows in two groups' end bins and outside the bounds) added:
    # the same shape, columns, keys and quantile levels; only the numbers differ.
    base = pd.DataFrame({"u": np.arange(300), "g": np.tile(["a", "b", "c"], 100),
                         "v": np.arange(300) % 50})
    extra = pd.DataFrame({"u": [999, 999, 999], "g": ["a", "b", "z"], "v": [-5.0, 70.0, np.nan]})
    out = []
    for df in (base, pd.concat([base, extra])):
        q = bdp.table(df, "u").group_by("g", keys=["a", "b", "c"]).cdf("v", bounds=(0, 50), bins=50)
        r = q.release(1.0, max_groups_per_unit=2, rng=bdp.rng_for_tests(6))
        out.append((r.to_pandas(), r.range(10, 20), r.quantiles([0.5])))
    for x, y in zip(out[0], out[1], strict=True):
        assert list(x.columns) == list(y.columns) and len(x) == len(y)
        assert x["g"].tolist() == y["g"].tolist()


def test_explain_and_the_frame_say_how_the_intervals_hold_and_what_each_column_is():
    df = pd.DataFrame({"u": np.arange(200), "g": np.tile(["a", "b"], 100),
                       "v": np.where(np.arange(200) % 7 == 0, np.nan, np.arange(200) % 10)})
    r = bdp.table(df, "u").group_by("g", keys=["a", "b"]).cdf("v", bounds=(0, 10), bins=10).release(
        1.0, max_groups_per_unit=1, rng=bdp.rng_for_tests(2))
    words = r.explain()
    assert "95%" in words and "hold for all quantiles together" in words
    assert "null values count in no bin" in words
    doc = CdfRelease.to_pandas.__doc__
    assert all(c in doc for c in r.to_pandas().columns if c != "g")


def test_a_range_between_edges_counts_the_bins_that_hold_it():
    # Integer values on unit bins: [2.2, 2.4) lies in the bin [2, 3), which holds 100 values; a
    # range rounded to the nearest edges would have been [2, 2), an exact-looking 0 ± 0.
    # On 0.1-wide float edges, 0.3 and 0.7 are edges although 0.1 * 3 != 0.3 in floats.
    r = bdp.table({"v": np.repeat(np.arange(10.0), 100)}, None).cdf(
        "v", bounds=(0, 10), bins=10).release(1.0, rng=bdp.rng_for_tests(3))
    assert r.range(2.2, 2.4) == r.range(2, 3) and r.range(2, 3)[1] > 0
    assert r.range(1.5, 4.01) == r.range(1, 5) and r.range(None, 0.5) == r.range(0, 1)
    assert r.range(2.2, 2.2) == (0.0, 0.0, 0.0)
    s = bdp.table({"v": np.linspace(0.05, 0.95, 10)}, None).cdf("v", bounds=(0, 1), bins=10).release(
        1.0, rng=bdp.rng_for_tests(4))
    assert s.range(0.3, 0.7) == s.range(s.edges[3], s.edges[7])
    assert s.range(0.3, 0.7) != s.range(s.edges[2], s.edges[7])


def test_quantile_and_quantiles_refuse_the_other_ones_argument_by_name():
    r = bdp.table({"v": VALUES[:100]}, None).cdf("v", bounds=(0, 100), bins=8).release(
        1.0, rng=bdp.rng_for_tests(1))
    with pytest.raises(InvalidParameter, match=r"qs=0.5 is not allowed: .*for one level, quantile\(q\)"):
        r.quantiles(0.5)
    with pytest.raises(InvalidParameter, match=r"qs='0\.5' is not allowed"):
        r.quantiles("0.5")
    with pytest.raises(InvalidParameter, match=r"q=\[0.1, 0.5\] is not allowed: .*quantiles\(\[...\]\)"):
        r.quantile([0.1, 0.5])
    assert len(r.quantiles(np.array([0.2, 0.4]))) == 2 and len(r.quantiles((0.5,))) == 1
