"""Linear regression by sufficient-statistics perturbation with an adaptive ridge (AdaSSP, Wang 2018)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import norm
from sklearn.base import BaseEstimator, RegressorMixin

from bayesdp.errors import DataError, check_open_unit
from bayesdp.models.base import (
    PrivateMixin,
    approx_guarantee,
    check_approx,
    checked_Xy,
    feature_bounds,
    fitted,
    gaussian_vector,
    rho_for,
    target_bounds,
)
from bayesdp.noise import Rng
from bayesdp.privacy import Ledger

# ρ shares of λ_min, XᵀX, Xᵀy and yᵀy: the two scalars only set the ridge and the residual
# variance, so most of the budget goes to the statistics the coefficients are built from.
SHARES = (0.1, 0.4, 0.4, 0.1)
FAILURE = 0.05  # Wang 2018, Alg. 2's ρ: the ridge keeps XᵀX + λI well conditioned w.p. 1 - ρ


class LinearRegression(PrivateMixin, RegressorMixin, BaseEstimator):
    """(ε, δ)-DP least squares by AdaSSP (Wang 2018, Alg. 2), add/remove neighbours.

    Features and target are clipped to their public bounds and mapped onto [-1, 1] by those
    bounds (a data-independent affine map), with a column of ones appended, so ‖x‖² <= d + 1 and
    |y| <= 1. Four discrete Gaussian releases (zCDP, composed and stated at (ε, δ)): λ_min(XᵀX)
    (sensitivity d+1), the upper triangle of XᵀX (L2 sensitivity d+1), Xᵀy (√(d+1)) and yᵀy (1).
    The ridge is λ = max(0, σ_XX·√(p·ln(2p²/ρ)) − λ̃_min) with λ̃_min = max(λ̂_min − σ_λ√ln(6/δ), 0),
    p = d + 1, as in Alg. 2 with bayesdp's calibrated σ in place of √ln(6/δ)/(ε/3)·‖X‖².
    `coef_interval` gives normal intervals for the coefficients (see there).
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-6,
        bounds_X: Any = None,
        bounds_y: Any = None,
        fit_intercept: bool = True,
        ledger: Ledger | None = None,
        rng: Rng | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.bounds_X = bounds_X
        self.bounds_y = bounds_y
        self.fit_intercept = fit_intercept
        self.ledger = ledger
        self.rng = rng

    def fit(self, X: Any, y: Any) -> LinearRegression:
        eps, delta = check_approx(self.epsilon, self.delta)
        X, y = checked_Xy(self, X, y, reset=True, y_numeric=True)
        if y.ndim != 1:
            raise DataError(f"y must be one target column; got shape {y.shape}")
        lo, hi = feature_bounds(self.bounds_X, X, "bounds_X")
        ylo, yhi = target_bounds(self.bounds_y, y)
        if self.fit_intercept:
            shift, scale = (lo + hi) / 2, (hi - lo) / 2
            yshift, yscale = (ylo + yhi) / 2, (yhi - ylo) / 2
        else:
            shift, scale = np.zeros_like(lo), np.maximum(np.abs(lo), np.abs(hi))
            yshift, yscale = 0.0, max(abs(ylo), abs(yhi))
        xs = np.hstack([(np.clip(X, lo, hi) - shift) / scale, np.ones((X.shape[0], 1))])
        ys = (np.clip(y, ylo, yhi) - yshift) / yscale
        p = xs.shape[1]
        rho = rho_for(eps, delta)
        guarantee = approx_guarantee(eps, delta, rho)
        guarantee, rng = self._spend(guarantee)
        iu = np.triu_indices(p)
        gram = xs.T @ xs
        m_lam = gaussian_vector(rho * SHARES[0], float(p), 1)
        m_xx = gaussian_vector(rho * SHARES[1], float(p), iu[0].size)
        m_xy = gaussian_vector(rho * SHARES[2], math.sqrt(p), p)
        m_yy = gaussian_vector(rho * SHARES[3], 1.0, 1)
        lam_hat = float(m_lam.release(np.linalg.eigvalsh(gram)[:1], rng=rng)[0])
        upper = m_xx.release(gram[iu], rng=rng)
        xy = m_xy.release(xs.T @ ys, rng=rng)
        yy = float(m_yy.release(np.array([ys @ ys]), rng=rng)[0])
        a = np.zeros((p, p))
        a[iu] = upper
        a = a + np.triu(a, 1).T
        lam_min = max(lam_hat - m_lam.scale * math.sqrt(math.log(6 / delta)), 0.0)
        ridge = max(0.0, m_xx.scale * math.sqrt(p * math.log(2 * p * p / FAILURE)) - lam_min)
        k = p if self.fit_intercept else p - 1  # without an intercept the ones column only counts rows
        m = a[:k, :k] + ridge * np.eye(k)
        theta = np.linalg.lstsq(m, xy[:k], rcond=None)[0]
        t = self._back_transform(shift, scale, yscale, k)
        self._stats = _Stats(a[:k, :k], theta, xy[:k], yy, float(a[-1, -1]), m_xx.scale, m_xy.scale, t)
        w = t @ theta
        self.coef_ = w[: X.shape[1]]
        self.intercept_ = float(w[-1] + yshift) if self.fit_intercept else 0.0
        self.ridge_ = ridge
        self.guarantee_ = guarantee
        return self

    def _back_transform(self, shift: np.ndarray, scale: np.ndarray, yscale: float, k: int) -> np.ndarray:
        """The linear map from coefficients on the [-1, 1] scale to (coef_, intercept_ - y shift)."""
        d = shift.size
        t = np.zeros((d + 1 if self.fit_intercept else d, k))
        t[np.arange(d), np.arange(d)] = yscale / scale
        if self.fit_intercept:
            t[d, :d] = -yscale * shift / scale
            t[d, d] = yscale
        return t

    def predict(self, X: Any) -> np.ndarray:
        X = fitted(self, X)
        return np.asarray(X @ self.coef_ + self.intercept_)

    def coef_interval(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Normal (1 − α) intervals for coef_ (and intercept_, last): (lower, upper) arrays.

        The ridge estimate θ = M⁻¹b̂ (M = Â + λI) is biased by −λM⁻¹θ*, which at small n·ε is
        larger than its spread, so the intervals are centred on the unregularised θᵤ = Â⁻¹b̂ of
        the same released statistics. Delta method: Cov ≈ Â⁻¹(σ̂²Â + σ_b²I + σ_A²(‖θᵤ‖²I + θᵤθᵤᵀ
        − diag θᵤ²))Â⁻¹, summing the sampling variance (σ̂² = RSS/(n − p) from the noisy yᵀy, Xᵀy,
        XᵀX and count) and the known noise on b̂ and on the symmetric Â. Each interval is then
        widened to contain the released estimate. Post-processing: no further budget. An
        approximation: it ignores the noise in σ̂² and in Â⁻¹ beyond first order.
        """
        fitted(self, np.zeros((1, self.n_features_in_)))
        s = self._stats
        a = check_open_unit("alpha", alpha)
        th = np.linalg.lstsq(s.gram, s.xy, rcond=None)[0]
        rss = s.yy - 2 * th @ s.xy + th @ s.gram @ th
        sigma2 = max(rss, 0.0) / max(s.n - th.size, 1.0)
        ginv = np.linalg.pinv(s.gram)
        inner = sigma2 * s.gram + s.sigma_xy**2 * np.eye(th.size)
        inner += s.sigma_xx**2 * ((th @ th) * np.eye(th.size) + np.outer(th, th) - np.diag(th * th))
        cov = s.t @ ginv @ inner @ ginv @ s.t.T
        half = float(norm.ppf(1 - a / 2)) * np.sqrt(np.maximum(np.diag(cov), 0.0))
        estimate = np.append(self.coef_, self.intercept_) if self.fit_intercept else self.coef_
        centre = s.t @ th + (estimate - s.t @ s.theta)  # the target's shift, as for the estimate
        return np.minimum(centre - half, estimate), np.maximum(centre + half, estimate)


class _Stats:
    """The released statistics the intervals are computed from (post-processing only)."""

    def __init__(
        self,
        gram: np.ndarray,
        theta: np.ndarray,
        xy: np.ndarray,
        yy: float,
        n: float,
        sigma_xx: float,
        sigma_xy: float,
        t: np.ndarray,
    ) -> None:
        self.gram, self.theta, self.xy, self.yy, self.n = gram, theta, xy, yy, n
        self.sigma_xx, self.sigma_xy, self.t = sigma_xx, sigma_xy, t
