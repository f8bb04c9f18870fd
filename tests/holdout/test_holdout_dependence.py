from __future__ import annotations

import numpy as np
import pytest

from bayesdp import rng_for_tests
from bayesdp.correlated import MarkovChain, dp_to_bdp
from bayesdp.errors import InvalidParameter
from bayesdp.holdout import ReusableHoldout, required_holdout_size

N = 10_000
INDEPENDENT = MarkovChain([[0.5, 0.5], [0.5, 0.5]])  # each row independent of the previous
CORRELATED = MarkovChain([[0.6, 0.4], [0.4, 0.6]])


def _holdout(dependence: object) -> ReusableHoldout:
    return ReusableHoldout(
        None, holdout=N, threshold=0.05, sigma=0.01, budget=10, dependence=dependence,
        rng=rng_for_tests(51),
    )


def test_independent_records_keep_the_dp_guarantee() -> None:
    plain, chain = _holdout(None), _holdout(INDEPENDENT)
    # Yang et al. 2015: without correlation Bayesian DP and DP coincide.
    assert chain.budget_guarantee.epsilon == pytest.approx(plain.budget_guarantee.epsilon, rel=1e-12)
    assert chain.accuracy(100, 0.05) == pytest.approx(plain.accuracy(100, 0.05), rel=1e-12)
    assert required_holdout_size(5, 100, 0.1, 0.05, dependence=INDEPENDENT) == required_holdout_size(
        5, 100, 0.1, 0.05
    )


def test_correlated_records_report_bayesian_dp() -> None:
    h = _holdout(CORRELATED)
    assert h.guarantee.epsilon == 0.0
    answers = h.query_means(np.zeros(3), np.ones(3))  # far above the threshold: three overflows
    assert isinstance(answers, list) and h.overflows == 3
    dp = h.dp_guarantee.epsilon
    assert h.guarantee.epsilon == dp_to_bdp(dp, CORRELATED, N) > dp
    assert h.budget_guarantee.epsilon == dp_to_bdp(10 * h.epsilon_per_overflow, CORRELATED, N)
    assert h.accuracy(100, 0.05) > _holdout(None).accuracy(100, 0.05)
    dep = h.guarantee.dependence
    assert dep.notion == "bdp" and dep.length == N and "2-state" in dep.model
    assert h.dp_guarantee.dependence is None and _holdout(None).guarantee.dependence is None
    assert "Bayesian differential privacy" in h.guarantee.explain()
    with pytest.raises(InvalidParameter, match="dependence"):
        h.guarantee + h.dp_guarantee  # Bayesian DP on a chain and plain DP do not add


def test_required_size_grows_with_correlation() -> None:
    independent = required_holdout_size(5, 100, 0.1, 0.05)
    assert required_holdout_size(5, 100, 0.1, 0.05, dependence=CORRELATED) > 2 * independent


def test_a_bad_model_is_refused_at_construction() -> None:
    with pytest.raises(InvalidParameter, match="model"):
        _holdout("chain")
