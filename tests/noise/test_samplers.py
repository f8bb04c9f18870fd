"""The exact samplers against their exact pmfs.

Each chi-square assertion uses the 1 - 1e-7 quantile, so its false-failure probability is 1e-7;
binomial assertions use a 5.5-sigma band (two-sided normal tail 3.8e-8).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from bayesdp.errors import DataError
from bayesdp.noise import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    rng_for_tests,
    samplers,
    snap,
    snap_add,
    unsnap,
)

FALSE_FAILURE = 1e-7


def chi_square_ok(draws: np.ndarray, support: np.ndarray, pmf: np.ndarray) -> tuple[float, float]:
    """Chi-square statistic over `support` (pmf exact there) plus one bin for everything else."""
    n = draws.size
    observed = np.array([np.count_nonzero(draws == v) for v in support], dtype=float)
    observed = np.append(observed, n - observed.sum())
    expected = np.append(pmf, max(1.0 - pmf.sum(), 0.0)) * n
    keep = expected >= 5
    rest_o, rest_e = observed[~keep].sum(), expected[~keep].sum()
    o = np.append(observed[keep], rest_o) if rest_e > 0 else observed[keep]
    e = np.append(expected[keep], rest_e) if rest_e > 0 else expected[keep]
    statistic = float(((o - e) ** 2 / e).sum())
    return statistic, float(stats.chi2.ppf(1 - FALSE_FAILURE, o.size - 1))


def dlap_pmf(t: float, support: np.ndarray) -> np.ndarray:
    p = math.exp(-1 / t)
    return (1 - p) / (1 + p) * p ** np.abs(support)


def dgauss_pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    x = np.arange(-math.ceil(40 * sigma) - 2, math.ceil(40 * sigma) + 3)
    z = np.exp(-(x.astype(float) ** 2) / (2 * sigma**2)).sum()
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma**2)) / z


@pytest.mark.parametrize("t", [0.05, 0.3, 1.0, 3.0, 40.0])
def test_discrete_laplace_matches_pmf(t: float) -> None:
    draws = discrete_laplace(t, 200_000, rng_for_tests(11))
    support = np.arange(-int(30 * t) - 3, int(30 * t) + 4)
    statistic, limit = chi_square_ok(draws, support, dlap_pmf(t, support))
    assert statistic < limit


@pytest.mark.parametrize("t", [2.0**20 * 1.37, 1.3e7])
def test_discrete_laplace_huge_scale_by_cdf_bins(t: float) -> None:
    """Huge scales: compare counts in 40 bins of |Z| whose probabilities follow from P(|Z| >= k)."""
    draws = np.abs(discrete_laplace(t, 400_000, rng_for_tests(12)))
    p = math.exp(-1 / t)
    edges = np.unique(np.round(np.linspace(0, 8 * t, 41)).astype(np.int64))
    tail = np.where(edges == 0, 1.0, 2 * p**edges / (1 + p))  # P(|Z| >= k)
    probs = np.append(-np.diff(tail), tail[-1])
    observed = np.bincount(np.searchsorted(edges, draws, side="right") - 1, minlength=probs.size)
    expected = probs * draws.size
    statistic = float(((observed - expected) ** 2 / expected).sum())
    assert statistic < stats.chi2.ppf(1 - FALSE_FAILURE, probs.size - 1)


def test_discrete_laplace_is_symmetric_and_zero_centred() -> None:
    draws = discrete_laplace(5.0, 400_000, rng_for_tests(13))
    p = math.exp(-1 / 5)
    sd = math.sqrt(2 * p / (1 - p) ** 2 / draws.size)
    assert abs(draws.mean()) < 5.5 * sd


@pytest.mark.parametrize("t", [0.4, 2.5])
def test_exact_path_alone_matches_pmf(monkeypatch: pytest.MonkeyPatch, t: float) -> None:
    """Force every draw through the interval-arithmetic path: it must give the same pmf."""
    monkeypatch.setattr(samplers, "TOLERANCE", 1e9)
    draws = discrete_laplace(t, 6_000, rng_for_tests(14))
    support = np.arange(-int(20 * t) - 3, int(20 * t) + 4)
    statistic, limit = chi_square_ok(draws, support, dlap_pmf(t, support))
    assert statistic < limit


@pytest.mark.parametrize("sigma", [0.4, 1.0, 2.5, 30.0])
def test_discrete_gaussian_matches_pmf(sigma: float) -> None:
    draws = discrete_gaussian(sigma, 200_000, rng_for_tests(15))
    support = np.arange(-int(8 * sigma) - 3, int(8 * sigma) + 4)
    statistic, limit = chi_square_ok(draws, support, dgauss_pmf(sigma, support))
    assert statistic < limit


def test_discrete_gaussian_huge_sigma_by_normal_bins() -> None:
    """σ = 1.5e6: the pmf equals the normal density to within 1e-12 relative; compare 40 bins."""
    sigma = 1.5e6
    draws = discrete_gaussian(sigma, 300_000, rng_for_tests(16))
    edges = np.linspace(-4, 4, 41) * sigma
    probs = np.diff(stats.norm.cdf(np.concatenate(([-np.inf], edges[1:-1], [np.inf])) / sigma))
    observed = np.bincount(np.searchsorted(edges[1:-1], draws), minlength=probs.size)
    expected = probs * draws.size
    statistic = float(((observed - expected) ** 2 / expected).sum())
    assert statistic < stats.chi2.ppf(1 - FALSE_FAILURE, probs.size - 1)


@pytest.mark.parametrize("knob", ["TOLERANCE", "_BERNOULLI_MARGIN"])
def test_exact_path_gaussian(monkeypatch: pytest.MonkeyPatch, knob: str) -> None:
    """Every proposal's magnitude, or every acceptance test, settled by the exact path alone."""
    monkeypatch.setattr(samplers, knob, 1e9)
    draws = discrete_gaussian(1.5, 3_000, rng_for_tests(17))
    support = np.arange(-15, 16)
    statistic, limit = chi_square_ok(draws, support, dgauss_pmf(1.5, support))
    assert statistic < limit


@pytest.mark.parametrize("gamma", [0.0, 1e-9, 0.3, 1.0, 4.0, 30.0])
def test_bernoulli_exp_rate(gamma: float) -> None:
    n = 400_000
    hits = int(bernoulli_exp(np.full(n, gamma), rng_for_tests(18)).sum())
    p = math.exp(-gamma)
    band = 5.5 * math.sqrt(n * p * (1 - p)) + 1e-9
    assert abs(hits - n * p) <= band
    if gamma == 0.0:
        assert hits == n


def test_bernoulli_exp_exact_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(samplers, "_BERNOULLI_MARGIN", np.float32(2.0))
    n = 4_000
    hits = int(bernoulli_exp(np.full(n, 0.7), rng_for_tests(19)).sum())
    p = math.exp(-0.7)
    assert abs(hits - n * p) <= 5.5 * math.sqrt(n * p * (1 - p))


def test_same_seed_same_draws() -> None:
    a = discrete_laplace(3.0, 1000, rng_for_tests(5))
    b = discrete_laplace(3.0, 1000, rng_for_tests(5))
    assert np.array_equal(a, b)


def test_snap_add_equals_snap_then_unsnap() -> None:
    """The fused release step is the three-step lattice arithmetic bit for bit, including huge steps."""
    rng = rng_for_tests(21)
    values = np.concatenate([rng.normal(0, 1e3, 10_000), [0.5, -0.5, 1.5, 2.0**40 + 0.5]])
    noise = rng.integers(-(2**60), 2**60, values.size)
    grid = 2.0**-20
    expected = unsnap(snap(values, grid) + noise, grid)
    assert np.array_equal(snap_add(values, noise.copy(), grid), expected)


def test_snap_add_refuses_values_beyond_the_grid() -> None:
    with pytest.raises(DataError, match="too large for the noise grid"):
        snap_add(np.array([1.0, 2.0**70]), np.zeros(2, dtype=np.int64), 1.0)


def dgauss_bins(sigma: float, edges: np.ndarray) -> np.ndarray:
    """The exact pmf summed over the bins [edges[i], edges[i+1]) of integers."""
    x = np.arange(-math.ceil(40 * sigma), math.ceil(40 * sigma) + 1)
    w = np.exp(-(x.astype(float) ** 2) / (2 * sigma**2))
    inner = np.searchsorted(edges[1:-1], x, side="right")
    return np.bincount(inner, weights=w, minlength=edges.size - 1) / w.sum()


def binned_ok(draws: np.ndarray, sigma: float, bins: int = 60) -> bool:
    """Chi-square over `bins` integer bins spanning ±5σ (the ends hold the tails, strips' and beyond)."""
    edges = np.unique(np.round(np.linspace(-5, 5, bins + 1) * sigma))
    probs = dgauss_bins(sigma, edges)
    observed = np.bincount(np.searchsorted(edges[1:-1], draws, side="right"), minlength=probs.size)
    expected = probs * draws.size
    statistic = float(((observed - expected) ** 2 / expected).sum())
    return statistic < stats.chi2.ppf(1 - FALSE_FAILURE, probs.size - 1)


def test_strip_sampler_matches_pmf() -> None:
    """The strip sampler (σ in STRIP_SIGMA; the huge-σ test above runs it too) against the exact
    pmf by bins of integers, and zero, -1 and 1 one by one in 2M draws (zero must not be counted
    twice: about 140 expected, a doubled zero is beyond the 5.5-sigma band)."""
    sigma = samplers.STRIP_SIGMA[0] * 1.37
    assert samplers.Strips.of(sigma) is not None
    draws = discrete_gaussian(sigma, 2_000_000, rng_for_tests(22))
    assert binned_ok(draws[:300_000], sigma)
    support = np.arange(-1, 2)
    expected = draws.size * dgauss_pmf(sigma, support)
    observed = np.array([np.count_nonzero(draws == v) for v in support])
    assert np.all(np.abs(observed - expected) <= 5.5 * np.sqrt(expected))


@pytest.mark.parametrize("knob", ["margin", "pool"])
def test_strip_sampler_exact_paths(monkeypatch: pytest.MonkeyPatch, knob: str) -> None:
    """Every acceptance the squeeze does not decide settled by interval arithmetic: from 64 bits
    of Y (margin), or from 23 bits with no spare words (pool); the tail always by bernoulli_exp."""
    if knob == "margin":
        monkeypatch.setattr(samplers, "_STRIP_MARGIN", 2.0)
    else:
        monkeypatch.setattr(samplers, "_STRIP_MARGIN", 2.0)
        monkeypatch.setattr(samplers, "_POOL_SHARE", 2**40)
        monkeypatch.setattr(samplers, "_POOL_MIN", 0)
    sigma = samplers.STRIP_SIGMA[0] * 1.01
    draws = discrete_gaussian(sigma, 20_000, rng_for_tests(23))
    assert binned_ok(draws, sigma, bins=20)


def test_strip_offsets_are_uniform() -> None:
    """Offsets redrawn outside the kernel (Lemire's method) are uniform on [0, d)."""
    rng = rng_for_tests(24)
    draws = np.array([samplers._offset(3, rng) for _ in range(30_000)])
    statistic, limit = chi_square_ok(draws, np.arange(3), np.full(3, 1 / 3))
    assert statistic < limit
