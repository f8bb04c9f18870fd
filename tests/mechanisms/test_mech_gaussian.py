"""Gaussian calibration: the analytic Gaussian of Balle & Wang 2018, the discrete Gaussian's tight δ
(Canonne–Kamath–Steinke 2020, Thm 7) by brute force, zCDP σ = Δ/√(2ρ), and the output law.

All checks here are exact or numerical except the chi-square, whose false-failure probability is 1e-7.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mech_stats import binned_counts, chi_square, dgauss_weights, quantile_edges
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from bayesdp import DiscreteGaussian, Gaussian, rng_for_tests
from bayesdp.mechanisms.gaussian import dgauss_delta


def analytic_gaussian_delta(epsilon: float, sigma: float, sensitivity: float) -> float:
    """δ(ε) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) (Balle & Wang 2018, Thm 8)."""
    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon + log_ndtr(-a - b)))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest σ with δ(ε) <= δ (Balle & Wang 2018, Alg. 1), by root finding on log σ."""

    def gap(log_sigma: float) -> float:
        return analytic_gaussian_delta(epsilon, math.exp(log_sigma), sensitivity) - delta

    lo, hi = math.log(sensitivity) - 10, math.log(sensitivity) + 30
    return math.exp(brentq(gap, lo, hi, xtol=1e-14, rtol=1e-14))


def brute_delta(epsilon: float, sigma: float, sensitivity: int) -> float:
    """Σ_x max(0, P(x) − e^ε P(x − Δ)) for P the discrete Gaussian N_Z(0, σ²), summed directly."""
    x, pmf = dgauss_weights(sigma)
    shifted = np.exp(-((x - sensitivity) ** 2) / (2 * sigma * sigma)) * (pmf[x == 0][0])
    return float(np.maximum(pmf - math.exp(epsilon) * shifted, 0.0).sum())


def test_balle_wang_reference_value() -> None:
    # Balle & Wang 2018 report σ ≈ 3.73 for ε = 1, δ = 1e-5, Δ = 1 (classical bound: 4.84).
    assert analytic_gaussian_sigma(1.0, 1e-5, 1.0) == pytest.approx(3.7307, abs=1e-4)


@pytest.mark.parametrize(
    ("epsilon", "delta", "sensitivity"),
    [
        (1.0, 1e-5, 1.0),
        (0.1, 1e-6, 1.0),
        (3.0, 1e-9, 1e-4),
        (0.5, 1e-5, 1e6),
        (10.0, 1e-3, 1.0),
        (0.01, 1e-5, 2.0),
        (2.0, 0.3, 1.0),
    ],
)
def test_gaussian_matches_analytic_gaussian(epsilon: float, delta: float, sensitivity: float) -> None:
    mech = Gaussian(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    reference = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    assert mech.scale == pytest.approx(reference, rel=1e-3)
    assert (mech.guarantee.epsilon, mech.guarantee.delta) == (epsilon, delta)


@pytest.mark.parametrize("sigma", [0.3, 0.8, 1.0, 2.5, 7.0, 40.0])
@pytest.mark.parametrize(("epsilon", "sensitivity"), [(0.1, 1), (1.0, 1), (1.0, 3), (4.0, 2)])
def test_dgauss_delta_matches_brute_force(sigma: float, epsilon: float, sensitivity: int) -> None:
    expected = brute_delta(epsilon, sigma, sensitivity)
    assert dgauss_delta(epsilon, sigma, sensitivity) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_dgauss_delta_for_large_sigma_is_an_upper_bound_within_its_error() -> None:
    """Above σ = 4096 the tails use the midpoint rule; its stated error is 0.05/σ² per tail."""
    for sigma, epsilon in [(5000.0, 1e-3), (5000.0, 3e-4), (12345.6, 2e-4)]:
        exact = brute_delta(epsilon, sigma, 1)
        bound = dgauss_delta(epsilon, sigma, 1)
        assert exact <= bound <= exact + (1 + math.exp(epsilon)) * 0.05 / sigma**2


@pytest.mark.parametrize(
    ("epsilon", "delta", "sensitivity"), [(1.0, 1e-3, 1), (0.5, 1e-6, 1), (2.0, 1e-5, 3), (5.0, 0.01, 1)]
)
def test_discrete_gaussian_calibration_is_tight(epsilon: float, delta: float, sensitivity: int) -> None:
    mech = DiscreteGaussian(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    sigma = mech.scale
    assert brute_delta(epsilon, sigma, sensitivity) <= delta
    assert brute_delta(epsilon, sigma * (1 - 1e-6), sensitivity) > delta


@pytest.mark.parametrize(("rho", "sensitivity"), [(0.5, 1.0), (1e-3, 1e3), (50.0, 1e-3), (1e-8, 1.0)])
def test_zcdp_sigma(rho: float, sensitivity: float) -> None:
    """σ = D/√(2ρ) (Bun & Steinke 2016, Prop. 1.6) with D = (floor(Δ/g) + 1)·g the sensitivity on
    the grid g = 2^(floor(log2 σ) − 20), so Δ < D <= Δ + g."""
    mech = Gaussian(rho=rho, sensitivity=sensitivity)
    d = (math.floor(sensitivity / mech.grid) + 1) * mech.grid
    assert mech.scale == pytest.approx(d / math.sqrt(2 * rho), rel=1e-15)
    nominal = sensitivity / math.sqrt(2 * rho)
    assert mech.grid <= nominal * 2.0**-20
    assert nominal < mech.scale <= nominal * (1 + 2.0**-20 * nominal / sensitivity)
    assert mech.guarantee.rho == rho
    assert mech.rho == pytest.approx(rho, rel=1e-14)
    discrete = DiscreteGaussian(rho=rho, sensitivity=max(round(sensitivity), 1))
    assert discrete.scale == pytest.approx(max(round(sensitivity), 1) / math.sqrt(2 * rho), rel=1e-15)
    assert discrete.guarantee.rho == rho


def test_discrete_gaussian_output_law() -> None:
    mech = DiscreteGaussian(rho=0.02, sensitivity=1)  # σ = 5
    rng = rng_for_tests(303)
    noise = mech.release(np.zeros(200_000, dtype=np.int64), rng=rng)
    x, pmf = dgauss_weights(mech.scale)
    edges = np.arange(-20.0, 20.0)
    cells = np.append(np.add.reduceat(pmf, np.searchsorted(x, np.append(x[0], edges + 1))), 0.0)
    statistic, critical = chi_square(binned_counts(noise, edges), cells[:-1])
    assert statistic < critical, (statistic, critical)


def test_gaussian_noise_in_steps_is_discrete_gaussian() -> None:
    """Continuous Gaussian: noise is grid × N_Z(0, σ_steps²), σ_steps about 2^20; at that size the
    discrete Gaussian's cell probabilities are the normal ones to within 1e-12 (midpoint rule)."""
    mech = Gaussian(epsilon=1.0, delta=1e-5)
    rng = rng_for_tests(404)
    steps = (mech.release(np.zeros(200_000), rng=rng) / mech.grid).astype(np.int64)
    edges = quantile_edges(mech.sigma_steps / math.sqrt(2), 60)
    cdf = np.concatenate([[0.0], ndtr((edges + 0.5) / mech.sigma_steps), [1.0]])
    statistic, critical = chi_square(binned_counts(steps, edges), np.diff(cdf))
    assert statistic < critical, (statistic, critical)
