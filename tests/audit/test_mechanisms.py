"""Every bayesdp mechanism passes an audit at its claimed ε (δ-audits at the claimed ε for (ε, δ)).

Each "passes" assertion fails with probability at most α = 1e-6 when the mechanism keeps its
promise (exact Clopper–Pearson coverage on runs the event search never saw). Each mechanism is
also audited against a stronger claim it does not meet, which shows the audit has power at the
sample size used; the margins of those assertions are stated inline.

Exponential, ReportNoisyMax and SparseVector choose once per call on a vector of utilities or
queries, so their samplers below call `release` once per run (about 0.3-1 ms each).
"""

import math

import numpy as np
import pytest

import bayesdp
from bayesdp.audit import audit
from bayesdp.noise import rng_for_tests

ALPHA = 1e-6


def claimed(mechanism):
    g = mechanism.guarantee
    return {"epsilon": g.epsilon, "delta": g.delta}


def per_run(release):
    """A sampler for a mechanism whose release takes one whole input (a vector) per run."""

    def sample(x, size, rng):
        return np.array([release(np.asarray(x, dtype=float), rng) for _ in range(size)])

    return sample


@pytest.mark.parametrize(
    ("mechanism", "d0", "d1"),
    [
        (bayesdp.Laplace(1.0), 0.0, 1.0),
        (bayesdp.Laplace(0.5, sensitivity=2.0), 3.0, 5.0),
        (bayesdp.DiscreteLaplace(1.0), 0, 1),
        (bayesdp.RandomizedResponse(1.0), 0, 1),
        (bayesdp.RandomizedResponse(1.0, categories=4), 0, 3),
    ],
    ids=["laplace", "laplace-sensitivity-2", "discrete-laplace", "rr-2", "rr-4"],
)
def test_pure_mechanisms_pass_with_a_tight_bound(mechanism, d0, d1):
    result = audit(mechanism, d0, d1, **claimed(mechanism), samples=10**6, alpha=ALPHA,
                   rng=rng_for_tests(21))
    assert result.passed  # false failure <= α = 1e-6
    # These pairs are tight: tail events (Laplace) and point masses (randomized response)
    # have ratio exactly e^ε with probabilities >= 0.1, whose bound at N = 10^6 falls short
    # by <= 5(σ₁/p₁ + σ₂/p₂) < 0.03; 0.1 short would be a 15-σ deviation.
    assert result.epsilon_lower > mechanism.guarantee.epsilon - 0.1


@pytest.mark.parametrize(
    ("weak", "strong"),
    [
        (bayesdp.Gaussian(epsilon=1.0, delta=1e-5), bayesdp.Gaussian(epsilon=4.0, delta=1e-5)),
        (
            bayesdp.DiscreteGaussian(epsilon=1.0, delta=1e-5),
            bayesdp.DiscreteGaussian(epsilon=4.0, delta=1e-5),
        ),
    ],
    ids=["gaussian", "discrete-gaussian"],
)
def test_gaussian_mechanisms_pass_their_delta_at_the_claimed_epsilon(weak, strong):
    result = audit(weak, 0, 1, **claimed(weak), samples=10**6, alpha=ALPHA,
                   rng=rng_for_tests(22))
    assert result.passed  # false failure <= α = 1e-6
    # Calibrated for ε = 4, σ ≈ 1.2 gives δ(1) ≈ 0.07 (Dong et al. Cor. 2.13 with μ ≈ 0.8):
    # claimed as (1, 1e-5) it must fail; δ_LB at 10^5 runs is within 0.01 of the best event's δ.
    broken = audit(strong, 0, 1, epsilon=1.0, delta=1e-5, samples=10**5, alpha=ALPHA,
                   rng=rng_for_tests(23))
    assert not broken.passed and broken.delta_lower > 0.03


def test_gaussian_under_zcdp_passes_its_converted_claim():
    mechanism = bayesdp.Gaussian(rho=0.5)
    result = audit(mechanism, 0.0, 1.0, **claimed(mechanism), samples=10**5, alpha=ALPHA,
                   rng=rng_for_tests(24))
    assert result.passed  # false failure <= α = 1e-6


UTILITIES = ([1.0] + [0.0] * 9, [0.0] + [1.0] * 9)  # every utility moves by Δ = 1


@pytest.mark.parametrize("kind", [bayesdp.Exponential, bayesdp.ReportNoisyMax])
def test_selection_mechanisms_pass_and_a_doubled_epsilon_fails(kind):
    correct = kind(1.0)
    sample = per_run(lambda u, rng: correct.release(u, rng=rng))
    result = audit(sample, *UTILITIES, **claimed(correct), samples=5_000, selection=1_000,
                   alpha=ALPHA, rng=rng_for_tests(25))
    assert result.passed  # false failure <= α = 1e-6
    # With ε = 2 the first candidate is chosen with probability 0.23 vs 0.039 (exponential)
    # or 0.27 vs 0.037 (permute-and-flip): ln-ratios 1.77 and 1.99. At 5,000 runs the bound
    # falls short by about 5(σ₁/p₁ + σ₂/p₂) ≈ 0.5, leaving it above 1 by 5 σ or more.
    doubled = kind(2.0)
    sample = per_run(lambda u, rng: doubled.release(u, rng=rng))
    broken = audit(sample, *UTILITIES, epsilon=1.0, samples=5_000, selection=1_000,
                   alpha=ALPHA, rng=rng_for_tests(26))
    assert not broken.passed and broken.epsilon_lower > 1.0


def test_sparse_vector_passes():
    svt = bayesdp.SparseVector(threshold=1.0, epsilon=1.0)

    def first_positive(queries, rng):
        answers = svt.release(queries, rng=rng)
        return int(np.argmax(answers)) if answers.any() else len(queries)

    sample = per_run(first_positive)
    result = audit(sample, [0.0, 0.0, 1.0, 2.0], [1.0, 1.0, 0.0, 1.0], **claimed(svt),
                   samples=2_000, selection=1_000, alpha=ALPHA, rng=rng_for_tests(27))
    assert result.passed  # false failure <= α = 1e-6
    assert math.isfinite(result.epsilon_lower)


def test_reusable_holdout_passes_at_its_budget_guarantee():
    from bayesdp.holdout import ReusableHoldout

    n = 100  # holdout size: replacing one record moves each holdout mean by at most 1/n

    def settings(rng=None):
        return ReusableHoldout(None, holdout=n, threshold=0.04, sigma=0.02, budget=1, rng=rng)

    def answers(holdout_means, rng):
        released = settings(rng).query_means(np.full(len(holdout_means), 0.5), holdout_means)
        return [np.nan if a.value is None else a.value for a in released]

    claim = settings().budget_guarantee
    result = audit(per_run(answers), [0.55, 0.55], [0.56, 0.56], epsilon=claim.epsilon,
                   delta=claim.delta, samples=1_500, selection=500, alpha=ALPHA,
                   rng=rng_for_tests(28))
    assert result.passed  # false failure <= α = 1e-6
