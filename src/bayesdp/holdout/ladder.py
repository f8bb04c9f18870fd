"""The Ladder: a leaderboard that resists adaptive overfitting (Blum & Hardt, ICML 2015)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from bayesdp.errors import DataError, check_positive, invalid

Loss = Callable[[np.ndarray, np.ndarray], Any]


def zero_one(labels: np.ndarray, predictions: np.ndarray) -> np.ndarray:
    """Per-example 0/1 loss: 1 where the prediction differs from the label."""
    return np.asarray(labels != predictions, dtype=np.float64)


LOSSES: dict[str, Loss] = {"zero_one": zero_one}


class Leaderboard:
    """Scores submissions on held-out labels; the base of the Ladder and the naive (Kaggle) board."""

    def __init__(self, labels: Any, *, loss: str | Loss = "zero_one") -> None:
        self.labels = np.asarray(labels)
        if self.labels.ndim != 1 or self.labels.size == 0:
            raise invalid("labels", f"shape {self.labels.shape}", "a non-empty 1-D array")
        if isinstance(loss, str):
            if loss not in LOSSES:
                raise invalid("loss", loss, f"one of {sorted(LOSSES)} or a callable")
            self.loss: Loss = LOSSES[loss]
        elif callable(loss):
            self.loss = loss
        else:
            raise invalid("loss", loss, f"one of {sorted(LOSSES)} or a callable")
        self.scores: list[float] = []

    @property
    def n(self) -> int:
        return int(self.labels.size)

    def losses(self, predictions: Any) -> np.ndarray:
        """Per-example losses, each in [0, 1] (the Ladder's analysis needs a bounded loss)."""
        pred = np.asarray(predictions)
        if pred.shape != self.labels.shape:
            raise DataError(
                f"predictions have shape {pred.shape}: they must match the labels, {self.labels.shape}"
            )
        values = np.asarray(self.loss(self.labels, pred), dtype=np.float64)
        if values.shape != self.labels.shape:
            raise DataError(f"the loss returned shape {values.shape}: one loss per example needed")
        if not np.isfinite(values).all() or values.min() < 0 or values.max() > 1:
            raise DataError("the loss gave values outside [0, 1]: use a bounded loss",
                            private_detail=f"min {values.min()!r}, max {values.max()!r}")
        return values

    def submit(self, predictions: Any) -> float:
        """Score a submission and return the released score (also appended to `scores`)."""
        score = self._score(self.losses(predictions))
        self.scores.append(score)
        return score

    def _score(self, losses: np.ndarray) -> float:
        """The exact empirical loss (the naive board)."""
        return float(losses.mean())


class NaiveLeaderboard(Leaderboard):
    """The Kaggle-style board: every submission's holdout loss, rounded to `digits` decimals."""

    def __init__(self, labels: Any, *, loss: str | Loss = "zero_one", digits: int = 5) -> None:
        super().__init__(labels, loss=loss)
        self.digits = int(digits)

    def _score(self, losses: np.ndarray) -> float:
        return round(float(losses.mean()), self.digits)


class Ladder(Leaderboard):
    """Releases a new score only when a submission beats the best so far by a clear margin.

    With `step` η (Blum & Hardt 2015, Alg. 1): accept when R_S(f) < R_prev − η and release
    R_S(f) rounded to a multiple of η. With `step=None`, the parameter-free Ladder (ibid. §3.2,
    as in Ladder.jl): accept when R_S(f) < R_prev − s/√n, s the standard deviation of the
    per-example loss differences against the current leader (of the losses for the first),
    a one-sided paired t-test, and release R_S(f). Otherwise the previous score is released.
    """

    def __init__(self, labels: Any, *, loss: str | Loss = "zero_one", step: float | None = None) -> None:
        super().__init__(labels, loss=loss)
        self.step = None if step is None else check_positive("step", step)
        self.best = math.inf
        self._leader: np.ndarray | None = None
        self._leader_index: int | None = None
        self.updates = 0

    @property
    def leader(self) -> int | None:
        """Index (into `scores`) of the submission that set the current score."""
        return self._leader_index

    def _score(self, losses: np.ndarray) -> float:
        loss = float(losses.mean())
        if self.step is not None:
            margin = self.step
        else:
            diffs = losses if self._leader is None else losses - self._leader
            margin = float(np.std(diffs, ddof=1)) / math.sqrt(self.n) if self.n > 1 else 0.0
        if loss < self.best - margin:
            self.best = loss if self.step is None else round(loss / self.step) * self.step
            self._leader = losses
            self._leader_index = len(self.scores)
            self.updates += 1
        return self.best
