from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from bayesdp import rng_for_tests
from bayesdp.errors import BudgetExhausted, InvalidParameter
from bayesdp.holdout import ReusableHoldout, accuracy_bound, required_holdout_size
from bayesdp.holdout.accounting import thresholdout_cost
from bayesdp.holdout.bounds import nips_parameters
from bayesdp.noise import grid_for

N = 1000
TINY = 1e-12  # a noise scale far below every gap used here: the comparison is exact


def _binomial_band(trials: int, p: float) -> tuple[int, int]:
    """Counts outside this band have probability below 1e-7 (exact binomial quantiles)."""
    return int(stats.binom.ppf(5e-8, trials, p)), int(stats.binom.isf(5e-8, trials, p))


def test_budget_drops_exactly_on_overflows_and_then_answers_are_refused() -> None:
    rng = rng_for_tests(10)
    h = ReusableHoldout(None, holdout=N, threshold=0.05, sigma=0.01, budget=25, rng=rng)
    train = rng.random(400) * 0.5
    hold = np.clip(train + rng.choice([0.0, 0.3], size=400), 0, 1)
    answers = h.query_means(train, hold)
    assert isinstance(answers, list)
    left = 25
    for a, t in zip(answers, train, strict=True):
        if a.source == "holdout":
            left -= 1
        elif a.source == "train":
            assert a.value == t
        else:
            assert left == 0 and a.value is None and a.exhausted
        assert a.budget_left == left
    assert h.overflows == 25 and h.budget_left == 0 and answers[-1].exhausted
    assert list(h.log) == answers
    later = h.query_means(0.5, 0.5)
    assert not isinstance(later, list) and later.exhausted


def test_raise_on_exhausted_keeps_what_was_released() -> None:
    h = ReusableHoldout(
        None, holdout=N, threshold=0.05, sigma=TINY, budget=2, threshold_noise=TINY,
        compare_noise=TINY, on_exhausted="raise", rng=rng_for_tests(11),
    )
    with pytest.raises(BudgetExhausted, match="2 of 3 queries"):
        h.query_means([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert [a.source for a in h.log] == ["holdout", "holdout"]
    with pytest.raises(BudgetExhausted):
        h.query_means(0.0, 1.0)


def test_threshold_is_redrawn_only_after_an_overflow() -> None:
    # The same query (gap T − b/2) again and again with exact comparisons: it overflows iff
    # γ < −b/2, probability p = e^{-1/2}/2 = 0.30. Kept until an overflow, γ makes the first
    # training answer be followed by training answers only (were it redrawn on every query, each
    # later answer would overflow w.p. 0.30); a flip would need |γ + b/2| < 1e-10, probability
    # below 1e-8 per instance. Redrawn after each overflow, the overflows per instance are
    # geometric (mean p/(1−p) = 0.44): the total over 50 instances passes 200 with probability
    # far below 1e-7, while a γ never redrawn would give 200 overflows to about half of them.
    rng = rng_for_tests(12)
    b, t = 0.02, 0.1
    total = 0
    for _ in range(50):
        h = ReusableHoldout(
            None, holdout=N, threshold=t, sigma=TINY, budget=1000, threshold_noise=b,
            compare_noise=TINY, rng=rng,
        )
        answers = h.query_means(np.zeros(200), np.full(200, t - b / 2))
        assert isinstance(answers, list)
        sources = [a.source for a in answers]
        first_train = sources.index("train")
        assert set(sources[first_train:]) == {"train"}
        assert h.overflows == first_train
        total += h.overflows
    assert total < 200


def test_answer_noise_is_laplace_sigma_on_its_grid() -> None:
    sigma, count = 0.02, 20000
    h = ReusableHoldout(
        None, holdout=N, threshold=0.05, sigma=sigma, budget=count, threshold_noise=TINY,
        compare_noise=TINY, rng=rng_for_tests(13),
    )
    answers = h.query_means(np.zeros(count), np.full(count, 0.5))
    assert isinstance(answers, list) and all(a.source == "holdout" for a in answers)
    noise = np.array([a.value for a in answers]) - 0.5
    g = grid_for(sigma)
    assert np.all(np.mod(np.array([a.value for a in answers]), g) == 0)
    # KS against Laplace(σ): false failure 1e-7; the grid (σ/2^20) is invisible at this size.
    assert stats.kstest(noise, stats.laplace(scale=sigma).cdf).pvalue > 1e-7
    # Σ|ξ| ~ Gamma(count, σ) exactly for Laplace: two-sided band at 1e-7.
    total = np.abs(noise).sum()
    lo, hi = stats.gamma.ppf([5e-8, 1 - 5e-8], count, scale=sigma)
    assert lo < total < hi


@pytest.mark.parametrize("distance", [1.0, 3.0])
def test_comparison_noise_has_its_scale(distance: float) -> None:
    # γ ≈ 0 (tiny scale): a query with gap T − c·b overflows iff η > c·b, probability e^{-c}/2.
    b, t, count = 0.01, 0.1, 20000
    h = ReusableHoldout(
        None, holdout=N, threshold=t, sigma=TINY, budget=count, threshold_noise=TINY,
        compare_noise=b, rng=rng_for_tests(14),
    )
    answers = h.query_means(np.zeros(count), np.full(count, t - distance * b))
    overflows = sum(a.source == "holdout" for a in answers)
    lo, hi = _binomial_band(count, 0.5 * math.exp(-distance))
    assert lo <= overflows <= hi


def test_threshold_noise_has_its_scale() -> None:
    # One query per fresh instance, exact comparison: gap T + b overflows iff γ < b, p = 1 − e^{-1}/2.
    b, t, count = 0.01, 0.1, 2000
    rng = rng_for_tests(15)
    overflows = 0
    for _ in range(count):
        h = ReusableHoldout(
            None, holdout=N, threshold=t, sigma=TINY, budget=1, threshold_noise=b,
            compare_noise=TINY, rng=rng,
        )
        answer = h.query_means(0.0, t + b)
        overflows += not isinstance(answer, list) and answer.source == "holdout"
    lo, hi = _binomial_band(count, 1 - 0.5 * math.exp(-1))
    assert lo <= overflows <= hi


def test_guarantee_follows_the_general_formula() -> None:
    n, sigma, s2, s3 = 2000, 0.01, 0.03, 0.05
    cost = thresholdout_cost(n, sigma, s2, s3)
    nominal = (1 / n) * (1 / sigma + 1 / s2 + 2 / s3)
    assert cost.nominal == pytest.approx(nominal, rel=1e-15)
    assert nominal <= cost.overflow <= nominal * (1 + 1e-4)
    assert s2 * cost.open_segment == pytest.approx(1 / n, rel=1e-4)  # threshold share: Δ/σ_threshold
    rng = rng_for_tests(16)
    h = ReusableHoldout(
        None, holdout=n, threshold=0.05, sigma=sigma, budget=10, threshold_noise=s2, compare_noise=s3,
        rng=rng,
    )
    assert h.guarantee.epsilon == 0.0
    while h.budget_left:
        answer = h.query_means(0.5, rng.uniform(0.4, 0.6))
        assert not isinstance(answer, list)
        opened = cost.open_segment if answer.source == "train" else 0.0
        assert h.guarantee.epsilon == pytest.approx(h.overflows * cost.overflow + opened, rel=1e-12)
    assert h.guarantee.epsilon == pytest.approx(h.budget_guarantee.epsilon, rel=1e-12)
    assert h.budget_guarantee.epsilon == pytest.approx(10 * cost.overflow)
    assert h.guarantee.relation == "replace_one"
    dwork = thresholdout_cost(n, sigma, 2 * sigma, 4 * sigma)
    assert dwork.nominal == pytest.approx(2 / (sigma * n))  # NIPS 2015: 2B/(σn) per unit of B


def test_parameters_are_validated() -> None:
    with pytest.raises(InvalidParameter, match="sigma"):
        ReusableHoldout(None, holdout=N, threshold=0.1, sigma=0, budget=1)
    with pytest.raises(InvalidParameter, match="budget"):
        ReusableHoldout(None, holdout=N, threshold=0.1, sigma=0.1, budget=1.5)
    with pytest.raises(InvalidParameter, match="on_exhausted"):
        ReusableHoldout(None, holdout=N, threshold=0.1, sigma=0.1, budget=1, on_exhausted="clip")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match="beta"):
        ReusableHoldout(None, holdout=N, threshold=0.1, sigma=0.1, budget=1).accuracy(10, 1.5)
    with pytest.raises(InvalidParameter, match="tau"):
        required_holdout_size(1, 10, 0.0, 0.1)


def test_required_size_is_the_smallest_that_meets_the_bound() -> None:
    budget, m, tau, beta = 5, 100, 0.1, 0.05
    n = required_holdout_size(budget, m, tau, beta)
    threshold, sigma = nips_parameters(m, tau, beta)

    def bound(size: int) -> float:
        return accuracy_bound(
            size, budget, m, beta, threshold=threshold, sigma=sigma,
            threshold_noise=2 * sigma, compare_noise=4 * sigma,
        )

    assert bound(n) <= tau < bound(n - 1)
    # Linear in B (pure-DP branch), ≈ 3400·B·ln(4m/β)/τ²; the pieces are explicit.
    assert 2000 < n * tau**2 / (budget * math.log(4 * m / beta)) < 5000
    assert required_holdout_size(2 * budget, m, tau, beta) == pytest.approx(2 * n, rel=0.01)


def test_answers_are_within_tau_in_the_theorems_regime() -> None:
    # Thresholdout with the NIPS 2015 parameters at the holdout size the bound asks for. Each run
    # asks m queries about known population means p_j; the holdout mean is Binomial(n, p_j)/n and
    # the training mean is deliberately off by up to 0.4, so runs overflow and exhaust the budget.
    # Each run fails (some answered query off by ≥ τ) with probability ≤ β; the count of failed
    # runs is then below the binomial 1 − 1e-7 quantile except with probability 1e-7.
    budget, m, tau, beta, runs = 3, 20, 0.25, 0.05, 1000
    n = required_holdout_size(budget, m, tau, beta)
    threshold, sigma = nips_parameters(m, tau, beta)
    rng = rng_for_tests(17)
    failures, answered = 0, 0
    for _ in range(runs):
        p = rng.uniform(0.2, 0.8, size=m)
        hold = rng.binomial(n, p) / n
        train = np.clip(p + rng.uniform(-0.4, 0.4, size=m), 0, 1)
        h = ReusableHoldout(None, holdout=n, threshold=threshold, sigma=sigma, budget=budget, rng=rng)
        assert h.accuracy(m, beta) <= tau
        answers = h.query_means(train, hold)
        assert isinstance(answers, list)
        values = np.array([np.nan if a.value is None else a.value for a in answers])
        ok = np.isnan(values) | (np.abs(values - p) < tau)
        failures += not ok.all()
        answered += int((~np.isnan(values)).sum())
    assert failures <= stats.binom.isf(1e-7, runs, beta)
    assert answered > runs * budget  # both training and holdout answers were checked


def test_a_vacuous_accuracy_bound_says_so() -> None:
    h = ReusableHoldout(None, holdout=2_000, threshold=0.04, sigma=0.01, budget=100)
    with pytest.warns(UserWarning, match=r"accuracy\(m=200, beta=0.05\) = .* is vacuous"):
        assert h.accuracy(m=200, beta=0.05) >= 1
    big = ReusableHoldout(None, holdout=10**8, threshold=0.04, sigma=0.01, budget=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert big.accuracy(m=200, beta=0.05) < 1
