"""Laplace and DiscreteLaplace outputs against the exact discrete Laplace pmf.

Each chi-square assertion compares with the 1 - 1e-7 quantile (false failure 1e-7).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mech_stats import binned_counts, chi_square, dlap_cdf, quantile_edges

from bayesdp import DiscreteLaplace, Laplace, rng_for_tests

N = 200_000


def assert_dlap(noise: np.ndarray, t: float) -> None:
    """Integer noise follows P(z) ∝ exp(-|z|/t): chi-square over cells at its quantiles."""
    edges = quantile_edges(t, 60) if t > 3 else np.arange(-12.0, 12.0)
    cdf = np.concatenate([[0.0], dlap_cdf(t, edges), [1.0]])
    statistic, critical = chi_square(binned_counts(noise, edges), np.diff(cdf))
    assert statistic < critical, (statistic, critical)


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1.0), (2.0, 1e-3), (0.5, 3e6), (0.7, 0.3)])
def test_laplace_noise_is_grid_times_discrete_laplace(epsilon: float, sensitivity: float) -> None:
    mech = Laplace(epsilon, sensitivity=sensitivity)
    rng = rng_for_tests(101)
    x = rng.uniform(-10, 10, N) * mech.scale
    rounded = np.rint(x / mech.grid)
    noise_steps = mech.release(x, rng=rng) / mech.grid - rounded
    assert np.all(noise_steps == np.rint(noise_steps))
    assert_dlap(noise_steps.astype(np.int64), mech.steps)


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1.0), (2.0, 1e-3), (0.5, 3e6)])
def test_laplace_scale_pays_for_rounding(epsilon: float, sensitivity: float) -> None:
    """b = (floor(Δ/g) + 1) g / ε: above Δ/ε by at most g/ε, and g about min(b, Δ)·2^-20."""
    mech = Laplace(epsilon, sensitivity=sensitivity)
    assert mech.steps == (math.floor(sensitivity / mech.grid) + 1) / epsilon
    nominal = sensitivity / epsilon
    assert nominal < mech.scale <= nominal + mech.grid / epsilon
    assert 2.0**20 <= min(nominal, sensitivity) / mech.grid < 2.0**21


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1), (0.25, 2), (20.0, 1), (1e-7, 1)])
def test_discrete_laplace_matches_its_pmf(epsilon: float, sensitivity: int) -> None:
    mech = DiscreteLaplace(epsilon, sensitivity=sensitivity)
    assert mech.scale == sensitivity / epsilon
    rng = rng_for_tests(202)
    x = rng.integers(-50, 50, N)
    noise = mech.release(x, rng=rng) - x
    assert noise.dtype == np.int64
    assert_dlap(noise, mech.scale)
