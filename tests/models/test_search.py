"""search(): the whole model search is budgeted in one spend before anything is returned."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.errors import BudgetExceeded, InvalidParameter
from bayesdp.models import GaussianNB, LinearRegression, LogisticRegression, search


def data(n: int = 20_000) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(0)
    x = gen.uniform(0, 1, (n, 4))
    return x, (x[:, 0] + 0.2 * gen.normal(size=n) > 0.5).astype(int)


def candidates() -> list[object]:
    return [
        LogisticRegression(epsilon=1.0, C=c, data_norm=2.0, classes=[0, 1]) for c in (1e-7, 1.0)
    ] + [GaussianNB(epsilon=0.5, bounds=(0, 1), classes=[0, 1])]


def test_search_spends_its_whole_budget_once_before_returning(tmp_path: Path) -> None:
    """Stage one: max of the slice fits (ε 1, 1, 0.5) and the selection (0.5); the refit adds max ε 1."""
    x, y = data()
    ledger = bdp.Ledger(tmp_path / "b.db", budget=bdp.Guarantee(2.0, delta=1e-9))
    result = search(candidates(), x, y, epsilon=0.5, ledger=ledger, rng=bdp.rng_for_tests(1))
    [spend] = ledger.history()
    assert spend.guarantee == result.guarantee
    assert result.guarantee.epsilon == pytest.approx(2.0)
    # C = 1e-7 shrinks the coefficients to nearly nothing: chance accuracy, never chosen here
    assert result.index != 0 and (result.model.predict(x) == y).mean() > 0.8


def test_search_refuses_before_spending_or_returning(tmp_path: Path) -> None:
    x, y = data()
    ledger = bdp.Ledger(tmp_path / "b.db", budget=bdp.Guarantee(1.9, delta=1e-9))
    given = candidates()
    with pytest.raises(BudgetExceeded):
        search(given, x, y, epsilon=0.5, ledger=ledger, rng=bdp.rng_for_tests(1))
    assert ledger.history() == []
    assert not any(hasattr(c, "guarantee_") for c in given)  # the caller's estimators stay unfitted


def test_search_shares_a_replace_one_ledger_with_the_estimators(tmp_path: Path) -> None:
    """The add/remove total (ε = 2) is charged in the ledger's relation, as every estimator's fit is."""
    x, y = data()
    ledger = bdp.Ledger(tmp_path / "r.db", budget=bdp.Guarantee(4.0, delta=1e-6, relation="replace_one"))
    result = search(candidates(), x, y, epsilon=0.5, ledger=ledger, rng=bdp.rng_for_tests(1))
    [spend] = ledger.history()
    assert spend.guarantee == result.guarantee.to_relation("replace_one")
    assert spend.guarantee.epsilon == pytest.approx(4.0)


def test_search_takes_only_private_classifiers() -> None:
    x, y = data(200)
    with pytest.raises(InvalidParameter, match="candidates"):
        search([LinearRegression(bounds_X=(0, 1), bounds_y=(0, 1))], x, y, epsilon=1.0)
    with pytest.raises(InvalidParameter, match="candidates"):
        search(["not a model"], x, y, epsilon=1.0)
    with pytest.raises(InvalidParameter, match="epsilon"):
        search(candidates(), x, y, epsilon=0)


def test_search_keeps_feature_names_and_labels_the_spend_with_every_candidate(tmp_path: Path) -> None:
    """The refit sees the caller's frame: its feature names survive, so predicting on a frame is quiet."""
    x, y = data(2_000)
    frame = pd.DataFrame(x, columns=["age", "dose", "weight", "height"])
    ledger = bdp.Ledger(tmp_path / "b.db", budget=bdp.Guarantee(2.0, delta=1e-9))
    result = search(candidates(), frame, pd.Series(y), epsilon=0.5, ledger=ledger, rng=bdp.rng_for_tests(1))
    assert list(result.model.feature_names_in_) == list(frame.columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result.model.predict(frame)
    [spend] = ledger.history()
    assert spend.label == "search among 3 candidates (2 LogisticRegression, 1 GaussianNB)"
