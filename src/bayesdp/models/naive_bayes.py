"""Naive Bayes from noisy counts: GaussianNB (Vaidya et al. 2013) and CategoricalNB."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import Any

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin

from bayesdp.errors import DataError, check_nonnegative, invalid
from bayesdp.models.base import (
    PrivateMixin,
    check_epsilon,
    checked_Xy,
    class_labels,
    feature_bounds,
    fitted,
    laplace_vector,
    leak_warning,
    one_blas_thread,
)
from bayesdp.models.moments import noisy_moments
from bayesdp.noise import Rng
from bayesdp.privacy import Guarantee, Ledger


class _NaiveBayes(PrivateMixin, ClassifierMixin, BaseEstimator, metaclass=ABCMeta):
    @abstractmethod
    def _joint_log_likelihood(self, X: np.ndarray) -> np.ndarray:
        """Unnormalised log posterior of each class, shape (n, k)."""

    def predict_log_proba(self, X: Any) -> np.ndarray:
        jll = self._joint_log_likelihood(fitted(self, X))
        return np.asarray(jll - logsumexp(jll, axis=1, keepdims=True))

    def predict_proba(self, X: Any) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        jll = self._joint_log_likelihood(fitted(self, X))
        return np.asarray(self.classes_[np.argmax(jll, axis=1)])


class GaussianNB(_NaiveBayes):
    """Gaussian naive Bayes from ε-DP class counts, means and variances (Vaidya et al. 2013, §4).

    `bounds` are public per-feature bounds (clipped to); `classes` the public label set. Either,
    when None, is read from the data with a PrivacyLeakWarning. Add/remove neighbours: one row
    changes one class's count and statistics (bayesdp.models.moments).
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        bounds: Any = None,
        classes: Any = None,
        priors: Any = None,
        var_smoothing: float = 1e-9,
        ledger: Ledger | None = None,
        rng: Rng | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.priors = priors
        self.var_smoothing = var_smoothing
        self.ledger = ledger
        self.rng = rng

    @one_blas_thread
    def fit(self, X: Any, y: Any) -> GaussianNB:
        eps = check_epsilon(self.epsilon)
        smoothing = check_nonnegative("var_smoothing", self.var_smoothing)
        X, y = checked_Xy(self, X, y, reset=True)
        labels, idx = class_labels(self.classes, y)
        bounds = feature_bounds(self.bounds, X)
        guarantee = Guarantee(eps)
        guarantee, rng = self._spend(guarantee)
        m = noisy_moments(X, idx, labels.size, bounds, eps, rng)
        assert m.variances is not None
        self.classes_ = labels
        self.class_count_ = m.counts
        self.class_prior_ = _priors(self.priors, m.counts)
        self.theta_ = m.means
        # var_smoothing is relative to the public range (sklearn uses the data's largest variance).
        self.epsilon_ = smoothing * float(((bounds[1] - bounds[0]) ** 2).max()) + 1e-300
        self.var_ = m.variances + self.epsilon_
        self.guarantee_ = guarantee
        return self

    def _joint_log_likelihood(self, X: np.ndarray) -> np.ndarray:
        norm = -0.5 * np.log(2.0 * np.pi * self.var_).sum(axis=1)
        sq = ((X[:, None, :] - self.theta_[None]) ** 2 / self.var_[None]).sum(axis=2)
        return np.asarray(np.log(self.class_prior_) + norm - 0.5 * sq)


class CategoricalNB(_NaiveBayes):
    """Categorical naive Bayes from ε-DP counts (Laplace; add/remove neighbours).

    Features are category codes 0..n_categories-1, with `n_categories` public (an int for all
    features or one per feature); `classes` the public label set. A row adds one class count and
    one count per feature, so the whole count vector has L1 sensitivity d + 1 (Dwork 2006, Thm 2).
    Negative noisy counts are set to 0 before Laplace (additive) smoothing `alpha`.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        n_categories: Any = None,
        classes: Any = None,
        alpha: float = 1.0,
        fit_prior: bool = True,
        ledger: Ledger | None = None,
        rng: Rng | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.n_categories = n_categories
        self.classes = classes
        self.alpha = alpha
        self.fit_prior = fit_prior
        self.ledger = ledger
        self.rng = rng

    @one_blas_thread
    def fit(self, X: Any, y: Any) -> CategoricalNB:
        eps = check_epsilon(self.epsilon)
        alpha = check_nonnegative("alpha", self.alpha)
        X, y = checked_Xy(self, X, y, reset=True)
        codes = _codes(X)
        labels, idx = class_labels(self.classes, y)
        cats = self._categories(codes)
        if (codes >= cats).any():
            j = int(np.flatnonzero((codes >= cats).any(axis=0))[0])
            raise DataError(f"feature {j} has a category code >= n_categories={int(cats[j])}")
        k, d = labels.size, codes.shape[1]
        offsets = np.concatenate([[0], np.cumsum(cats)])
        cells = idx[:, None] * offsets[-1] + offsets[:-1] + codes  # (class, feature, category) cell
        exact = np.concatenate(
            [np.bincount(idx, minlength=k), np.bincount(cells.ravel(), minlength=k * offsets[-1])]
        )
        guarantee = Guarantee(eps)
        guarantee, rng = self._spend(guarantee)
        noisy = np.maximum(
            laplace_vector(eps, float(d + 1), exact.size).release(exact.astype(np.float64), rng=rng), 0.0
        )
        class_count, table = noisy[:k], noisy[k:].reshape(k, offsets[-1])
        self.classes_ = labels
        self.n_categories_ = cats
        self.class_count_ = class_count
        self.category_count_ = [table[:, offsets[j] : offsets[j + 1]] for j in range(d)]
        self.feature_log_prob_ = [
            np.log(c + alpha) - np.log((c + alpha).sum(axis=1, keepdims=True) + 1e-300)
            for c in self.category_count_
        ]
        prior = class_count + alpha if self.fit_prior else np.ones(k)
        self.class_log_prior_ = np.log(prior / prior.sum())
        self.guarantee_ = guarantee
        return self

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.categorical = True
        return tags

    def _categories(self, codes: np.ndarray) -> np.ndarray:
        d = codes.shape[1]
        if self.n_categories is None:
            leak_warning("n_categories (the number of categories)", "pass n_categories from the schema")
            return np.asarray(codes.max(axis=0) + 1, dtype=np.int64)
        try:
            cats = np.broadcast_to(np.asarray(self.n_categories), (d,)).astype(np.int64)
        except (TypeError, ValueError):
            raise invalid("n_categories", self.n_categories, f"a positive int or {d} of them") from None
        if (cats < 1).any() or not np.array_equal(cats, np.broadcast_to(np.asarray(self.n_categories), (d,))):
            raise invalid("n_categories", self.n_categories, "positive integers")
        return cats

    def _joint_log_likelihood(self, X: np.ndarray) -> np.ndarray:
        codes = _codes(X)
        jll = np.tile(self.class_log_prior_, (codes.shape[0], 1))
        for j, logp in enumerate(self.feature_log_prob_):
            known = codes[:, j] < logp.shape[1]  # an unseen code contributes nothing
            jll[known] += logp[:, codes[known, j]].T
        return np.asarray(jll)


def _codes(X: np.ndarray) -> np.ndarray:
    """Category codes: non-negative, truncated to integers as scikit-learn's CategoricalNB does."""
    if (X < 0).any():
        raise DataError("Negative values in data passed to CategoricalNB: it takes category codes 0, 1, ...")
    return X.astype(np.int64)


def _priors(priors: Any, counts: np.ndarray) -> np.ndarray:
    """Given priors, else noisy class frequencies (a class with a non-positive count gets a tiny prior)."""
    if priors is not None:
        p = np.asarray(priors, dtype=np.float64)
        if p.shape != counts.shape or (p < 0).any() or not np.isclose(p.sum(), 1.0):
            raise invalid("priors", priors, f"{counts.size} non-negative numbers summing to 1")
        return p
    c = np.maximum(counts, 1e-3)
    return np.asarray(c / c.sum())
