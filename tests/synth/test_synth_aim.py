"""AIM and its graphical model: exact junction-tree inference, Private-PGM fitting, sampling,
selection beyond a tree, the full table on small domains, and the composed spend."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from synth_stats import within_binomial

from bayesdp import rng_for_tests
from bayesdp.privacy import Guarantee, Ledger
from bayesdp.synth import synthesize
from bayesdp.synth.aim import Spend, _Triangulated, aim
from bayesdp.synth.budget import rho_for
from bayesdp.synth.measure import Data
from bayesdp.synth.metrics import marginal_tvd
from bayesdp.synth.pgm import (
    Estimate,
    MaskCells,
    Measurement,
    adjacency,
    calibrate,
    eliminate,
    fit,
    junction_tree,
)

SIZES = (3, 2, 4, 3, 2)
# A cycle 0-1-2-3-0 and a chord-free tail: the graph needs triangulation.
CLIQUES = [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4), (0,), (1,), (2,), (3,), (4,)]


def brute_joint(theta: dict[tuple[int, ...], np.ndarray]) -> np.ndarray:
    log = np.zeros(SIZES)
    for r, t in theta.items():
        log = log + t.reshape([SIZES[a] if a in r else 1 for a in range(len(SIZES))])
    p = np.exp(log - log.max())
    return p / p.sum()


def test_junction_tree_inference_is_exact():
    rng = rng_for_tests(81)
    theta = {r: rng.normal(0, 1.5, [SIZES[a] for a in r]) for r in CLIQUES}
    jt = junction_tree(SIZES, CLIQUES)
    for r in CLIQUES:  # every clique sits in a maximal clique; running intersection holds
        assert any(set(r) <= set(c) for c in jt.cliques)
    est = Estimate(jt, theta, calibrate(jt, theta), 1.0)
    joint = brute_joint(theta)
    for a, b in itertools.combinations(range(len(SIZES)), 2):
        exact = joint.sum(axis=tuple(k for k in range(len(SIZES)) if k not in (a, b)))
        np.testing.assert_allclose(est.pair(a, b), exact, atol=1e-12)
        np.testing.assert_allclose(est.pair(b, a), exact.T, atol=1e-12)


def test_fit_reproduces_consistent_marginals():
    # Exact marginals of a table with tiny variance: the fitted model must match them all.
    rng = rng_for_tests(82)
    x = np.column_stack([rng.integers(0, k, 4000) for k in SIZES])
    x[:, 1] = (x[:, 0] + x[:, 3]) % 2  # dependence around the cycle
    meas = []
    for r in CLIQUES:
        t = np.zeros([SIZES[a] for a in r])
        np.add.at(t, tuple(x[:, a] for a in r), 1)
        meas.append(Measurement(r, t, 1e-4))
    est = fit(SIZES, meas, iters=400)
    assert est.n_hat == pytest.approx(4000)
    for m in meas:
        np.testing.assert_allclose(est.n_hat * est.marginal(m.clique), m.y, atol=0.5)


def random_model(seed: int) -> Estimate:
    rng = rng_for_tests(seed)
    theta = {r: rng.normal(0, 1.0, [SIZES[a] for a in r]) for r in CLIQUES}
    jt = junction_tree(SIZES, CLIQUES)
    return Estimate(jt, theta, calibrate(jt, theta), 1.0)


def test_samples_follow_the_model():
    # 100,000 draws: every cell of every 2-way table within its binomial band (false failure
    # <= 2e-7 per table, synth_stats).
    est = random_model(83)
    k = 100_000
    for iid in (True, False):
        s = est.sample(k, rng=rng_for_tests(84), iid=iid)
        for a, b in itertools.combinations(range(len(SIZES)), 2):
            counts = np.bincount(s[:, a] * SIZES[b] + s[:, b], minlength=SIZES[a] * SIZES[b])
            assert within_binomial(counts, k, est.pair(a, b)), (a, b, iid)


def test_rounded_samples_are_closer_to_the_model_than_iid_draws():
    # Deterministic given the seeds: the root clique gets ⌊k·p⌋ or ⌈k·p⌉ records per cell, and
    # every 2-way table lies closer to the model than i.i.d. draws' (mean TVD).
    est = random_model(85)
    jt = est.jt
    k = 2_000

    def tvd(s: np.ndarray) -> float:
        return float(np.mean([0.5 * np.abs(np.bincount(s[:, a] * SIZES[b] + s[:, b],
                                                       minlength=SIZES[a] * SIZES[b]) / k
                                           - est.pair(a, b).ravel()).sum()
                              for a, b in itertools.combinations(range(len(SIZES)), 2)]))

    rounded = est.sample(k, rng=rng_for_tests(86))
    root = jt.cliques[jt.order[0]]
    counts = np.zeros([SIZES[a] for a in root])
    np.add.at(counts, tuple(rounded[:, a] for a in root), 1)
    assert np.all(np.abs(counts - k * est.beliefs[jt.order[0]]) < 1.0)
    assert tvd(rounded) < 0.5 * tvd(est.sample(k, rng=rng_for_tests(86), iid=True))


def latent_table(n: int, columns: int, levels: int, keep: float, seed: int) -> pd.DataFrame:
    """Noisy copies of one hidden variable: every pair is dependent, no tree explains them."""
    rng = rng_for_tests(seed)
    z = rng.integers(0, levels, n)
    cols = {f"c{j}": np.where(rng.random(n) < keep, z, rng.integers(0, levels, n))
            for j in range(columns)}
    return pd.DataFrame({k: v.astype(str) for k, v in cols.items()})


def pair_error(syn, table: pd.DataFrame, domain: dict[str, list[str]]) -> float:
    """Mean TVD of the model's exact 2-way marginals from the table's."""
    out = []
    for a, b in itertools.combinations(table.columns, 2):
        real = pd.crosstab(table[a], table[b]).reindex(
            index=domain[a], columns=domain[b], fill_value=0).to_numpy() / len(table)
        out.append(0.5 * np.abs(syn.marginal([a, b]) - real).sum())
    return float(np.mean(out))


def test_aim_selects_beyond_a_tree_and_beats_mst():
    # 5 columns of 5 levels (3,125 cells, more than the full-table rule allows at this n·ρ):
    # AIM keeps more pairs than a tree has edges, and its 2-way marginals are closer than MST's.
    table = latent_table(10_000, 5, 5, 0.6, 85)
    domain = {c: [str(v) for v in range(5)] for c in table.columns}
    a = synthesize(table, 2.0, 1e-9, domain=domain, method="aim", rng=rng_for_tests(86))
    m = synthesize(table, 2.0, 1e-9, domain=domain, method="mst", rng=rng_for_tests(87))
    assert len(a.edges) > len(table.columns) - 1
    assert pair_error(a, table, domain) < 0.7 * pair_error(m, table, domain)


def test_small_domain_is_within_twice_the_noisy_full_table():
    # 4 columns of 4 levels (256 cells) and 100,000 rows at ε = 1: the domain is small against
    # n·ρ, so MST measures the full table. Sampled 2-way TVD within 2x that of the full table
    # with Laplace(1/ε) noise (the pure-DP reference), each sampled to n rows.
    table = latent_table(100_000, 4, 4, 0.5, 88)
    domain = {c: [str(v) for v in range(4)] for c in table.columns}
    syn = synthesize(table, 1.0, 1e-9, domain=domain, rng=rng_for_tests(89))
    ours = np.mean(list(marginal_tvd(table, syn.sample(len(table), rng=rng_for_tests(90))).values()))
    rng = rng_for_tests(91)
    codes = np.column_stack([table[c].astype(int) for c in table.columns])
    counts = np.bincount(np.ravel_multi_index(codes.T, (4,) * 4), minlength=256).astype(float)
    noisy = np.maximum(counts + rng.laplace(0, 1.0, counts.size), 0)
    draw = np.array(np.unravel_index(rng.choice(256, len(table), p=noisy / noisy.sum()), (4,) * 4)).T
    full = pd.DataFrame(draw.astype(str), columns=table.columns)
    reference = np.mean(list(marginal_tvd(table, full).values()))
    assert ours <= 2.0 * reference, (ours, reference)


def test_aim_spends_exactly_its_budget_in_composed_steps(tmp_path):
    table = latent_table(5_000, 5, 5, 0.6, 92)
    codes = np.column_stack([table[c].astype(int) for c in table.columns])
    rho = rho_for(1.0, 1e-9)
    spend = Spend()
    aim(Data(codes, [5] * 5), rho, 1.0, 1.0, rng_for_tests(93), spend)
    assert spend.rho == pytest.approx(rho, rel=1e-9)
    kinds = [w.split()[0] for w, _ in spend.steps]
    assert kinds[0] == "1-way" and kinds.count("select") == kinds.count("measure") >= 1
    # each round selects, then measures the pair it selected
    assert all(a == "select" and b == "measure" for a, b in zip(kinds[1::2], kinds[2::2], strict=True))
    ledger = Ledger(tmp_path / "ledger.db", budget=Guarantee(2.0, delta=1e-6), accounting="zcdp")
    syn = synthesize(table, 1.0, 1e-9, domain={c: [str(v) for v in range(5)] for c in table.columns},
                     method="aim", ledger=ledger, rng=rng_for_tests(94))
    assert syn.guarantee.rho == pytest.approx(rho)
    assert ledger.spent().rho == pytest.approx(rho)


def test_warm_fit_resumes_from_the_last_step():
    # One AIM round: a model fitted for 15 steps, then a new pair measured. Five warm steps
    # resuming from the last accepted step move that pair's marginal at least 90% of the way to
    # the converged fit's (restarting from 1/L moves it 64%). Deterministic given the seed.
    rng = rng_for_tests(95)
    x = np.column_stack([rng.integers(0, k, 20_000) for k in SIZES])
    x[:, 1] = (x[:, 0] + x[:, 3]) % 2
    x[:, 4] = np.where(rng.random(20_000) < 0.8, x[:, 2] % 2, x[:, 4])

    def measure(r):
        t = np.zeros([SIZES[a] for a in r])
        np.add.at(t, tuple(x[:, a] for a in r), 1)
        return Measurement(r, t + rng.normal(0, 30, t.shape), 900.0)

    meas = [measure(r) for r in [(0,), (1,), (2,), (3,), (4,), (0, 1), (1, 2)]]
    new = measure((2, 4))
    est = fit(SIZES, meas, iters=15)
    conv = fit(SIZES, [*meas, new], iters=2000)
    warm = fit(SIZES, [*meas, new], warm=est.theta, step=est.step, iters=5)
    before = est.n_hat * est.pair(2, 4)
    moved = np.abs(warm.n_hat * warm.marginal((2, 4)) - before).sum()
    assert moved >= 0.9 * np.abs(conv.n_hat * conv.marginal((2, 4)) - before).sum()


def test_aim_rounds_get_an_eighth_of_the_budget_per_column():
    # T = 8d rounds: the first (1-way) round measures d marginals at 0.9ρ/T each, 0.9ρ/8 in all,
    # and the first selection costs 0.1ρ/T (Alg. 2's split). Deterministic.
    table = latent_table(5_000, 5, 5, 0.6, 96)
    codes = np.column_stack([table[c].astype(int) for c in table.columns])
    rho = rho_for(1.0, 1e-9)
    spend = Spend()
    aim(Data(codes, [5] * 5), rho, 1.0, 1.0, rng_for_tests(97), spend)
    (first, r1), (select, r2) = spend.steps[:2]
    assert first == "1-way marginals" and r1 == pytest.approx(0.9 * rho / 8)
    assert select.startswith("select") and r2 == pytest.approx(0.1 * rho / 40)


def test_model_size_filter_matches_a_fresh_triangulation():
    # _Triangulated resumes G + ab's elimination from G's; it must give the size a full
    # triangulation of G + ab gives, for every pair, on graphs with fill-in and size-1 columns.
    rng = rng_for_tests(91)
    checked = 0
    for _ in range(300):
        d = int(rng.integers(2, 13))
        sizes = tuple(int(k) for k in rng.choice([1, 2, 3, 5, 8, 17], d))
        pairs = list(itertools.combinations(range(d), 2))
        measured = [pairs[k] for k in rng.permutation(len(pairs))[: int(rng.integers(0, 2 * d))]]
        mask_cells = MaskCells(sizes)
        tri = _Triangulated(mask_cells, measured, d)
        for a, b in pairs:
            size = sum(mask_cells[c] for c in eliminate(mask_cells, adjacency(d, [*measured, (a, b)])))
            for limit in (size - 1, size, float(rng.choice([20, 200, 2000]))):
                assert tri.fits(a, b, limit) == (size <= limit)
                checked += 1
    assert checked > 10_000


def test_pair_marginals_are_exact_on_a_wider_model():
    # Eight columns, pairs and triples in a loop: separators that share columns with the pair
    # or the next separator, so the walk's batched products are exercised.
    sizes = (2, 3, 2, 3, 2, 3, 2, 2)
    cliques = [(0, 1, 2), (2, 3), (3, 4, 5), (5, 6), (6, 7), (0, 7), (1, 4), (2, 5, 6),
               *[(a,) for a in range(8)]]
    rng = rng_for_tests(92)
    theta = {r: rng.normal(0, 1.5, [sizes[a] for a in r]) for r in cliques}
    jt = junction_tree(sizes, cliques)
    est = Estimate(jt, theta, calibrate(jt, theta), 1.0)
    log = sum(t.reshape([sizes[a] if a in r else 1 for a in range(8)]) for r, t in theta.items())
    joint = np.exp(log - log.max())
    joint /= joint.sum()
    for a, b in itertools.combinations(range(8), 2):
        exact = joint.sum(axis=tuple(k for k in range(8) if k not in (a, b)))
        np.testing.assert_allclose(est.pair(a, b), exact, atol=1e-12)
