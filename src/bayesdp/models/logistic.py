"""Logistic regression by objective or output perturbation (Chaudhuri, Monteleoni & Sarwate 2011)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin

from bayesdp.errors import check_delta, check_positive, check_positive_int, invalid
from bayesdp.models.base import (
    PrivateMixin,
    check_epsilon,
    checked_Xy,
    class_labels,
    clip_factors,
    fitted,
    gaussian_vector,
    laplace_vector,
    norm_bound,
    one_blas_thread,
    rho_for,
    uniform,
)
from bayesdp.noise import Rng, discrete_gaussian
from bayesdp.privacy import Guarantee, Ledger

C_LOGISTIC = 0.25  # bound on the logistic loss's second derivative (Chaudhuri et al. 2011, §3.4.1)
SIGMA_STEPS = 2.0**40  # scale of the discrete Gaussians that stand in for continuous normals
METHODS = ("objective", "output")


def jacobian_share(p: int) -> float:
    """The share of ε the Jacobian may take in objective perturbation: min(1/2, 4/p) (CMS 2011, Alg. 2: 1/2).

    The ridge c/(n(e^{share·ε} − 1)) costs bias ∝ 1/(share·ε) whatever p, while the noise's norm,
    Gamma(p, 1/ε'), grows as p/((1 − share)ε): balancing them gives a share ∝ 1/p, for every ε.
    The constant 4 was chosen on validation rows carved from the training sets of both bench
    tables (bench/RESULTS.md); the test rows were not read.
    """
    return min(0.5, 4.0 / p)


def standard_normals(size: int, rng: Rng) -> np.ndarray:
    """Approximately N(0, 1): (K + U − 1/2)/σ, K discrete Gaussian of scale σ = 2^40, U uniform in [0, 1).

    The density is the discrete Gaussian's pmf, constant on each unit cell. Against φ it errs by
    the factor exp((x² − k²)/2σ²) with |x² − k²| <= |x| + 1/4 in cell k, so the total variation
    per coordinate is at most E(|x| + 1/4)/(4σ²)·(1 + o(1)) < 1/(4σ) (the discrete Gaussian's
    normaliser equals √(2π)σ up to e^{−2π²σ²}: CKS 2020, Fact 18).
    """
    k = discrete_gaussian(SIGMA_STEPS, size, rng).astype(np.float64)
    return (k + uniform(rng, size) - 0.5) / SIGMA_STEPS


def gamma_norm_noise(d: int, beta: float, rng: Rng) -> tuple[np.ndarray, float]:
    """b with density ∝ exp(−β‖b‖) (Chaudhuri et al. 2011, Alg. 2) and its total variation from it.

    ‖b‖ ~ Gamma(d, 1/β) is −Σ ln U_i/β for d uniforms U_i in (0, 1] (a sum of d Exp(1) draws), and
    its direction is g/‖g‖ for g ∈ R^d standard normal. Built from d of `standard_normals`, b is
    within total variation d/(4σ) of the exact law, which the guarantee adds to δ.
    """
    g = standard_normals(d, rng)
    radius = -np.log1p(-uniform(rng, d)).sum() / beta
    return radius * g / np.linalg.norm(g), d / (4 * SIGMA_STEPS)


def jacobian_epsilon(n: int, ridge: float) -> float:
    """ln(1 + c/(nΛ)): the Jacobian's share of ε in objective perturbation (CMS 2011, Thm 9, tightened).

    At a common output f the two Jacobians are M and M + a·uuᵀ (one row added) with M ⪰ nΛI (the
    other rows and the ridge), 0 <= a <= c and ‖u‖ <= 1 (a GLM loss has a rank-one Hessian). By
    the matrix determinant lemma det(M + a·uuᵀ) = det M·(1 + a·uᵀM⁻¹u), so their ratio is in
    [1, 1 + c/(nΛ)]; CMS bound the replace-one ratio by (1 + c/(nΛ))².
    """
    return math.log1p(C_LOGISTIC / (n * ridge))


def scaled_rows(X: np.ndarray, norm: float, scale: float, intercept: bool) -> np.ndarray:
    """Rows clipped to L2 norm `norm`, with a 1 appended for the intercept, divided by `scale` (one pass)."""
    n, d = X.shape
    factor = clip_factors(X, norm) / scale
    x = np.empty((n, d + 1 if intercept else d))
    np.multiply(X, factor[:, None], out=x[:, :d])
    if intercept:
        x[:, d] = 1.0 / scale
    return x


def _objective(f: np.ndarray, yx: np.ndarray, reg: float, b: np.ndarray) -> tuple[float, np.ndarray]:
    """(1/n)Σ ln(1 + e^{−m}) + (reg/2)‖f‖² + b·f/n and its gradient, m = y·(x·f) (rows yx = y·x).

    One exponential serves both: ln(1 + e^{−m}) = max(−m, 0) + ln(1 + z) and the derivative's
    σ(−m) = z/(1 + z) for m >= 0, 1/(1 + z) for m < 0, with z = e^{−|m|} (no overflow either way).
    """
    n = yx.shape[0]
    m = yx @ f
    z = np.exp(-np.abs(m))
    loss = (np.maximum(-m, 0.0) + np.log1p(z)).sum() / n + 0.5 * reg * (f @ f) + (b @ f) / n
    grad = -(yx.T @ (np.where(m >= 0, z, 1.0) / (1.0 + z))) / n + reg * f + b / n
    return float(loss), grad


def newton(yx: np.ndarray, reg: float, b: np.ndarray, max_iter: int, tol: float) -> tuple[np.ndarray, int]:
    """The minimiser of `_objective` by damped Newton steps (Boyd & Vandenberghe 2004, Alg. 9.5).

    Objective perturbation's proof assumes the exact minimiser (CMS 2011, Thm 9). Newton's method
    converges quadratically once near it, so it stops when half the squared Newton decrement,
    λ²/2 (the predicted gap F(f) − F*, B&V Sec. 9.5.1), is at most tol·(1 + |F|), tol near the
    float resolution by default, or when no step lowers F in floating point: the minimiser to
    machine precision (the gradient left is 1e-12-ish where L-BFGS at gtol 1e-6 stopped up to
    0.09 away in norm). The count of steps does not grow as the ridge shrinks with ε (7 to 8 at
    ε = 0.1 to 5 on Adult's 32,561 training rows stacked six times, 34 features, where L-BFGS
    took 26, 55 and 133 iterations). Returns the minimiser and the number of steps.
    """
    n, p = yx.shape
    f = np.zeros(p)
    value, grad = _objective(f, yx, reg, b)
    for step in range(1, max_iter + 1):
        z = np.exp(-np.abs(yx @ f))
        root = yx * (np.sqrt(z) / (1.0 + z))[:, None]  # rows times √(σ(m)(1 − σ(m)))
        direction = -np.linalg.solve(root.T @ root / n + reg * np.eye(p), grad)
        decrement = -float(grad @ direction)
        if decrement / 2 <= tol * (1.0 + abs(value)):
            return f, step
        t = 1.0
        trial = f + direction
        v_new, g_new = _objective(trial, yx, reg, b)
        while v_new > value - 0.25 * t * decrement and t > 1e-10:  # Armijo backtracking
            t *= 0.5
            trial = f + t * direction
            v_new, g_new = _objective(trial, yx, reg, b)
        if not v_new < value:  # no float-representable descent is left
            return f, step
        f, value, grad = trial, v_new, g_new
    return f, max_iter


class LogisticRegression(PrivateMixin, ClassifierMixin, BaseEstimator):
    """ε-DP logistic regression, binary or one-vs-rest (Chaudhuri, Monteleoni & Sarwate 2011).

    Rows are clipped to the public L2 norm `data_norm` and, with an intercept, extended by a 1
    and divided by √(data_norm² + 1), so ‖x‖ <= 1. The objective is (1/n)Σℓ + (Λ/2)‖f‖² with
    Λ = 1/(nC) on these scaled rows: on the original rows the ridge of scikit-learn's
    C/(data_norm² + 1), which here also applies to the intercept (the Jacobian bound needs it).

    Neighbours add or remove one row, the relation of every other bayesdp release, so one ledger
    serves every estimator (a replace-one ledger receives the restatement 2ε, see `PrivateMixin`).
    Multiplied by n, the objective is F_D(f) = Σℓ(f; x_i, y_i) + (λ/2)‖f‖² with λ = nΛ' a
    function of C, ε and p only, never of n (n is private under add/remove). Adding a row z to D
    adds one term: F_{D+z} = F_D + ℓ(·; z), with ‖∇ℓ(f; z)‖ = |ℓ'|·‖x‖ <= 1 and
    ∇²ℓ = ℓ''xxᵀ, 0 <= ℓ'' <= c = 1/4 (Chaudhuri et al. 2011, §3.4.1).

    - method="objective" (Alg. 2): the ridge is Λ' = max(Λ, c/(n(e^{sε} − 1))), c = 1/4, with
      s = `jacobian_share`(p) <= 1/2 for p coefficients, so ε' = ε − ln(1 + c/λ) >= (1 − s)ε
      (see `jacobian_epsilon`); C=None (the default) means Λ = 0: only the ridge privacy needs,
      which shrinks as ε grows. The released f minimises F_D(f) + b·f with b of density
      ν(b) ∝ exp(−ε'‖b‖) (see `gamma_norm_noise`). Proof of ε-DP under add/remove (CMS 2011,
      Thm 9, with one row added instead of one replaced): b = −∇F_D(f) is a bijection (F_D is
      λ-strongly convex), so f has density ν(−∇F_D(f))·det ∇²F_D(f). On D + z the gradient
      moves by ∇ℓ(f; z), of norm <= 1, so ν's ratio is within e^{±ε'}; the Hessian gains
      ℓ''xxᵀ on top of ∇²F_D ⪰ λI, so the determinants' ratio is in [1, 1 + c/λ] (matrix
      determinant lemma). The densities' ratio is thus within e^{±(ε' + ln(1 + c/λ))} = e^{±ε}.
      The guarantee is (ε, δ) with δ the sampler's total variation times (1 + e^ε) (a TV-η
      perturbation of an ε-DP mechanism).
    - method="output" (Alg. 1): the exact minimiser plus noise of L2 sensitivity 1/λ = C: f_D
      minimises the λ-strongly convex F_D, and F_{D+z} = F_D + ℓ(·; z) with ‖∇ℓ‖ <= 1, so the
      minimisers are within 1/λ (CMS 2011, Lemma 7). Laplace on L1 <= √p·C when delta = 0, else
      the discrete Gaussian (zCDP). C is required: the noise does not shrink as rows are added
      (the sensitivity cannot read n), so the C that balances the ridge's bias against the noise
      grows with n and with the minimiser's norm. No public default serves real tables: the C
      whose noise has root-mean-square norm 1/2 predicted Adult's majority class at ε = 0.5 and
      1 and lost 0.04 to 0.1 of accuracy to method="objective" on CPS 1988 (bench/RESULTS.md).

    With k > 2 classes each one-vs-rest problem gets ε/k (and δ/k): every row is in all k.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 0.0,
        data_norm: float | None = None,
        classes: Any = None,
        C: float | None = None,
        method: str = "objective",
        fit_intercept: bool = True,
        max_iter: int = 200,
        tol: float = 1e-15,
        ledger: Ledger | None = None,
        rng: Rng | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.classes = classes
        self.C = C
        self.method = method
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.ledger = ledger
        self.rng = rng

    @one_blas_thread
    def fit(self, X: Any, y: Any) -> LogisticRegression:
        eps = check_epsilon(self.epsilon)
        delta = check_delta("delta", self.delta)
        c_reg = None if self.C is None else check_positive("C", self.C)
        check_positive_int("max_iter", self.max_iter)
        check_positive("tol", self.tol)
        if self.method not in METHODS:
            raise invalid("method", self.method, f"one of {METHODS}")
        if c_reg is None and self.method == "output":
            raise invalid(
                "C",
                None,
                "a positive number with method='output': its noise does not shrink as rows are added, "
                "so the C that balances bias and noise depends on the private number of rows "
                "(models.search can choose among candidates); method='objective' needs no C",
            )
        X, y = checked_Xy(self, X, y, reset=True)
        labels, idx = class_labels(self.classes, y)
        norm = norm_bound(self.data_norm, X)
        scale = math.sqrt(norm * norm + 1) if self.fit_intercept else norm
        x = scaled_rows(X, norm, scale, self.fit_intercept)
        problems = 1 if labels.size == 2 else labels.size
        n, p = x.shape
        e_k, d_k = eps / problems, delta / problems
        if c_reg is None:
            c_reg = math.inf
        self.C_ = c_reg
        lam = 1.0 / (n * c_reg)
        if self.method == "objective":
            tv = p / (4 * SIGMA_STEPS)
            guarantee = Guarantee(
                # (1 + e^50)·tv > 0.5 for any p: the cap keeps exp finite without changing δ.
                eps, delta=min(problems * (1 + math.exp(min(e_k, 50.0))) * tv + delta, 0.5)
            )
        else:
            guarantee = Guarantee(eps, delta=delta)
        guarantee, rng = self._spend(guarantee)
        self._iterations: list[int] = []
        if problems == 1:  # one problem: sign the rows in place rather than copy them
            x *= np.where(idx == 1, 1.0, -1.0)[:, None]
            w = self._solve(x, lam, e_k, d_k, rng)[None]
        else:
            signed = (np.where(idx == j, 1.0, -1.0)[:, None] * x for j in range(problems))
            w = np.vstack([self._solve(yx, lam, e_k, d_k, rng) for yx in signed])
        self.classes_ = labels
        self.coef_ = w[:, : X.shape[1]] / scale
        self.intercept_ = w[:, -1] / scale if self.fit_intercept else np.zeros(problems)
        self.n_iter_ = np.array(self._iterations)
        self.guarantee_ = guarantee
        return self

    def _solve(self, yx: np.ndarray, lam: float, eps: float, delta: float, rng: Rng) -> np.ndarray:
        """The coefficients on the scaled rows of one binary problem; rows yx = y·x with y = ±1."""
        n, p = yx.shape
        if self.method == "objective":
            # The ridge grows to c/(n(e^{sε} − 1)) whenever Λ is below it, which bounds the Jacobian's
            # share of ε by s (Alg. 2's Δ, with s for its 1/2; the choice reads only n, p, ε and C).
            ridge = max(lam, C_LOGISTIC / (n * math.expm1(jacobian_share(p) * eps)))
            b, _ = gamma_norm_noise(p, eps - jacobian_epsilon(n, ridge), rng)
            return self._minimise(yx, ridge, b)
        f = self._minimise(yx, lam, np.zeros(p))
        sens = 1.0 / (n * lam)
        if delta == 0:
            return np.asarray(laplace_vector(eps, math.sqrt(p) * sens, p).release(f, rng=rng))
        return np.asarray(gaussian_vector(rho_for(eps, delta), sens, p).release(f, rng=rng))

    def _minimise(self, yx: np.ndarray, reg: float, b: np.ndarray) -> np.ndarray:
        f, steps = newton(yx, reg, b, self.max_iter, float(self.tol))
        self._iterations.append(steps)
        return f

    def decision_function(self, X: Any) -> np.ndarray:
        X = fitted(self, X)
        scores = X @ self.coef_.T + self.intercept_
        return np.asarray(scores[:, 0] if scores.shape[1] == 1 else scores)

    def predict_proba(self, X: Any) -> np.ndarray:
        s = self.decision_function(X)
        if s.ndim == 1:
            p1 = expit(s)
            return np.column_stack([1 - p1, p1])
        p = expit(s)
        return np.asarray(p / np.maximum(p.sum(axis=1, keepdims=True), 1e-300))

    def predict_log_proba(self, X: Any) -> np.ndarray:
        return np.log(np.maximum(self.predict_proba(X), 1e-300))

    def predict(self, X: Any) -> np.ndarray:
        s = self.decision_function(X)
        best = (s > 0).astype(np.int64) if s.ndim == 1 else np.argmax(s, axis=1)
        return np.asarray(self.classes_[best])
