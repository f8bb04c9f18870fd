"""Edge cases: tiny δ, α, ε and ρ, and malformed responses and scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_mech_gaussian import analytic_gaussian_sigma

from bayesdp import Exponential, Gaussian, Laplace, RandomizedResponse
from bayesdp.errors import DataError, InvalidParameter


@pytest.mark.parametrize("delta", [1e-12, 1e-13, 1e-14, 1e-16])
def test_gaussian_small_delta_matches_analytic_gaussian(delta: float) -> None:
    """The midpoint-rule error bound is relative to the tail, so tiny δ costs no extra noise."""
    mech = Gaussian(epsilon=1.0, delta=delta)
    assert mech.scale == pytest.approx(analytic_gaussian_sigma(1.0, delta, 1.0), rel=1e-3)


@pytest.mark.parametrize("alpha", [1e-13, 1e-14])
def test_gaussian_interval_for_small_alpha(alpha: float) -> None:
    """The interval stays finite for α far below the midpoint error bound near the centre."""
    w = Gaussian(epsilon=1.0, delta=1e-5).interval(alpha)
    assert math.isfinite(w)


def test_estimate_counts_refuses_negative_responses_with_a_data_error() -> None:
    """Negative responses are a DataError naming what is allowed."""
    with pytest.raises(DataError, match="responses must be categories"):
        RandomizedResponse(1.0).estimate_counts([-1, 0])


def test_selection_refuses_two_dimensional_scores() -> None:
    """A 2x2 array of scores is refused, not taken for 4 candidates."""
    with pytest.raises((DataError, InvalidParameter)):
        Exponential(1.0).select(["a", "b", "c", "d"], np.ones((2, 2)))


@pytest.mark.parametrize("epsilon", [1e-5, 1e-6, 1e-7])
def test_laplace_noise_at_tiny_epsilon_is_not_inflated(epsilon: float) -> None:
    """The grid follows min(b, Δ), so the rounding surcharge stays below 1% even for tiny ε."""
    assert Laplace(epsilon).scale <= 1.01 / epsilon


def test_gaussian_noise_at_tiny_rho_is_not_inflated() -> None:
    assert Gaussian(rho=1e-12).scale <= 1.01 / math.sqrt(2e-12)
