"""select(): candidates fitted on the training part, scored through the holdout, the best one kept."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression as OLS
from sklearn.naive_bayes import GaussianNB as SkGaussianNB
from sklearn.tree import DecisionTreeClassifier

import bayesdp as bdp
from bayesdp.errors import BudgetExhausted, DataError, InvalidParameter
from bayesdp.holdout import NaiveHoldout
from bayesdp.models import GaussianNB, Labelled, select


def split(seed: int = 0) -> tuple[np.ndarray, np.ndarray, Labelled, Labelled]:
    """1,000 rows to fit on, 1,000 validation rows, 1,000 holdout rows."""
    gen = np.random.default_rng(seed)
    x = gen.uniform(0, 1, (3000, 3))
    y = (x[:, 0] + 0.3 * gen.normal(size=3000) > 0.5).astype(int)
    return x[:1000], y[:1000], Labelled(x[1000:2000], y=y[1000:2000]), Labelled(x[2000:], y=y[2000:])


def test_naive_holdout_reports_exact_holdout_accuracy_and_picks_the_best() -> None:
    xt, yt, valid, hold = split()
    models = [
        DecisionTreeClassifier(max_depth=1, random_state=0),
        SkGaussianNB(),
        DecisionTreeClassifier(random_state=0),
    ]
    result = select(models, xt, yt, holdout=NaiveHoldout(valid, holdout=hold))
    expected = [float(np.mean(m.predict(hold.X) == hold.y)) for m in models]
    assert list(result.scores) == expected
    assert result.index == int(np.argmax(expected)) and result.model is models[result.index]
    assert result.guarantee is None


def test_reusable_holdout_reports_its_guarantee_and_private_candidates_fit() -> None:
    xt, yt, valid, hold = split()
    holdout = bdp.ReusableHoldout(valid, holdout=hold, threshold=0.02, sigma=0.01, budget=5,
                                  rng=bdp.rng_for_tests(1))
    models = [
        GaussianNB(bounds=(0, 1), classes=[0, 1], rng=bdp.rng_for_tests(2)),
        DecisionTreeClassifier(random_state=0),
    ]
    result = select(models, xt, yt, holdout=holdout)
    assert result.guarantee == holdout.guarantee
    assert all(s is not None and 0 <= s <= 1 for s in result.scores)
    # the fully grown tree overfits its fit rows: its validation accuracy and the holdout's agree,
    # but the Gaussian NB is better on both, so it is chosen
    assert result.index == 0


def test_refused_candidates_score_none_and_an_all_refused_selection_raises() -> None:
    xt, yt, valid, hold = split()
    holdout = bdp.ReusableHoldout(valid, holdout=hold, threshold=1e-6, sigma=1e-6, budget=1,
                                  rng=bdp.rng_for_tests(3))
    trees = [DecisionTreeClassifier(max_depth=d, random_state=0) for d in (1, 2, 3)]
    holdout.query_means(0.0, 1.0)  # a gap of 1 overflows: the single unit of budget is spent
    with pytest.raises(BudgetExhausted):
        select(trees, xt, yt, holdout=holdout)


def test_bad_arguments_name_the_parameter() -> None:
    xt, yt, valid, hold = split()
    naive = NaiveHoldout(valid, holdout=hold)
    with pytest.raises(InvalidParameter, match="candidates"):
        select([OLS()], xt, yt, holdout=naive)
    with pytest.raises(InvalidParameter, match="holdout"):
        select([SkGaussianNB()], xt, yt, holdout=None)  # type: ignore[arg-type]
    with pytest.raises(DataError, match="Labelled"):  # built on the holdout size only
        select([SkGaussianNB()], xt, yt, holdout=NaiveHoldout(None, holdout=len(hold)))
    with pytest.raises(DataError, match="Labelled"):  # built on bare feature arrays
        select([SkGaussianNB()], xt, yt, holdout=NaiveHoldout(valid.X, holdout=hold.X))
    with pytest.raises(DataError, match="999 rows"):
        Labelled(hold.X[:999], y=hold.y)
