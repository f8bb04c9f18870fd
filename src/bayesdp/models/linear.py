"""Linear regression by sufficient-statistics perturbation with an adaptive ridge (AdaSSP, Wang 2018)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import cho_solve
from scipy.stats import chi2
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from bayesdp.errors import DataError, check_open_unit
from bayesdp.models.base import (
    PrivateMixin,
    approx_guarantee,
    check_approx,
    checked_Xy,
    feature_bounds,
    fitted,
    gaussian_vector,
    one_blas_thread,
    rho_for,
    target_bounds,
)
from bayesdp.noise import Rng
from bayesdp.privacy import Ledger

# ρ shares of λ_min, XᵀX and Xᵀy: the scalar only sets the ridge, so most of the budget goes to
# the statistics the coefficients are built from; XᵀX's noise also decides whether
# `coef_interval` is bounded, so it gets the larger share.
SHARES = (0.1, 0.5, 0.4)
FAILURE = 0.05  # Wang 2018, Alg. 2's ρ: the ridge keeps XᵀX + λI well conditioned w.p. 1 - ρ


class LinearRegression(PrivateMixin, RegressorMixin, BaseEstimator):
    """(ε, δ)-DP least squares by AdaSSP (Wang 2018, Alg. 2), add/remove neighbours.

    Features and target are clipped to their public bounds and mapped onto [-1, 1] by those
    bounds (a data-independent affine map), with a column of ones appended, so ‖x‖² <= d + 1 and
    |y| <= 1. Three discrete Gaussian releases (zCDP, composed and stated at (ε, δ)): λ_min(XᵀX)
    (sensitivity d+1), the upper triangle of XᵀX (L2 sensitivity d+1) and Xᵀy (√(d+1)).
    The ridge is λ = max(0, σ_XX·√(p·ln(2p²/ρ)) − λ̃_min) with λ̃_min = max(λ̂_min − σ_λ√ln(6/δ), 0),
    p = d + 1, as in Alg. 2 with bayesdp's calibrated σ in place of √ln(6/δ)/(ε/3)·‖X‖².
    `coef_interval` gives intervals that hold the table's least-squares coefficients with probability
    at least 1 − α whatever the table, unbounded where the noise hides the design (see there).
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

    @one_blas_thread
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
        lam_hat = float(m_lam.release(np.linalg.eigvalsh(gram)[:1], rng=rng)[0])
        upper = m_xx.release(gram[iu], rng=rng)
        xy = m_xy.release(xs.T @ ys, rng=rng)
        a = np.zeros((p, p))
        a[iu] = upper
        a = a + np.triu(a, 1).T
        lam_min = max(lam_hat - m_lam.scale * math.sqrt(math.log(6 / delta)), 0.0)
        ridge = max(0.0, m_xx.scale * math.sqrt(p * math.log(2 * p * p / FAILURE)) - lam_min)
        k = p if self.fit_intercept else p - 1  # without an intercept the ones column only counts rows
        m = a[:k, :k] + ridge * np.eye(k)
        theta = np.linalg.lstsq(m, xy[:k], rcond=None)[0]
        t = self._back_transform(shift, scale, yscale, k)
        w = t @ theta
        offset = np.zeros(t.shape[0])
        if self.fit_intercept:
            offset[-1] = yshift
        self._stats = _Stats(a[:k, :k], xy[:k], m_xx.scale, m_xy.scale, t, offset)
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
        """(1 − α) intervals for the least-squares fit of the clipped rows: (lower, upper) arrays.

        The target is this table's ordinary least squares θ = A⁻¹b on the [-1, 1] scale, mapped to
        coef_ (and intercept_, last), not a population parameter: the only randomness is the added
        noise. For that θ, Âθ − b̂ = Eθ − e is Gaussian with covariance
        Σ(θ) = σ_b²I + σ_A²(‖θ‖²I + θθᵀ − diag θ²) ⪯ (σ_b² + 2σ_A²‖θ‖²)I, so with probability 1 − α
        θ lies in {θ : (Âθ − b̂)ᵀΣ(θ)⁻¹(Âθ − b̂) ≤ χ²_p(1 − α)} (test inversion: Casella & Berger
        2002, Thm 9.2.2) and in D = {θ : ‖Âθ − b̂‖² ≤ χ²_p(1 − α)·(σ_b² + 2σ_A²‖θ‖²)}, which holds
        it. Each interval is D's projection, so all hold at once. D is an ellipsoid when
        ÂᵀÂ ≻ 2χ²σ_A²I, else unbounded, and then every interval is (−inf, inf): where the noise on
        XᵀX hides its smallest eigenvalue, near-collinear tables with any coefficients are
        consistent with the release, and intervals that are always finite cannot keep their
        coverage on every table (Gleser & Hwang 1987). Each interval is widened to contain the
        released estimate. Post-processing: no further budget. The discrete Gaussian on its grid
        (2⁻²⁰ of the sensitivity) is treated as Gaussian.
        """
        check_is_fitted(self, "guarantee_")  # no rows to validate: a frame's feature names stay unchecked
        s = self._stats
        a = check_open_unit("alpha", alpha)
        lower, upper = _ellipsoid_projection(s.gram, s.xy, s.sigma_xx, s.sigma_xy, s.t, a)
        estimate = np.append(self.coef_, self.intercept_) if self.fit_intercept else self.coef_
        return np.minimum(lower + s.offset, estimate), np.maximum(upper + s.offset, estimate)


def _ellipsoid_projection(
    gram: np.ndarray, xy: np.ndarray, sigma_a: float, sigma_b: float, t: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of t·θ over D = {θ : ‖Âθ − b̂‖² ≤ c(σ_b² + 2σ_A²‖θ‖²)}, c = χ²_p(1 − α).

    Expanded, D = {θ : (θ − m)ᵀM(θ − m) ≤ k} with M = ÂᵀÂ − 2cσ_A²I, m = M⁻¹Âᵀb̂ and
    k = cσ_b² + mᵀMm − ‖b̂‖²; the range of a row tᵢ over it is tᵢm ± √(k·tᵢM⁻¹tᵢᵀ) (Cauchy–Schwarz
    in the inner product of M). Unbounded (±inf) unless M is positive definite.
    """
    p = xy.size
    c = float(chi2.ppf(1 - alpha, p))
    m_mat = gram.T @ gram - 2 * c * sigma_a**2 * np.eye(p)
    try:
        chol = np.linalg.cholesky(m_mat)
    except np.linalg.LinAlgError:  # M is not positive definite: D is unbounded
        inf = np.full(t.shape[0], np.inf)
        return -inf, inf
    centre = cho_solve((chol, True), gram.T @ xy)
    k = max(c * sigma_b**2 + centre @ m_mat @ centre - xy @ xy, 0.0)
    half = np.sqrt(k * np.einsum("ij,ji->i", t, cho_solve((chol, True), t.T)))
    return t @ centre - half, t @ centre + half


@dataclass(frozen=True)
class _Stats:
    """The released statistics the intervals are computed from (post-processing only), the map
    from the [-1, 1] scale to (coef_, intercept_) and the target's shift (the intercept's)."""

    gram: np.ndarray
    xy: np.ndarray
    sigma_xx: float
    sigma_xy: float
    t: np.ndarray
    offset: np.ndarray
