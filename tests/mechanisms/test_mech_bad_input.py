"""Bad parameters and bad data: a clear InvalidParameter / DataError naming what, which value, what range."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bayesdp import (
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    RandomizedResponse,
    ReportNoisyMax,
    SparseVector,
    rng_for_tests,
)
from bayesdp.errors import DataError, InvalidParameter

NAN, INF = math.nan, math.inf

EPSILON_TAKERS: list[Callable[[Any], Any]] = [
    Laplace,
    DiscreteLaplace,
    lambda e: Gaussian(epsilon=e, delta=1e-5),
    lambda e: DiscreteGaussian(epsilon=e, delta=1e-5),
    RandomizedResponse,
    Exponential,
    ReportNoisyMax,
    lambda e: SparseVector(0.0, epsilon=e),
]


def message(name: str, value: Any) -> str:
    """The standard message: `name=value is not allowed: name must be ...`."""
    return rf"{name}={re.escape(repr(value))} is not allowed: {name} must be "


@pytest.mark.parametrize("value", [0, -1.0, NAN, INF, -INF, "one"])
@pytest.mark.parametrize("make", EPSILON_TAKERS)
def test_bad_epsilon(make: Callable[[Any], Any], value: Any) -> None:
    with pytest.raises(InvalidParameter, match=message("epsilon", value)):
        make(value)


def test_missing_epsilon_is_named() -> None:
    with pytest.raises(InvalidParameter, match=message("epsilon", None) + "a finite number"):
        Laplace(None)


@pytest.mark.parametrize("value", [0, -2.0, NAN, INF])
@pytest.mark.parametrize(
    "make",
    [
        lambda s: Laplace(1.0, sensitivity=s),
        lambda s: DiscreteLaplace(1.0, sensitivity=s),
        lambda s: Gaussian(epsilon=1.0, delta=1e-5, sensitivity=s),
        lambda s: Gaussian(rho=0.5, sensitivity=s),
        lambda s: DiscreteGaussian(rho=0.5, sensitivity=s),
        lambda s: Exponential(1.0, sensitivity=s),
        lambda s: ReportNoisyMax(1.0, sensitivity=s),
        lambda s: SparseVector(0.0, epsilon=1.0, sensitivity=s),
    ],
)
def test_bad_sensitivity(make: Callable[[Any], Any], value: float) -> None:
    with pytest.raises(InvalidParameter, match=message("sensitivity", value)):
        make(value)


def test_fractional_sensitivity_of_an_integer_mechanism() -> None:
    with pytest.raises(ValueError, match=r"sensitivity.*1\.5"):
        DiscreteLaplace(1.0, sensitivity=1.5)
    with pytest.raises(ValueError, match=r"sensitivity.*1\.5"):
        DiscreteGaussian(rho=1.0, sensitivity=1.5)


@pytest.mark.parametrize("value", [-0.1, 1, 1.5, NAN, INF])
@pytest.mark.parametrize("cls", [Gaussian, DiscreteGaussian])
def test_bad_delta(cls: type[Gaussian], value: float) -> None:
    allowed = r"in \[0, 1\)" if math.isfinite(value) else "a finite number"
    with pytest.raises(InvalidParameter, match=message("delta", value) + allowed):
        cls(epsilon=1.0, delta=value)


@pytest.mark.parametrize("cls", [Gaussian, DiscreteGaussian])
def test_gaussian_needs_a_positive_delta_or_rho(cls: type[Gaussian]) -> None:
    with pytest.raises(InvalidParameter, match=r"delta=0 is not allowed: .*never pure"):
        cls(epsilon=1.0, delta=0)
    with pytest.raises(InvalidParameter, match="epsilon and delta"):
        cls(epsilon=1.0)
    with pytest.raises(InvalidParameter, match="not both"):
        cls(epsilon=1.0, delta=1e-5, rho=0.5)
    for rho in (0, -1.0, NAN, INF):
        with pytest.raises(InvalidParameter, match=message("rho", rho)):
            cls(rho=rho)


@pytest.mark.parametrize("value", [1, 0, 2.5, True, "3", None])
def test_bad_categories(value: Any) -> None:
    with pytest.raises(InvalidParameter, match=message("categories", value) + "an integer >= 2"):
        RandomizedResponse(1.0, categories=value)


def test_bad_sparse_vector_parameters() -> None:
    for cap in (0, -1, 1.5, True, "2"):
        with pytest.raises(InvalidParameter, match=message("max_positives", cap) + "a positive integer"):
            SparseVector(0.0, epsilon=1.0, max_positives=cap)
    for threshold in (NAN, INF, "high"):
        with pytest.raises(InvalidParameter, match=message("threshold", threshold)):
            SparseVector(threshold, epsilon=1.0)


ADDITIVE = [
    Laplace(1.0),
    DiscreteLaplace(1.0),
    Gaussian(epsilon=1.0, delta=1e-5),
    DiscreteGaussian(rho=0.5),
]


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5, NAN])
@pytest.mark.parametrize("mech", ADDITIVE, ids=repr)
def test_bad_alpha(mech: Laplace, alpha: float) -> None:
    allowed = r"in the open interval \(0, 1\)" if math.isfinite(alpha) else "a finite number"
    with pytest.raises(InvalidParameter, match=message("alpha", alpha) + allowed):
        mech.interval(alpha)


ALL_RELEASERS = [*ADDITIVE, RandomizedResponse(1.0), Exponential(1.0), ReportNoisyMax(1.0)]


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (["a", "b"], "values must be numeric; got list"),
        ("abc", "values must be numeric; got str"),
        ([0.0, NAN], "values has NaN or infinite entries.*: 1 of 2 entries"),
        (np.array([[INF, 0.0], [-INF, NAN]]), "values has NaN or infinite entries.*: 3 of 4 entries"),
        (None, "values has NaN or infinite entries.*: 1 of 1 entries"),
    ],
)
@pytest.mark.parametrize("mech", ALL_RELEASERS, ids=repr)
def test_non_numeric_or_nan_data(mech: Any, data: Any, pattern: str) -> None:
    with pytest.raises(DataError, match=pattern) as info:
        mech.release(data, rng=rng_for_tests(0))
    assert not any(ch.isdigit() for ch in info.value.public_message)  # counts are private


@pytest.mark.parametrize("mech", [DiscreteLaplace(1.0), DiscreteGaussian(rho=0.5), RandomizedResponse(1.0)])
def test_fractional_data_for_discrete_mechanisms(mech: Any) -> None:
    with pytest.raises(DataError, match=r"values must be integers; found fractional entries.*such as 0\.5"
                       ) as info:
        mech.release([1, 0.5], rng=rng_for_tests(0))
    assert "0.5" not in info.value.public_message


def test_randomized_response_categories_out_of_range() -> None:
    rr = RandomizedResponse(1.0, categories=3)
    for data in ([0, 3], [-1, 2]):
        with pytest.raises(DataError, match=r"values must be categories 0\.\.2.*found -?\d\.\.\d") as info:
            rr.release(data, rng=rng_for_tests(0))
        assert "found" not in info.value.public_message
    with pytest.raises(DataError, match=r"responses must be categories 0\.\.2"):
        rr.estimate_counts([0, 1, 5])
    with pytest.raises(DataError, match=r"responses must be integers"):
        rr.estimate_counts([0.5])


def test_values_too_large_for_the_grid() -> None:
    with pytest.raises(DataError, match=r"a value is too large for the noise grid.*1e\+300") as info:
        Laplace(1.0).release([0.0, 1e300], rng=rng_for_tests(0))
    assert "1e+300" not in info.value.public_message
    with pytest.raises(DataError, match=r"values must lie within ±2\^62"):
        DiscreteLaplace(1.0).release([2.0**63], rng=rng_for_tests(0))


def test_bad_selection_scores() -> None:
    mech = Exponential(1.0)
    with pytest.raises(DataError, match=r"need one score per candidate: 3 candidates, 2 scores"):
        mech.select(["a", "b", "c"], [1.0, 2.0])
    with pytest.raises(DataError, match="need one score per candidate: 0 candidates, 0 scores"):
        mech.select([], [])
    with pytest.raises(DataError, match=r"exactly one of utilities .* or losses"):
        mech.select(["a"], [1.0], losses=[1.0])
    with pytest.raises(DataError, match=r"exactly one of utilities .* or losses"):
        mech.select(["a"])
    with pytest.raises(DataError, match=r"losses has NaN.*1 of 2 entries"):
        mech.select(["a", "b"], losses=[1.0, NAN])


def test_sparse_vector_bad_queries() -> None:
    sv = SparseVector(0.0, epsilon=1.0, rng=rng_for_tests(0))
    with pytest.raises(DataError, match=r"values has NaN.*1 of 2 entries"):
        sv.answer([1.0, NAN])
    assert sv.remaining == 1  # nothing was spent on a refused call


def test_rng_must_be_a_generator() -> None:
    with pytest.raises(InvalidParameter, match=r"rng=42 is not allowed: rng must be None \(secure"):
        Laplace(1.0).release([1.0], rng=42)
