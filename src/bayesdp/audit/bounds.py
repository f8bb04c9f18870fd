"""Exact Clopper–Pearson bounds on event probabilities and the ε/δ lower bounds they imply.

For an event S with k₁ hits in n₁ runs on one input and k₂ hits in n₂ runs on its neighbour,
p₁ ≥ Beta⁻¹(α/2; k₁, n₁-k₁+1) and p₂ ≤ Beta⁻¹(1-α/2; k₂+1, n₂-k₂) hold together with
probability ≥ 1-α, so ε ≥ ln(p₁/p₂) and δ ≥ p₁ - e^ε p₂ at that confidence (Clopper and Pearson
1934; the recipe of StatDP, Ding et al. CCS 2018, and DP-Sniper, Bichsel et al. S&P 2021).
All functions take arrays and work on many events at once.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betaincinv


def cp_lower(k: np.ndarray, n: float | np.ndarray, a: float) -> np.ndarray:
    """One-sided 1-a lower Clopper–Pearson bound on a binomial p from k hits in n runs (CP 1934)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.broadcast_to(np.asarray(n, dtype=np.float64), k.shape)
    out = np.zeros(k.shape)
    pos = k > 0
    out[pos] = betaincinv(k[pos], n[pos] - k[pos] + 1.0, a)
    return out


def cp_upper(k: np.ndarray, n: float | np.ndarray, a: float) -> np.ndarray:
    """One-sided 1-a upper Clopper–Pearson bound, 1 - lower bound of the misses (CP 1934)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.broadcast_to(np.asarray(n, dtype=np.float64), k.shape)
    return 1.0 - cp_lower(n - k, n, a)


def epsilon_lower(k1: np.ndarray, k2: np.ndarray, n1: int, n2: int, alpha: float) -> np.ndarray:
    """ln(p₁⁻/p₂⁺) at joint confidence 1-α: a lower bound on ε (−inf when k₁ = 0)."""
    p1 = cp_lower(k1, float(n1), alpha / 2)
    p2 = cp_upper(k2, float(n2), alpha / 2)
    with np.errstate(divide="ignore"):
        out: np.ndarray = np.log(p1) - np.log(p2)
    return out


def delta_lower(
    k1: np.ndarray, k2: np.ndarray, n1: int, n2: int, epsilon: float, alpha: float
) -> np.ndarray:
    """p₁⁻ - e^ε p₂⁺ at joint confidence 1-α: a lower bound on δ at that ε (hockey stick)."""
    p1 = cp_lower(k1, float(n1), alpha / 2)
    p2 = cp_upper(k2, float(n2), alpha / 2)
    return p1 - math.exp(epsilon) * p2
