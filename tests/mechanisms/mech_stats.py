"""Exact statistical bands for the mechanism tests, each at false-failure probability 1e-7 per side."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

FALSE_FAILURE = 1e-7
# Two-sided normal band with tail 1e-7 per side: Φ^{-1}(1 - 1e-7) = 5.199.
Z_BAND = float(stats.norm.isf(FALSE_FAILURE))


def binomial_band(n: int, p: float) -> tuple[int, int]:
    """[lo, hi] holding a Binomial(n, p) count except with probability <= 1e-7 per side (exact quantiles)."""
    lo = int(stats.binom.ppf(FALSE_FAILURE, n, p))
    hi = int(stats.binom.isf(FALSE_FAILURE, n, p))
    # ppf gives the smallest k with CDF(k) >= 1e-7, so P(X < lo) < 1e-7; isf the k with SF(k) <= 1e-7.
    return lo, hi


def chi_square(observed: np.ndarray, probabilities: np.ndarray) -> tuple[float, float]:
    """Pearson statistic and its 1 - 1e-7 quantile; cells expected below 5 are pooled into one."""
    observed = np.asarray(observed, dtype=np.float64)
    n = observed.sum()
    expected = np.asarray(probabilities, dtype=np.float64) * n
    assert math.isclose(expected.sum(), n, rel_tol=1e-9), "probabilities must sum to 1"
    small = expected < 5
    if small.any():
        observed = np.append(observed[~small], observed[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    statistic = float(((observed - expected) ** 2 / expected).sum())
    return statistic, float(stats.chi2.isf(FALSE_FAILURE, observed.size - 1))


def dlap_cdf(t: float, z: np.ndarray) -> np.ndarray:
    """P(Z <= z) for P(z) ∝ exp(-|z|/t): p^{-z}/(1+p) below 0, 1 - p^{z+1}/(1+p) from 0 (CKS 2020, Def. 2)."""
    z = np.asarray(z, dtype=np.float64)
    p = math.exp(-1.0 / t)
    below = np.exp(np.minimum(z, 0.0) / t) / (1 + p)
    above = 1.0 - np.exp(-(np.maximum(z, 0.0) + 1.0) / t) / (1 + p)
    cdf: np.ndarray = np.where(z < 0, below, above)
    return cdf


def dlap_tail(t: float, k: int) -> float:
    """P(|Z| > k) = 2 p^{k+1}/(1+p), p = e^{-1/t}."""
    p = math.exp(-1.0 / t)
    return 2.0 * math.exp(-(k + 1) / t) / (1 + p)


def dgauss_weights(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Support ±(40σ + 2) and the exact discrete Gaussian pmf on it (brute-force normalisation)."""
    half = math.ceil(40 * sigma) + 2
    x = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-(x * x) / (2 * sigma * sigma))
    return x, w / w.sum()


def binned_counts(draws: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts of integer draws in the cells (-inf, e0], (e0, e1], ..., (e_last, inf)."""
    return np.bincount(np.searchsorted(edges, draws, side="left"), minlength=edges.size + 1)


def quantile_edges(t: float, cells: int) -> np.ndarray:
    """Integer cell edges near the quantiles j/cells of a distribution of scale t (edges unique)."""
    q = np.linspace(0, 1, cells + 1)[1:-1]
    edges = np.round(np.sign(q - 0.5) * -t * np.log1p(-np.abs(2 * q - 1)))
    return np.unique(edges)
