"""Expected accuracy of an aggregate from public parameters only (what `Query.preview` reports).

Figures are for the estimator a release runs (estimate.py) on a group of n values: the expected
half-width of the released interval and the expected absolute error of the estimate (noise
only; the bias of clipping and bounding depends on the data). A count, sum or histogram cell
has one noise, so both figures are exact. A mean's figures depend on where the mean lies in its
bounds and on which of its two stages a group takes: they are the averages of the estimator
itself over SIMULATED noise draws (no data is read), for a mean in the middle of its bounds,
and (`_max`) the largest over means at the middle, three quarters and the top of the bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesdp.mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian
from bayesdp.noise import Rng
from bayesdp.tables.engines.base import Diagnostics, ExactAggregates
from bayesdp.tables.estimate import estimate, measure_of
from bayesdp.tables.plan import Step

# Noise draws a mean's figures average over: their relative Monte Carlo error is about 1/√4000,
# under 2%.
SIMULATED = 4000
# The simulation reads no data, so a fixed seed leaks nothing; it makes a preview repeatable
# (the same figures twice, on a service and on its client).
SIMULATION_SEED = 15
# Above this σ a discrete Gaussian's mean absolute value is the continuous one's to 1e-6.
_DISCRETE_GAUSSIAN_EXACT = 50.0


@dataclass(frozen=True)
class Accuracy:
    """One aggregate's expected interval half-width and absolute error (see the module)."""

    half_width: float
    abs_error: float
    half_width_max: float
    abs_error_max: float


def mean_abs(mech: object) -> float:
    """E|X| of a mechanism's noise: discrete Laplace 2p/(1 - p²) with p = e^(-1/b) (the sum of
    k·p^|k| over its pmf, Inusah & Kozubowski 2006), Laplace b, Gaussian σ√(2/π), and a discrete
    Gaussian by summing its pmf (Canonne, Kamath & Steinke 2020, Def. 1)."""
    b = float(mech.scale)  # type: ignore[attr-defined]
    if isinstance(mech, DiscreteLaplace):
        p = math.exp(-1.0 / b)
        return 2.0 * p / (1.0 - p * p)
    if isinstance(mech, DiscreteGaussian) and b < _DISCRETE_GAUSSIAN_EXACT:
        k = np.arange(-math.ceil(12 * b) - 1, math.ceil(12 * b) + 2, dtype=np.float64)
        w = np.exp(-k * k / (2 * b * b))
        return float(np.abs(k) @ w / w.sum())
    if isinstance(mech, Gaussian | DiscreteGaussian):
        return b * math.sqrt(2.0 / math.pi)
    return b


def accuracy(step: Step, alpha: float, n: int, rng: Rng | None = None) -> Accuracy | None:
    """Expected accuracy of a count, sum, histogram cell or mean at n values (None for the other
    kinds, whose error depends on the data's spread; `Query.preview` bounds theirs). `rng`
    drives the simulation (default: seeded with SIMULATION_SEED)."""
    agg = step.aggregate
    if agg.kind in ("count_units", "count", "sum", "histogram"):
        (part,) = step.parts.values()
        hw, err = float(part.mechanism.interval(alpha)), mean_abs(part.mechanism)
        return Accuracy(hw, err, hw, err)
    if agg.kind != "mean":
        return None
    assert agg.bounds is not None
    lo, hi = agg.bounds
    gen = np.random.default_rng(SIMULATION_SEED) if rng is None else rng
    placed = (lo + (hi - lo) * f for f in (0.5, 0.75, 1.0))
    figures = [_simulated_mean(step, alpha, n, mu, gen) for mu in placed]
    return Accuracy(*figures[0], max(f[0] for f in figures), max(f[1] for f in figures))


def _simulated_mean(step: Step, alpha: float, n: int, mu: float, rng: Rng) -> tuple[float, float]:
    """Average half-width and absolute error of the mean estimator on SIMULATED groups of n
    values with mean mu (the release's own code, fed exact aggregates instead of data)."""
    size = np.full(SIMULATED, float(n))
    moments = np.column_stack([size, size * mu, size * mu * mu])
    exact = ExactAggregates(
        groups=pd.DataFrame(index=pd.RangeIndex(SIMULATED)), units=size.astype(np.int64),
        rows=size.astype(np.int64), moments={measure_of(step.aggregate): moments}, cells={},
        bins={}, diagnostics=Diagnostics(0, 0, 0, 0, 0))
    est = estimate(step, exact, np.arange(SIMULATED), alpha, rng)
    return float(np.mean(est.high - est.low) / 2), float(np.mean(np.abs(est.value - mu)))
