"""The Gaussian mechanism, calibrated exactly for the discrete Gaussian it samples (CKS 2020).

`Gaussian` rounds to the power-of-two grid and adds g·Z with Z a discrete Gaussian, so its
privacy is that of the discrete Gaussian with integer sensitivity D = floor(Δ/g) + 1 steps.
`DiscreteGaussian` is the same on integers with D = Δ.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from bayesdp.errors import InvalidParameter, check_delta, invalid
from bayesdp.mechanisms.base import (
    RHO_RANGE,
    Mechanism,
    as_array,
    as_integers,
    check_alpha,
    check_epsilon,
    check_in_range,
    check_noise_steps,
    check_sensitivity,
    shaped,
)
from bayesdp.mechanisms.laplace import grid_steps
from bayesdp.noise import Rng, discrete_gaussian, grid_for, snap_add
from bayesdp.privacy import Guarantee, Noise, Relation

# Below this σ the discrete Gaussian's tails are summed exactly; above it, by the midpoint rule.
_EXACT_SIGMA = 4096.0


def _support(sigma: float) -> np.ndarray:
    half = math.ceil(40 * sigma) + 2
    return np.arange(-half, half + 1, dtype=np.float64)


def midpoint_error(a: float, sigma: float) -> float:
    """Bound on |P[X >= m] − Φ̄(a/σ)|, a = m − 1/2, for X ~ N_Z(0, σ²) (Euler–Maclaurin midpoint rule).

    Each unit cell errs by at most max|f''|/24 with f(x) = e^{−x²/2σ²}, normalised by
    Z >= √(2π)σ (Jacobi). Beyond a = √3σ, |f''| decreases, so the sum is at most
    (|f''(a)| + |f'(a)|)/24 = f(a)(a²/σ⁴ + a/σ²)/24: relative to the tail, O(a³/σ⁶).
    Nearer the centre, sup|f''| = 1/σ² and ∫|f''| = 4e^{-1/2}/σ give 0.05/σ².
    """
    if a >= math.sqrt(3) * sigma:
        density = math.exp(-a * a / (2 * sigma * sigma)) / (math.sqrt(2 * math.pi) * sigma)
        return density * (a * a / sigma**4 + a / sigma**2) / 24
    return 0.05 / sigma**2


def dgauss_tail(a: float, sigma: float) -> tuple[float, float]:
    """P[X > a] for X discrete Gaussian N_Z(0, σ²), as (estimate, absolute error bound)."""
    m = math.floor(a) + 1
    if sigma <= _EXACT_SIGMA:
        x = _support(sigma)
        w = np.exp(-(x * x) / (2 * sigma * sigma))
        return float(w[x >= m].sum() / w.sum()), 0.0
    return float(ndtr(-(m - 0.5) / sigma)), midpoint_error(abs(m - 0.5), sigma)


def dgauss_delta(epsilon: float, sigma: float, sensitivity: int) -> float:
    """Tight δ(ε) of the discrete Gaussian with integer sensitivity Δ (CKS 2020, Thm 7), rounded up."""
    c = epsilon * sigma * sigma / sensitivity
    p1, e1 = dgauss_tail(c - sensitivity / 2, sigma)
    p2, e2 = dgauss_tail(c + sensitivity / 2, sigma)
    return max(p1 - math.exp(epsilon) * p2, 0.0) + e1 + math.exp(epsilon) * e2


def calibrate_sigma(epsilon: float, delta: float, sensitivity: int) -> float:
    """Smallest σ (to 1e-9 relative) with dgauss_delta(ε, σ, Δ) <= δ, by bisection on log σ."""
    lo, hi = sensitivity * 1e-3, float(sensitivity)
    while dgauss_delta(epsilon, hi, sensitivity) > delta:
        lo, hi = hi, hi * 2
    while hi / lo > 1 + 1e-9:
        mid = math.sqrt(lo * hi)
        if dgauss_delta(epsilon, mid, sensitivity) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def dgauss_quantile(sigma: float, alpha: float) -> int:
    """Smallest k with P(|X| > k) <= α for X ~ N_Z(0, σ²) (midpoint error included above _EXACT_SIGMA)."""
    if sigma <= _EXACT_SIGMA:
        x = _support(sigma)
        w = np.exp(-(x * x) / (2 * sigma * sigma))
        outside = 1.0 - np.cumsum(w[x >= 0] * np.where(x[x >= 0] == 0, 1.0, 2.0)) / w.sum()
        return int(np.argmax(outside <= alpha))
    k = max(math.ceil(-sigma * float(ndtri(alpha / 2)) - 0.5), 0)
    while 2 * (float(ndtr(-(k + 0.5) / sigma)) + midpoint_error(k + 0.5, sigma)) > alpha:
        k += max(1, math.ceil(sigma * 1e-6))
    return k


def _parameters(epsilon: float | None, delta: float | None, rho: float | None) -> tuple[str, float, float]:
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise InvalidParameter("give either rho (zCDP) or epsilon and delta, not both")
        return "zcdp", check_in_range("rho", rho, RHO_RANGE), 0.0
    if epsilon is None or delta is None:
        raise InvalidParameter("Gaussian needs epsilon and delta (approximate DP) or rho (zCDP)")
    e = check_epsilon(epsilon)
    d = check_delta("delta", delta)
    if not d >= 1e-300:
        raise invalid("delta", delta, "in [1e-300, 1): the Gaussian mechanism is never pure ε-DP")
    return "approx", e, d


class _GaussianBase(Mechanism):
    def __init__(
        self,
        epsilon: float | None,
        delta: float | None,
        rho: float | None,
        relation: Relation,
        unit: str,
    ) -> None:
        self.kind, a, b = _parameters(epsilon, delta, rho)
        self._relation, self._unit = relation, unit
        self._a, self._b = a, b

    def _settle(self, steps: int) -> None:
        """Calibrate σ in grid steps for integer sensitivity `steps` and fix the guarantee."""
        if self.kind == "zcdp":
            self.sigma_steps = steps / math.sqrt(2 * self._a)
        else:
            self.sigma_steps = calibrate_sigma(self._a, self._b, steps)
        check_noise_steps(self.sigma_steps, "this epsilon, delta or rho with this sensitivity")
        self.rho = steps * steps / (2 * self.sigma_steps**2)

    def _stated(self, noise: tuple[Noise, ...]) -> Guarantee:
        """ρ-zCDP, or (ε, δ)-DP, as asked."""
        if self.kind == "zcdp":
            return Guarantee.zcdp(self._a, relation=self._relation, unit=self._unit, noise=noise)
        return Guarantee(self._a, delta=self._b, relation=self._relation, unit=self._unit, noise=noise)


class Gaussian(_GaussianBase):
    """Gaussian noise on the grid: (ε, δ)-DP tight by CKS 2020 Thm 7, or ρ-zCDP by Thm 14 (ρ = D²/2σ²).

    `epsilon` in [1e-12, 700] with `delta` in [1e-300, 1), or `rho` in [1e-24, 2.5e5];
    `sensitivity` in [1e-200, 1e200]; σ at most 2^50 grid steps.
    """

    family = "gaussian"
    grid: float

    def __init__(
        self,
        epsilon: float | None = None,
        *,
        delta: float | None = None,
        sensitivity: float = 1.0,
        rho: float | None = None,
        relation: Relation = "add_remove",
        unit: str = "row",
    ) -> None:
        super().__init__(epsilon, delta, rho, relation, unit)
        self.sensitivity = check_sensitivity(sensitivity)
        if self.kind == "zcdp":
            rough = self.sensitivity / math.sqrt(2 * self._a)
        else:  # the classical σ only picks the grid; the calibration below is exact
            rough = self.sensitivity * math.sqrt(2 * math.log(1.25 / self._b)) / self._a
        self.grid = grid_for(rough, self.sensitivity)
        self._settle(grid_steps(self.sensitivity, self.grid))

    @property
    def scale(self) -> float:
        """σ in data units."""
        return self.sigma_steps * self.grid

    def _release(self, values: Any, rng: Rng) -> Any:
        x = as_array(values)
        noise = discrete_gaussian(self.sigma_steps, x.size, rng)
        return shaped(snap_add(x.ravel(), noise, self.grid), values)

    def interval(self, alpha: float = 0.05) -> float:
        """Half-width w with P(|output - value| <= w) >= 1 - α (noise plus at most g/2 of rounding)."""
        return (dgauss_quantile(self.sigma_steps, check_alpha(alpha)) + 0.5) * self.grid

    def __repr__(self) -> str:
        return f"Gaussian({self.guarantee}, sensitivity={self.sensitivity:g}, sigma={self.scale:.6g})"


class DiscreteGaussian(_GaussianBase):
    """Integer queries plus discrete Gaussian noise (CKS 2020): tight (ε, δ) by Thm 7 or ρ-zCDP by Thm 14.

    Ranges as `Gaussian`'s, with an integer `sensitivity` and σ at most 2^50.
    """

    family = "discrete_gaussian"

    def __init__(
        self,
        epsilon: float | None = None,
        *,
        delta: float | None = None,
        sensitivity: int = 1,
        rho: float | None = None,
        relation: Relation = "add_remove",
        unit: str = "row",
    ) -> None:
        super().__init__(epsilon, delta, rho, relation, unit)
        self.sensitivity = int(as_integers(check_sensitivity(sensitivity), "sensitivity"))
        self._settle(self.sensitivity)

    @property
    def scale(self) -> float:
        return self.sigma_steps

    def _release(self, values: Any, rng: Rng) -> Any:
        x = as_integers(values).ravel()
        out = x + discrete_gaussian(self.sigma_steps, x.size, rng)
        return shaped(out, values) if np.ndim(values) else int(out[0])

    def interval(self, alpha: float = 0.05) -> float:
        return float(dgauss_quantile(self.sigma_steps, check_alpha(alpha)))

    def __repr__(self) -> str:
        return f"DiscreteGaussian({self.guarantee}, sensitivity={self.sensitivity}, sigma={self.scale:.6g})"
