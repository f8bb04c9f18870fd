"""Choose among classifiers by holdout accuracy through Thresholdout, so the holdout stays valid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np
from sklearn.base import is_classifier

from bayesdp.errors import BudgetExhausted, DataError, invalid
from bayesdp.holdout import HoldoutAnswer, NaiveHoldout, ReusableHoldout
from bayesdp.privacy import Guarantee

_RECIPE = "ReusableHoldout(Labelled(X_valid, y=y_valid), holdout=Labelled(X_holdout, y=y_holdout), ...)"


@dataclass(frozen=True)
class Labelled:
    """Rows `X` (array or frame) and their labels `y`: one data set of a holdout's two."""

    X: Any
    _: KW_ONLY
    y: Any

    def __post_init__(self) -> None:
        if len(self.X) != len(self.y):
            raise DataError(f"Labelled: X has {len(self.X)} rows but y has {len(self.y)}")

    def __len__(self) -> int:
        return len(self.y)


@dataclass(frozen=True)
class Selection:
    """The chosen fitted model, every candidate's reported holdout accuracy, and the holdout's guarantee.

    `scores[i]` is None when the holdout's budget was spent before candidate i was scored.
    `guarantee` is the reusable holdout's guarantee on the holdout rows after this selection
    (None for a NaiveHoldout, which protects nothing).
    """

    model: Any
    _: KW_ONLY
    index: int
    scores: tuple[float | None, ...]
    answers: tuple[HoldoutAnswer, ...]
    guarantee: Guarantee | None


def select(
    candidates: Sequence[Any], X_train: Any, y_train: Any, *, holdout: ReusableHoldout | NaiveHoldout
) -> Selection:
    """Fit each candidate classifier (in place) on (X_train, y_train) and pick the best reported accuracy.

    Build the holdout on two labelled sets the candidates are not fit on:
    `ReusableHoldout(Labelled(X_valid, y=y_valid), holdout=Labelled(X_holdout, y=y_holdout),
    threshold=..., sigma=..., budget=...)`. Each candidate's accuracy is a [0, 1]-valued query
    (1 for a correct prediction) whose validation mean the holdout compares with its holdout
    mean, so the holdout is read only through Thresholdout (Dwork et al., Science 2015; seed
    002, Alg. 1) and the reported accuracies stay close to fresh-data accuracy however many
    candidates, chosen adaptively, are compared. Validation rows that were also fit on would score above the
    holdout, and every comparison would then spend budget.
    """
    if not isinstance(holdout, ReusableHoldout | NaiveHoldout):
        raise invalid("holdout", holdout, "a ReusableHoldout (or a NaiveHoldout for comparison)")
    if not holdout.has_data:
        raise DataError(f"select() scores on the holdout's own data: build it as {_RECIPE}")
    models = list(candidates)
    if not models or not all(is_classifier(m) for m in models):
        raise invalid("candidates", candidates, "a non-empty sequence of scikit-learn-style classifiers")
    for model in models:
        model.fit(X_train, y_train)

    def correct(data: Any) -> np.ndarray:
        if not isinstance(data, Labelled):
            raise DataError(f"select() needs labelled rows on both sides: build the holdout as {_RECIPE}")
        labels = np.asarray(data.y)
        return np.column_stack([np.asarray(m.predict(data.X)) == labels for m in models])

    answers = holdout.query_batch(correct)
    scores = tuple(a.value for a in answers)
    answered = [i for i, s in enumerate(scores) if s is not None]
    if not answered:
        raise BudgetExhausted("the holdout's budget is spent: no candidate could be scored")
    best = max(answered, key=lambda i: float(scores[i]))  # type: ignore[arg-type]
    guarantee = holdout.guarantee if isinstance(holdout, ReusableHoldout) else None
    return Selection(models[best], index=best, scores=scores, answers=tuple(answers), guarantee=guarantee)
