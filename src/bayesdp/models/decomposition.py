"""PCA from a noisy covariance: Analyze Gauss (Dwork, Talwar, Thakurta & Zhang 2014, Alg. 1)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from bayesdp.errors import check_positive_int, invalid
from bayesdp.models.base import (
    PrivateMixin,
    approx_guarantee,
    check_approx,
    checked_X,
    clip_rows,
    fitted,
    gaussian_vector,
    norm_bound,
    one_blas_thread,
    rho_for,
)
from bayesdp.noise import Rng
from bayesdp.privacy import Ledger

# ρ shares of the count, the sum and the second-moment matrix: the matrix carries the components.
SHARES = (0.1, 0.2, 0.7)


class PCA(PrivateMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """(ε, δ)-DP principal components from a noisy covariance (add/remove neighbours).

    Rows are clipped to the public L2 norm `data_norm`. Three discrete Gaussian releases (zCDP,
    stated at (ε, δ)): the count (sensitivity 1), Σx (‖x‖ <= data_norm) and the upper triangle of
    Σxxᵀ (Frobenius sensitivity data_norm², as in Analyze Gauss, Alg. 1). The covariance
    Σxxᵀ/n − μμᵀ is eigendecomposed; all of it is post-processing of the three releases.
    """

    def __init__(
        self,
        n_components: int | None = None,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-6,
        data_norm: float | None = None,
        ledger: Ledger | None = None,
        rng: Rng | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.ledger = ledger
        self.rng = rng

    @one_blas_thread
    def fit(self, X: Any, y: Any = None) -> PCA:
        eps, delta = check_approx(self.epsilon, self.delta)
        X = checked_X(self, X, reset=True)
        d = X.shape[1]
        k = d if self.n_components is None else check_positive_int("n_components", self.n_components)
        if k > d:
            raise invalid("n_components", self.n_components, f"at most the number of features, {d}")
        norm = norm_bound(self.data_norm, X)
        x = clip_rows(X, norm)
        rho = rho_for(eps, delta)
        guarantee = approx_guarantee(eps, delta, rho)
        guarantee, rng = self._spend(guarantee)
        iu = np.triu_indices(d)
        count = gaussian_vector(rho * SHARES[0], 1.0, 1).release(np.array([x.shape[0]]), rng=rng)
        n = max(float(count[0]), 1.0)
        mean = gaussian_vector(rho * SHARES[1], norm, d).release(x.sum(axis=0), rng=rng) / n
        upper = gaussian_vector(rho * SHARES[2], norm * norm, iu[0].size).release((x.T @ x)[iu], rng=rng)
        second = np.zeros((d, d))
        second[iu] = upper
        second = second + np.triu(second, 1).T
        values, vectors = np.linalg.eigh(second / n - np.outer(mean, mean))
        order = np.argsort(values)[::-1][:k]
        self.mean_ = mean
        self.components_ = _signed(vectors[:, order].T)
        self.explained_variance_ = np.maximum(values[order], 0.0)
        total = float(np.maximum(values, 0.0).sum())
        self.explained_variance_ratio_ = self.explained_variance_ / total if total > 0 else np.zeros(k)
        self.n_components_ = k
        self.guarantee_ = guarantee
        return self

    @property
    def _n_features_out(self) -> int:
        return int(self.n_components_)

    def transform(self, X: Any) -> np.ndarray:
        X = fitted(self, X)
        return np.asarray((X - self.mean_) @ self.components_.T)

    def inverse_transform(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "guarantee_")
        return np.asarray(np.asarray(X, dtype=np.float64) @ self.components_ + self.mean_)


def _signed(components: np.ndarray) -> np.ndarray:
    """Fix each component's sign so its largest entry is positive (deterministic, like scikit-learn)."""
    signs = np.sign(components[np.arange(components.shape[0]), np.argmax(np.abs(components), axis=1)])
    return components * np.where(signs == 0, 1.0, signs)[:, None]
