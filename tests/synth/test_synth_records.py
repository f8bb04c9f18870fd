"""Local release by perturbed records (W&Z Example 2.1) and the exponential-mechanism database."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln
from synth_stats import chi2_upper, within_binomial

from bayesdp import rng_for_tests
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.synth import perturb_records, sanitized_database
from bayesdp.synth.exponential import compositions


def test_seed_figure_mean_recovered_to_about_014():
    # Seed 004: n = 10,000, ε = 0.1, Beta(10, 10): the mean is off by about √2/(ε√n) = 0.14.
    # Over R = 300 releases, Σ(err/σ)² is chi-square(R) up to the tiny Var(X)/n term; checked
    # between its 1e-7 quantiles (false failure <= 2e-7). The reported se matches to 6%
    # (sd of a sample sd of Laplace data is about √(5/4n) = 1.1%: 5.3 sd; false failure < 1e-7).
    rng = rng_for_tests(12)
    n, eps, reps = 10_000, 0.1, 300
    sigma = math.sqrt(2) / (eps * math.sqrt(n))
    assert sigma == pytest.approx(0.1414, abs=1e-4)
    errs = np.empty(reps)
    for r in range(reps):
        x = rng.beta(10, 10, n)
        rel = perturb_records(x, (0, 1), eps, rng=rng)
        est = rel.mean()
        errs[r] = est.estimate - x.mean()
        if r == 0:
            assert est.standard_error == pytest.approx(sigma, rel=0.06)
            assert rel.noise_scale == pytest.approx(10.0, rel=1e-5)
    stat = float(((errs / sigma) ** 2).sum())
    assert stats.chi2.ppf(1e-7, reps) < stat < stats.chi2.isf(1e-7, reps)


def test_released_noise_is_laplace():
    # KS distance of the noise to Laplace(b): above sqrt(ln(2e7)/(2n)) with probability < 1e-7 (DKW).
    rng = rng_for_tests(13)
    x = rng.random(20_000)
    rel = perturb_records(x, (0, 1), 1.0, rng=rng)
    ks = stats.kstest(rel.values - x, stats.laplace(scale=rel.noise_scale).cdf).statistic
    assert ks < math.sqrt(math.log(2e7) / (2 * x.size))


def test_explain_says_records_are_noise_but_means_concentrate():
    rel = perturb_records(rng_for_tests(14).random(1000), (0, 1), 0.1, rng=rng_for_tests(14))
    text = rel.explain()
    assert "almost pure noise" in text and "concentrate" in text and "1000" in text


def test_deconvolved_histogram_undoes_the_noise():
    # Data in the left half only; noise b = 0.2 spreads it. The corrected estimate puts the mass
    # back: over 12 seeds the estimate of the left cell had mean 0.9993 and sd 0.0008, so the
    # 0.05 tolerance is some 60 sd; the naive histogram of clipped noisy values is off by ~0.2.
    rng = rng_for_tests(15)
    x = rng.uniform(0, 0.5, 400_000)
    rel = perturb_records(x, (0, 1), 5.0, rng=rng)
    hist = rel.histogram(bins=2)
    np.testing.assert_allclose(hist.probs, [1.0, 0.0], atol=0.05)
    naive = np.histogram(np.clip(rel.values, 0, 1), bins=2, range=(0, 1))[0] / x.size
    assert naive[1] > 0.15


def test_perturb_records_bad_input():
    with pytest.raises(DataError):
        perturb_records(np.zeros((5, 2)), (0, 1), 1.0)
    with pytest.raises(InvalidParameter):
        perturb_records([0.5], (0, 1), -1.0)
    with pytest.raises(InvalidParameter):
        perturb_records([0.5], (0, 1), 1.0).histogram(bins=0)


def test_compositions_enumerates_every_histogram():
    comp = compositions(4, 3)
    assert comp.shape == (math.comb(6, 2), 3)
    assert (comp.sum(axis=1) == 4).all() and len({tuple(r) for r in comp}) == comp.shape[0]


def test_sanitized_database_follows_the_exponential_mechanism():
    # Domain {0, 1}, k = 3, n = 4: four candidate histograms with probabilities
    # ∝ C(3; h) exp(-ε n KS / 2). 3,000 releases; every count within its binomial band (1e-7).
    data = np.array([0, 0, 0, 1])
    eps, k, reps = 1.0, 3, 3_000
    hist = compositions(k, 2)
    ks = np.abs(np.cumsum(hist, axis=1) / k - np.array([0.75, 1.0])).max(axis=1)
    logw = gammaln(k + 1) - gammaln(hist + 1).sum(axis=1) - eps * data.size * ks / 2
    p = np.exp(logw - logw.max())
    p /= p.sum()
    rng = rng_for_tests(16)
    ones = np.array([sanitized_database(data, [0, 1], eps, k, rng=rng).values.sum()
                     for _ in range(reps)])
    counts = np.array([(ones == h[1]).sum() for h in hist])
    assert within_binomial(counts, reps, p)
    assert ((counts - reps * p) ** 2 / (reps * p)).sum() < chi2_upper(3)


def test_sanitized_database_bad_input():
    with pytest.raises(DataError, match="not in the domain"):
        sanitized_database([0.5], [0, 1], 1.0, 2)
    with pytest.raises(DataError, match="exceeds"):
        sanitized_database([0, 1], np.arange(50), 1.0, 40)
    with pytest.raises(InvalidParameter):
        sanitized_database([0, 1], [0, 1], 1.0, 0)
