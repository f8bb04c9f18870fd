"""SparseVector (AboveThreshold, Dwork & Roth 2014, Alg. 1 and 2): cap, budget, noise scales, answers.

Answers for values 1e6 above/below the threshold are wrong only if a noise of scale <= 12 exceeds
5e5, probability below e^{-4e4}: those checks are exact in practice. The frequency check uses exact
binomial 1e-7 quantiles per side.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mech_stats import binomial_band

from bayesdp import SparseVector, rng_for_tests
from bayesdp.errors import BudgetExhausted

FAR = 1e6


def test_stops_after_max_positives_then_budget_is_exhausted() -> None:
    sv = SparseVector(0.0, epsilon=1.0, max_positives=3, rng=rng_for_tests(1))
    answers = sv.answer(np.full(10, FAR))
    assert answers.tolist() == [True, True, True]  # queries after the third positive are not answered
    assert sv.remaining == 0
    with pytest.raises(BudgetExhausted, match="all 3 positive answers are spent"):
        sv.answer([FAR])


def test_answers_far_below_and_above() -> None:
    sv = SparseVector(10.0, epsilon=1.0, max_positives=2, rng=rng_for_tests(2))
    below = sv.answer(np.full(50, -FAR))
    assert below.tolist() == [False] * 50 and sv.remaining == 2  # negatives cost no positive
    mixed = sv.answer([-FAR, FAR, -FAR, -FAR, FAR, -FAR, FAR])
    assert mixed.tolist() == [False, True, False, False, True]
    assert sv.remaining == 0


def test_release_is_a_fresh_run() -> None:
    sv = SparseVector(0.0, epsilon=1.0, max_positives=1, rng=rng_for_tests(3))
    assert sv.release([-FAR, FAR, FAR], rng=rng_for_tests(4)).tolist() == [False, True]
    assert sv.remaining == 1
    assert sv.answer([]).tolist() == []


@pytest.mark.parametrize(
    ("epsilon", "sensitivity", "cap"), [(1.0, 1.0, 1), (0.5, 2.0, 3), (2.0, 1e-3, 2), (0.1, 1e5, 1)]
)
def test_noise_scales_are_as_documented(epsilon: float, sensitivity: float, cap: int) -> None:
    """Per run ε' = ε/c: threshold noise Lap(2Δ/ε'), query noise Lap(4Δ/ε') (Dwork & Roth, Alg. 2),
    with Δ paid on the grid as D = (floor(Δ/g) + 1)·g."""
    sv = SparseVector(0.0, epsilon=epsilon, sensitivity=sensitivity, max_positives=cap, rng=rng_for_tests(5))
    d = (math.floor(sensitivity / sv.grid) + 1) * sv.grid
    assert sv.threshold_steps_scale * sv.grid == pytest.approx(2 * d * cap / epsilon, rel=1e-15)
    assert sv.query_steps_scale * sv.grid == pytest.approx(4 * d * cap / epsilon, rel=1e-15)
    assert sv.scale == pytest.approx(4 * d * cap / epsilon, rel=1e-15)
    assert sensitivity < d <= sensitivity + sv.grid
    assert sv.grid <= 2 * sensitivity * cap / epsilon * 2.0**-20  # the grid is 2^-20 of 2Δc/ε or finer
    assert (sv.guarantee.epsilon, sv.guarantee.delta) == (epsilon, 0.0)


def laplace_sum_tail(s: float, b1: float, b2: float) -> float:
    """P(L1 + L2 > s), s >= 0, for independent Laplace(b1), Laplace(b2): the density is
    (b1 e^{-|x|/b1} − b2 e^{-|x|/b2}) / (2(b1² − b2²)) (product of the characteristic functions)."""
    return (b1 * b1 * math.exp(-s / b1) - b2 * b2 * math.exp(-s / b2)) / (2 * (b1 * b1 - b2 * b2))


@pytest.mark.parametrize("cap", [1, 3])
def test_answer_frequency_near_the_threshold(cap: int) -> None:
    """A query a above T is positive iff ν_T − ν_q <= a: probability 1 − P(L_T + L_q > a).

    The noises are discrete Laplace of scale >= 2^21 steps; the continuous law is within
    1e-5 of them here, and the band is widened by that much."""
    runs, epsilon = 3000, 1.0
    rng = rng_for_tests(40 + cap)
    sv = SparseVector(0.0, epsilon=epsilon, max_positives=cap, rng=rng)
    a = sv.scale / 2  # half a query-noise scale above the threshold, on the grid
    assert a / sv.grid == round(a / sv.grid)
    positives = sum(bool(sv.release([a], rng=rng)[0]) for _ in range(runs))
    p = 1 - laplace_sum_tail(a, sv.threshold_steps_scale * sv.grid, sv.scale)
    lo = binomial_band(runs, p - 1e-5)[0]
    hi = binomial_band(runs, p + 1e-5)[1]
    assert lo <= positives <= hi, (positives, lo, hi, p)
    # Other scales would be seen: halving or doubling both scales moves p by more than the band.
    for factor in (0.5, 2.0):
        other = 1 - laplace_sum_tail(a, factor * sv.threshold_steps_scale * sv.grid, factor * sv.scale)
        assert not lo <= runs * other <= hi
