"""MarkovQuiltMechanism: end-to-end privacy against every adversary, release, interval, errors."""

from __future__ import annotations

import numpy as np
import pytest
from correlated_oracle import chain_probabilities, leakage, sequences
from scipy import stats

from bayesdp import rng_for_tests
from bayesdp.correlated import (
    BayesianNetwork,
    ChainClass,
    MarkovChain,
    MarkovQuiltMechanism,
    dp_to_bdp,
)
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.privacy import Guarantee

EXAMPLE = [[0.9, 0.1], [0.2, 0.8]]


def scale_in_counts(mech: MarkovQuiltMechanism) -> float:
    """The Laplace scale actually used for a histogram, in counts."""
    assert mech.states is not None
    return mech.steps(mech.states, mech.grid <= 1.0) * mech.grid


@pytest.mark.parametrize(("notion", "eps", "length"), [
    ("pufferfish", 1.0, 6), ("pufferfish", 3.0, 6), ("bdp", 1.0, 5), ("bdp", 3.0, 5),
])
def test_calibrated_histogram_stays_within_e_eps(notion: str, eps: float, length: int) -> None:
    chain = MarkovChain(EXAMPLE)
    seqs = sequences(2, length)
    prob = chain_probabilities(chain.transition, chain.stationary, seqs)
    mech = MarkovQuiltMechanism(chain, length=length, epsilon=eps, notion=notion)
    assert mech.scale == pytest.approx(2 * mech.calibration.sigma)
    assert leakage(seqs, prob, 2, scale_in_counts(mech), notion) <= eps * (1 + 1e-12)
    # the oracle is sharp enough to fail: noise calibrated as if records were independent leaks
    assert leakage(seqs, prob, 2, 2.0 / eps, notion) > eps * 1.05


def test_three_states_worst_start() -> None:
    rng = rng_for_tests(3)
    chain = MarkovChain(rng.dirichlet(np.ones(3) * 2, size=3), initial="worst")
    seqs = sequences(3, 5)
    mech = MarkovQuiltMechanism(chain, length=5, epsilon=2.0)
    for q in (rng.dirichlet(np.ones(3)), np.array([0.98, 0.01, 0.01])):
        prob = chain_probabilities(chain.transition, q, seqs)
        assert leakage(seqs, prob, 3, scale_in_counts(mech), "pufferfish") <= 2.0 * (1 + 1e-12)


def test_any_dp_mechanism_meets_the_forward_bdp_level() -> None:
    chain = MarkovChain(EXAMPLE)
    seqs = sequences(2, 5)
    prob = chain_probabilities(chain.transition, chain.stationary, seqs)
    for eps_dp in (0.1, 0.5):
        bound = dp_to_bdp(eps_dp, chain, 5)
        seen = leakage(seqs, prob, 2, 2.0 / eps_dp, "bdp")  # histogram with ε'-DP Laplace noise
        assert eps_dp <= seen <= bound * (1 + 1e-12)


def test_release_distribution() -> None:
    chain = MarkovChain(EXAMPLE)
    mech = MarkovQuiltMechanism(chain, length=100, epsilon=1.0)
    seq = np.array([0] * 60 + [1] * 40)
    out = mech.release(seq, rng=rng_for_tests(4))
    assert out.shape == (2,) and np.all(np.isfinite(out))
    np.testing.assert_array_equal(mech.histogram([seq, seq[:30]]), [90, 40])
    # many i.i.d. noise draws through release_values: coverage of interval(α) is binomial
    n, alpha = 200_000, 0.1
    noise = mech.release_values(np.zeros(n), rng=rng_for_tests(5))
    half = mech.interval(alpha, size=n)
    inside = int(np.sum(np.abs(noise) <= half))
    # P(|Z| <= w) >= 1-α and is within one lattice step of it; 1e-7 binomial quantiles bound it
    low = stats.binom.ppf(1e-7, n, 1 - alpha)
    assert inside >= low
    assert inside <= stats.binom.isf(1e-7, n, 1 - alpha + 1e-4)
    # mean |noise| of a Laplace(b) is b; std of the mean is b/sqrt(n): a 5.3-sigma band (p < 1e-7)
    b = mech.steps(n, False) * mech.grid
    assert abs(np.mean(np.abs(noise)) - b) <= 5.3 * b / np.sqrt(n)


def test_guarantee_and_explain() -> None:
    chain = MarkovChain(EXAMPLE)
    mech = MarkovQuiltMechanism(chain, length=100, epsilon=1.0, notion="bdp")
    g = mech.guarantee
    assert (g.epsilon, g.delta, g.relation, g.unit) == (1.0, 0.0, "replace_one", "record")
    assert g != Guarantee(1.0, relation="replace_one", unit="record")  # not for independent records
    dep = g.dependence
    assert dep.notion == "bdp" and dep.length == 100 and "2-state" in dep.model
    assert str(g).endswith("Bayesian DP under a 2-state time-homogeneous Markov chain started from "
                           "its stationary distribution")
    text = g.explain()
    assert "Bayesian differential privacy" in text and "Markov chain" in text
    assert "stronger than the model" in text
    tight = MarkovQuiltMechanism(chain, length=15, epsilon=1.0)
    assert tight.calibration.trivial and "group privacy" in tight.guarantee.explain()
    approx = MarkovQuiltMechanism(ChainClass.bounds(0.3, 0.3), length=100, epsilon=1.0, method="approx")
    assert "eigengap" in approx.guarantee.dependence.model and approx.states is None
    half = MarkovQuiltMechanism(chain, length=100, epsilon=0.5, notion="bdp")
    assert (mech.guarantee + half.guarantee).epsilon == 1.5
    other = MarkovQuiltMechanism(MarkovChain([[0.8, 0.2], [0.2, 0.8]]), length=100, epsilon=1.0, notion="bdp")
    assert other.guarantee.dependence.model == g.dependence.model  # same words, another chain
    with pytest.raises(InvalidParameter, match="dependence"):
        g + other.guarantee
    with pytest.raises(InvalidParameter, match="dependence"):
        g + Guarantee(1.0, relation="replace_one", unit="record")
    with pytest.raises(DataError, match="states="):
        approx.release(np.zeros(5, dtype=int))
    binned = MarkovQuiltMechanism(ChainClass.bounds(0.3, 0.3), length=100, epsilon=1.0,
                                  method="approx", states=3)
    assert binned.release(np.array([0, 2, 2]), rng=rng_for_tests(7)).shape == (3,)
    with pytest.raises(InvalidParameter, match="states"):
        MarkovQuiltMechanism(chain, length=100, epsilon=1.0, states=3)


def test_network_mechanism_releases_values() -> None:
    net = BayesianNetwork({"A": [], "B": ["A"], "C": ["B"]},
                          cpts={"A": [0.5, 0.5], "B": [[0.8, 0.2], [0.3, 0.7]],
                           "C": [[0.8, 0.2], [0.3, 0.7]]})
    mech = MarkovQuiltMechanism(net, length=None, epsilon=1.0, lipschitz=1)
    assert mech.length == 3 and mech.states == 2
    out = mech.release_values([2.0], rng=rng_for_tests(6))
    assert out.shape == (1,)


def test_bad_input() -> None:
    chain = MarkovChain(EXAMPLE)
    mech = MarkovQuiltMechanism(chain, length=10, epsilon=1.0)
    with pytest.raises(DataError, match="outside") as info:
        mech.release(np.array([0, 1, 2]))
    assert info.value.private_detail == "sequence 0: 1 state(s), first 2 at position 2"
    assert "position" not in info.value.public_message  # the private data's facts stay private
    with pytest.raises(DataError, match="length=10") as info:
        mech.release(np.zeros(11, dtype=int))
    assert "11" not in info.value.public_message
    assert info.value.private_detail == "longest sequence: 11 records"
    with pytest.raises(DataError, match="finite"):
        mech.release_values([np.nan])
    with pytest.raises(InvalidParameter, match="epsilon"):
        MarkovQuiltMechanism(chain, length=10, epsilon=0.0)
    with pytest.raises(InvalidParameter, match="lipschitz"):
        MarkovQuiltMechanism(chain, length=10, epsilon=1.0, lipschitz=-1)
    with pytest.raises(InvalidParameter, match="alpha"):
        mech.interval(1.5)


@pytest.mark.parametrize("notion", ["pufferfish", "bdp"])
def test_network_histogram_stays_within_e_eps(notion: str) -> None:
    rng = rng_for_tests(9)
    net = BayesianNetwork(
        {"A": [], "B": [], "C": ["A", "B"], "D": ["C"], "E": ["C"]},
        cpts={"A": [0.3, 0.7], "B": [0.6, 0.4], "C": rng.dirichlet(np.ones(2) * 8, size=(2, 2)),
         "D": [[0.65, 0.35], [0.4, 0.6]], "E": [[0.6, 0.4], [0.35, 0.65]]},
    )
    rows = sequences(2, 5)  # every assignment, nodes in order
    prob = net.joint()[tuple(rows.T)]
    for eps in (1.0, 2.0):
        mech = MarkovQuiltMechanism(net, length=None, epsilon=eps, notion=notion)
        assert leakage(rows, prob, 2, scale_in_counts(mech), notion) <= eps * (1 + 1e-12)
    assert not mech.calibration.trivial  # at ε = 2 a quilt beats group privacy


@pytest.mark.parametrize("notion", ["pufferfish", "bdp"])
def test_sparse_chain_histogram_stays_within_e_eps(notion: str) -> None:
    chain = MarkovChain([[0.5, 0.5, 0.0], [0.0, 0.6, 0.4], [0.3, 0.0, 0.7]])
    seqs = sequences(3, 5)
    prob = chain_probabilities(chain.transition, chain.stationary, seqs)
    mech = MarkovQuiltMechanism(chain, length=5, epsilon=8.0, notion=notion)
    assert not mech.calibration.trivial
    assert leakage(seqs, prob, 3, scale_in_counts(mech), notion) <= 8.0 * (1 + 1e-12)
