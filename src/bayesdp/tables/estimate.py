"""Noise, estimates and confidence intervals from exact bounded aggregates (engine independent).

Every interval covers the noise only (not the bias from clipping or bounding, which the release
reports as counts beside it): with probability at least 1 - α the exact bounded value lies in
it. An aggregate made of several noisy parts gives each part α/parts (union bound), and the
interval is the range of the estimator over the parts' intervals (interval arithmetic), or
bounds the estimator's own error by the exact quantiles of its noises' combinations (a mean:
`combined_widths`, `means.py`). Each
aggregate kind computes its own (`Aggregate.estimate`); this module holds what they share,
including `PlannedStep`: a plan's step as the kinds read it, so they never import the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from bayesdp.noise import Rng
from bayesdp.tables.engines.base import Cells, CellWindow, ExactAggregates

# Draws and seed of `combined_width`'s numerical integration (reads no data, so a fixed seed leaks
# nothing and makes every release's intervals computed alike).
COMBINED = 200_000
COMBINED_SEED = 16
# Reads a quantile's whole grid (`Cells` with margin FULL_GRID) from the same bounded rows.
FullGrid = Callable[[Cells], CellWindow]


class PlannedPart(Protocol):
    """One noisy part of a step (`plan.Part`): its mechanism and noise scale."""

    @property
    def mechanism(self) -> Any: ...

    @property
    def scale(self) -> float: ...


class PlannedStep(Protocol):
    """What an aggregate reads of its step in the plan (`plan.Step`, which holds the aggregate):
    typed here so that the aggregates never import the plan, which imports them."""

    @property
    def aggregate(self) -> Estimable: ...

    @property
    def parts(self) -> Mapping[str, PlannedPart]: ...


class Estimable(Protocol):
    """What `estimate` calls on a step's aggregate (`aggregates.Aggregate`)."""

    def value_range(self) -> tuple[float, float]: ...

    def estimate(self, step: PlannedStep, exact: ExactAggregates, index: np.ndarray, alpha: float,
                 *, rng: Rng, full_grid: FullGrid | None) -> Estimate: ...


@dataclass(frozen=True)
class Estimate:
    """Noisy values and their interval per released group (for histograms, per group and bin)."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray


def noisy(step: PlannedStep, part: str, exact: np.ndarray, alpha: float, *, rng: Rng
          ) -> tuple[np.ndarray, float]:
    """`exact` with the noise of the step's `part`, and that noise's half-width at level 1 - α."""
    mech = step.parts[part].mechanism
    return np.asarray(mech.release(exact, rng=rng), dtype=np.float64), float(mech.interval(alpha))


def combined_width(parts: tuple[tuple[Any, float], ...], alpha: float) -> float:
    """Half-width h with P(|Σ k_i N_i| <= h) >= 1 - α for the independent noises N_i of the
    mechanisms in `parts` (mechanism, k_i): see `combined_widths`."""
    (mech, k), *rest = parts
    return float(combined_widths(tuple(rest), mech, (k,), alpha)[0])


def combined_widths(parts: tuple[tuple[Any, float], ...], last: Any, weights: tuple[float, ...],
                    alpha: float) -> np.ndarray:
    """For each weight w: the half-width h_w with P(|Σ k_i N_i + w·N| <= h_w) >= 1 - α, the N_i
    and N (of `last`) independent noises of the mechanisms: the empirical (1 - 0.95α)-quantile of
    COMBINED draws (numerical integration with a fixed seed: it reads no data; at 0.95α the Monte
    Carlo error, about 1% of α, is 4.8 standard deviations short of α), plus each value's
    rounding to its mechanism's grid (at most |k_i|·grid_i/2)."""
    key = (tuple((repr(m), k) for m, k in parts), repr(last), weights, alpha)
    if key not in _COMBINED_WIDTHS:
        if len(_COMBINED_WIDTHS) >= 256:
            _COMBINED_WIDTHS.clear()
        gen = np.random.default_rng(COMBINED_SEED)
        fixed = np.zeros(COMBINED)
        for mech, k in parts:
            fixed += k * np.asarray(mech.release(np.zeros(COMBINED), rng=gen), dtype=np.float64)
        varying = np.asarray(last.release(np.zeros(COMBINED), rng=gen), dtype=np.float64)
        grid = sum(abs(k) * _grid(mech) / 2 for mech, k in parts)
        level = 1 - 0.95 * alpha
        _COMBINED_WIDTHS[key] = np.array([np.quantile(np.abs(fixed + w * varying), level)
                                          + grid + abs(w) * _grid(last) / 2 for w in weights])
    return _COMBINED_WIDTHS[key]


def _grid(mech: Any) -> float:
    return float(getattr(mech, "grid", None) or 0.0)


_COMBINED_WIDTHS: dict[tuple[Any, ...], np.ndarray] = {}


def plus_minus(step: PlannedStep, part: str, exact: np.ndarray, alpha: float, *, rng: Rng) -> Estimate:
    """One noisy part released as it is: the value ± its half-width."""
    v, w = noisy(step, part, exact, alpha, rng=rng)
    return Estimate(v, v - w, v + w)


def ratio_range(s_lo: np.ndarray, s_hi: np.ndarray, n_lo: np.ndarray, n_hi: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Range of S/n over S in [s_lo, s_hi], n in [n_lo, n_hi] with n_lo > 0."""
    low = np.where(s_lo < 0, s_lo / n_lo, s_lo / n_hi)
    high = np.where(s_hi > 0, s_hi / n_lo, s_hi / n_hi)
    return low, high


def estimate(step: PlannedStep, exact: ExactAggregates, index: np.ndarray, alpha: float, *,
             rng: Rng, full_grid: FullGrid | None = None) -> Estimate:
    """The noisy value and interval of one aggregate for the groups at `index` (-1: empty group),
    both clamped to the aggregate's range (`consistent`).

    `full_grid(cells)` reads a quantile's whole grid (`Cells` with margin FULL_GRID), which a draw
    needs only when it lands outside its group's window; quantiles require it.
    """
    agg = step.aggregate
    return consistent(agg.value_range(), agg.estimate(step, exact, index, alpha, rng=rng,
                                                           full_grid=full_grid))


def consistent(value_range: tuple[float, float], est: Estimate) -> Estimate:
    """The value and its interval clamped to the aggregate's `value_range`, the interval widened
    to hold the value.

    Post-processing of the noisy values, so it costs no privacy (Dwork & Roth 2014, Prop. 2.1).
    The exact value lies in the range, so clamping never moves the interval off it, and widening
    only adds values: the interval's coverage stays >= 1 - α.
    """
    lo, hi = value_range
    value = np.clip(est.value, lo, hi)
    low = np.minimum(np.clip(est.low, lo, hi), value)
    high = np.maximum(np.clip(est.high, lo, hi), value)
    return Estimate(value, low, high)


def take(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Rows of `values` at `index`; zeros for groups with no data (index -1: public keys)."""
    present = index >= 0
    out = np.zeros((index.size, *values.shape[1:]), dtype=np.float64)
    out[present] = values[index[present]]
    return out
