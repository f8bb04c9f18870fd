"""Randomized response (Dwork 2006, Example 1; k-ary form): the report law and the count estimator.

False-failure probabilities: binomial and chi-square checks use exact 1e-7 quantiles (per side);
mean checks use a 5.3-sigma band (normal two-sided tail 1.2e-7, the mean of 2,000 independent
estimates); variance checks use the exact 1e-7 quantiles of χ²(R − 1) on each side.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mech_stats import FALSE_FAILURE, binomial_band, chi_square
from scipy import stats

from bayesdp import RandomizedResponse, rng_for_tests

RUNS = 2000


@pytest.mark.parametrize(("epsilon", "k"), [(0.5, 2), (1.0, 2), (1.0, 5), (3.0, 10), (1e-3, 3)])
def test_report_probabilities_are_exact(epsilon: float, k: int) -> None:
    rr = RandomizedResponse(epsilon, categories=k)
    assert rr.p_truth == pytest.approx(math.exp(epsilon) / (math.exp(epsilon) + k - 1), rel=1e-15)
    assert rr.p_truth + (k - 1) * rr.p_other == pytest.approx(1.0, rel=1e-15)
    assert rr.p_truth / rr.p_other == pytest.approx(math.exp(epsilon), rel=1e-14)  # ε-local DP
    assert rr.guarantee.epsilon == epsilon
    assert rr.guarantee.relation == "replace_one"


@pytest.mark.parametrize(("epsilon", "k"), [(0.5, 2), (1.0, 5), (3.0, 4)])
def test_report_law_given_the_truth(epsilon: float, k: int) -> None:
    rr = RandomizedResponse(epsilon, categories=k)
    rng = rng_for_tests(500 + k)
    n = 200_000
    truth = rng.integers(0, k, n)
    report = rr.release(truth, rng=rng)
    assert report.dtype == np.int64 and report.shape == truth.shape
    same = int(np.count_nonzero(report == truth))
    lo, hi = binomial_band(n, rr.p_truth)
    assert lo <= same <= hi
    # Joint (truth, report) cells: P = P(truth) · (p_truth on the diagonal, p_other elsewhere).
    observed = np.bincount(truth * k + report, minlength=k * k)
    p_truth_cell = np.bincount(truth, minlength=k) / n
    law = np.where(np.eye(k, dtype=bool), rr.p_truth, rr.p_other) * p_truth_cell[:, None]
    statistic, critical = chi_square(observed, law.ravel())
    assert statistic < critical


@pytest.mark.parametrize(
    ("epsilon", "truth_counts"), [(0.5, [700, 300]), (1.0, [100, 200, 300, 400]), (2.0, [50, 0, 950])]
)
def test_estimator_is_unbiased_with_the_stated_variance(epsilon: float, truth_counts: list[int]) -> None:
    k = len(truth_counts)
    rr = RandomizedResponse(epsilon, categories=k)
    truth = np.repeat(np.arange(k), truth_counts)
    n = truth.size
    rng = rng_for_tests(600 + k)
    reports = rr.release(np.broadcast_to(truth, (RUNS, n)), rng=rng)
    estimates = [rr.estimate_counts(row) for row in reports]
    counts = np.array([e.counts for e in estimates])
    stderr = np.array([e.stderr for e in estimates])
    np.testing.assert_allclose(counts.sum(axis=1), n, rtol=1e-9)  # the estimates always total n

    # The stated variance at the truth: Σ Bernoulli variances /(p − q)² (each person reports c
    # with probability p if they hold c, q otherwise).
    p, q = rr.p_truth, rr.p_other
    held = np.array(truth_counts, dtype=np.float64)
    variance = (held * p * (1 - p) + (n - held) * q * (1 - q)) / (p - q) ** 2
    assert np.all(np.abs(counts.mean(axis=0) - held) <= 5.3 * np.sqrt(variance / RUNS))
    scaled = (RUNS - 1) * counts.var(axis=0, ddof=1) / variance
    assert np.all(scaled >= stats.chi2.ppf(FALSE_FAILURE, RUNS - 1))
    assert np.all(scaled <= stats.chi2.isf(FALSE_FAILURE, RUNS - 1))

    # The reported stderr is the same formula at the estimate; where the estimate is never clipped
    # (truth away from 0 and n) stderr² is linear in it, so its mean is the variance at the truth.
    inside = held >= 50
    sq = stderr[:, inside] ** 2
    # (Binary: p(1 − p) = q(1 − q), so stderr is a constant and only rounding remains.)
    band = 5.3 * sq.std(axis=0, ddof=1) / math.sqrt(RUNS) + 1e-12 * variance[inside]
    assert np.all(np.abs(sq.mean(axis=0) - variance[inside]) <= band)


def test_estimate_on_a_known_table() -> None:
    """Exact arithmetic of N̂_c = (n_c − n q)/(p − q) on fixed responses (no randomness)."""
    rr = RandomizedResponse(math.log(3.0), categories=2)  # p = 3/4, q = 1/4
    est = rr.estimate_counts([1] * 60 + [0] * 40)
    np.testing.assert_allclose(est.counts, [(40 - 25) / 0.5, (60 - 25) / 0.5])
    v = np.array([30 * 3 / 16 + 70 * 3 / 16, 70 * 3 / 16 + 30 * 3 / 16])
    np.testing.assert_allclose(est.stderr, np.sqrt(v) / 0.5)


def test_scalar_in_scalar_out_and_shapes_kept() -> None:
    rr = RandomizedResponse(1.0, categories=3)
    rng = rng_for_tests(9)
    assert isinstance(rr.release(2, rng=rng), int)
    assert isinstance(rr(np.int64(1), rng=rng), int)
    for shape in [(4,), (2, 3), (0,)]:
        out = rr.release(np.zeros(shape, dtype=np.int64), rng=rng)
        assert out.shape == shape and out.dtype == np.int64
