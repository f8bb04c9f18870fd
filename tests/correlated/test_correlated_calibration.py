"""Quilt calibration: the reference note's worked example and tables, and a brute-force search."""

from __future__ import annotations

import math

import numpy as np
import pytest
from correlated_oracle import chain_quilts

from bayesdp import rng_for_tests
from bayesdp.correlated import (
    ChainClass,
    MarkovChain,
    QuiltCalibration,
    gk16_scale,
    group_dp_scale,
    max_influence,
    quilt_calibration,
)
from bayesdp.errors import InvalidParameter

EXAMPLE = [[0.9, 0.1], [0.2, 0.8]]

# Reference note §5 (run_synthetic.m port, checked by brute force): rows q = P(1|0), cols p = P(1|1)
MQM_EXACT = [
    [1, 3.632, 5.715, 7.752, 9.898, 12.84, 16.625, 22.298, 31.738],
    [3.364, 1, 3.293, 4.337, 6.138, 7.977, 10.12, 13.075, 22.298],
    [4.337, 3.235, 1, 2.355, 3.801, 5.131, 6.724, 10.12, 16.625],
    [5.86, 3.924, 2.355, 1, 1.806, 3.572, 5.131, 7.977, 12.84],
    [7.737, 5.498, 3.707, 1.806, 1, 1.806, 3.801, 6.138, 9.898],
    [10.075, 7.168, 4.904, 3.572, 1.806, 1, 2.355, 4.337, 7.752],
    [13.58, 9.551, 6.724, 4.904, 3.707, 2.355, 1, 3.293, 5.715],
    [19.6, 13.075, 9.551, 7.168, 5.498, 3.924, 3.235, 1, 3.632],
    [31.738, 19.6, 13.58, 10.075, 7.737, 5.86, 4.337, 3.364, 1],
]
MQM_APPROX = {
    0: [12.922, 14.076, 15.772, 17.675, 20.183, 23.506, 28.276, 35.75, 49.22],
    4: [16.995, 14.209, 12.005, 10.232, 8.973, 10.298, 12.278, 15.177, 20.183],
    8: [49.22, 32.941, 24.877, 20.069, 16.995, 14.895, 13.709, 12.849, 12.922],
}
GRID = [round(0.1 * j, 1) for j in range(1, 10)]


def binary(q: float, p: float) -> MarkovChain:
    return MarkovChain([[1 - q, q], [1 - p, p]])


def test_exact_table_t100_eps1() -> None:
    got = [[round(quilt_calibration(binary(q, p), 100, 1.0).sigma, 3) for p in GRID] for q in GRID]
    assert got == MQM_EXACT


def test_approx_rows_t100_eps1() -> None:
    for row, want in MQM_APPROX.items():
        q = GRID[row]
        got = [round(quilt_calibration(binary(q, p), 100, 1.0, method="approx").sigma, 3)
               for p in GRID]
        assert got == want


def test_gk16_cells_and_not_applicable_region() -> None:
    cells = {(0.1, 0.2): 6.767, (0.5, 0.4): 2.649, (0.5, 0.6): 2.636}
    for (q, p), want in cells.items():
        res = gk16_scale(binary(q, p), 100, 1.0)
        assert res.sigma is not None and round(res.sigma, 3) == want
    results = [gk16_scale(binary(q, p), 100, 1.0) for q in GRID for p in GRID]
    assert sum(not r.applicable for r in results) == 42
    assert all(r.sigma == pytest.approx(2.0) for r, (q, p) in
               zip(results, [(q, p) for q in GRID for p in GRID], strict=True) if q == p)
    assert not gk16_scale(binary(0.1, 0.8), 100, 1.0).applicable  # γ = 1.486 in the note
    assert group_dp_scale(100, 1.0) == 100


def test_worked_example() -> None:
    chain = MarkovChain(EXAMPLE)
    cal = quilt_calibration(chain, 100, 1.0)
    assert cal.sigma == pytest.approx(22.2984, abs=5e-5)
    assert cal.nearby == 17 and cal.quilt == (cal.node - 9, cal.node + 9)
    assert 11 <= cal.node <= 88  # attained at every node i = 12..89 (1-based)
    lam = 0.7**9  # e(t) = 2 log((1 + 2λ^t)/(1 − λ^t)) for the symmetric quilt t = 9
    assert cal.influence == pytest.approx(2 * math.log((1 + 2 * lam) / (1 - lam)), rel=1e-12)
    for length in (40, 60, 200, 1000):
        assert quilt_calibration(chain, length, 1.0).sigma == pytest.approx(cal.sigma, rel=1e-12)
    ends = [round(quilt_calibration(chain, 100, 1.0, node=i).sigma, 2) for i in (0, 1, 4)]
    assert ends == [9.04, 10.50, 14.43]  # σ_1, σ_2, σ_5: the end nodes need less noise
    assert quilt_calibration(chain, 100, 1.0, node=50).sigma == pytest.approx(cal.sigma)
    short = quilt_calibration(chain, 20, 1.0)
    assert short.sigma == 20 and short.trivial
    worst = MarkovChain(EXAMPLE, initial="worst")
    assert round(quilt_calibration(worst, 100, 1.0).sigma, 3) == 22.925
    assert round(quilt_calibration(chain, 100, 1.0, method="approx").sigma, 3) == 35.750
    assert round(quilt_calibration(ChainClass.bounds(1 / 3, 0.255), 100, 1.0, method="approx")
                 .sigma, 3) == 42.286
    bdp = quilt_calibration(chain, 100, 1.0, notion="bdp")
    assert round(bdp.sigma, 3) == 24.575
    assert (bdp.node - bdp.quilt[0], bdp.quilt[1] - bdp.node) == (10, 10)
    assert 2 * 2 * cal.sigma / 100 == pytest.approx(0.892, abs=5e-4)  # expected L1, 2kσ/T


@pytest.mark.parametrize(("eps", "row"), [
    (0.5, (54.90, 56.41, 82.69, 59.22)),
    (2.0, (8.289, 8.690, 14.99, 9.647)),
    (5.0, (1.189, 1.580, 4.397, 2.137)),
])
def test_other_epsilons(eps: float, row: tuple[float, ...]) -> None:
    chain, worst = MarkovChain(EXAMPLE), MarkovChain(EXAMPLE, initial="worst")
    got = (
        quilt_calibration(chain, 100, eps).sigma,
        quilt_calibration(worst, 100, eps).sigma,
        quilt_calibration(chain, 100, eps, method="approx").sigma,
        quilt_calibration(chain, 100, eps, notion="bdp").sigma,
    )
    for g, w in zip(got, row, strict=True):
        assert g == pytest.approx(w, abs=0.5 * 10 ** -(len(str(w).split(".")[1])))
    if eps == 5.0:
        assert quilt_calibration(chain, 100, eps).nearby == 1  # quilt (1, 1)


def brute_sigma(model: object, length: int, eps: float, notion: str) -> float:
    """max over all nodes, min over all quilts (no window, no shortcuts)."""
    worst = 0.0
    for node in range(length):
        best = math.inf
        for quilt, card in chain_quilts(node, length):
            e = max_influence(model, node, quilt, notion, length=length)
            if e < eps:
                best = min(best, card / (eps - e))
        worst = max(worst, best)
    return worst


def check_search(cases: list[tuple[int, int, float]], notion: str, initial: str) -> None:
    rng = rng_for_tests(21)
    for k, length, eps in cases:
        p = rng.dirichlet(np.ones(k) * 3, size=k)
        init = rng.dirichlet(np.ones(k)) if initial == "given" else initial
        chain = MarkovChain(p, initial=init)
        want = brute_sigma(chain, length, eps, notion)
        cal = quilt_calibration(chain, length, eps, notion=notion)
        assert cal.sigma == pytest.approx(want, rel=1e-12)
        assert quilt_calibration(chain, length, eps, notion=notion, node=0).sigma == pytest.approx(
            min(card / (eps - e) for q, card in chain_quilts(0, length)
                if (e := max_influence(chain, 0, q, notion, length=length)) < eps), rel=1e-12)
        e = max_influence(chain, cal.node, cal.quilt, notion, length=length)
        assert cal.influence == pytest.approx(e, rel=1e-12, abs=1e-15)
        assert cal.sigma == pytest.approx(cal.nearby / (eps - cal.influence), rel=1e-12)


NOTIONS_INITIALS = [(n, i) for n in ("pufferfish", "bdp") for i in ("stationary", "worst", "given")]


@pytest.mark.parametrize(("notion", "initial"), NOTIONS_INITIALS)
def test_search_equals_exhaustive_scan(notion: str, initial: str) -> None:
    check_search([(2, 9, 1.0), (3, 8, 2.0)], notion, initial)


@pytest.mark.slow
@pytest.mark.parametrize(("notion", "initial"), NOTIONS_INITIALS)
def test_search_with_interior_nodes_equals_exhaustive_scan(notion: str, initial: str) -> None:
    check_search([(2, 40, 2.0)], notion, initial)  # window 16 < T/2: interior shortcut used


def test_class_search_equals_exhaustive_scan() -> None:
    rng = rng_for_tests(22)
    chains = ChainClass(tuple(MarkovChain(rng.dirichlet(np.ones(2) * 3, size=2), initial=s)
                              for s in ("stationary", "worst")))
    assert quilt_calibration(chains, 15, 1.0).sigma == pytest.approx(
        brute_sigma(chains, 15, 1.0, "pufferfish"), rel=1e-12)


def test_long_chain_and_window() -> None:
    rng = rng_for_tests(23)
    chain = MarkovChain(0.8 * np.eye(10) + 0.2 * rng.dirichlet(np.ones(10), size=10))
    short = quilt_calibration(chain, 2000, 1.0)
    long = quilt_calibration(chain, 1_000_000, 1.0)
    assert long.sigma == pytest.approx(short.sigma, rel=1e-12)
    assert long.sigma < 2000


def test_periodic_chain_gets_group_privacy() -> None:
    flip = MarkovChain([[0.0, 1.0], [1.0, 0.0]])
    cal = quilt_calibration(flip, 50, 1.0)
    assert cal == QuiltCalibration(50.0, node=0, quilt=(), influence=0.0, nearby=50)
    with pytest.raises(InvalidParameter, match="periodic"):
        quilt_calibration(flip, 50, 1.0, method="approx")


def test_bad_input() -> None:
    chain = MarkovChain(EXAMPLE)
    for eps in (0, -1, math.inf, math.nan):
        with pytest.raises(InvalidParameter, match="epsilon"):
            quilt_calibration(chain, 100, eps)
    with pytest.raises(InvalidParameter, match="length"):
        quilt_calibration(chain, 0, 1.0)
    with pytest.raises(InvalidParameter, match="method"):
        quilt_calibration(chain, 10, 1.0, method="fast")
    with pytest.raises(InvalidParameter, match="exact"):
        quilt_calibration(ChainClass.bounds(0.2, 0.1), 10, 1.0)
    with pytest.raises(InvalidParameter, match="model"):
        quilt_calibration("chain", 10, 1.0)
    with pytest.raises(InvalidParameter, match="node"):
        quilt_calibration(chain, 10, 1.0, node=10)
    with pytest.raises(InvalidParameter, match="node"):
        quilt_calibration(chain, 10, 1.0, node="x")


@pytest.mark.parametrize("notion", ["pufferfish", "bdp"])
def test_sigma_does_not_decrease_with_length(notion: str) -> None:
    # a shorter chain is a marginal of a longer one, so one calibration covers many people
    rng = rng_for_tests(24)
    for initial in ("stationary", "worst", rng.dirichlet(np.ones(3))):
        chain = MarkovChain(rng.dirichlet(np.ones(3) * 2, size=3), initial=initial)
        sigmas = [quilt_calibration(chain, n, 1.0, notion=notion).sigma for n in range(1, 40, 3)]
        assert np.all(np.diff(sigmas) >= -1e-12 * np.array(sigmas[:-1]))


@pytest.mark.parametrize("notion", ["pufferfish", "bdp"])
def test_eigengap_bound_dominates_the_exact_influence(notion: str) -> None:
    from bayesdp.correlated.influence import approx_delta

    rng = rng_for_tests(25)
    for k in (2, 3, 4):
        chain = MarkovChain(rng.dirichlet(np.ones(k) * 2, size=k), initial="worst")
        pi_min, gap = chain.pi_min, chain.eigengap  # general gap when not reversible
        length = 40
        for a, b in [(2, 3), (5, 5), (8, 4), (12, 12)]:
            node = 20
            d = approx_delta(np.array([a, b]), pi_min, gap)
            bound = 2 * d[0] + (2 if notion == "bdp" else 1) * d[1]
            assert max_influence(chain, node, [node - a, node + b], notion, length=length) \
                <= bound + 1e-12
        assert quilt_calibration(chain, length, 2.0, method="approx", notion=notion).sigma >= \
            quilt_calibration(chain, length, 2.0, notion=notion).sigma * (1 - 1e-12)


@pytest.mark.timeout(60)
def test_a_nearly_reducible_chain_is_refused_not_a_memory_hog():
    """Records correlated over millions of positions would need a window of that width (its
    square in memory, ~17 GB at the old 2^14 limit): the exact search refuses beyond MAX_WINDOW."""
    chain = MarkovChain([[1 - 1e-300, 1e-300], [1e-300, 1 - 1e-300]])
    with pytest.raises(InvalidParameter, match="wider than 4096 nodes"):
        quilt_calibration(chain, 100_000, 1.0)
