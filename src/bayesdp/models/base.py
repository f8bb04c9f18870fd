"""What every private estimator shares: input checks, public bounds, clipping, noise, the spend, BLAS threads.

Vector releases go through bayesdp's mechanisms. A mechanism rounds each coordinate to its grid g
before adding integer noise, so a d-vector whose L1 (L2) norm moves by at most Δ moves by at
most Δ/g + d (Δ/g + √d) grid steps after rounding; `laplace_vector` and `gaussian_vector`
calibrate the mechanism to a sensitivity S >= Δ + d·g (Δ + √d·g) and check that it holds.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, TypeVar

import numpy as np
from scipy.optimize import brentq
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import ThreadpoolController

from bayesdp.errors import DataError, InvalidParameter, check_delta, check_positive, invalid
from bayesdp.mechanisms import Gaussian, Laplace
from bayesdp.noise import Rng, resolve_rng
from bayesdp.privacy import Guarantee, Ledger, zcdp_epsilon

Fit = TypeVar("Fit", bound=Callable[..., Any])

# The grid is at most 2^-20 of the sensitivity (bayesdp.noise.lattice), so S = Δ/(1 - k·2^-20)
# covers the rounding of k = d (L1) or √d (L2) coordinates.
_GRID_FRACTION = 2.0**-20


class PrivacyLeakWarning(UserWarning):
    """A parameter that must be public was read from the private data: the model is not DP."""


def leak_warning(what: str, fix: str) -> None:
    warnings.warn(
        f"{what} were read from the data, which leaks private information and voids the "
        f"privacy guarantee; {fix}",
        PrivacyLeakWarning,
        stacklevel=3,
    )


def check_epsilon(epsilon: Any) -> float:
    return check_positive("epsilon", epsilon)


def check_approx(epsilon: Any, delta: Any) -> tuple[float, float]:
    """(ε, δ) for a Gaussian-noise estimator: δ must be in (0, 1)."""
    d = check_delta("delta", delta)
    if d == 0:
        raise invalid("delta", delta, "in (0, 1): this estimator adds Gaussian noise")
    return check_epsilon(epsilon), d


@lru_cache(maxsize=256)
def rho_for(epsilon: float, delta: float) -> float:
    """The largest ρ whose tight (ε, δ) conversion (CKS 2020, Prop. 12) is at most the given ε."""
    hi = 1.0
    while zcdp_epsilon(hi, delta) < epsilon:
        hi *= 2.0
    return float(brentq(lambda r: zcdp_epsilon(r, delta) - epsilon, 1e-12, hi, xtol=1e-14, rtol=1e-10))


def approx_guarantee(epsilon: float, delta: float, rho: float) -> Guarantee:
    """ρ-zCDP stated as the (ε, δ) it was calibrated to (the ledger's zcdp accounting reads ρ)."""
    return Guarantee(epsilon, delta=delta, rho=rho)


def laplace_vector(epsilon: float, l1: float, d: int) -> Laplace:
    """Laplace noise for a d-vector of L1 sensitivity l1, ε-DP for the whole vector (Dwork 2006, Thm 2)."""
    return _calibrated(lambda s: Laplace(epsilon, sensitivity=s), l1, d, float(d))


def gaussian_vector(rho: float, l2: float, d: int) -> Gaussian:
    """Discrete Gaussian noise for a d-vector of L2 sensitivity l2: ρ-zCDP for it (CKS 2020, Thm 14)."""
    return _calibrated(lambda s: Gaussian(rho=rho, sensitivity=s), l2, d, math.sqrt(d))


def _calibrated(make: Any, sensitivity: float, d: int, spread: float) -> Any:
    if spread * _GRID_FRACTION >= 0.5:
        raise InvalidParameter(f"a release of {d} coordinates is too large for the noise grid (at most 2^38)")
    mech = make(sensitivity / (1.0 - spread * _GRID_FRACTION))
    if sensitivity + spread * mech.grid > mech.sensitivity:  # the grid bound failed: never release
        raise AssertionError("noise grid coarser than 2^-20 of the sensitivity")
    return mech


def feature_bounds(bounds: Any, X: np.ndarray, name: str = "bounds") -> tuple[np.ndarray, np.ndarray]:
    """Public (lower, upper) per feature, scalars broadcast; None reads them from X with a warning."""
    d = X.shape[1]
    if bounds is None:
        leak_warning(
            f"{name} (the range of each feature)", f"pass {name}=(lower, upper) from domain knowledge"
        )
        lo, hi = X.min(axis=0), X.max(axis=0)
        return lo.astype(np.float64), np.maximum(hi, lo + 1e-12).astype(np.float64)
    try:
        lo, hi = (np.broadcast_to(np.asarray(b, dtype=np.float64), (d,)).copy() for b in bounds)
    except (TypeError, ValueError):
        raise invalid(name, bounds, f"a pair (lower, upper) of numbers or arrays of length {d}") from None
    if not (np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < hi).all()):
        raise invalid(name, bounds, "finite (lower, upper) with lower < upper for every feature")
    return lo, hi


def target_bounds(bounds: Any, y: np.ndarray) -> tuple[float, float]:
    """Public (lower, upper) for a 1-d target; None reads them from y with a warning."""
    lo, hi = feature_bounds(bounds, y.reshape(-1, 1), "bounds_y")
    return float(lo[0]), float(hi[0])


def norm_bound(data_norm: Any, X: np.ndarray) -> float:
    """Public bound on each row's L2 norm; None reads the largest norm from X with a warning."""
    if data_norm is None:
        leak_warning("data_norm (the largest row norm)", "pass data_norm from domain knowledge")
        return max(float(np.sqrt((X * X).sum(axis=1)).max(initial=0.0)), 1e-12)
    return check_positive("data_norm", data_norm)


def clip_factors(X: np.ndarray, norm: float) -> np.ndarray:
    """Each row's factor min(1, norm/‖x‖) that scales it back onto the L2 ball (a per-row map: DP-safe)."""
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    return np.asarray(np.minimum(1.0, norm / np.maximum(norms, 1e-300)))


def clip_rows(X: np.ndarray, norm: float) -> np.ndarray:
    """Scale each row whose L2 norm exceeds `norm` back onto the ball."""
    return X * clip_factors(X, norm)[:, None]


def checked_X(est: Any, X: Any, *, reset: bool) -> np.ndarray:
    """sklearn's validation (feature counts and names) with its errors raised as DataError."""
    try:
        out: np.ndarray = validate_data(est, X, reset=reset, dtype=np.float64)
    except ValueError as exc:
        raise DataError(str(exc)) from None
    return out


def checked_Xy(est: Any, X: Any, y: Any, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    try:
        X, y = validate_data(est, X, y, dtype=np.float64, **kwargs)
    except ValueError as exc:
        raise DataError(str(exc)) from None
    return X, y


def fitted(est: Any, X: Any) -> np.ndarray:
    """Check that `est` is fitted and validate X against what it was fitted on."""
    check_is_fitted(est, "guarantee_")  # set last: a fit refused by the ledger leaves no model
    return checked_X(est, X, reset=False)


@lru_cache(maxsize=1)
def _threadpools() -> ThreadpoolController:
    return ThreadpoolController()  # scans the loaded libraries once (about 1 ms)


def one_blas_thread(fit: Fit) -> Fit:
    """Run a `fit` with BLAS on one thread, then restore the process's setting.

    The fits' products (XᵀX, a Newton step's Hessian, distances to centres) are a few to a few
    hundred million flops. On a shared 2-core machine (load average 12) OpenBLAS's second thread
    made them 7 to 125 times slower, not faster: a 21,700 x 35 Gram matrix took 163 ms on two
    threads and 1.3 ms on one, a logistic regression's fit 2.9 s against 0.29 s (medians
    of 12). On an idle machine one thread gives up at most the cores' factor on large products.
    """

    @wraps(fit)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _threadpools().limit(limits=1, user_api="blas"):
            return fit(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def spend_in(ledger: Ledger | None, guarantee: Guarantee, label: str) -> Guarantee:
    """Spend an add/remove `guarantee` in `ledger`'s relation and return it as spent (unchanged without one).

    A replace-one ledger receives the restatement (2ε, (1 + e^ε)δ), 4ρ: a replacement is a
    removal then an addition (Dwork 2006, Remark 2.1; `Guarantee.to_relation`).
    """
    if ledger is None:
        return guarantee
    if not isinstance(ledger, Ledger):
        raise invalid("ledger", ledger, "None or a bayesdp Ledger")
    guarantee = guarantee.to_relation(ledger.budget.relation)
    ledger.spend(guarantee, label)
    return guarantee


class PrivateMixin:
    """The spend: every estimator records its guarantee in its ledger before it keeps a fitted value."""

    ledger: Ledger | None
    rng: Rng | None
    guarantee_: Guarantee

    def _spend(self, guarantee: Guarantee) -> tuple[Guarantee, Rng]:
        """Spend `guarantee` in the ledger's relation (BudgetExceeded leaves the estimator unfitted).

        Returns the guarantee as spent (see `spend_in`) and the noise source.
        `rng=None` (the default) is a fresh CSPRNG; a seeded generator is for tests only (not private).
        """
        guarantee = spend_in(self.ledger, guarantee, f"fit {type(self).__name__}")
        # A test generator is copied so that each fit is reproducible, like scikit-learn's random_state.
        return guarantee, resolve_rng(copy.deepcopy(self.rng))

    @property
    def guarantee(self) -> Guarantee:
        """The privacy guarantee the fit spent (available after fit)."""
        check_is_fitted(self, "guarantee_")
        return self.guarantee_


def uniform(rng: Rng, size: int) -> np.ndarray:
    """Uniform [0, 1) doubles from 53 bits of the generator's raw words (not a release: no noise)."""
    words = rng.bit_generator.random_raw(size)
    return (np.asarray(words, dtype=np.uint64) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def class_labels(classes: Any, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Public class labels and each row's index among them; None reads the labels from y with a warning."""
    try:
        check_classification_targets(y)
    except ValueError as exc:
        raise DataError(str(exc)) from None
    if classes is None:
        leak_warning("the class labels", "pass classes=[...] listing every possible label")
        labels = np.unique(y)
    else:
        labels = np.unique(np.asarray(classes))
        if labels.size != np.asarray(classes).size:
            raise invalid("classes", classes, "a list of distinct labels")
    if labels.size < 2:
        raise invalid(
            "classes", labels.tolist(), "at least two labels (a classifier cannot train on one class)"
        )
    idx = np.searchsorted(labels, y)
    idx = np.minimum(idx, labels.size - 1)
    if not (labels[idx] == y).all():
        raise DataError(
            f"y has labels outside classes={labels.tolist()}: {np.setdiff1d(y, labels)[:5].tolist()}"
        )
    return labels, idx
