"""Privacy cost of Thresholdout on the power-of-two grid (sparse vector + Laplace, Dwork & Roth 2014 §3.6).

Each noise lives on its own grid g = grid_for(b), so every comparison and release is exact
integer arithmetic. Rounding a query mean (sensitivity Δ = 1/n) to a grid g moves it by at
most floor(Δ/g) + 1 steps, and the privacy proof shifts each noise by whole steps of its own
grid; the costs below are those step counts times g/b, a factor 1 + O(2^-20·σn) above the
textbook ε = Δ(1/σ + 1/σ_threshold + 2/σ_compare) per overflow (seed 002, proof of Thm 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bayesdp.noise import grid_for


def _steps(sensitivity: float, grid: float) -> int:
    """Largest change, in grid steps, of two values at most `sensitivity` apart after rounding."""
    return math.floor(sensitivity / grid) + 1


@dataclass(frozen=True)
class ThresholdoutCost:
    """ε of one overflow (answer + threshold + comparison) and of an open segment (threshold only)."""

    overflow: float
    open_segment: float
    nominal: float


def thresholdout_cost(
    n: int, sigma: float, threshold_noise: float, compare_noise: float
) -> ThresholdoutCost:
    """Per-overflow ε of AboveThreshold plus a Laplace release, Δ = 1/n (Dwork & Roth Thm 3.23)."""
    delta = 1.0 / n
    g_answer, g_threshold, g_compare = (grid_for(b) for b in (sigma, threshold_noise, compare_noise))
    d_compare = _steps(delta, g_compare)  # |snapped gap − snapped gap'| in comparison steps
    d_threshold = math.ceil(d_compare * g_compare / g_threshold)  # threshold shift, its own steps
    s_compare = d_compare + math.ceil(d_threshold * g_threshold / g_compare)  # overflow query shift
    answer = _steps(delta, g_answer) * g_answer / sigma
    threshold = d_threshold * g_threshold / threshold_noise
    compare = s_compare * g_compare / compare_noise
    nominal = delta * (1.0 / sigma + 1.0 / threshold_noise + 2.0 / compare_noise)
    return ThresholdoutCost(answer + threshold + compare, threshold, nominal)
