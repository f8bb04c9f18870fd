"""interval(alpha) of the additive mechanisms: exact for the noise used, and covering at that rate.

Statistical assertions: the number of draws outside the interval is Binomial(n, q) with q the
exact P(|noise| > w); each count is checked against its exact 1e-7 quantiles on both sides, so
each assertion fails falsely with probability <= 2e-7.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mech_stats import binomial_band, dgauss_weights, dlap_tail
from scipy.special import ndtr

from bayesdp import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace, rng_for_tests

N = 100_000

LAPLACES = [
    Laplace(1.0),
    Laplace(2.0, sensitivity=1e-3),  # scale 5e-4
    Laplace(0.5, sensitivity=3e6),  # scale 6e6
    Laplace(1e-3, sensitivity=2e4),  # scale 2e7
]
GAUSSIANS = [
    Gaussian(epsilon=1.0, delta=1e-5),
    Gaussian(epsilon=3.0, delta=1e-9, sensitivity=1e-4),  # σ about 1.6e-4
    Gaussian(epsilon=0.5, delta=1e-6, sensitivity=1e6),  # σ about 8e6
    Gaussian(rho=0.1, sensitivity=0.01),
    Gaussian(rho=1e-14, sensitivity=1.0),  # σ about 7e6
]
DISCRETE_LAPLACES = [
    DiscreteLaplace(5.0),  # scale 0.2
    DiscreteLaplace(1.0, sensitivity=3),
    DiscreteLaplace(1e-7),  # scale 1e7
]
DISCRETE_GAUSSIANS = [
    DiscreteGaussian(rho=2.0),  # σ = 0.5
    DiscreteGaussian(epsilon=1.0, delta=1e-5, sensitivity=2),
    DiscreteGaussian(rho=1e-13),  # σ about 2.2e6
]


def dgauss_tail(sigma: float, k: int) -> float:
    """P(|X| > k) for X discrete Gaussian: brute-force sums for moderate σ; for σ > 1000 the midpoint
    rule 2Φ(-(k + 1/2)/σ), whose error (≈ 1/(24σ²) per unit of density) is far below 1e-9 there."""
    if sigma <= 1000:
        x, pmf = dgauss_weights(sigma)
        return float(pmf[np.abs(x) > k].sum())
    return float(2 * ndtr(-(k + 0.5) / sigma))


def steps_and_tail(mech: object, alpha: float) -> tuple[int, float, float]:
    """(k, q(k), q(k-1)): the interval in noise steps, and the exact tail beyond k and beyond k - 1."""
    if isinstance(mech, Laplace):
        k = round(mech.interval(alpha) / mech.grid - 0.5)
        return k, dlap_tail(mech.steps, k), dlap_tail(mech.steps, k - 1)
    if isinstance(mech, DiscreteLaplace):
        k = round(mech.interval(alpha))
        return k, dlap_tail(mech.scale, k), dlap_tail(mech.scale, k - 1)
    if isinstance(mech, Gaussian):
        k = round(mech.interval(alpha) / mech.grid - 0.5)
    else:
        assert isinstance(mech, DiscreteGaussian)
        k = round(mech.interval(alpha))
    return k, dgauss_tail(mech.sigma_steps, k), dgauss_tail(mech.sigma_steps, k - 1)


ALL = LAPLACES + GAUSSIANS + DISCRETE_LAPLACES + DISCRETE_GAUSSIANS


@pytest.mark.parametrize("alpha", [0.05, 0.001])
@pytest.mark.parametrize("mech", ALL, ids=repr)
def test_interval_is_the_smallest_that_covers(mech: object, alpha: float) -> None:
    k, q, q_before = steps_and_tail(mech, alpha)
    assert q <= alpha * (1 + 1e-9)
    # Exact for the noise used: one step less would not cover (unless k = 0 already covers).
    assert k == 0 or q_before > alpha * (1 - 1e-9)


@pytest.mark.parametrize("mech", ALL, ids=repr)
def test_interval_covers_at_its_rate(mech: object) -> None:
    alpha = 0.05
    rng = rng_for_tests(20260 + ALL.index(mech))
    w = mech.interval(alpha)  # type: ignore[attr-defined]
    _, q, _ = steps_and_tail(mech, alpha)
    # Inputs on the grid (integers), so the noise is exactly grid times an integer and the
    # count outside is Binomial(N, q).
    x = rng.integers(-1000, 1000, size=N)
    outside = int(np.count_nonzero(np.abs(mech.release(x, rng=rng) - x) > w))  # type: ignore[attr-defined]
    lo, hi = binomial_band(N, q)
    assert lo <= outside <= hi, (outside, lo, hi, q)


@pytest.mark.parametrize("mech", LAPLACES + GAUSSIANS, ids=repr)
def test_interval_covers_off_grid_inputs_too(mech: Laplace | Gaussian) -> None:
    """Rounding an off-grid input moves it by at most g/2, which the interval includes."""
    rng = rng_for_tests(7)
    x = rng.uniform(-5, 5, size=N) * mech.scale
    w = mech.interval(0.05)
    _, q, _ = steps_and_tail(mech, 0.05)
    outside = int(np.count_nonzero(np.abs(mech.release(x, rng=rng) - x) > w))
    assert outside <= binomial_band(N, q)[1]  # Binomial(N, <= q): P(false failure) <= 1e-7


@pytest.mark.parametrize("mech", LAPLACES + GAUSSIANS, ids=repr)
def test_outputs_lie_on_the_grid(mech: Laplace | Gaussian) -> None:
    assert math.log2(mech.grid) == int(math.log2(mech.grid))
    rng = rng_for_tests(11)
    y = mech.release(rng.normal(0, 1e3, size=10_000) * mech.scale, rng=rng)
    steps = y / mech.grid
    assert np.all(steps == np.rint(steps))
    assert np.all(np.abs(steps) < 2.0**53)


@pytest.mark.parametrize("mech", ALL, ids=repr)
def test_scalar_in_scalar_out_and_shapes_kept(mech: object) -> None:
    rng = rng_for_tests(3)
    release = mech.release  # type: ignore[attr-defined]
    scalar = release(4, rng=rng)
    assert isinstance(scalar, int if isinstance(mech, DiscreteLaplace | DiscreteGaussian) else float)
    assert isinstance(mech(4, rng=rng), type(scalar))  # type: ignore[operator]
    assert isinstance(release(np.int64(4), rng=rng), type(scalar))
    for shape in [(5,), (3, 4), (2, 0), (2, 3, 2)]:
        out = release(np.ones(shape, dtype=np.int64), rng=rng)
        assert isinstance(out, np.ndarray)
        assert out.shape == shape
    assert release([1, 2, 3], rng=rng).shape == (3,)


def test_discrete_outputs_are_integers() -> None:
    rng = rng_for_tests(5)
    for mech in DISCRETE_LAPLACES + DISCRETE_GAUSSIANS:
        assert mech.release(np.arange(10), rng=rng).dtype == np.int64


@pytest.mark.parametrize("mech", ALL, ids=repr)
def test_guarantee_names_its_mechanism(mech: object) -> None:
    guarantee = mech.guarantee  # type: ignore[attr-defined]
    assert guarantee.noise == (mech.noise,) and guarantee.noise[0].family == mech.family
    assert guarantee.relation == "add_remove" and guarantee.unit == "row"
    if isinstance(mech, Laplace | DiscreteLaplace):
        assert (guarantee.epsilon, guarantee.delta, guarantee.rho) == (mech.epsilon, 0.0, None)
    else:
        assert isinstance(mech, Gaussian | DiscreteGaussian)
        assert guarantee.rho is not None or guarantee.delta > 0
