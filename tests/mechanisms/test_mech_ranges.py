"""Each parameter has a documented range enforced by the constructor, and every output is finite.

Each case below raised a raw Python exception or returned inf before the ranges existed."""

import numpy as np
import pytest

from bayesdp import DiscreteLaplace, Gaussian, Laplace, RandomizedResponse, rng_for_tests
from bayesdp.errors import InvalidParameter


def test_tiny_epsilon_is_refused_not_an_overflow():
    with pytest.raises(InvalidParameter, match=r"epsilon=1e-30 .* \[1e-12, 700\]"):
        Laplace(1e-30).release([0, 1])


def test_subnormal_sensitivity_is_refused_not_a_division_by_zero():
    with pytest.raises(InvalidParameter, match="sensitivity=5e-324"):
        Laplace(1.0, sensitivity=5e-324)


def test_huge_sensitivity_is_refused_not_an_infinite_output():
    with pytest.raises(InvalidParameter, match="sensitivity"):
        Laplace(1.0, sensitivity=6.7e307)


def test_randomized_response_beyond_e_to_the_700_is_refused():
    with pytest.raises(InvalidParameter, match=r"epsilon=710\.0"):
        RandomizedResponse(710.0)
    top = RandomizedResponse(700.0, categories=3)
    assert top.release(np.array([0, 1, 2]), rng=rng_for_tests(1)).tolist() == [0, 1, 2]


def test_randomized_response_estimates_are_finite_at_the_smallest_epsilon():
    with pytest.raises(InvalidParameter, match="epsilon=1e-300"):
        RandomizedResponse(1e-300, categories=3)
    est = RandomizedResponse(1e-12, categories=3).estimate_counts([0, 1, 2, 1])
    assert np.all(np.isfinite(est.counts)) and np.all(np.isfinite(est.stderr))


def test_the_edges_of_the_ranges_give_finite_outputs():
    rng = rng_for_tests(2)
    for mech in (Laplace(1e-12, sensitivity=1e200), Laplace(700.0, sensitivity=1e-200),
                 Gaussian(1e-12, delta=1e-300, sensitivity=1e200), Gaussian(rho=2.5e5, sensitivity=1e-200)):
        assert np.all(np.isfinite(mech.release(np.zeros(5), rng=rng)))
        assert np.isfinite(mech.interval(1e-6))


def test_integer_noise_beyond_two_to_the_fifty_steps_is_refused():
    with pytest.raises(InvalidParameter, match="2\\^50"):
        DiscreteLaplace(1e-12, sensitivity=2**40)
    with pytest.raises(InvalidParameter, match="delta"):
        Gaussian(1.0, delta=5e-324)
