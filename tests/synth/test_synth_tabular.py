"""Synthetic tables: MST, AIM and independent synthesizers, accounting, schema, bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from synth_stats import within_binomial

from bayesdp import rng_for_tests
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.privacy import zcdp_epsilon
from bayesdp.synth import synthesize
from bayesdp.synth.budget import rho_for


def chain_table(n: int, sizes: list[int], seed: int) -> pd.DataFrame:
    """Columns c0 -> c1 -> ... drawn from a chain Bayesian network with random CPTs."""
    rng = rng_for_tests(seed)
    cols = {"c0": rng.integers(0, sizes[0], n)}
    for j in range(1, len(sizes)):
        cpt = rng.dirichlet(0.5 * np.ones(sizes[j]), size=sizes[j - 1])
        cdf = np.cumsum(cpt[cols[f"c{j - 1}"]], axis=1)
        cols[f"c{j}"] = np.minimum((rng.random(n)[:, None] > cdf).sum(axis=1), sizes[j] - 1)
    return pd.DataFrame({k: v.astype(str) for k, v in cols.items()})


SIZES = [2, 3, 4, 3, 2]
DOMAIN = {f"c{j}": [str(v) for v in range(k)] for j, k in enumerate(SIZES)}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return chain_table(6000, SIZES, 20)


@pytest.fixture(scope="module")
def mst(table):
    return synthesize(table, 1.0, 1e-9, domain=DOMAIN, rng=rng_for_tests(21))


def test_sampled_marginals_match_the_model(mst):
    # The correlation-breaking sampler bug (mbi#145) shows as samples far from the model's own
    # marginals. 100,000 rows, i.i.d. or rounded: every cell of every 2-way table within its
    # binomial band at 1e-7 / (cells x pairs) per side (Bonferroni), false failure <= 2e-7 per
    # table. Rounded, the tree's root column gets ⌊k·p⌋ or ⌈k·p⌉ rows per level.
    k = 100_000
    for iid in (True, False):
        df = mst.sample(k, rng=rng_for_tests(22), iid=iid)
        pairs = list(itertools.combinations(mst.columns, 2))
        for a, b in pairs:
            ia = pd.Categorical(df[a], categories=DOMAIN[a]).codes
            ib = pd.Categorical(df[b], categories=DOMAIN[b]).codes
            counts = np.bincount(ia * len(DOMAIN[b]) + ib, minlength=len(DOMAIN[a]) * len(DOMAIN[b]))
            model = mst.marginal([a, b])
            assert abs(model.sum() - 1) < 1e-9
            assert within_binomial(counts, k, model), (a, b, iid)
    root = mst.columns[mst.model.order[0]]
    counts = pd.Categorical(df[root], categories=DOMAIN[root]).value_counts().to_numpy()
    assert np.all(np.abs(counts - k * mst.marginal([root])) < 1.0)


def test_model_is_consistent_along_the_tree(mst):
    marg = mst.model.marginals()
    for a, b in itertools.combinations(range(len(SIZES)), 2):
        joint = mst.model.pair(a, b)
        np.testing.assert_allclose(joint.sum(axis=1), marg[a], atol=1e-9)
        np.testing.assert_allclose(joint.sum(axis=0), marg[b], atol=1e-9)
    assert len(mst.edges) == len(SIZES) - 1


def test_accounting_and_guarantee_travel_with_samples(mst):
    g = mst.guarantee
    assert g.rho == pytest.approx(rho_for(1.0, 1e-9))
    assert g.epsilon <= 1.0 + 1e-12 and g.delta == 1e-9 and g.relation == "add_remove"
    assert zcdp_epsilon(g.rho, 1e-9) == pytest.approx(1.0, rel=1e-9)
    assert g.rho > 0.0149  # the tight conversion: SmartNoise MST gets ρ = 0.01497 at (1, 1e-9)
    df = mst.sample(10, rng=rng_for_tests(23))
    assert df.attrs["guarantee"] == g
    assert "no further privacy cost" in df.attrs["explanation"]


def test_high_budget_recovers_the_tree_marginals(table):
    # At ε = 1e4 the noise sd on a 2-way cell is about 0.2 counts of 6000, so the model's kept
    # 2-way marginals equal the data's to within 1e-3 (20 sd of the cell noise, relative to n).
    syn = synthesize(table, 1e4, 1e-9, domain=DOMAIN, rng=rng_for_tests(24))
    for a, b in syn.edges:
        real = pd.crosstab(table[a], table[b]).reindex(index=DOMAIN[a], columns=DOMAIN[b],
                                                        fill_value=0).to_numpy() / len(table)
        np.testing.assert_allclose(syn.marginal([a, b]), real, atol=1e-3)


@pytest.mark.parametrize("method", ["aim", "independent"])
def test_other_methods(table, method):
    syn = synthesize(table, 1.0, 1e-9, domain=DOMAIN, method=method, rng=rng_for_tests(25))
    if method == "independent":
        assert syn.edges == ()
    else:  # 144 cells against n·ρ ≈ 90: AIM measures the full table, every pair kept
        assert len(syn.edges) == len(SIZES) * (len(SIZES) - 1) // 2
    df = syn.sample(500, rng=rng_for_tests(26))
    assert list(df.columns) == list(table.columns) and len(df) == 500
    assert syn.guarantee.epsilon <= 1.0 + 1e-12


def test_schema_numeric_and_integer_columns():
    rng = rng_for_tests(27)
    n = 3000
    data = pd.DataFrame({
        "age": rng.integers(18, 90, n),
        "score": rng.normal(0, 1, n),
        "group": rng.choice(["a", "b", "c"], n),
    })
    syn = synthesize(data, 2.0, 1e-6, bounds={"age": (18, 90), "score": (-4, 4)},
                     domain={"group": ["a", "b", "c"]}, bins=8, rng=rng)
    out = syn.sample(2000, rng=rng)
    assert dict(out.dtypes) == dict(data.dtypes)
    assert out["age"].between(18, 90).all() and out["score"].between(-4, 4).all()
    assert set(out["group"]) <= {"a", "b", "c"}
    assert syn.clipped == int((data["score"].abs() > 4).sum())


def test_domains_are_discovered_privately():
    # A level held by one record survives with probability <= δ/2 = 5e-10; levels held by 2,000
    # records clear the threshold (about 140 at ε = 1) except with probability far below 1e-9.
    rng = rng_for_tests(28)
    col = np.array(["x"] * 2000 + ["y"] * 2000 + ["rare"])
    data = pd.DataFrame({"a": col, "b": rng.permutation(col)})
    syn = synthesize(data, 1.0, 1e-9, rng=rng)
    assert syn.discovered == ("a", "b")
    assert [list(s.levels) for s in syn.specs] == [["x", "y"], ["x", "y"]]
    assert syn.dropped in (1, 2)
    assert syn.guarantee.delta == pytest.approx(1e-9) and syn.guarantee.epsilon <= 1.0 + 1e-12


def test_bad_input(table):
    nums = pd.DataFrame({"x": np.arange(10.0), "y": ["a", "b"] * 5})
    with pytest.raises(DataError, match=r"'x' is numeric and has no bounds.*bounds="):
        synthesize(nums, 1.0, domain={"y": ["a", "b"]})
    with pytest.raises(DataError, match="single value"):
        synthesize(nums, 1.0, bounds={"x": (0, 10)}, domain={"y": ["a"]})
    with pytest.raises(DataError, match="outside its declared domain"):
        synthesize(nums, 1.0, bounds={"x": (0, 10)}, domain={"y": ["a", "c"]}, strict=True)
    syn = synthesize(nums, 1.0, bounds={"x": (0, 10)}, domain={"y": ["a", "c"]},
                     rng=rng_for_tests(29))
    assert syn.dropped == 5
    with pytest.raises(InvalidParameter, match="bins"):
        synthesize(nums, 1.0, bounds={"x": (0, 10)}, domain={"y": ["a", "b"]}, bins=0)
    with pytest.raises(InvalidParameter, match="method"):
        synthesize(table, 1.0, domain=DOMAIN, method="gan")
    with pytest.raises(DataError, match="not in the data"):
        synthesize(table, 1.0, columns=["zz"])
    with pytest.raises(InvalidParameter, match="k"):
        synthesize(table, 1.0, domain=DOMAIN, rng=rng_for_tests(30)).sample(0)
    with pytest.raises(InvalidParameter, match="iid"):
        synthesize(table, 1.0, domain=DOMAIN, rng=rng_for_tests(30)).sample(5, iid="yes")


def test_rare_levels_are_merged_and_split_back_consistently():
    # Ten levels with 3 records each fall below 3σ (σ about 14 here) and are measured as one;
    # the model splits them back by their noisy counts. Sampled 1-way counts of the expanded
    # model stay within their binomial bands (1e-7 overall).
    rng = rng_for_tests(31)
    rare = [f"r{i}" for i in range(10)]
    col = np.concatenate([rng.choice(["a", "b"], 3000), np.repeat(rare, 3)])
    data = pd.DataFrame({"x": col, "y": np.where(np.isin(col, rare), "u", "v")})
    domain = {"x": ["a", "b", *rare], "y": ["u", "v"]}
    syn = synthesize(data, 1.0, 1e-9, domain=domain, rng=rng)
    assert syn.model.sizes == (12, 2)
    marg = syn.marginal(["x"])
    assert abs(marg.sum() - 1) < 1e-12 and (marg >= 0).all()
    k = 50_000
    out = syn.sample(k, rng=rng)
    counts = pd.Categorical(out["x"], categories=domain["x"]).value_counts().to_numpy()
    assert within_binomial(counts, k, marg)


def test_table_projection_is_the_least_squares_point():
    # Dykstra's projection against a direct solve of the same QP (SLSQP), on a small table
    # whose plain margin fit has negative cells.
    from scipy.optimize import minimize

    from bayesdp.synth.simplex import fit_margins, project_tables

    y = np.array([[5.0, -3.0, 1.0], [0.5, 4.0, -2.0]])
    rows, cols = np.array([3.0, 2.5]), np.array([2.0, 1.5, 2.0])
    assert fit_margins(y, rows, cols).min() < 0
    got = project_tables(y, rows, cols, iters=5000)
    cons = [{"type": "eq", "fun": lambda t: t.reshape(2, 3).sum(axis=1) - rows},
            {"type": "eq", "fun": lambda t: t.reshape(2, 3).sum(axis=0)[:2] - cols[:2]}]
    ref = minimize(lambda t: ((t - y.ravel()) ** 2).sum(), np.full(6, 0.9), method="SLSQP",
                   bounds=[(0, None)] * 6, constraints=cons, options={"ftol": 1e-14}).x
    np.testing.assert_allclose(got.ravel(), ref, atol=1e-6)
    assert got.min() >= 0


def test_explain_says_when_the_full_table_was_measured(table, mst):
    # 144 cells against n·ρ ≈ 90: AIM measures the whole table, and says so; MST's tree does not.
    full = synthesize(table, 1.0, 1e-9, domain=DOMAIN, method="aim", rng=rng_for_tests(25))
    text = full.explain()
    assert "full contingency table of c0, c1, c2, c3, c4 (144 cells)" in text
    assert "beyond the kept pairs" not in text
    assert "full contingency table" not in mst.explain() and "beyond the kept pairs" in mst.explain()


def test_explain_names_the_model_with_its_article(table, mst):
    assert mst.explain().startswith("Synthetic rows from an MST model of 5 columns")
    small = table.iloc[:500]
    for method, words in (("aim", "an AIM model"), ("independent", "a model of independent columns")):
        text = synthesize(small, 1.0, 1e-9, domain=DOMAIN, method=method, rng=rng_for_tests(26)).explain()
        assert text.startswith(f"Synthetic rows from {words} of 5 columns"), text[:60]
