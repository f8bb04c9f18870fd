"""MarkovChain and ChainClass: validation, stationary law, eigengaps, reversal, fitting."""

from __future__ import annotations

import numpy as np
import pytest

from bayesdp import rng_for_tests
from bayesdp.correlated import ChainClass, MarkovChain
from bayesdp.errors import DataError, InvalidParameter

EXAMPLE = [[0.9, 0.1], [0.2, 0.8]]


def test_stationary_and_eigengaps_of_the_worked_example() -> None:
    chain = MarkovChain(EXAMPLE)
    np.testing.assert_allclose(chain.stationary, [2 / 3, 1 / 3], rtol=1e-14)
    assert chain.is_reversible and chain.is_aperiodic and chain.period == 1
    assert chain.eigengap_reversible == pytest.approx(0.3, rel=1e-12)
    assert chain.eigengap_general == pytest.approx((1 - 0.49) / 2, rel=1e-12)
    assert chain.eigengap == chain.eigengap_reversible
    assert chain.pi_min == pytest.approx(1 / 3)


def test_stationary_solves_pi_p_and_reversal() -> None:
    rng = rng_for_tests(1)
    for k in (2, 5, 12):
        chain = MarkovChain(rng.dirichlet(np.ones(k), size=k))
        pi = chain.stationary
        np.testing.assert_allclose(pi @ chain.transition, pi, atol=1e-14)
        rev = chain.reversal()
        np.testing.assert_allclose(rev.transition.sum(axis=1), 1.0, atol=1e-14)
        np.testing.assert_allclose(rev.stationary, pi, atol=1e-13)
        np.testing.assert_allclose(rev.reversal().transition, chain.transition, atol=1e-13)
        # every 2-state chain is reversible; a random dense larger one is not
        assert chain.is_reversible == (k == 2)
        if k > 2:
            assert 0 < chain.eigengap == chain.eigengap_general <= 0.5


def test_reversible_chain_is_its_own_reversal() -> None:
    sym = np.array([[2.0, 1.0, 0.5], [1.0, 3.0, 1.0], [0.5, 1.0, 1.0]])
    chain = MarkovChain(sym / sym.sum(axis=1, keepdims=True))  # random walk on a weighted graph
    assert chain.is_reversible
    np.testing.assert_allclose(chain.reversal().transition, chain.transition, atol=1e-14)


def test_period_and_irreducibility() -> None:
    cycle = MarkovChain([[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    assert cycle.period == 3 and not cycle.is_aperiodic
    with pytest.raises(InvalidParameter, match="periodic"):
        _ = cycle.eigengap
    with pytest.raises(InvalidParameter, match="reducible"):
        MarkovChain([[1.0, 0.0], [0.5, 0.5]])
    absorbing = MarkovChain([[1.0, 0.0], [0.5, 0.5]], initial="worst")
    assert not absorbing.is_irreducible
    with pytest.raises(InvalidParameter, match="reducible"):
        _ = absorbing.stationary


@pytest.mark.parametrize(("matrix", "match"), [
    ([[0.9, 0.2], [0.2, 0.8]], "row 0 sum"),
    ([[1.1, -0.1], [0.2, 0.8]], r"transition\[0, 1\]"),
    ([[0.5, 0.5, 0.0]], "square"),
    ([[1.0]], "k >= 2"),
    ([[np.nan, 1.0], [0.5, 0.5]], "finite"),
    ("abc", "transition"),
])
def test_bad_matrices(matrix: object, match: str) -> None:
    with pytest.raises(InvalidParameter, match=match):
        MarkovChain(matrix)


def test_bad_initial() -> None:
    with pytest.raises(InvalidParameter, match="initial"):
        MarkovChain(EXAMPLE, initial="uniform")
    with pytest.raises(InvalidParameter, match="initial"):
        MarkovChain(EXAMPLE, initial=[1.0, 0.0])
    with pytest.raises(InvalidParameter, match="initial sum"):
        MarkovChain(EXAMPLE, initial=[0.5, 0.6])


def test_fit_counts_transitions() -> None:
    seqs = [np.array([0, 0, 1, 1, 1, 0]), np.array([1, 1, 0])]
    chain = MarkovChain.fit(seqs)
    # 0->0: 1, 0->1: 1; 1->1: 3, 1->0: 2
    np.testing.assert_allclose(chain.transition, [[0.5, 0.5], [0.4, 0.6]])
    with pytest.raises(DataError, match="pseudocount"):
        MarkovChain.fit([np.array([0, 0, 0, 1])], 2)
    assert MarkovChain.fit([np.array([0, 0, 0, 1])], 2, pseudocount=1.0).k == 2
    with pytest.raises(DataError, match="outside"):
        MarkovChain.fit([np.array([0, 3, 1])], 2)
    with pytest.raises(DataError, match="non-integer"):
        MarkovChain.fit([np.array([0.5, 1.0])], 2)


def test_chain_class() -> None:
    a, b = MarkovChain(EXAMPLE), MarkovChain([[0.7, 0.3], [0.4, 0.6]])
    both = ChainClass((a, b))
    assert both.is_finite
    assert both.approx_bounds() == (min(a.pi_min, b.pi_min), min(a.eigengap, b.eigengap))
    bounds = ChainClass.bounds(0.1, 0.2)
    assert not bounds.is_finite and bounds.approx_bounds() == (0.1, 0.2)
    with pytest.raises(InvalidParameter, match="pi_min"):
        ChainClass.bounds(0.0, 0.2)
    with pytest.raises(InvalidParameter, match="eigengap"):
        ChainClass.bounds(0.1, 1.5)
    with pytest.raises(InvalidParameter, match="same number of states"):
        ChainClass((a, MarkovChain(np.full((3, 3), 1 / 3))))
    with pytest.raises(InvalidParameter, match="not both"):
        ChainClass((a,), pi_min=0.1, eigengap=0.1)
