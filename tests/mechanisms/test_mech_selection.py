"""Exponential mechanism and report-noisy-max: selection frequencies against their exact laws.

Chi-square checks compare with the 1 - 1e-7 quantile (false failure 1e-7 each). The checks with a
huge ε are exact: every non-maximal candidate has probability e^{-γ} with γ >= 5e5, i.e. 0 in float64
and well below 1e-200 in exact arithmetic.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from mech_stats import chi_square

from bayesdp import Exponential, ReportNoisyMax, rng_for_tests

DRAWS = 6_000


def frequencies(mech: Exponential | ReportNoisyMax, utilities: np.ndarray, seed: int) -> np.ndarray:
    rng = rng_for_tests(seed)
    picks = [mech.release(utilities, rng=rng) for _ in range(DRAWS)]
    return np.bincount(picks, minlength=utilities.size)


def exponential_law(epsilon: float, sensitivity: float, utilities: np.ndarray) -> np.ndarray:
    """P(r) ∝ exp(ε u(r)/(2Δu)) (McSherry & Talwar 2007), shifted by max u so nothing overflows."""
    w = np.exp(epsilon * (utilities - utilities.max()) / (2 * sensitivity))
    law: np.ndarray = w / w.sum()
    return law


def permute_and_flip_law(epsilon: float, sensitivity: float, utilities: np.ndarray) -> np.ndarray:
    """Exact P(i) of permute-and-flip (McKenna & Sheldon 2020, Alg. 1) by enumerating all orders:
    visit candidates in a uniformly random order, take i with probability p_i = e^{ε(u_i − u*)/(2Δ)}."""
    p = np.exp(epsilon * (utilities - utilities.max()) / (2 * sensitivity))
    law = np.zeros(utilities.size)
    orders = list(itertools.permutations(range(utilities.size)))
    for order in orders:
        survive = 1.0
        for i in order:
            law[i] += survive * p[i]
            survive *= 1 - p[i]
    return law / len(orders)


@pytest.mark.parametrize(
    ("epsilon", "sensitivity", "utilities"),
    [(1.0, 1.0, [3.0, 1.0, 0.0, 2.5]), (0.3, 2.0, [10.0, 0.0, 5.0, 7.0, 1.0]), (4.0, 1.0, [0.0, 0.5, 1.0])],
)
def test_exponential_frequencies(epsilon: float, sensitivity: float, utilities: list[float]) -> None:
    u = np.array(utilities)
    mech = Exponential(epsilon, sensitivity=sensitivity)
    law = exponential_law(epsilon, sensitivity, u)
    np.testing.assert_allclose(mech.probabilities(u), law, rtol=1e-12)
    statistic, critical = chi_square(frequencies(mech, u, 700), law)
    assert statistic < critical


def test_exponential_select_with_utilities_and_with_losses() -> None:
    """Utilities: P ∝ exp(ε u/(2Δ)); losses (seed 004): P ∝ exp(−ε ℓ/(2Δ)); select returns candidates."""
    candidates = ["a", "b", "c", "d"]
    mech = Exponential(1.0, sensitivity=2.0)
    losses = np.array([0.0, 2.0, 4.0, 1.0])
    rng = rng_for_tests(701)
    by_loss = [mech.select(candidates, losses=losses, rng=rng) for _ in range(DRAWS)]
    by_utility = [mech.select(candidates, -losses, rng=rng) for _ in range(DRAWS)]
    law = exponential_law(1.0, 2.0, -losses)
    assert law[0] > law[3] > law[1] > law[2]  # lower loss is more likely
    for picks in (by_loss, by_utility):
        observed = np.array([picks.count(c) for c in candidates])
        statistic, critical = chi_square(observed, law)
        assert statistic < critical


def test_exponential_handles_huge_utilities() -> None:
    """Utilities near 1e300 with Δ = 1e285: exp(ε u/(2Δ)) overflows, the gaps are about 0, 1, 3."""
    u = np.array([1e300, 1e300 - 1e285, 1e300 - 3e285])
    mech = Exponential(2.0, sensitivity=1e285)
    with np.errstate(over="ignore"):
        assert np.all(np.isinf(np.exp(2.0 * u / (2 * 1e285))))  # the naive weights overflow
    gaps = 2.0 * (u.max() - u) / (2 * 1e285)  # exact differences (Sterbenz), then one rounding
    law = np.exp(-gaps) / np.exp(-gaps).sum()
    np.testing.assert_allclose(gaps, [0.0, 1.0, 3.0], rtol=0.05)
    statistic, critical = chi_square(frequencies(mech, u, 702), law)
    assert statistic < critical
    # Gaps of 1e300 units: the lower candidate is never chosen, whatever the overflow.
    never = Exponential(1.0, sensitivity=1.0)
    rng = rng_for_tests(703)
    assert {never.select(["hi", "lo"], [1e300, -1e300], rng=rng) for _ in range(200)} == {"hi"}


@pytest.mark.parametrize(
    ("epsilon", "sensitivity", "utilities"),
    [(1.0, 1.0, [3.0, 1.0, 0.0, 2.5]), (0.5, 1.0, [4.0, 4.0, 2.0, 0.0, 3.0]), (2.0, 0.5, [0.0, 0.2, 1.0])],
)
def test_report_noisy_max_frequencies_are_permute_and_flip(
    epsilon: float, sensitivity: float, utilities: list[float]
) -> None:
    u = np.array(utilities)
    law = permute_and_flip_law(epsilon, sensitivity, u)
    assert law.sum() == pytest.approx(1.0, rel=1e-12)
    rnm = ReportNoisyMax(epsilon, sensitivity=sensitivity)
    statistic, critical = chi_square(frequencies(rnm, u, 800), law)
    assert statistic < critical


def test_permute_and_flip_law_small_case_by_hand() -> None:
    """Two candidates with p = (1, e^{-1}): P(second) = ½ e^{-1} (it must come first and pass)."""
    law = permute_and_flip_law(2.0, 1.0, np.array([1.0, 0.0]))
    np.testing.assert_allclose(law, [1 - 0.5 * math.exp(-1), 0.5 * math.exp(-1)], rtol=1e-15)


@pytest.mark.parametrize("cls", [Exponential, ReportNoisyMax])
def test_huge_epsilon_always_returns_a_maximum(cls: type[Exponential] | type[ReportNoisyMax]) -> None:
    mech = cls(1e6, sensitivity=1.0)
    rng = rng_for_tests(900)
    unique = np.array([1.0, 5.0, 3.0, 4.0, -2.0])
    assert {mech.release(unique, rng=rng) for _ in range(300)} == {1}
    tied = np.array([1.0, 5.0, 5.0, 2.0])
    picks = {mech.release(tied, rng=rng) for _ in range(300)}
    # Each tie wins with probability 1/2: missing one in 300 draws has probability 2^-299.
    assert picks == {1, 2}


@pytest.mark.parametrize("cls", [Exponential, ReportNoisyMax])
def test_selection_guarantee_and_scale(cls: type[Exponential] | type[ReportNoisyMax]) -> None:
    mech = cls(0.5, sensitivity=3.0)
    assert mech.scale == 2 * 3.0 / 0.5
    assert (mech.guarantee.epsilon, mech.guarantee.delta) == (0.5, 0.0)
