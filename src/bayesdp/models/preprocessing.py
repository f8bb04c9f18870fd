"""StandardScaler with public bounds: noisy mean and variance per feature (Laplace)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin

from bayesdp.models.base import (
    PrivateMixin,
    check_epsilon,
    checked_X,
    feature_bounds,
    fitted,
    one_blas_thread,
)
from bayesdp.models.moments import noisy_moments
from bayesdp.noise import Rng
from bayesdp.privacy import Guarantee, Ledger


class StandardScaler(PrivateMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Centre and scale each feature by its ε-DP mean and standard deviation (add/remove neighbours).

    `bounds=(lower, upper)` are public per-feature bounds (scalars or arrays); values outside are
    clipped, before the statistics are taken and in `transform`. Without bounds they are read from
    the data with a PrivacyLeakWarning. The count, sums and sums of squares are Laplace releases
    (bayesdp.models.moments); transform is post-processing and costs nothing. `norm_bound_` is
    the largest L2 norm a transformed row can have, from the public bounds and the released
    mean and scale only (post-processing): a `bayesdp.models.Pipeline` hands it to the next
    step's `data_norm`.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        bounds: Any = None,
        with_mean: bool = True,
        with_std: bool = True,
        ledger: Ledger | None = None,
        rng: Rng | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.with_mean = with_mean
        self.with_std = with_std
        self.ledger = ledger
        self.rng = rng

    @one_blas_thread
    def fit(self, X: Any, y: Any = None) -> StandardScaler:
        eps = check_epsilon(self.epsilon)
        X = checked_X(self, X, reset=True)
        bounds = feature_bounds(self.bounds, X)
        guarantee = Guarantee(eps)
        guarantee, rng = self._spend(guarantee)
        m = noisy_moments(
            X, np.zeros(X.shape[0], dtype=np.int64), 1, bounds, eps, rng, variances=self.with_std
        )
        self.mean_ = m.means[0] if self.with_mean else None
        self.var_ = m.variances[0] if m.variances is not None else None
        self.scale_ = None if self.var_ is None else _safe_scale(np.sqrt(self.var_))
        self.n_samples_seen_ = float(m.counts[0])
        self.bounds_ = bounds
        lo, hi = (self._scaled(b) for b in bounds)
        self.norm_bound_ = float(np.sqrt((np.maximum(np.abs(lo), np.abs(hi)) ** 2).sum()))
        self.guarantee_ = guarantee
        return self

    def transform(self, X: Any) -> np.ndarray:
        X = fitted(self, X)
        return self._scaled(np.clip(X, *self.bounds_))

    def _scaled(self, X: np.ndarray) -> np.ndarray:
        if self.mean_ is not None:
            X = X - self.mean_
        if self.scale_ is not None:
            X = X / self.scale_
        return X

    def inverse_transform(self, X: Any) -> np.ndarray:
        X = fitted(self, X)
        if self.scale_ is not None:
            X = X * self.scale_
        if self.mean_ is not None:
            X = X + self.mean_
        return X


def _safe_scale(scale: np.ndarray) -> np.ndarray:
    """Zero scales become 1, as scikit-learn does, so constant features pass through unscaled."""
    return np.where(scale < 10 * np.finfo(np.float64).eps, 1.0, scale)
