"""Fuzz: every mechanism's constructor and release, and Guarantee and compose."""

import numpy as np
from fuzzing import FUZZ, counts, error_or_finite, numbers, positive, probabilities, value_arrays
from hypothesis import given
from hypothesis import strategies as st

import bayesdp as bdp

SEED = 20


@FUZZ
@given(epsilon=positive, sensitivity=positive, values=value_arrays, alpha=probabilities)
def test_laplace(epsilon, sensitivity, values, alpha):
    mech = error_or_finite(lambda: bdp.Laplace(epsilon, sensitivity=sensitivity))
    if mech is not None:
        error_or_finite(lambda: mech.release(np.array(values), rng=bdp.rng_for_tests(SEED)))
        error_or_finite(lambda: mech.interval(alpha))
        error_or_finite(lambda: mech.scale)


@FUZZ
@given(epsilon=positive, sensitivity=counts, values=value_arrays, alpha=probabilities)
def test_discrete_laplace(epsilon, sensitivity, values, alpha):
    mech = error_or_finite(lambda: bdp.DiscreteLaplace(epsilon, sensitivity=sensitivity))
    if mech is not None:
        ints = np.round(values)
        error_or_finite(lambda: mech.release(ints, rng=bdp.rng_for_tests(SEED)))
        error_or_finite(lambda: mech.interval(alpha))


@FUZZ
@given(epsilon=positive, delta=probabilities, rho=st.one_of(st.none(), positive),
       sensitivity=positive, values=value_arrays)
def test_gaussian(epsilon, delta, rho, sensitivity, values):
    def build():
        if rho is None:
            return bdp.Gaussian(epsilon, delta=delta, sensitivity=sensitivity)
        return bdp.Gaussian(rho=rho, sensitivity=sensitivity)

    mech = error_or_finite(build)
    if mech is not None:
        error_or_finite(lambda: mech.release(np.array(values), rng=bdp.rng_for_tests(SEED)))
        error_or_finite(lambda: mech.interval(0.05))


@FUZZ
@given(epsilon=positive, delta=probabilities, sensitivity=counts, values=value_arrays)
def test_discrete_gaussian(epsilon, delta, sensitivity, values):
    mech = error_or_finite(lambda: bdp.DiscreteGaussian(epsilon, delta=delta, sensitivity=sensitivity))
    if mech is not None:
        error_or_finite(lambda: mech.release(np.round(values), rng=bdp.rng_for_tests(SEED)))


@FUZZ
@given(epsilon=positive, categories=counts, responses=st.lists(st.integers(-1, 4), max_size=8))
def test_randomized_response(epsilon, categories, responses):
    mech = error_or_finite(lambda: bdp.RandomizedResponse(epsilon, categories=categories))
    if mech is not None:
        error_or_finite(lambda: mech.release(np.array(responses, dtype=np.int64),
                                             rng=bdp.rng_for_tests(SEED)))
        error_or_finite(lambda: mech.estimate_counts(responses))


@FUZZ
@given(epsilon=positive, sensitivity=positive, utilities=value_arrays,
       kind=st.sampled_from(["Exponential", "ReportNoisyMax"]))
def test_selection(epsilon, sensitivity, utilities, kind):
    mech = error_or_finite(lambda: getattr(bdp, kind)(epsilon, sensitivity=sensitivity))
    if mech is not None:
        error_or_finite(lambda: mech.select(list(range(len(utilities))), utilities,
                                            rng=bdp.rng_for_tests(SEED)))


@FUZZ
@given(threshold=numbers, epsilon=positive, sensitivity=positive, positives=counts,
       values=value_arrays)
def test_sparse_vector(threshold, epsilon, sensitivity, positives, values):
    mech = error_or_finite(lambda: bdp.SparseVector(threshold, epsilon=epsilon, sensitivity=sensitivity,
                                                    max_positives=positives,
                                                    rng=bdp.rng_for_tests(SEED)))
    if mech is not None:
        error_or_finite(lambda: mech.answer(values))


@FUZZ
@given(epsilon=numbers, delta=probabilities, n=counts, prior=probabilities,
       others=st.lists(st.tuples(positive, probabilities), max_size=3),
       how=st.sampled_from(["basic", "advanced", "zcdp", "pld", "nonsense"]))
def test_guarantee_and_compose(epsilon, delta, n, prior, others, how):
    g = error_or_finite(lambda: bdp.Guarantee(epsilon, delta=delta))
    if g is None:
        return
    error_or_finite(lambda: g.semantic(n))
    error_or_finite(lambda: g.posterior(prior))
    error_or_finite(lambda: g.min_total_error())
    error_or_finite(lambda: g.explain(n=n if isinstance(n, int) and 0 < n < 10**9 else None))
    parts = [g]
    for e, d in others:
        h = error_or_finite(lambda e=e, d=d: bdp.Guarantee(e, delta=d))
        if h is not None:
            parts.append(h)
    total = error_or_finite(lambda: bdp.compose(parts, how))
    if total is not None:
        error_or_finite(lambda: (total.epsilon, total.delta))
