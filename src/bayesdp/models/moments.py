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

    Features are clipped to their public bounds and centred at the midpoint m, so |x - m| <= r
    with r the half-range: a row changes one group's count by 1, its sums by Σr (L1) and its
    sums of squares by Σr² (Vaidya et al. 2013, §4; Laplace: Dwork 2006, Thm 2). Means and
    variances are post-processing: m + S1/n and S2/n - (S1/n)², clipped to the feasible range,
    variances no lower than the standard deviation of their noise.
    """
    lo, hi = bounds
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    z = np.clip(X, lo, hi) - mid
    onehot = np.zeros((X.shape[0], k))
    onehot[np.arange(X.shape[0]), groups] = 1.0
    rest = 1.0 if variances else 1.0 - SHARES[2]  # without variances, count and sums share all of ε
    shares = (SHARES[0] / rest, SHARES[1] / rest, SHARES[2])
    d = X.shape[1]
    m_count = laplace_vector(epsilon * shares[0], 1.0, k)
    count = m_count.release(onehot.sum(axis=0), rng)
    n = np.maximum(count, 1.0)[:, None]
    s1 = laplace_vector(epsilon * shares[1], float(half.sum()), k * d).release(onehot.T @ z, rng)
    mean = np.clip(s1 / n, -half, half)
    var = None
    if variances:
        m2 = laplace_vector(epsilon * shares[2], float((half * half).sum()), k * d)
        s2 = m2.release(onehot.T @ (z * z), rng)
        # A variance below the noise's standard deviation (√2·b/n) cannot be told from it: floor it there.
        floor = np.minimum(np.sqrt(2.0) * m2.scale / n, half * half)
        var = np.clip(s2 / n - mean * mean, floor, half * half)
    return Moments(np.maximum(count, 0.0), mean + mid, var, m_count.scale)
