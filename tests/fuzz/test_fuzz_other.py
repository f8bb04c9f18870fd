"""Fuzz: synthesis, the reusable holdout, the Markov quilt mechanism and the auditor."""

import numpy as np
import pandas as pd
import pytest
from fuzzing import SLOW_FUZZ, counts, error_or_finite, numbers, positive, probabilities
from hypothesis import given
from hypothesis import strategies as st

import bayesdp as bdp


@pytest.fixture(scope="module")
def people() -> pd.DataFrame:
    rng = np.random.default_rng(8)
    return pd.DataFrame({"a": rng.choice(["x", "y"], 150), "b": rng.integers(0, 3, 150).astype(str)})


@SLOW_FUZZ
@given(epsilon=positive, delta=probabilities, method=st.sampled_from(["mst", "aim", "nope"]),
       bins=counts, k=st.sampled_from([None, 0, 5, -1]))
def test_synthesize(people, epsilon, delta, method, bins, k):
    syn = error_or_finite(lambda: bdp.synthesize(people, epsilon, delta, method=method, bins=bins,
                                                 rng=bdp.rng_for_tests(4)))
    if syn is not None:
        error_or_finite(lambda: syn.sample(k, rng=bdp.rng_for_tests(5)))


@SLOW_FUZZ
@given(threshold=numbers, sigma=numbers, budget=counts, means=st.lists(probabilities, min_size=1,
                                                                        max_size=4))
def test_reusable_holdout(threshold, sigma, budget, means):
    holdout = error_or_finite(lambda: bdp.ReusableHoldout(
        None, holdout=1000, threshold=threshold, sigma=sigma, budget=budget, rng=bdp.rng_for_tests(6)))
    if holdout is not None:
        error_or_finite(lambda: [a.value for a in holdout.query_means(means, means[::-1])])
        error_or_finite(lambda: holdout.guarantee.epsilon)


@SLOW_FUZZ
@given(p=probabilities, q=probabilities, length=st.sampled_from([0, -1, 1, 10, 10**9, 10**30]),
       epsilon=positive, lipschitz=positive, method=st.sampled_from(["exact", "approx"]),
       notion=st.sampled_from(["pufferfish", "bdp"]))
def test_markov_quilt(p, q, length, epsilon, lipschitz, method, notion):
    def build():
        chain = bdp.MarkovChain([[1 - q, q], [p, 1 - p]])
        return bdp.MarkovQuiltMechanism(chain, length=length, epsilon=epsilon, lipschitz=lipschitz,
                                        method=method, notion=notion)

    mech = error_or_finite(build)
    if mech is not None:
        seq = np.array([0, 1, 1, 0])
        error_or_finite(lambda: mech.release([seq], rng=bdp.rng_for_tests(7)))
        error_or_finite(lambda: mech.interval(0.05))
        error_or_finite(lambda: mech.guarantee.explain())


@SLOW_FUZZ
@given(epsilon=numbers, delta=probabilities, samples=st.sampled_from([0, 1, 100, 2000, -5]),
       alpha=probabilities, d1=numbers)
def test_audit(epsilon, delta, samples, alpha, d1):
    error_or_finite(lambda: bdp.audit(bdp.Laplace(1.0), 0.0, d1, epsilon=epsilon, delta=delta,
                                      samples=samples, alpha=alpha, rng=bdp.rng_for_tests(9)))


def test_synthesize_refuses_a_subnormal_delta_and_huge_bins(people):
    # Found by the fuzz run: delta=5e-324 divided by zero in level discovery.
    with pytest.raises(bdp.errors.InvalidParameter, match="delta"):
        bdp.synthesize(people, 1.0, 5e-324, rng=bdp.rng_for_tests(1))
    with pytest.raises(bdp.errors.InvalidParameter, match="bins"):
        bdp.synthesize(people.assign(c=1.0), 1.0, 1e-9, bounds={"c": (0, 2)}, bins=10**6)


def test_markov_quilt_refuses_a_length_beyond_int64():
    # Found by the fuzz run: length=10**30 overflowed a C long in the quilt search.
    with pytest.raises(bdp.errors.InvalidParameter, match="length"):
        bdp.MarkovQuiltMechanism(bdp.MarkovChain([[0.5, 0.5], [0.5, 0.5]]), length=10**30, epsilon=1.0)
