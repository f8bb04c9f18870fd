"""Noise, estimates and confidence intervals from exact bounded aggregates (engine independent).

Every interval covers the noise only (not the bias from clipping or bounding, which the release
reports as counts beside it): with probability at least 1 - α the exact bounded value lies in
it. An aggregate made of several noisy parts gives each part α/parts (union bound), and the
interval is the range of the estimator over the parts' intervals (interval arithmetic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bayesdp.noise import Rng
from bayesdp.tables.aggregates import Aggregate
from bayesdp.tables.engines.base import ExactAggregates, Measure
from bayesdp.tables.plan import Step
from bayesdp.tables.quantiles import FullGrid, cells_of, quantile_draws

# A mean's stage-1 count must reach this many of its noise scales for the re-centred second stage:
# below it the first estimate is too rough to centre on (simulated crossover, bench/RESULTS.md).
MEAN_SWITCH = 15.0


@dataclass(frozen=True)
class Estimate:
    """Noisy values and their interval per released group (for histograms, per group and bin)."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray


def measure_of(agg: Aggregate) -> Measure:
    assert agg.column is not None and agg.bounds is not None
    return Measure(agg.column, *agg.bounds)


def _noisy(step: Step, part: str, exact: np.ndarray, alpha: float, rng: Rng) -> tuple[np.ndarray, float]:
    mech = step.parts[part].mechanism
    return np.asarray(mech.release(exact, rng), dtype=np.float64), float(mech.interval(alpha))


def _ratio_range(s_lo: np.ndarray, s_hi: np.ndarray, n_lo: np.ndarray, n_hi: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Range of S/n over S in [s_lo, s_hi], n in [n_lo, n_hi] with n_lo > 0."""
    low = np.where(s_lo < 0, s_lo / n_lo, s_lo / n_hi)
    high = np.where(s_hi > 0, s_hi / n_lo, s_hi / n_hi)
    return low, high


def estimate(step: Step, exact: ExactAggregates, index: np.ndarray, alpha: float,
             rng: Rng, full_grid: FullGrid | None = None) -> Estimate:
    """The noisy value and interval of one aggregate for the groups at `index` (-1: empty group),
    both clamped to the aggregate's range (`consistent`).

    `full_grid(cells)` reads a quantile's whole grid (`Cells` with margin FULL_GRID), which a draw
    needs only when it lands outside its group's window; quantiles require it.
    """
    return consistent(step.aggregate, _estimate(step, exact, index, alpha, rng, full_grid))


def value_range(agg: Aggregate) -> tuple[float, float]:
    """The values an aggregate can take: counts are >= 0; a sum has the sign of its bounds (n >= 0
    values in [lo, hi]); a mean or quantile lies in its bounds, a std in [0, (hi - lo)/2]."""
    if agg.kind in ("count_units", "count", "histogram"):
        return 0.0, math.inf
    assert agg.bounds is not None
    lo, hi = agg.bounds
    if agg.kind == "sum":
        return (0.0 if lo >= 0 else -math.inf), (0.0 if hi <= 0 else math.inf)
    if agg.kind == "std":
        return 0.0, (hi - lo) / 2
    return lo, hi


def consistent(agg: Aggregate, est: Estimate) -> Estimate:
    """The value and its interval clamped to `value_range`, the interval widened to hold the value.

    Post-processing of the noisy values, so it costs no privacy (Dwork & Roth 2014, Prop. 2.1).
    The exact value lies in the range, so clamping never moves the interval off it, and widening
    only adds values: the interval's coverage stays >= 1 - α.
    """
    lo, hi = value_range(agg)
    value = np.clip(est.value, lo, hi)
    low = np.minimum(np.clip(est.low, lo, hi), value)
    high = np.maximum(np.clip(est.high, lo, hi), value)
    return Estimate(value, low, high)


def _estimate(step: Step, exact: ExactAggregates, index: np.ndarray, alpha: float,
              rng: Rng, full_grid: FullGrid | None) -> Estimate:
    agg = step.aggregate
    a = alpha / len(agg.parts)
    present = index >= 0
    if agg.kind in ("count_units", "count"):
        base = exact.units if agg.kind == "count_units" else exact.rows
        v, w = _noisy(step, "count", _take(base, index, present), a, rng)
        return Estimate(v, v - w, v + w)
    if agg.kind == "histogram":
        counts = exact.bins[next(b for b in exact.bins if b.edges == agg.edges and b.column == agg.column)]
        v, w = _noisy(step, "counts", _take(counts, index, present), a, rng)
        return Estimate(v, v - w, v + w)
    if agg.kind == "quantile":
        assert full_grid is not None, "quantiles need the engine's full grid"
        spec = cells_of(step, alpha)
        d = quantile_draws(step, exact.cells[spec], spec, index, alpha, rng, full_grid)
        return Estimate(d.value, d.low, d.high)
    mom = _take(exact.moments[measure_of(agg)], index, present)
    n, s, sq = mom[:, 0], mom[:, 1], mom[:, 2]
    assert agg.bounds is not None
    lo, hi = agg.bounds
    if agg.kind == "sum":
        v, w = _noisy(step, "sum", s, a, rng)
        return Estimate(v, v - w, v + w)
    if agg.kind == "mean":
        return _mean(step, n, s, alpha, rng)
    mid, r = (lo + hi) / 2, (hi - lo) / 2
    n_hat, wn = _noisy(step, "count", n, a, rng)
    s_hat, ws = _noisy(step, "sum", s - n * mid, a, rng)
    n_lo, n_hi = np.maximum(n_hat - wn, 1.0), np.maximum(n_hat + wn, 1.0)
    unknown = n_hat - wn < 1.0
    n_use = np.maximum(n_hat, 1.0)
    e1_lo, e1_hi = _ratio_range(s_hat - ws, s_hat + ws, n_lo, n_hi)
    e1_lo, e1_hi = np.clip(e1_lo, -r, r), np.clip(e1_hi, -r, r)
    # std: Y = Σ((x-mid)² - r²/2) released; E[(x-mid)²] = Y/n + r²/2 (population variance).
    y_hat, wy = _noisy(step, "squares", sq - 2 * mid * s + n * mid * mid - n * r * r / 2, a, rng)
    e2 = np.clip(y_hat / n_use + r * r / 2, 0.0, r * r)
    var = np.clip(e2 - np.clip(s_hat / n_use, -r, r) ** 2, 0.0, r * r)
    e2_lo, e2_hi = _ratio_range(y_hat - wy, y_hat + wy, n_lo, n_hi)
    e2_lo, e2_hi = np.clip(e2_lo + r * r / 2, 0, r * r), np.clip(e2_hi + r * r / 2, 0, r * r)
    sq_lo = np.where((e1_lo <= 0) & (e1_hi >= 0), 0.0, np.minimum(e1_lo**2, e1_hi**2))
    sq_hi = np.maximum(e1_lo**2, e1_hi**2)
    v_lo, v_hi = np.clip(e2_lo - sq_hi, 0, r * r), np.clip(e2_hi - sq_lo, 0, r * r)
    return Estimate(np.sqrt(var), np.where(unknown, 0.0, np.sqrt(v_lo)),
                    np.where(unknown, r, np.sqrt(v_hi)))


def _mean(step: Step, n: np.ndarray, s: np.ndarray, alpha: float, rng: Rng) -> Estimate:
    """A mean in two stages per group, re-centring the sum on a first private estimate (the
    coarse-then-refined scheme of Karwa & Vadhan 2018, ITCS: a rough private location first).

    Stage 1 releases the count n1 and S1 = Σ(x - mid), so c = mid + S1/n1 (clipped to the bounds).
    A group whose n1 is at least MEAN_SWITCH of its noise scales then releases Z = Σ(x - c)/d,
    d = max(c - lo, hi - c) (one row moves it by at most 1), and its mean is c + dZ/n1: the
    count's noise now multiplies only the small μ - c. Any other group releases a second count
    and mid-centred sum, each averaged with stage 1's by inverse variance, and its mean is
    mid + Ŝ/n̂. Either way a group spends the aggregate's whole budget once (`branches`).
    Intervals: interval arithmetic over the parts a group uses, each count and sum at α/4 and Z
    at α/2. The branch depends on stage 1's count only, so a miss needs its α/4 event or one of
    the other parts' (α/2 for Z, 3α/4 for the second stage): at most α in all.
    """
    agg = step.aggregate
    assert agg.bounds is not None
    lo, hi = agg.bounds
    mid, r = (lo + hi) / 2, (hi - lo) / 2
    n1, w1 = _noisy(step, "count", n, alpha / 4, rng)
    s1, _ = _noisy(step, "sum", s - n * mid, alpha / 4, rng)
    centre = np.clip(mid + s1 / np.maximum(n1, 1.0), lo, hi)
    big = n1 >= MEAN_SWITCH * step.parts["count"].scale
    value, low, high = np.empty(n.size), np.full(n.size, float(lo)), np.full(n.size, float(hi))
    if big.any():
        c, d = centre[big], np.maximum(centre[big] - lo, hi - centre[big])
        z, wz = _noisy(step, "centred", (s[big] - n[big] * c) / d, alpha / 2, rng)
        nb = n1[big]
        value[big] = c + d * z / np.maximum(nb, 1.0)
        e_lo, e_hi = _ratio_range(z - wz, z + wz, np.maximum(nb - w1, 1.0), np.maximum(nb + w1, 1.0))
        known = nb - w1 >= 1.0
        low[big] = np.where(known, c + d * e_lo, lo)
        high[big] = np.where(known, c + d * e_hi, hi)
    small = ~big
    if small.any():
        n2, _ = _noisy(step, "count2", n[small], alpha / 4, rng)
        s2, _ = _noisy(step, "sum2", s[small] - n[small] * mid, alpha / 4, rng)
        kn, ks = _inverse_variance(step, "count", "count2"), _inverse_variance(step, "sum", "sum2")
        n_hat, s_hat = kn * n1[small] + (1 - kn) * n2, ks * s1[small] + (1 - ks) * s2
        wn, ws = second_stage_widths(step, alpha)
        value[small] = mid + s_hat / np.maximum(n_hat, 1.0)
        e_lo, e_hi = _ratio_range(s_hat - ws, s_hat + ws, np.maximum(n_hat - wn, 1.0),
                                  np.maximum(n_hat + wn, 1.0))
        known = n_hat - wn >= 1.0
        low[small] = np.where(known, mid + np.maximum(e_lo, -r), lo)
        high[small] = np.where(known, mid + np.minimum(e_hi, r), hi)
    value = np.clip(value, lo, hi)
    return Estimate(value, np.clip(low, lo, hi), np.clip(high, lo, hi))


def second_stage_widths(step: Step, alpha: float) -> tuple[float, float]:
    """Half-widths of a mean's averaged count and sum (second stage): each holds when both of
    its parts' α/4 intervals do."""
    w = {p: float(step.parts[p].mechanism.interval(alpha / 4)) for p in ("count", "count2", "sum", "sum2")}
    kn, ks = _inverse_variance(step, "count", "count2"), _inverse_variance(step, "sum", "sum2")
    return kn * w["count"] + (1 - kn) * w["count2"], ks * w["sum"] + (1 - ks) * w["sum2"]


def mean_half_width(step: Step, alpha: float, n: int) -> float:
    """A mean's interval half-width for a group of n values, from public parameters only: at most
    2r·wZ/(n - wn) in the re-centred stage (d <= 2r, μ = c), (wS + r·wn)/(n - wn) in the other."""
    assert step.aggregate.bounds is not None
    lo, hi = step.aggregate.bounds
    r = (hi - lo) / 2
    count = step.parts["count"].mechanism
    if n >= MEAN_SWITCH * count.scale:
        wz, wn = float(step.parts["centred"].mechanism.interval(alpha / 2)), float(count.interval(alpha / 4))
        return float(min(r, 2 * r * wz / max(n - wn, 1.0)))
    wn, ws = second_stage_widths(step, alpha)
    return float(min(r, (ws + r * wn) / max(n - wn, 1.0)))


def _inverse_variance(step: Step, first: str, second: str) -> float:
    """Weight of `first` in the minimum-variance average of two unbiased estimates whose noise
    is of one family, so variances are in the ratio of squared scales (Aitken 1935)."""
    v1, v2 = step.parts[first].scale ** 2, step.parts[second].scale ** 2
    return v2 / (v1 + v2)


def _take(values: np.ndarray, index: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Rows of `values` at `index`; zeros for groups with no data (public keys)."""
    out = np.zeros((index.size, *values.shape[1:]), dtype=np.float64)
    out[present] = values[index[present]]
    return out


