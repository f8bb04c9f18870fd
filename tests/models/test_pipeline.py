"""A private scaler states the norm of the rows it outputs; a bayesdp Pipeline hands it on and composes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn.preprocessing

import bayesdp as bdp
from bayesdp.errors import InvalidParameter
from bayesdp.models import (
    ClippingWarning,
    LogisticRegression,
    PrivacyLeakWarning,
    StandardScaler,
    make_pipeline,
)

LO, HI = np.array([0.0, -5.0, 0.0]), np.array([10.0, 5.0, 1.0])


def data(n: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(3)
    x = np.column_stack([gen.uniform(0, 10, n), gen.normal(0, 2, n), gen.uniform(0, 1, n)])
    return x, (x[:, 0] - 5 + x[:, 1] + gen.logistic(size=n) > 0).astype(int)


def test_scaled_rows_stay_within_the_stated_norm_bound() -> None:
    """Rows outside the public bounds are clipped in transform, so norm_bound_ holds for any row."""
    x, _ = data()
    scaler = StandardScaler(bounds=(LO, HI), rng=bdp.rng_for_tests(1)).fit(x)
    wild = np.random.default_rng(4).normal(0, 100, (1000, 3))
    norms = np.linalg.norm(scaler.transform(np.vstack([x, wild])), axis=1)
    assert norms.max() <= scaler.norm_bound_ * (1 + 1e-12)
    corner = scaler.transform(np.where([True, False, True], HI, LO)[None])
    assert np.linalg.norm(corner) <= scaler.norm_bound_ * (1 + 1e-12)


def test_pipeline_hands_the_bound_on_and_composes_the_guarantee() -> None:
    x, y = data()
    steps = (
        StandardScaler(bounds=(LO, HI), epsilon=0.5, rng=bdp.rng_for_tests(1)),
        LogisticRegression(classes=[0, 1], epsilon=1.0, rng=bdp.rng_for_tests(2)),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # data_norm is not read from the rows
        warnings.simplefilter("error", ClippingWarning)
        pipe = make_pipeline(*steps).fit(x, y)
    scaler, logistic = (step for _, step in pipe.steps)
    assert logistic.data_norm == scaler.norm_bound_
    assert pipe.guarantee == scaler.guarantee + logistic.guarantee
    assert pipe.guarantee.epsilon == pytest.approx(1.5)
    assert (pipe.predict(x) == y).mean() > 0.8


def test_pipeline_warns_when_data_norm_is_below_the_bound() -> None:
    x, y = data()
    scaler = StandardScaler(bounds=(LO, HI), rng=bdp.rng_for_tests(1))
    logistic = LogisticRegression(data_norm=1.0, classes=[0, 1], rng=bdp.rng_for_tests(2))
    with pytest.warns(ClippingWarning, match=r"above data_norm=1: they are clipped"):
        make_pipeline(scaler, logistic).fit(x, y)
    assert logistic.data_norm == 1.0


def test_pipeline_with_a_non_private_step_has_no_guarantee() -> None:
    x, y = data()
    pipe = make_pipeline(
        sklearn.preprocessing.StandardScaler(),
        LogisticRegression(data_norm=4.0, classes=[0, 1], rng=bdp.rng_for_tests(2)),
    ).fit(x, y)
    with pytest.raises(InvalidParameter, match="step 'standardscaler'"):
        _ = pipe.guarantee
