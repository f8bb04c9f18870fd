"""Clopper–Pearson bounds and the ε/δ lower bounds built on them (exact checks)."""

import math

import numpy as np
from scipy.stats import beta

from bayesdp.audit.bounds import cp_lower, cp_upper, delta_lower, epsilon_lower


def test_clopper_pearson_matches_beta_quantiles():
    k = np.array([0, 1, 17, 500, 999, 1000])
    n = 1000
    a = 1e-4
    lower = np.where(k > 0, beta.ppf(a, k, n - k + 1), 0.0)
    upper = np.where(k < n, beta.ppf(1 - a, k + 1, n - k), 1.0)
    np.testing.assert_allclose(cp_lower(k, n, a), lower, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(cp_upper(k, n, a), upper, rtol=1e-9, atol=1e-15)


def test_zero_hits_upper_bound_has_closed_form():
    # With k = 0 the upper bound solves (1 - p)^n = a exactly.
    n, a = 10**6, 5e-7
    assert math.isclose(cp_upper(np.array([0]), n, a)[0], 1 - a ** (1 / n), rel_tol=1e-9)


def test_reproduces_the_reference_audit_table():
    # semantics-audit.md §2.4 (ε_claim = 1, N = 10^6 or 2,000, α = 0.05).
    # Each figure is printed there to the given number of decimals.
    cases = [
        (499_483, 183_619, 10**6, 0.995, 3),  # (i) correct Laplace
        (499_483, 67_528, 10**6, 1.99, 2),  # (ii) half the noise
        (100_002, 0, 10**6, 10.2, 1),  # (iii) release each record with p = 0.1
        (1_587, 0, 2_000, 6.0, 1),  # (iv) numpy Laplace, "unreachable from loc = 1"
    ]
    for k1, k2, n, expected, decimals in cases:
        got = epsilon_lower(np.array([k1]), np.array([k2]), n, n, 0.05)[0]
        assert round(got, decimals) == expected


def test_delta_bound_is_the_hockey_stick_of_the_bounds():
    k1, k2, n, eps, alpha = np.array([300]), np.array([40]), 1000, 0.5, 0.01
    expected = cp_lower(k1, n, alpha / 2) - math.exp(eps) * cp_upper(k2, n, alpha / 2)
    np.testing.assert_allclose(delta_lower(k1, k2, n, n, eps, alpha), expected)
    assert epsilon_lower(np.array([0]), np.array([5]), n, n, alpha)[0] == -np.inf
