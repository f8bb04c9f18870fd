"""The query plumbing shared by the reusable and the naive holdout: data in, means out, answers logged."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import numpy as np

from bayesdp.errors import DataError, invalid
from bayesdp.holdout.answers import HoldoutAnswer
from bayesdp.holdout.data import Query, check_means, evaluate, row_count


class HoldoutBase(ABC):
    """Evaluates queries on a training and a holdout set and answers them through `_answer`.

    `holdout` may be an integer (the holdout size) when the caller only uses `query_means`.
    """

    def __init__(self, train: Any, *, holdout: Any) -> None:
        if isinstance(holdout, int | np.integer) and not isinstance(holdout, bool):
            if holdout < 1:
                raise invalid("holdout", holdout, "a data set or a positive holdout size")
            self._n = int(holdout)
            self._holdout: Any = None
        else:
            self._n = row_count(holdout, "holdout")
            self._holdout = holdout
        self._train = train
        self._n_train = None if train is None else row_count(train, "train")
        self._log: list[HoldoutAnswer] = []
        self._clipped = 0

    @property
    def has_data(self) -> bool:
        """Whether both sets were given as data (so `query` works), not the holdout size alone."""
        return self._holdout is not None and self._train is not None

    @property
    def n(self) -> int:
        """Holdout size."""
        return self._n

    @property
    def log(self) -> tuple[HoldoutAnswer, ...]:
        """Every answer released so far, in order (nothing that was not released)."""
        return tuple(self._log)

    @property
    def clipped(self) -> int:
        """How many per-record query values were clipped into [0, 1] (with clip=True)."""
        return self._clipped

    def query(self, f: Query, *, clip: bool = False) -> HoldoutAnswer:
        """Answer one statistical query f: records -> [0, 1], vectorized (one value per record)."""
        answers = self._query_callable(f, clip, single=True)
        return answers[0]

    def query_batch(self, fs: Query | Iterable[Query], *, clip: bool = False) -> list[HoldoutAnswer]:
        """Answer queries one by one: a list of callables, or one callable giving (n, q) values."""
        if callable(fs):
            return self._query_callable(fs, clip, single=False)
        answers: list[HoldoutAnswer] = []
        for f in fs:
            answers.extend(self._query_callable(f, clip, single=True))
        return answers

    def query_means(
        self, train_mean: Any, holdout_mean: Any
    ) -> HoldoutAnswer | list[HoldoutAnswer]:
        """Answer queries whose means the caller computed: a scalar pair gives one answer, arrays a list."""
        t = check_means("train_mean", train_mean)
        h = check_means("holdout_mean", holdout_mean)
        if t.shape != h.shape:
            raise invalid("holdout_mean", f"shape {h.shape}", f"the shape of train_mean, {t.shape}")
        answers = self._answer(t, h)
        return answers[0] if np.ndim(train_mean) == 0 and np.ndim(holdout_mean) == 0 else answers

    def _query_callable(self, f: Query, clip: bool, single: bool) -> list[HoldoutAnswer]:
        if self._holdout is None or self._train is None:
            raise DataError(
                "this holdout was built without data (train or holdout missing): use query_means"
            )
        assert self._n_train is not None
        tr = evaluate(f, self._train, self._n_train, "train", clip)
        ho = evaluate(f, self._holdout, self._n, "holdout", clip)
        if tr.means.shape != ho.means.shape:
            raise DataError(
                f"the query gave {tr.means.size} value(s) per record on train but "
                f"{ho.means.size} on holdout"
            )
        if single and tr.means.size != 1:
            raise DataError(
                f"query() takes one query but f gave {tr.means.size} values per record: "
                "use query_batch() for several"
            )
        self._clipped += tr.clipped + ho.clipped
        return self._answer(tr.means, ho.means)

    @abstractmethod
    def _answer(self, train: np.ndarray, holdout: np.ndarray) -> list[HoldoutAnswer]:
        """Answer the queries with these means, in order, appending the answers to the log."""
