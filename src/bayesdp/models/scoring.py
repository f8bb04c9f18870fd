"""A private scorer: a fitted classifier's accuracy on labelled rows as one ε-DP release."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np

from bayesdp.errors import DataError, check_open_unit, check_positive
from bayesdp.mechanisms import DiscreteLaplace
from bayesdp.models.base import spend_in
from bayesdp.noise import Rng
from bayesdp.privacy import Guarantee, Ledger


@dataclass(frozen=True)
class Score:
    """A noisy accuracy, a (1 − α) interval for the rows' true accuracy, and the guarantee spent."""

    value: float
    _: KW_ONLY
    interval: tuple[float, float]
    guarantee: Guarantee


def accuracy(
    model: Any,
    X: Any,
    y: Any,
    *,
    epsilon: float,
    alpha: float = 0.05,
    ledger: Ledger | None = None,
    rng: Rng | None = None,
) -> Score:
    """The share of rows `model` predicts right, released with ε-DP (add/remove neighbours).

    A `ledger` for replace-one neighbours is charged the restatement 2ε (see `spend_in`), which
    `guarantee` then states, as for every estimator.

    The count of correct predictions c and the row count n each move by at most 1 when a row is
    added or removed, so the pair gets discrete Laplace noise of L1 sensitivity 2 (CKS 2020,
    Def. 2; Dwork 2006, Thm 2). The value is c̃/ñ clipped to [0, 1]. Each count is within its
    (1 − α/2) half-width w of the truth, so with probability >= 1 − α (union bound) the accuracy
    c/n lies in [(c̃ − w)/(ñ + w), (c̃ + w)/(ñ − w)] (clipped to [0, 1]). The model is a fixed
    function here: score rows it was not fitted on, or the fit's own guarantee adds to this one.
    """
    eps = check_positive("epsilon", epsilon)
    a = check_open_unit("alpha", alpha)
    labels = np.asarray(y)
    predicted = np.asarray(model.predict(X))
    if predicted.shape != labels.shape:
        raise DataError(f"accuracy: y has shape {labels.shape} but the predictions {predicted.shape}")
    mech = DiscreteLaplace(eps, sensitivity=2)
    spent = spend_in(ledger, mech.guarantee, "score accuracy")
    correct = int((predicted == labels).sum())
    c, n = (float(v) for v in mech.release(np.array([correct, labels.size]), rng=rng))
    w = mech.interval(a / 2)
    value = min(max(c / n, 0.0), 1.0) if n > 0 else 0.5
    low = min(max((c - w) / (n + w), 0.0), 1.0) if n + w > 0 else 0.0
    high = min(max((c + w) / (n - w), 0.0), 1.0) if n - w > 0 else 1.0
    return Score(value, interval=(low, high), guarantee=spent)
