"""Choose among fitted classifiers by holdout accuracy through Thresholdout, so the holdout stays valid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import is_classifier

from bayesdp.errors import BudgetExhausted, DataError, invalid
from bayesdp.holdout import HoldoutAnswer, NaiveHoldout, ReusableHoldout
from bayesdp.privacy import Guarantee


@dataclass(frozen=True)
class Selection:
    """The chosen fitted model, every candidate's reported holdout accuracy, and the holdout's guarantee.

    `scores[i]` is None when the holdout's budget was spent before candidate i was scored.
    `guarantee` is the reusable holdout's guarantee on the holdout rows after this selection
    (None for a NaiveHoldout, which protects nothing).
    """

    model: Any
    index: int
    scores: tuple[float | None, ...]
    answers: tuple[HoldoutAnswer, ...]
    guarantee: Guarantee | None


def select(
    candidates: Sequence[Any],
    X_train: Any,
    y_train: Any,
    X_holdout: Any,
    y_holdout: Any,
    *,
    holdout: ReusableHoldout | NaiveHoldout,
    fit_fraction: float = 0.5,
) -> Selection:
    """Fit each candidate classifier (in place) on the training part and pick the best reported accuracy.

    The first `fit_fraction` of the training rows fit each candidate; the rest are the analyst's
    own validation rows, whose accuracy is the training-side mean of the Thresholdout query (an
    accuracy measured on the rows a model was fit on would be biased upward before any reuse).
    Each candidate's accuracy is the mean of a [0, 1]-valued query (1 for a correct prediction)
    on those validation rows and on the holdout; `holdout.query_means` answers it, so with a
    ReusableHoldout the holdout is read only through Thresholdout (Dwork et al., Science 2015;
    seed 002, Alg. 1) and the reported accuracies stay close to fresh-data accuracy however
    many candidates, chosen adaptively, are compared. Build the holdout on len(y_holdout) rows,
    e.g. ReusableHoldout(None, len(y_holdout), threshold=..., sigma=..., budget=...).
    """
    if not isinstance(holdout, ReusableHoldout | NaiveHoldout):
        raise invalid("holdout", holdout, "a ReusableHoldout (or a NaiveHoldout for comparison)")
    models = list(candidates)
    if not models or not all(is_classifier(m) for m in models):
        raise invalid("candidates", candidates, "a non-empty sequence of scikit-learn-style classifiers")
    y_hold = np.asarray(y_holdout)
    if y_hold.shape[0] != holdout.n:
        raise DataError(f"y_holdout has {y_hold.shape[0]} rows but the holdout was built on {holdout.n}")
    if not 0 < fit_fraction < 1:
        raise invalid("fit_fraction", fit_fraction, "in the open interval (0, 1)")
    y_tr = np.asarray(y_train)
    cut = round(fit_fraction * y_tr.shape[0])
    if not 0 < cut < y_tr.shape[0]:
        raise DataError(f"X_train has {y_tr.shape[0]} rows: too few to split at fit_fraction={fit_fraction}")
    x_fit, x_val = _rows(X_train, slice(0, cut)), _rows(X_train, slice(cut, None))
    train_acc, hold_acc = [], []
    for model in models:
        model.fit(x_fit, y_tr[:cut])
        train_acc.append(float(np.mean(model.predict(x_val) == y_tr[cut:])))
        hold_acc.append(float(np.mean(model.predict(X_holdout) == y_hold)))
    answers = holdout.query_means(np.array(train_acc), np.array(hold_acc))
    assert isinstance(answers, list)
    scores = tuple(a.value for a in answers)
    answered = [i for i, s in enumerate(scores) if s is not None]
    if not answered:
        raise BudgetExhausted("the holdout's budget is spent: no candidate could be scored")
    best = max(answered, key=lambda i: float(scores[i]))  # type: ignore[arg-type]
    guarantee = holdout.guarantee if isinstance(holdout, ReusableHoldout) else None
    return Selection(models[best], best, scores, tuple(answers), guarantee)


def _rows(X: Any, rows: slice) -> Any:
    """Rows of an array or a pandas frame, by position."""
    return X.iloc[rows] if hasattr(X, "iloc") else np.asarray(X)[rows]
