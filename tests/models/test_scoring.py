"""accuracy(): a fitted classifier's accuracy as one ε-DP release with a valid interval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bayesdp as bdp
from bayesdp.errors import BudgetExceeded, InvalidParameter
from bayesdp.models import GaussianNB, accuracy


def fitted(n: int = 400) -> tuple[GaussianNB, np.ndarray, np.ndarray]:
    gen = np.random.default_rng(5)
    x = gen.uniform(0, 1, (n, 2))
    y = (x[:, 0] + 0.2 * gen.normal(size=n) > 0.5).astype(int)
    model = GaussianNB(bounds=(0, 1), classes=[0, 1], rng=bdp.rng_for_tests(1)).fit(x, y)
    return model, x, y


def test_accuracy_interval_covers_the_rows_accuracy() -> None:
    """300 releases at ε = 0.5 on 400 rows: the 95% intervals cover the exact accuracy >= 85% of times.

    The interval's coverage is at least 0.95 (union bound), so fewer than 255 of 300 hits is a
    binomial tail below 1e-7.
    """
    model, x, y = fitted()
    truth = float((model.predict(x) == y).mean())
    rng = bdp.rng_for_tests(2)
    scores = [accuracy(model, x, y, epsilon=0.5, rng=rng) for _ in range(300)]
    hits = [s.interval[0] <= truth <= s.interval[1] for s in scores]
    assert np.mean(hits) >= 0.85
    assert all(0 <= s.interval[0] <= s.value <= s.interval[1] <= 1 for s in scores)
    assert abs(np.mean([s.value for s in scores]) - truth) < 0.01  # sd 0.02 each: 8σ of a mean


def test_accuracy_spends_before_returning(tmp_path: Path) -> None:
    model, x, y = fitted()
    ledger = bdp.Ledger(tmp_path / "b.db", budget=bdp.Guarantee(1.0))
    score = accuracy(model, x, y, epsilon=0.6, ledger=ledger, rng=bdp.rng_for_tests(3))
    assert ledger.history()[-1].guarantee == score.guarantee == bdp.Guarantee(0.6)
    with pytest.raises(BudgetExceeded):
        accuracy(model, x, y, epsilon=0.6, ledger=ledger, rng=bdp.rng_for_tests(3))
    with pytest.raises(InvalidParameter, match="epsilon"):
        accuracy(model, x, y, epsilon=-1)


def test_accuracy_shares_a_replace_one_ledger_with_the_estimators(tmp_path: Path) -> None:
    """A replace-one ledger is charged the restatement 2ε, as an estimator's fit is, not refused."""
    model, x, y = fitted()
    ledger = bdp.Ledger(tmp_path / "r.db", budget=bdp.Guarantee(3.0, relation="replace_one"))
    GaussianNB(epsilon=1.0, bounds=(0, 1), classes=[0, 1], ledger=ledger).fit(x, y)
    score = accuracy(model, x, y, epsilon=0.25, ledger=ledger, rng=bdp.rng_for_tests(4))
    assert score.guarantee == bdp.Guarantee(0.5, relation="replace_one")
    assert [h.guarantee.epsilon for h in ledger.history()] == [2.0, 0.5]
