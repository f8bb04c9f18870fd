"""Noisy per-group counts, means and variances of bounded features (the statistics NB and scalers use)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayesdp.models.base import laplace_vector
from bayesdp.noise import Rng

# Budget shares of count, sum and sum of squares: a count has sensitivity 1 whatever the
# features, so it needs less of ε than the feature sums.
SHARES = (0.2, 0.4, 0.4)


@dataclass(frozen=True)
class Moments:
    """Noisy counts (k,), means (k, d), variances (k, d) (or None), and the count noise's scale."""

    counts: np.ndarray
    means: np.ndarray
    variances: np.ndarray | None
    count_scale: float


def noisy_moments(
    X: np.ndarray,
    groups: np.ndarray,
    k: int,
    bounds: tuple[np.ndarray, np.ndarray],
    epsilon: float,
    rng: Rng,
    *,
    variances: bool = True,
) -> Moments:
    """ε-DP (add/remove) counts, sums and sums of squares per group, each by the Laplace mechanism.

    Features are clipped to their public bounds, centred at the midpoint m and divided by the
    half-range r, so u = (x - m)/r lies in [-1, 1]: a row changes one group's count by 1, its
    sums of u by at most d (L1) and its sums of u² by at most d (Vaidya et al. 2013, §4; Laplace:
    Dwork 2006, Thm 2). Every feature thus gets the same noise relative to its range, whatever
    the others' ranges. Means and
    variances are post-processing: m + S1/n and S2/n - (S1/n)², clipped to the feasible range,
    variances no lower than the standard deviation of their noise.
    """
    lo, hi = bounds
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    u = (np.clip(X, lo, hi) - mid) / half
    onehot = np.zeros((X.shape[0], k))
    onehot[np.arange(X.shape[0]), groups] = 1.0
    rest = 1.0 if variances else 1.0 - SHARES[2]  # without variances, count and sums share all of ε
    shares = (SHARES[0] / rest, SHARES[1] / rest, SHARES[2])
    d = X.shape[1]
    m_count = laplace_vector(epsilon * shares[0], 1.0, k)
    count = m_count.release(onehot.sum(axis=0), rng=rng)
    n = np.maximum(count, 1.0)[:, None]
    s1 = laplace_vector(epsilon * shares[1], float(d), k * d).release(onehot.T @ u, rng=rng) * half
    mean = np.clip(s1 / n, -half, half)
    var = None
    if variances:
        m2 = laplace_vector(epsilon * shares[2], float(d), k * d)
        s2 = m2.release(onehot.T @ (u * u), rng=rng) * (half * half)
        # A variance below the noise's standard deviation (√2·b·r²/n) cannot be told from it: floor it there.
        floor = np.minimum(np.sqrt(2.0) * m2.scale * half * half / n, half * half)
        var = np.clip(s2 / n - mean * mean, floor, half * half)
    return Moments(np.maximum(count, 0.0), mean + mid, var, m_count.scale)
