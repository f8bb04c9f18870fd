"""DP ↔ BDP conversion and the GMRF baseline of Yang et al. 2015."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bayesdp import rng_for_tests
from bayesdp.correlated import MarkovChain, bdp_to_dp, dp_to_bdp, gmrf_sum_scale, group_dp_scale
from bayesdp.errors import InvalidParameter

EXAMPLE = [[0.9, 0.1], [0.2, 0.8]]


def test_forward_map_of_the_reference_note() -> None:
    chain = MarkovChain(EXAMPLE)
    got = [round(dp_to_bdp(e, chain, 100), 3) for e in (0.01, 0.02, 0.05, 0.1)]
    assert got == [0.325, 0.572, 1.173, 1.952]


def test_sanity_rules() -> None:
    weak, strong = MarkovChain([[0.6, 0.4], [0.4, 0.6]]), MarkovChain([[0.95, 0.05], [0.05, 0.95]])
    levels = np.array([0.01, 0.05, 0.1, 0.5, 1.0])
    for chain in (weak, strong):
        eps = np.array([dp_to_bdp(e, chain, 200) for e in levels])
        assert np.all(np.diff(eps) > 0) and np.all(eps >= levels)
        puff = np.array([dp_to_bdp(e, chain, 200, notion="pufferfish") for e in levels])
        approx = np.array([dp_to_bdp(e, chain, 200, method="approx") for e in levels])
        assert np.all(puff <= eps) and np.all(approx >= eps - 1e-12)
        assert np.all(eps <= levels * 200)  # never worse than group privacy
    assert all(dp_to_bdp(e, strong, 200) > dp_to_bdp(e, weak, 200) for e in levels)


def test_inverse() -> None:
    chain = MarkovChain(EXAMPLE)
    for eps in (0.3, 1.0, 4.0):
        dp = bdp_to_dp(eps, chain, 100)
        assert dp <= eps
        assert dp_to_bdp(dp, chain, 100) <= eps * (1 + 1e-12)
        assert dp_to_bdp(dp * 1.01, chain, 100) > eps * 0.99
    assert bdp_to_dp(1.0, chain, 10) == pytest.approx(1.0 / group_dp_scale(10, 1.0))


def test_conversion_errors() -> None:
    chain = MarkovChain(EXAMPLE)
    with pytest.raises(InvalidParameter, match="epsilon_dp"):
        dp_to_bdp(0.0, chain, 10)
    with pytest.raises(InvalidParameter, match="length"):
        dp_to_bdp(0.1, chain, None)
    with pytest.raises(InvalidParameter, match="notion"):
        dp_to_bdp(0.1, chain, 10, notion="ddp")


def gmrf_by_precision(cov: np.ndarray) -> float:
    """max_{i,K} |1 + Σ_u coef of x_i in E[X_U | x_i, x_K]| via the precision of X_U given the rest
    after marginalizing: E[X_U | x_C] = −(Q'_UU)^{-1} Q'_UC x_C, Q' = (Σ restricted to U ∪ C)^{-1}."""
    n = len(cov)
    worst = 0.0
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for r in range(n):
            for kn in itertools.combinations(others, r):
                c = [i, *kn]
                u = [j for j in range(n) if j not in c]
                if not u:
                    worst = max(worst, 1.0)
                    continue
                idx = u + c
                q = np.linalg.inv(cov[np.ix_(idx, idx)])
                coef = -np.linalg.solve(q[: len(u), : len(u)], q[: len(u), len(u)])
                worst = max(worst, abs(1 + coef.sum()))
    return worst


def test_gmrf_sum_scale() -> None:
    assert gmrf_sum_scale(np.eye(4), 0.5, 2.0) == pytest.approx(4.0)  # independent: Δ/ε
    rho = 0.6
    pair = np.array([[1.0, rho], [rho, 1.0]])
    assert gmrf_sum_scale(pair, 1.0, 1.0) == pytest.approx(1 + rho)
    assert gmrf_sum_scale(pair, 1.0, 1.0, knowledge="none") == pytest.approx(1 + rho)
    rng = rng_for_tests(7)
    for n in (3, 5):
        a = rng.standard_normal((n, n + 2))
        cov = a @ a.T / (n + 2)
        got = gmrf_sum_scale(cov, 1.0, 1.0)
        assert got == pytest.approx(gmrf_by_precision(cov), rel=1e-10)
        assert gmrf_sum_scale(cov, 1.0, 1.0, knowledge="none") <= got + 1e-12
    with pytest.raises(InvalidParameter, match="positive definite"):
        gmrf_sum_scale(np.array([[1.0, 2.0], [2.0, 1.0]]), 1.0, 1.0)
    with pytest.raises(InvalidParameter, match="knowledge"):
        gmrf_sum_scale(np.eye(2), 1.0, 1.0, knowledge="some")
    with pytest.raises(InvalidParameter, match="none"):
        gmrf_sum_scale(np.eye(17), 1.0, 1.0)
