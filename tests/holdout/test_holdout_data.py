from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from bayesdp import rng_for_tests
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.holdout import NaiveHoldout, ReusableHoldout

X_TRAIN = np.array([0.0, 0.5, 1.0, 1.0])
X_HOLD = np.array([0.25, 0.25, 1.0, 0.5, 0.0])


def _frames(values: np.ndarray) -> list[object]:
    return [
        pd.DataFrame({"x": values}),
        pl.DataFrame({"x": values}),
        pa.table({"x": values}),
    ]


def test_every_input_type_gives_the_exact_means() -> None:
    for train, hold in zip(_frames(X_TRAIN), _frames(X_HOLD), strict=True):
        naive = NaiveHoldout(train, holdout=hold)
        assert naive.query(lambda d: d["x"]).value == pytest.approx(X_HOLD.mean(), abs=1e-15)
    naive = NaiveHoldout(X_TRAIN[:, None], holdout=X_HOLD[:, None])
    assert naive.query(lambda a: a[:, 0]).value == pytest.approx(X_HOLD.mean(), abs=1e-15)


def test_agreeing_sets_release_the_exact_training_mean() -> None:
    # Identical sets: the gap is 0 and the threshold 0.5 is 5000 comparison-noise scales away.
    h = ReusableHoldout(
        X_TRAIN, holdout=X_TRAIN.copy(), threshold=0.5, sigma=2.5e-5, budget=1, rng=rng_for_tests(0)
    )
    answer = h.query(lambda a: a)
    assert (answer.value, answer.source, answer.budget_left) == (X_TRAIN.mean(), "train", 1)


def test_values_outside_the_unit_interval_are_refused_or_clipped_and_counted() -> None:
    h = NaiveHoldout(X_TRAIN, holdout=X_HOLD)
    with pytest.raises(DataError, match=r"outside \[0, 1\].*clip=True"):
        h.query(lambda a: 2 * a)
    answer = h.query(lambda a: 2 * a, clip=True)
    assert answer.value == pytest.approx(np.clip(2 * X_HOLD, 0, 1).mean())
    assert h.clipped == 2 + 1  # train: 1.0, 1.0 -> 2.0 (twice); holdout: 1.0 -> 2.0 (0.5 -> 1.0 is inside)
    assert h.log == (answer,)


def test_bad_query_results_name_the_problem() -> None:
    h = NaiveHoldout(X_TRAIN, holdout=X_HOLD)
    with pytest.raises(DataError, match="non-finite"):
        h.query(lambda a: a * np.nan)
    with pytest.raises(DataError, match="one value per record"):
        h.query(lambda a: a.mean())
    with pytest.raises(DataError, match="query_batch"):
        h.query(lambda a: np.stack([a, a], axis=1))
    with pytest.raises(InvalidParameter, match="query"):
        h.query("x")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match="holdout"):
        NaiveHoldout(X_TRAIN, holdout=3.5)
    with pytest.raises(DataError, match="no records"):
        NaiveHoldout(X_TRAIN, holdout=np.array([]))


def test_batches_of_callables_and_matrix_queries_agree() -> None:
    h = NaiveHoldout(X_TRAIN, holdout=X_HOLD)
    by_list = h.query_batch([lambda a: a, lambda a: 1 - a])
    by_matrix = h.query_batch(lambda a: np.stack([a, 1 - a], axis=1))
    assert [a.value for a in by_list] == [a.value for a in by_matrix]
    assert len(h.log) == 4


def test_means_only_holdout() -> None:
    h = ReusableHoldout(None, holdout=1000, threshold=0.1, sigma=0.01, budget=2, rng=rng_for_tests(1))
    with pytest.raises(DataError, match="query_means"):
        h.query(lambda a: a)
    with pytest.raises(InvalidParameter, match="holdout_mean"):
        h.query_means(0.5, 1.5)
    with pytest.raises(InvalidParameter, match="shape"):
        h.query_means([0.5, 0.5], [0.5])
