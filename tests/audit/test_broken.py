"""The auditor on a correct Laplace and on deliberately broken mechanisms it must catch.

Every audit uses a fixed seed and α = 1e-6. A "passes" assertion on a truly ε-DP mechanism
fails with probability at most α = 1e-6 (exact Clopper–Pearson coverage, the event being
fixed on separate selection runs). The "fails" assertions have their margins stated inline.
"""

import math

import numpy as np

from bayesdp.audit import NumpyLaplace, audit
from bayesdp.noise import discrete_laplace, grid_for, rng_for_tests, snap, unsnap

ALPHA = 1e-6


def grid_laplace(epsilon, snap_input=True):
    """Laplace of scale 1/ε on the power-of-two grid (as bayesdp does it), declaring its grid."""
    g = grid_for(1.0 / epsilon)
    steps = (1.0 + g) / epsilon / g

    def mechanism(x, size, rng):
        noise = discrete_laplace(steps, size, rng)
        if snap_input:
            return unsnap(snap(np.full(size, float(x)), g) + noise, g)
        return float(x) + unsnap(noise, g)  # broken: the input is never rounded to the grid

    mechanism.grid = g
    return mechanism


def release_each_record(p):
    """Seed 003, Example 3: publish each record independently with probability p (-1 = withheld)."""

    def mechanism(records, size, rng):
        rec = np.asarray(records)
        return np.where(rng.random((size, rec.size)) < p, rec, -1)

    return mechanism


def numpy_laplace(x, size, rng):
    """The textbook float sampler (Mironov 2012): the broken example, tests only."""
    return rng.laplace(float(x), 10.0, size)


def test_correct_laplace_passes_with_a_tight_bound():
    result = audit(grid_laplace(1.0), 0.0, 1.0, epsilon=1.0, samples=10**6, alpha=ALPHA,
                   rng=rng_for_tests(1))
    assert result.passed  # false failure <= α = 1e-6
    # Tail events {o <= t}, t <= 0, have ratio exactly e; for one with p ≈ 0.5 vs 0.18 at
    # N = 10^6 the bound's shortfall is ≈ 5(σ₁/p₁ + σ₂/p₂) ≈ 0.016 (σ/p ≈ 0.001, 0.002), so
    # falling 0.1 short needs a 30-σ deviation (probability far below 1e-6).
    assert result.epsilon_lower > 0.9
    assert result.counts[0] > result.counts[1] and result.confidence == 1 - ALPHA


def test_half_the_noise_fails():
    result = audit(grid_laplace(2.0), 0.0, 1.0, epsilon=1.0, samples=10**5, alpha=ALPHA,
                   rng=rng_for_tests(2))
    # True ε = 2; the reference finds ε_LB = 1.99 at 10^6. At 10^5 the shortfall of a
    # threshold event with p ≈ 0.5 vs 0.07 is ≈ 5(0.003 + 0.012) = 0.08, far from the 1.0 needed.
    assert not result.passed
    assert 1.5 < result.epsilon_lower <= 2.0 + 1e-9


def test_release_each_record_is_not_dp_for_any_epsilon():
    mechanism, p = release_each_record(0.1), 0.1
    pure = audit(mechanism, [1, 2, 3], [1, 2, 4], epsilon=1.0, samples=10**5, alpha=ALPHA,
                 rng=rng_for_tests(3))
    # "record 3 is published" has probability 0.1 vs 0: ε_LB ≈ ln(pN/ln(2/α)) = 6.5.
    assert not pure.passed and pure.epsilon_lower > 5
    assert pure.counts[1] == 0
    approx = audit(mechanism, [1, 2, 3], [1, 2, 4], epsilon=1.0, delta=1e-3, samples=10**6,
                   alpha=ALPHA, rng=rng_for_tests(4))
    # The mechanism is (0, p)-DP and its δ at ε = 1 is exactly p. δ_LB <= p except with
    # probability α/2; δ_LB >= p - 0.003 unless the hit count falls 5 σ (σ = 3e-4) below its
    # mean on top of the bound's own 4.9 σ margin and e·14.5/N: probability below 1e-7.
    assert not approx.passed
    assert p - 0.003 <= approx.delta_lower <= p


def test_numpy_float_laplace_fails_through_unreachable_outputs():
    result = audit(numpy_laplace, 0.0, 1.0, epsilon=0.1, samples=10**4, alpha=ALPHA,
                   reachable=NumpyLaplace(10.0), rng=rng_for_tests(5))
    # About 81% of outputs from one input are unreachable from the other and 0% from its own:
    # ε_LB ≈ ln(0.81·10^4/14.5) = 6.3, against a claim of 0.1.
    assert not result.passed and result.epsilon_lower > 5
    assert "cannot be produced" in result.event and result.counts[1] == 0


def test_numpy_float_laplace_fails_through_its_precision_without_a_declared_inverse():
    result = audit(numpy_laplace, 0.0, 1.0, epsilon=0.1, samples=10**5, alpha=ALPHA,
                   rng=rng_for_tests(6))
    # Outputs near 0 from loc = 0 carry bits finer than any output of fl(1 + n) can: the
    # event "not a multiple of 2^-53" has probability ≈ 0.028 vs 0 (ε_LB ≈ 5.2).
    assert not result.passed and result.epsilon_lower > 3
    assert "multiple of 2^" in result.event and result.counts[1] == 0


def test_grid_mechanism_that_skips_rounding_is_caught_off_its_lattice():
    result = audit(grid_laplace(1.0, snap_input=False), 0.0, 0.3, epsilon=1.0, samples=10**4,
                   alpha=ALPHA, rng=rng_for_tests(7))
    # Every output from 0.3 is off the declared grid, none from 0: ε_LB ≈ ln(10^4/14.5) = 6.5.
    assert not result.passed and result.epsilon_lower > 5
    assert "multiple" in result.event


def test_randomized_response_with_the_binary_formula_for_four_categories_fails():
    eps, k = 1.0, 4
    keep = math.exp(eps) / (math.exp(eps) + 1)  # broken: should be e^ε/(e^ε + k - 1)

    def mechanism(x, size, rng):
        other = (x + rng.integers(1, k, size)) % k
        return np.where(rng.random(size) < keep, x, other)

    result = audit(mechanism, 0, 1, epsilon=eps, samples=10**5, alpha=ALPHA, rng=rng_for_tests(8))
    # True ε = ln(0.731/0.0897) = 2.10; point masses at N = 10^5 land within 0.1 of it.
    assert not result.passed and result.epsilon_lower > 1.8


def test_vector_of_float_laplace_values_fails_per_coordinate():
    def mechanism(x, size, rng):
        return rng.laplace(np.asarray(x, dtype=float), 10.0, (size, 2))

    result = audit(mechanism, [0.0, 5.0], [1.0, 5.0], epsilon=0.1, samples=10**4,
                   alpha=ALPHA, reachable=NumpyLaplace(10.0), rng=rng_for_tests(9))
    # Coordinate 0 differs (0 vs 1): as above, ε_LB ≈ 6.3. Coordinate 1 is the same
    # on both inputs, so its reachability events cannot separate them.
    assert not result.passed and result.epsilon_lower > 5
    assert result.event.startswith("output[0] cannot be produced from input")
