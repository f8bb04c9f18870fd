"""max_influence against brute-force enumeration of every sequence (T ≤ 9, k ≤ 3)."""

from __future__ import annotations

import numpy as np
import pytest
from correlated_oracle import (
    bdp_influence,
    chain_probabilities,
    chain_quilts,
    conditional_influence,
    sequences,
)

from bayesdp import rng_for_tests
from bayesdp.correlated import ChainClass, MarkovChain, max_influence
from bayesdp.errors import InvalidParameter


def random_chain(k: int, seed: int, initial: object = "stationary") -> MarkovChain:
    rng = rng_for_tests(seed)
    return MarkovChain(rng.dirichlet(np.ones(k) * 2, size=k), initial=initial)


def start(chain: MarkovChain) -> np.ndarray:
    return chain.stationary if isinstance(chain.initial, str) else np.asarray(chain.initial)


@pytest.mark.parametrize(("k", "length", "seed", "initial"), [
    (2, 9, 1, "stationary"), (3, 7, 2, "stationary"), (3, 6, 3, "given"), (2, 8, 4, "given"),
])
def test_pufferfish_matches_enumeration(k: int, length: int, seed: int, initial: str) -> None:
    chain = random_chain(k, seed)
    if initial == "given":
        chain = MarkovChain(chain.transition, initial=rng_for_tests(seed + 100).dirichlet(np.ones(k)))
    seqs = sequences(k, length)
    prob = chain_probabilities(chain.transition, start(chain), seqs)
    for node in range(length):
        for quilt, _ in chain_quilts(node, length):
            want = conditional_influence(seqs, prob, k, node, quilt, [])
            got = max_influence(chain, node, quilt, length=length)
            assert got == pytest.approx(want, abs=1e-12, rel=1e-10)


@pytest.mark.parametrize(("k", "length", "seed"), [
    (2, 6, 5), pytest.param(3, 6, 6, marks=pytest.mark.slow), pytest.param(2, 7, 11, marks=pytest.mark.slow),
])
def test_bdp_matches_sup_over_every_known_set(k: int, length: int, seed: int) -> None:
    chain = random_chain(k, seed)
    seqs = sequences(k, length)
    prob = chain_probabilities(chain.transition, chain.stationary, seqs)
    for node in range(length):
        for quilt, _ in chain_quilts(node, length):
            want = bdp_influence(seqs, prob, k, node, quilt)
            got = max_influence(chain, node, quilt, "bdp", length=length)
            assert got == pytest.approx(want, abs=1e-12, rel=1e-10)


def test_knowledge_can_increase_influence() -> None:
    # reference note §1: knowing X_{i+b+1} makes X_{i+b} more informative about X_i
    chain = MarkovChain([[0.9, 0.1], [0.2, 0.8]])
    puff = max_influence(chain, 3, [1, 5], length=8)
    bdp = max_influence(chain, 3, [1, 5], "bdp", length=8)
    assert bdp > puff > 0


def test_worst_start_is_the_sup_over_initial_distributions() -> None:
    k, length = 3, 6
    worst = random_chain(k, 7, "worst")
    seqs = sequences(k, length)
    rng = rng_for_tests(8)
    starts = list(rng.dirichlet(np.ones(k), size=30))
    starts += [np.full(k, 1e-9) + np.eye(k)[y] for y in range(k)]  # near the vertices
    for node in range(1, length):
        for quilt, _ in chain_quilts(node, length):
            bound = max_influence(worst, node, quilt, length=length)
            seen = []
            for q in starts:
                prob = chain_probabilities(worst.transition, q / q.sum(), seqs)
                seen.append(conditional_influence(seqs, prob, k, node, quilt, []))
            assert max(seen) <= bound + 1e-9
            assert max(seen) == pytest.approx(bound, abs=1e-6)  # attained as q nears a vertex


def test_class_takes_the_sup_over_its_chains() -> None:
    a, b = random_chain(2, 9), random_chain(2, 10)
    both = ChainClass((a, b))
    for quilt in ([1, 4], [4], [0]):
        want = max(max_influence(c, 2, quilt, length=6) for c in (a, b))
        assert max_influence(both, 2, quilt, length=6) == want


def test_bad_quilts_are_refused() -> None:
    chain = MarkovChain([[0.9, 0.1], [0.2, 0.8]])
    with pytest.raises(InvalidParameter, match="quilt"):
        max_influence(chain, 3, [0, 1, 5], length=8)
    with pytest.raises(InvalidParameter, match="node"):
        max_influence(chain, 8, [], length=8)
    with pytest.raises(InvalidParameter, match="length"):
        max_influence(chain, 1, [2])
    with pytest.raises(InvalidParameter, match="notion"):
        max_influence(chain, 1, [2], "dp", length=8)


def test_sparse_chain_with_impossible_transitions() -> None:
    # a 3-cycle with self-loops: P^t has zeros for t < 2, so some influences are infinite
    p = np.array([[0.5, 0.5, 0.0], [0.0, 0.6, 0.4], [0.3, 0.0, 0.7]])
    for initial in ("stationary", "given"):
        q = rng_for_tests(12).dirichlet(np.ones(3))
        chain = MarkovChain(p, initial=q if initial == "given" else "stationary")
        length = 5
        seqs = sequences(3, length)
        prob = chain_probabilities(p, start(chain), seqs)
        for node in range(length):
            for quilt, _ in chain_quilts(node, length):
                want = conditional_influence(seqs, prob, 3, node, quilt, [])
                got = max_influence(chain, node, quilt, length=length)
                assert got == pytest.approx(want, abs=1e-12, rel=1e-10)
                if initial == "stationary":
                    # with zero transitions the separable BDP form is an upper bound: the
                    # quilt node and the known node next to it cannot take every pair of values
                    want = bdp_influence(seqs, prob, 3, node, quilt)
                    got = max_influence(chain, node, quilt, "bdp", length=length)
                    assert got >= want - 1e-12
