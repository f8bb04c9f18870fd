"""The Laplace mechanism on the power-of-two grid, and its integer form (Dwork 2006, seed 003 §3)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesdp.mechanisms.base import (
    Mechanism,
    as_array,
    as_integers,
    check_alpha,
    check_noise_steps,
    check_sensitivity,
    shaped,
)
from bayesdp.noise import Rng, discrete_laplace, grid_for, snap_add
from bayesdp.privacy import Relation


def dlap_quantile(t: float, alpha: float) -> int:
    """Smallest k with P(|Z| > k) <= α for P(z) ∝ e^{-|z|/t}: P(|Z| > k) = 2p^{k+1}/(1+p), p = e^{-1/t}."""
    log_p = -1.0 / t
    k = math.ceil((math.log(alpha) + math.log1p(math.exp(log_p)) - math.log(2.0)) / log_p) - 1
    return max(k, 0)


def grid_steps(sensitivity: float, grid: float) -> int:
    """Largest change in grid steps after rounding two inputs at most `sensitivity` apart."""
    return math.floor(sensitivity / grid) + 1


class Laplace(Mechanism):
    """ε-DP Laplace noise of scale ≈ Δ/ε (Dwork 2006, Thm 2), released on a power-of-two grid.

    Each value is rounded to the grid g = grid_for(Δ/ε, Δ), and g·Z is added with Z discrete Laplace
    of scale D/ε steps, where D = floor(Δ/g) + 1 bounds the change of a rounded input; outputs
    are multiples of g whatever the input, so floating point leaks nothing (Mironov 2012).

    `epsilon` in [1e-12, 700], `sensitivity` in [1e-200, 1e200] (`mechanisms.base` ranges).
    """

    family = "laplace"
    grid: float

    def __init__(
        self,
        epsilon: float,
        *,
        sensitivity: float = 1.0,
        relation: Relation = "add_remove",
        unit: str = "row",
    ) -> None:
        self._pure(epsilon, relation, unit)
        self.sensitivity = check_sensitivity(sensitivity)
        self.grid = grid_for(self.sensitivity / self.epsilon, self.sensitivity)
        self.steps = grid_steps(self.sensitivity, self.grid) / self.epsilon

    @property
    def scale(self) -> float:
        """Laplace b in data units: (D·g)/ε, slightly above Δ/ε to pay for rounding."""
        return self.steps * self.grid

    def _release(self, values: Any, rng: Rng) -> Any:
        x = as_array(values)
        noise = discrete_laplace(self.steps, x.size, rng)
        return shaped(snap_add(x.ravel(), noise, self.grid), values)

    def interval(self, alpha: float = 0.05) -> float:
        """Half-width w with P(|output - value| <= w) >= 1 - α (noise plus at most g/2 of rounding)."""
        return (dlap_quantile(self.steps, check_alpha(alpha)) + 0.5) * self.grid

    def __repr__(self) -> str:
        return f"Laplace(epsilon={self.epsilon:g}, sensitivity={self.sensitivity:g}, scale={self.scale:.6g})"


class DiscreteLaplace(Mechanism):
    """ε-DP for integer queries: Z with P(z) ∝ exp(-ε|z|/Δ) (CKS 2020, Def. 2; Ghosh et al. 2009).

    `epsilon` in [1e-12, 700], `sensitivity` a positive integer with Δ/ε at most 2^50.
    """

    family = "discrete_laplace"

    def __init__(
        self,
        epsilon: float,
        *,
        sensitivity: int = 1,
        relation: Relation = "add_remove",
        unit: str = "row",
    ) -> None:
        self._pure(epsilon, relation, unit)
        self.sensitivity = int(as_integers(check_sensitivity(sensitivity), "sensitivity"))
        check_noise_steps(self.scale, f"sensitivity={sensitivity!r} with epsilon={epsilon!r}")

    @property
    def scale(self) -> float:
        return self.sensitivity / self.epsilon

    def _release(self, values: Any, rng: Rng) -> Any:
        x = as_integers(values).ravel()
        out = x + discrete_laplace(self.scale, x.size, rng)
        return shaped(out, values) if np.ndim(values) else int(out[0])

    def interval(self, alpha: float = 0.05) -> float:
        return float(dlap_quantile(self.scale, check_alpha(alpha)))

    def __repr__(self) -> str:
        return f"DiscreteLaplace(epsilon={self.epsilon:g}, sensitivity={self.sensitivity})"
