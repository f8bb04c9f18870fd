"""Expected accuracy of an aggregate from public parameters only (what `Query.preview` reports).

Figures are for the estimator a release runs on a group of n values: the expected half-width of
the released interval and the expected absolute error of the estimate (noise only; the bias of
clipping and bounding depends on the data). Each aggregate kind computes its own
(`Aggregate.accuracy`): a count, sum or histogram cell has one noise, so both figures are exact
(`one_noise`); a mean simulates its two stages (`means`); a std or quantile gives an upper bound
on the half-width only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bayesdp.mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian
from bayesdp.tables.estimate import PlannedStep

# Above this σ a discrete Gaussian's mean absolute value is the continuous one's to 1e-6.
_DISCRETE_GAUSSIAN_EXACT = 50.0


@dataclass(frozen=True)
class Accuracy:
    """One aggregate's expected interval half-width and absolute error (see the module); the
    `_max` figures are the largest over where the value may lie in its bounds. `upper_bound`:
    the half-widths are upper bounds and the errors are not given (NaN)."""

    half_width: float
    abs_error: float
    half_width_max: float
    abs_error_max: float
    upper_bound: bool = False


def bound(half_width: float) -> Accuracy:
    """An upper bound on the half-width, without an expected error."""
    return Accuracy(half_width, math.nan, half_width, math.nan, upper_bound=True)


def one_noise(step: PlannedStep, alpha: float) -> Accuracy:
    """Exact figures of an aggregate released with one noise: its half-width and E|noise|."""
    (part,) = step.parts.values()
    hw, err = float(part.mechanism.interval(alpha)), mean_abs(part.mechanism)
    return Accuracy(hw, err, hw, err)


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
