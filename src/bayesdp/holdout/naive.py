"""The standard holdout, reused without protection: the baseline that overfits (Science 2015, Fig. 1A)."""

from __future__ import annotations

import numpy as np

from bayesdp.holdout.answers import HoldoutAnswer
from bayesdp.holdout.base import HoldoutBase


class NaiveHoldout(HoldoutBase):
    """Releases the exact holdout mean of every query. No privacy, no budget: for experiments only.

    Same interface as ReusableHoldout (query, query_batch, query_means, log); every answer has
    source "holdout" and budget_left None.
    """

    def _answer(self, train: np.ndarray, holdout: np.ndarray) -> list[HoldoutAnswer]:
        answers = [HoldoutAnswer(float(v), source="holdout", budget_left=None) for v in holdout]
        self._log.extend(answers)
        return answers
