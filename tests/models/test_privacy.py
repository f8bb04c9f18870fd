"""Exact sensitivity of every release the estimators make, and the law of objective perturbation's noise.

The mechanisms are replaced by recorders that return their input, so a fit on a data set and on
its neighbour (one extreme row added) exposes the
exact statistics each mechanism would have noised; their difference must stay within the
sensitivity the mechanism was calibrated to (L1 for Laplace, L2 for the Gaussian). A fit that
understated a sensitivity (a missing row-norm factor, a forgotten statistic) fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy import stats

import bayesdp as bdp
from bayesdp.mechanisms import Gaussian, Laplace
from bayesdp.models import (
    PCA,
    CategoricalNB,
    GaussianNB,
    KMeans,
    LinearRegression,
    LogisticRegression,
    StandardScaler,
)
from bayesdp.models.logistic import gamma_norm_noise, standard_normals


class Recorder:
    """Replaces Laplace and Gaussian releases by the identity and records (mechanism, values)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[Any, np.ndarray]] = []

        def identity(mech: Any, values: Any, rng: Any = None) -> Any:
            v = np.array(values, dtype=np.float64)
            self.calls.append((mech, v.copy()))
            return v

        for cls in (Laplace, Gaussian):
            monkeypatch.setattr(cls, "release", identity)

    def run(self, fit: Callable[[], Any]) -> list[tuple[Any, np.ndarray]]:
        self.calls = []
        fit()
        return self.calls


def assert_within_sensitivity(a: list[tuple[Any, np.ndarray]], b: list[tuple[Any, np.ndarray]]) -> None:
    assert len(a) == len(b) and a
    for (mech, va), (_, vb) in zip(a, b, strict=True):
        diff = np.abs(va - vb).ravel()
        size = diff.sum() if isinstance(mech, Laplace) else np.sqrt((diff * diff).sum())
        assert size <= mech.sensitivity, (mech, size)


def data(n: int = 300, d: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    return gen.uniform(-1, 2, (n, d)), gen.integers(0, 3, n)


CORNERS = (lambda lo, hi: hi, lambda lo, hi: lo, lambda lo, hi: np.where(np.arange(lo.size) % 2, lo, hi))


@pytest.mark.parametrize("corner", CORNERS)
@pytest.mark.parametrize(
    "make",
    [
        lambda: StandardScaler(bounds=(-1, 2)),
        lambda: GaussianNB(bounds=(-1, 2), classes=[0, 1, 2]),
        lambda: KMeans(3, bounds=(-1, 2), n_iter=1),
        lambda: PCA(2, data_norm=3.0),
        lambda: LinearRegression(bounds_X=(-1, 2), bounds_y=(0, 2)),
    ],
    ids=["scaler", "gaussian_nb", "kmeans", "pca", "linear"],
)
def test_added_row_moves_each_release_within_its_sensitivity(
    monkeypatch: pytest.MonkeyPatch, make: Callable[[], Any], corner: Callable[..., np.ndarray]
) -> None:
    rec = Recorder(monkeypatch)
    x, y = data()
    lo, hi = np.full(4, -1.0), np.full(4, 2.0)
    row = corner(lo, hi)
    if isinstance(make(), PCA):
        row = row / np.linalg.norm(row) * 3.0
    x2, y2 = np.vstack([x, row]), np.append(y, 2)
    est = make().set_params(rng=bdp.rng_for_tests(1))
    assert_within_sensitivity(rec.run(lambda: est.fit(x, y)), rec.run(lambda: est.fit(x2, y2)))


def test_categorical_counts_within_sensitivity(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = Recorder(monkeypatch)
    gen = np.random.default_rng(3)
    x, y = gen.integers(0, 4, (200, 5)), gen.integers(0, 2, 200)
    est = CategoricalNB(n_categories=4, classes=[0, 1])
    a = rec.run(lambda: est.fit(x, y))
    b = rec.run(lambda: est.fit(np.vstack([x, [3, 0, 1, 2, 3]]), np.append(y, 1)))
    assert_within_sensitivity(a, b)
    # the row adds d + 1 = 6 counts: the calibrated L1 sensitivity is exactly that (plus rounding)
    assert np.abs(a[0][1] - b[0][1]).sum() == 6 <= a[0][0].sensitivity < 6.001


@pytest.mark.parametrize(
    ("added", "label", "C"),
    [
        (np.full(4, 9.0), 1, 0.5),
        (np.array([-5.0, 0.0, 5.0, 0.0]), 0, 0.5),
        (np.full(4, 9.0), 0, 50.0),
    ],
)
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_output_perturbation_minimiser_moves_at_most_C(
    monkeypatch: pytest.MonkeyPatch, added: np.ndarray, label: int, C: float, delta: float
) -> None:
    """Chaudhuri et al. 2011, Lemma 7: adding one row moves the minimiser of Σℓ + ‖f‖²/(2C) by <= C.

    L1 sensitivity √p·C for Laplace (delta = 0), L2 C for the Gaussian.
    """
    rec = Recorder(monkeypatch)
    x, y = data(200)
    y = (y > 0).astype(int)
    x2, y2 = np.vstack([x, added]), np.append(y, label)
    est = LogisticRegression(method="output", delta=delta, C=C, data_norm=2.0, classes=[0, 1], tol=1e-12)
    a, b = rec.run(lambda: est.fit(x, y)), rec.run(lambda: est.fit(x2, y2))
    assert_within_sensitivity(a, b)
    assert a[0][0].sensitivity == pytest.approx(C * (1.0 if delta else np.sqrt(5)), rel=1e-5)


def test_standard_normals_follow_the_normal_law() -> None:
    """KS test against N(0, 1) on 20,000 draws: false failure probability 1e-7 (the p-value threshold)."""
    z = standard_normals(20_000, bdp.rng_for_tests(5))
    assert stats.kstest(z, "norm").pvalue > 1e-7


def test_gamma_norm_noise_has_gamma_norm_and_uniform_direction() -> None:
    """‖b‖ ~ Gamma(d, 1/β), b/‖b‖ uniform (Chaudhuri et al. 2011, Alg. 2); each KS test errs w.p. 1e-7."""
    gen, d, beta = bdp.rng_for_tests(6), 5, 2.0
    draws = np.array([gamma_norm_noise(d, beta, gen)[0] for _ in range(3000)])
    norms = np.linalg.norm(draws, axis=1)
    assert stats.kstest(norms, stats.gamma(d, scale=1 / beta).cdf).pvalue > 1e-7
    # uniform on the sphere: each coordinate of the direction has (u + 1)/2 ~ Beta((d-1)/2, (d-1)/2)
    u = draws[:, 0] / norms
    assert stats.kstest((u + 1) / 2, stats.beta((d - 1) / 2, (d - 1) / 2).cdf).pvalue > 1e-7


def test_objective_guarantee_states_the_sampler_total_variation() -> None:
    x, y = data(500)
    est = LogisticRegression(epsilon=1.0, data_norm=2.0, classes=[0, 1, 2], rng=bdp.rng_for_tests(2)).fit(
        x, y
    )
    g = est.guarantee
    assert (g.epsilon, g.relation) == (1.0, "add_remove")
    # three one-vs-rest problems, each (1/3)-DP up to TV p/(4·2^40) with p = 5 (intercept)
    assert g.delta == pytest.approx(3 * (1 + np.exp(1 / 3)) * 5 / (4 * 2.0**40))


@pytest.mark.parametrize(
    ("epsilon", "C", "features"),
    [
        (0.1, 1.0, 4),
        (1.0, 1.0, 4),
        (5.0, 1.0, 4),
        (1.0, 1e3, 4),
        (0.5, None, 4),
        (5.0, None, 4),
        (5.0, None, 15),
    ],
)
def test_objective_noise_leaves_the_jacobian_one_log_factor(
    monkeypatch: pytest.MonkeyPatch, epsilon: float, C: float | None, features: int
) -> None:
    """ε' = ε − ln(1 + c/(nΛ')) >= (1 − s)ε, Λ' = max(1/(nC), c/(n(e^{sε} − 1))), C=None as C = ∞."""
    betas: list[float] = []
    ridges: list[float] = []

    def record(d: int, beta: float, rng: Any) -> tuple[np.ndarray, float]:
        betas.append(beta)
        return gamma_norm_noise(d, beta, rng)

    def minimise(est: Any, yx: np.ndarray, reg: float, b: np.ndarray) -> np.ndarray:
        ridges.append(reg)
        return np.zeros(yx.shape[1])

    monkeypatch.setattr("bayesdp.models.logistic.gamma_norm_noise", record)
    monkeypatch.setattr(LogisticRegression, "_minimise", minimise)
    x, y = data(400, d=features)
    LogisticRegression(epsilon=epsilon, C=C, data_norm=2.0, classes=[0, 1], rng=bdp.rng_for_tests(4)).fit(
        x, (y > 0).astype(int)
    )
    n, c, share = 400, 0.25, min(0.5, 4 / (features + 1))  # p = features + intercept
    ridge = max(0.0 if C is None else 1 / (n * C), c / (n * np.expm1(share * epsilon)))
    assert ridges == [pytest.approx(ridge, rel=1e-12)]
    assert betas == [pytest.approx(epsilon - np.log1p(c / (n * ridge)), rel=1e-12)]
    assert betas[0] >= (1 - share) * epsilon * (1 - 1e-12)


def test_objective_guarantee_at_a_huge_epsilon_caps_delta() -> None:
    """(1 + e^ε)·TV overflowed a float for ε > 709; the δ it bounds is capped at 1/2 long before."""
    x, y = data(100)
    est = LogisticRegression(epsilon=1e3, data_norm=2.0, classes=[0, 1], rng=bdp.rng_for_tests(3))
    assert est.fit(x, (y > 0).astype(int)).guarantee.delta == 0.5
