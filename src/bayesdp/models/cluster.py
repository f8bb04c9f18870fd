"""KMeans by noisy Lloyd iterations with a stated iteration budget (Blum et al. 2005; Su et al. 2016)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin

from bayesdp.errors import check_positive_int
from bayesdp.models.base import (
    PrivateMixin,
    check_epsilon,
    checked_X,
    feature_bounds,
    fitted,
    one_blas_thread,
    uniform,
)
from bayesdp.models.moments import noisy_moments
from bayesdp.noise import Rng
from bayesdp.privacy import Guarantee, Ledger


class KMeans(PrivateMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    """ε-DP k-means: `n_iter` Lloyd steps, each on noisy counts and sums (add/remove neighbours).

    Initial centres are placed in the public box `bounds` without looking at the data, by Su et
    al.'s sphere packing (see `_packing`): a centre in a corner of the box strands its cluster.
    Each of the `n_iter` iterations (the whole budget: no convergence test reads the data) assigns
    rows to their nearest centre and releases per-cluster counts and sums of the clipped features
    with ε/n_iter (DPLloyd: Su et al. 2016, §3; SuLQ k-means: Blum et al. 2005, §5), through
    bayesdp.models.moments. A cluster whose noisy count is within 3 noise scales of 0, or under 5%
    of n/k, moves next to the largest cluster's centre (a split of it; post-processing only).
    `labels_` is predict(X) on the training rows: the model applied to the data it was fit on.
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        epsilon: float = 1.0,
        bounds: Any = None,
        n_iter: int = 10,
        ledger: Ledger | None = None,
        rng: Rng | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.n_iter = n_iter
        self.ledger = ledger
        self.rng = rng

    @one_blas_thread
    def fit(self, X: Any, y: Any = None) -> KMeans:
        eps = check_epsilon(self.epsilon)
        k = check_positive_int("n_clusters", self.n_clusters)
        iters = check_positive_int("n_iter", self.n_iter)
        X = checked_X(self, X, reset=True)
        lo, hi = feature_bounds(self.bounds, X)
        guarantee = Guarantee(eps)
        guarantee, rng = self._spend(guarantee)
        centres = _packing(lo, hi, k, rng)
        for _ in range(iters):
            m = noisy_moments(X, _nearest(X, centres), k, (lo, hi), eps / iters, rng, variances=False)
            # A cluster within 3 noise scales of empty has no usable mean, and one with under 5% of
            # an even share is stranded: it restarts beside the largest one, to split it next step.
            empty = m.counts < max(3 * m.count_scale, 0.05 * m.counts.sum() / k)
            nudge = (hi - lo) * (uniform(rng, centres.size).reshape(centres.shape) - 0.5) / 50
            centres = np.where(empty[:, None], m.means[np.argmax(m.counts)] + nudge, m.means)
        self.cluster_centers_ = centres
        self.labels_ = _nearest(X, centres)
        self.n_iter_ = iters
        self.guarantee_ = guarantee
        return self

    def predict(self, X: Any) -> np.ndarray:
        return _nearest(fitted(self, X), self.cluster_centers_)

    def transform(self, X: Any) -> np.ndarray:
        return np.sqrt(_sq_distances(fitted(self, X), self.cluster_centers_))

    def score(self, X: Any, y: Any = None) -> float:
        """Minus the sum of squared distances to the nearest centre (scikit-learn's convention)."""
        return -float(_sq_distances(fitted(self, X), self.cluster_centers_).min(axis=1).sum())


def _packing(lo: np.ndarray, hi: np.ndarray, k: int, rng: Rng) -> np.ndarray:
    """k uniform points r inside the box and 2r apart, r halved until k fit (Su et al. 2016, DPLloyd).

    r starts at half the narrowest side; each try draws 100k uniform candidates and keeps, in turn,
    the first one 2r from those kept (rejection sampling of each centre). No data is read.
    """
    width = hi - lo
    r = float(width.min()) / 2
    while True:
        cand = lo + r + (width - 2 * r) * uniform(rng, 100 * k * lo.size).reshape(100 * k, lo.size)
        far = np.ones(cand.shape[0], dtype=bool)
        chosen = [0]
        while len(chosen) < k:
            far &= ((cand - cand[chosen[-1]]) ** 2).sum(axis=1) >= 4 * r * r
            if not far.any():
                break
            chosen.append(int(np.argmax(far)))
        if len(chosen) == k:
            return cand[chosen]
        r /= 2


def _sq_distances(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    d = (X * X).sum(axis=1)[:, None] - 2 * X @ centres.T + (centres * centres).sum(axis=1)[None]
    return np.asarray(np.maximum(d, 0.0))


def _nearest(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """argmin_c ‖x − c‖² = argmin_c (‖c‖² − 2x·c): a row's own ‖x‖² does not change its nearest centre."""
    return np.asarray(np.argmin((centres * centres).sum(axis=1)[None] - 2 * X @ centres.T, axis=1))
