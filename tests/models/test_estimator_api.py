"""The estimators' contract: spend before use, public parameters, leak warnings, clone and Pipeline."""

from __future__ import annotations

import pickle
import warnings
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline

import bayesdp as bdp
from bayesdp.errors import BudgetExceeded, DataError, InvalidParameter
from bayesdp.models import (
    PCA,
    CategoricalNB,
    GaussianNB,
    KMeans,
    LinearRegression,
    LogisticRegression,
    PrivacyLeakWarning,
    StandardScaler,
)

PUBLIC = [
    (StandardScaler, {"bounds": (0, 1)}),
    (GaussianNB, {"bounds": (0, 1), "classes": [0, 1]}),
    (CategoricalNB, {"n_categories": 2, "classes": [0, 1]}),
    (LinearRegression, {"bounds_X": (0, 1), "bounds_y": (0, 1)}),
    (LogisticRegression, {"data_norm": 2.0, "classes": [0, 1]}),
    (KMeans, {"bounds": (0, 1)}),
    (PCA, {"data_norm": 2.0}),
]
IDS = [cls.__name__ for cls, _ in PUBLIC]


def xy(n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(0)
    x = (gen.uniform(0, 1, (n, 3)) > 0.5).astype(float)
    return x, x[:, 0].astype(int)


@pytest.mark.parametrize(("cls", "public"), PUBLIC, ids=IDS)
def test_spends_before_the_model_is_usable(tmp_path: Any, cls: Any, public: dict[str, Any]) -> None:
    x, y = xy()
    ledger = bdp.Ledger(tmp_path / "budget.db", budget=bdp.Guarantee(1.5, delta=1e-5))
    est = cls(epsilon=1.0, ledger=ledger, **public)
    est.fit(x, y)
    assert ledger.history()[-1].guarantee == est.guarantee
    assert ledger.history()[-1].label == f"fit {cls.__name__}"
    second = clone(est).set_params(ledger=ledger)
    with pytest.raises(BudgetExceeded):
        second.fit(x, y)
    with pytest.raises(NotFittedError):
        (second.transform if hasattr(second, "transform") else second.predict)(x)
    assert len(ledger.history()) == 1


def test_one_add_remove_ledger_serves_every_estimator(tmp_path: Any) -> None:
    """Every estimator states add/remove neighbours, the default relation of a ledger."""
    x, y = xy()
    ledger = bdp.Ledger(tmp_path / "budget.db", budget=bdp.Guarantee(7.0, delta=1e-4))
    for cls, public in PUBLIC:
        est = cls(epsilon=1.0, ledger=ledger, rng=bdp.rng_for_tests(1), **public).fit(x, y)
        assert est.guarantee.relation == "add_remove"
    assert [s.label for s in ledger.history()] == [f"fit {cls.__name__}" for cls, _ in PUBLIC]
    assert ledger.spent().epsilon == pytest.approx(7.0)


@pytest.mark.parametrize(("cls", "public"), PUBLIC, ids=IDS)
def test_a_replace_one_ledger_receives_the_restated_guarantee(
    tmp_path: Any, cls: Any, public: dict[str, Any]
) -> None:
    """Add/remove (ε, δ) restates as replace-one (2ε, (1 + e^ε)δ) (Dwork 2006, Remark 2.1)."""
    x, y = xy()
    ledger = bdp.Ledger(tmp_path / "budget.db", budget=bdp.Guarantee(2.5, delta=1e-4, relation="replace_one"))
    est = cls(epsilon=1.0, ledger=ledger, rng=bdp.rng_for_tests(1), **public).fit(x, y)
    alone = clone(est).set_params(ledger=None).fit(x, y).guarantee
    assert alone.relation == "add_remove"
    assert est.guarantee == alone.to_relation("replace_one") == ledger.history()[-1].guarantee
    assert est.guarantee.epsilon == pytest.approx(2.0)


@pytest.mark.parametrize(("cls", "public"), PUBLIC, ids=IDS)
def test_public_parameters_silence_the_leak_warning(cls: Any, public: dict[str, Any]) -> None:
    x, y = xy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        cls(**public).fit(x, y)
    with pytest.warns(PrivacyLeakWarning, match="leaks private information"):
        cls().fit(x, y)


def test_parameters_are_stored_as_given_and_checked_at_fit() -> None:
    est = LinearRegression(epsilon=-1, bounds_X="nonsense")
    assert est.get_params()["epsilon"] == -1
    with pytest.raises(InvalidParameter, match="epsilon=-1"):
        est.fit(*xy())
    with pytest.raises(InvalidParameter, match="delta=0"):
        LinearRegression(delta=0).fit(*xy())
    with pytest.raises(InvalidParameter, match="bounds_X"):
        LinearRegression(bounds_X=(1, 0), bounds_y=(0, 1)).fit(*xy())
    with pytest.raises(InvalidParameter, match="method='newton'"):
        LogisticRegression(method="newton", data_norm=1, classes=[0, 1]).fit(*xy())
    with pytest.raises(DataError, match="outside classes"):
        GaussianNB(bounds=(0, 1), classes=[0, 2]).fit(*xy())
    with pytest.raises(InvalidParameter, match="n_components=9"):
        PCA(9, data_norm=1).fit(*xy())


def test_pipeline_and_clone_keep_the_guarantee() -> None:
    x, y = xy(2000)
    pipe = make_pipeline(
        StandardScaler(bounds=(0, 1), epsilon=0.5, rng=bdp.rng_for_tests(1)),
        LogisticRegression(data_norm=4.0, classes=[0, 1], epsilon=0.5, rng=bdp.rng_for_tests(2)),
    ).fit(x, y)
    assert pipe.predict(x).shape == (2000,)
    scaler, logistic = (step.guarantee for _, step in pipe.steps)
    total = scaler + logistic
    assert (total.epsilon, total.relation) == (pytest.approx(1.0), "add_remove")
    again = clone(pipe).fit(x, y)
    np.testing.assert_array_equal(again.predict_proba(x), pipe.predict_proba(x))  # seeded: reproducible


def test_a_pickled_or_cloned_estimator_spends_from_the_same_ledger(tmp_path: Any) -> None:
    ledger = bdp.Ledger(tmp_path / "budget.db", budget=bdp.Guarantee(2.0))
    est = GaussianNB(bounds=(0, 1), classes=[0, 1], ledger=ledger)
    assert clone(est).ledger is ledger
    restored = pickle.loads(pickle.dumps(est))
    assert restored.ledger.path == ledger.path and restored.ledger.budget == ledger.budget
    restored.fit(*xy())
    assert [s.label for s in ledger.history()] == ["fit GaussianNB"]


@pytest.mark.parametrize(("cls", "public"), PUBLIC, ids=IDS)
def test_fit_runs_blas_on_one_thread_and_restores_it(
    monkeypatch: pytest.MonkeyPatch, cls: Any, public: dict[str, Any]
) -> None:
    """Multithreaded BLAS made fits 10x slower on a loaded 2-core machine: every fit runs on one thread."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from bayesdp.models.base import PrivateMixin

    def blas_threads() -> set[int]:
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    seen: list[set[int]] = []
    spend = PrivateMixin._spend

    def recorded(self: Any, guarantee: Any) -> Any:
        seen.append(blas_threads())
        return spend(self, guarantee)

    monkeypatch.setattr(PrivateMixin, "_spend", recorded)
    x, y = xy()
    with threadpool_limits(2, user_api="blas"):
        cls(epsilon=1.0, **public).fit(x, y)
        assert blas_threads() == {2}
    assert seen == [{1}]


def test_output_perturbation_refuses_a_default_C_before_spending(tmp_path: Any) -> None:
    """No public C serves every table (the one whose noise had RMS norm 1/2 predicted Adult's
    majority class at ε = 1): method="output" asks for C, and nothing is spent."""
    x, y = xy()
    ledger = bdp.Ledger(tmp_path / "budget.db", budget=bdp.Guarantee(1.0, delta=1e-5))
    est = LogisticRegression(method="output", data_norm=2.0, classes=[0, 1], ledger=ledger)
    with pytest.raises(InvalidParameter, match=r"C=None is not allowed.*method='output'"):
        est.fit(x, y)
    assert ledger.history() == []
    est.set_params(C=0.5).fit(x, y)
    assert est.C_ == 0.5 and ledger.history()[-1].guarantee == est.guarantee


def test_coef_interval_after_a_frame_fit_warns_nothing() -> None:
    """coef_interval reads no rows: fitted on a DataFrame, it must not warn about feature names."""
    pd = pytest.importorskip("pandas")
    x, _ = xy()
    frame = pd.DataFrame(x, columns=["a", "b", "c"])
    model = LinearRegression(epsilon=1.0, bounds_X=(0, 1), bounds_y=(0, 1), rng=bdp.rng_for_tests(1))
    model.fit(frame, x[:, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lower, upper = model.coef_interval()
    assert lower.shape == upper.shape == (4,)
