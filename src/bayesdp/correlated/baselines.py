"""Baselines for correlated records: group DP, Ghosh–Kleinberg 2016 and Yang et al. 2015 (GMRF)."""

from __future__ import annotations

import itertools
import math
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_banded

from bayesdp.correlated.chain import MarkovChain
from bayesdp.errors import InvalidParameter, check_positive, check_positive_int, invalid

MAX_GMRF_ANY = 16


def group_dp_scale(length: int, epsilon: float) -> float:
    """σ = T/ε: every record of a length-T sequence may change (group privacy, Dwork 2006)."""
    return check_positive_int("length", length) / check_positive("epsilon", epsilon)


@dataclass(frozen=True)
class GK16:
    """Ghosh & Kleinberg 2016 (inferential privacy) on a binary chain: γ, ‖Γ‖₂ and the scale σ.

    `sigma` is None where the theorem does not apply (γ > 1/2 and ‖Γ‖₂ ≥ 1).
    """

    gamma: float
    _: KW_ONLY
    spectral_norm: float
    sigma: float | None

    @property
    def applicable(self) -> bool:
        return self.sigma is not None


def gk16_gamma(chain: MarkovChain) -> float:
    """γ = ½ log max(f_j, 1/f_j) with p = P(1|1), q = P(1|0) (pufferfish code,
    inferentialPrivacy_cal_gamma.m, after Ghosh & Kleinberg 2016)."""
    if chain.k != 2:
        raise invalid("chain.k", chain.k, "2 (the GK16 closed form is for binary chains)")
    p, q = float(chain.transition[1, 1]), float(chain.transition[0, 1])
    if not (0 < p < 1 and 0 < q < 1):
        raise invalid("transition", chain.transition.tolist(), "binary with all entries in (0, 1)")
    f = np.array([
        (p**2 + p * (1 - q)) / (p**2 + q * (1 - p)),
        (p / q) * ((1 - q) ** 2 + q * (1 - p)) / ((1 - p) * (1 - q) + p * (1 - p)),
        (1 - p) / (1 - q) * ((1 - q) * q + q * p) / ((1 - p) * q + p**2),
        ((1 - q) ** 2 + p * (1 - q)) / ((1 - q) ** 2 + q * (1 - p)),
    ])
    return float(np.log(np.max(np.concatenate([f, 1 / f]))) / 2)


def gk16_scale(chain: MarkovChain, length: int, epsilon: float) -> GK16:
    """σ = max_i 2 Σ_j [(I − Γ)^{-1}]_ij / ε, Γ = γ (sub- and super-diagonal) (Ghosh & Kleinberg 2016,
    'paper exact' in inferentialPrivacy2.m); not applicable when γ > 1/2 and ‖Γ‖₂ ≥ 1."""
    T = check_positive_int("length", length)
    eps = check_positive("epsilon", epsilon)
    gamma = gk16_gamma(chain)
    norm = 2 * gamma * math.cos(math.pi / (T + 1)) if T > 1 else 0.0  # tridiagonal Toeplitz
    if gamma > 0.5 and norm >= 1:
        return GK16(gamma, spectral_norm=norm, sigma=None)
    bands = np.zeros((3, T))
    bands[0, 1:] = -gamma
    bands[1, :] = 1.0
    bands[2, :-1] = -gamma
    rows = solve_banded((1, 1), bands, np.ones(T))
    return GK16(gamma, spectral_norm=norm, sigma=float(2 * rows.max() / eps))


def gmrf_sum_scale(covariance: Any, epsilon: float, width: float, *,
                   knowledge: str = "any") -> float:
    """Laplace λ = (Δ/ε) max_{i,K} |1 + 1ᵀβ_{U,i|K}| for the sum of a Gaussian field (Yang, Sato &
    Nakagawa 2015; derivation in the reference note §4). β: coefficients of x_i in E[X_U | x_i, x_K].

    knowledge="any" takes every known set K (at most 16 records); "none" only K = ∅, giving
    (Δ/ε) max_i |Σ_j Σ_ji| / Σ_ii.
    """
    eps = check_positive("epsilon", epsilon)
    delta = check_positive("width", width)
    cov = np.array(covariance, dtype=np.float64)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or not np.allclose(cov, cov.T):
        raise invalid("covariance", cov.shape, "a symmetric n x n matrix")
    if not np.all(np.isfinite(cov)) or np.linalg.eigvalsh(cov).min() <= 0:
        raise invalid("covariance", "not positive definite", "a positive definite matrix")
    if knowledge not in ("any", "none"):
        raise invalid("knowledge", knowledge, "'any' or 'none'")
    n = cov.shape[0]
    if knowledge == "none":
        return delta / eps * float(np.max(np.abs(cov.sum(axis=0)) / np.diag(cov)))
    if n > MAX_GMRF_ANY:
        raise InvalidParameter(
            f"knowledge='any' enumerates every known set: n={n} records is more than "
            f"{MAX_GMRF_ANY}; use knowledge='none'"
        )
    colsum = cov.sum(axis=0)
    worst = 0.0
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for r in range(n):
            combos = list(itertools.combinations(others, r))
            subsets = np.array(combos, dtype=np.int64).reshape(len(combos), r)
            cond = np.concatenate([np.full((len(subsets), 1), i), subsets], axis=1)  # C = {i} ∪ K
            s_cc = cov[cond[:, :, None], cond[:, None, :]]
            e0 = np.zeros((len(subsets), r + 1))
            e0[:, 0] = 1.0
            w = np.linalg.solve(s_cc, e0[..., None])[..., 0]  # Σ_CC^{-1} e_i
            # 1ᵀ Σ_{U,C} = (column sums over all rows) − (sums over rows in C)
            to_u = colsum[cond] - s_cc.sum(axis=1)
            worst = max(worst, float(np.max(np.abs(1.0 + np.sum(to_u * w, axis=1)))))
    return delta / eps * worst
