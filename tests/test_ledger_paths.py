"""Every release path takes `ledger=` and spends before it returns (DESIGN, Conventions).

For each path: the ledger records the path's guarantee; an exhausted budget refuses the
release and nothing is returned; and a failure that depends on the data (a NaN, a value
outside the domain, an empty table) comes after the spend, so it answers nothing for free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.correlated import MarkovChain, MarkovQuiltMechanism
from bayesdp.errors import BudgetExceeded, BudgetExhausted, DataError
from bayesdp.holdout import ReusableHoldout
from bayesdp.privacy import Guarantee, Ledger
from bayesdp.synth import (
    perturb_records,
    perturbed_histogram,
    sanitized_database,
    series_density,
    smoothed_histogram,
    synthesize,
)

RNG = bdp.rng_for_tests
X = np.linspace(0.0, 1.0, 200)
BAD = np.array([0.5, np.nan, 0.2])
CHAIN = MarkovChain([[0.9, 0.1], [0.2, 0.8]])
MQM = MarkovQuiltMechanism(CHAIN, length=100, epsilon=1.0)
FRAME = pd.DataFrame({"a": ["x", "y"] * 50, "b": np.arange(100) % 7})


@dataclass(frozen=True)
class Path:
    name: str
    call: Any  # (ledger, data) -> release
    good: Any
    bad: Any
    budget: Guarantee  # the path's relation, unit and dependence, with room for one release


REPLACE = Guarantee(1.0, relation="replace_one")
PATHS = [
    Path("Laplace.release", lambda led, x: bdp.Laplace(1.0).release(x, ledger=led, rng=RNG(1)),
         X, BAD, Guarantee(1.0)),
    Path("Exponential.select",
         lambda led, u: bdp.Exponential(1.0).select(["a", "b", "c"], u, ledger=led, rng=RNG(1)),
         np.array([1.0, 2.0, 3.0]), BAD, Guarantee(1.0)),
    Path("RandomizedResponse.release",
         lambda led, x: bdp.RandomizedResponse(1.0).release(x, ledger=led, rng=RNG(1)),
         np.array([0, 1, 1]), np.array([0, 1, 2]), Guarantee(1.0, relation="replace_one", unit="respondent")),
    Path("perturbed_histogram",
         lambda led, x: perturbed_histogram(x, (0, 1), 1.0, bins=4, ledger=led, rng=RNG(1)),
         X, BAD, Guarantee(1.0)),
    Path("smoothed_histogram",
         lambda led, x: smoothed_histogram(x, (0, 1), 1.0, ledger=led, rng=RNG(1)), X, BAD, REPLACE),
    Path("series_density", lambda led, x: series_density(x, (0, 1), 1.0, ledger=led, rng=RNG(1)),
         X, BAD, REPLACE),
    Path("perturb_records", lambda led, x: perturb_records(x, (0, 1), 1.0, ledger=led, rng=RNG(1)),
         X, BAD, REPLACE),
    Path("sanitized_database",
         lambda led, x: sanitized_database(x, [0, 1, 2], 1.0, 4, ledger=led, rng=RNG(1)),
         np.array([0, 1, 2, 2]), np.array([0, 3]), REPLACE),
    Path("synthesize",  # strict: the data holder's check, the one failure left on the data
         lambda led, df: synthesize(df, 1.0, 1e-6, domain={"a": ["x", "y"]}, bounds={"b": (0, 7)},
                                    strict=True, ledger=led, rng=RNG(1)),
         FRAME, FRAME.assign(a="z"), Guarantee(1.0, delta=1e-6)),
    Path("MarkovQuiltMechanism.release",
         lambda led, s: MQM.release(s, ledger=led, rng=RNG(1)), np.array([0, 1, 1, 0]),
         np.array([0, 1, 5]), Guarantee(1.0, relation="replace_one", unit="record",
                                        dependence=MQM.guarantee.dependence)),
    Path("MarkovQuiltMechanism.release_values",
         lambda led, v: MQM.release_values(v, ledger=led, rng=RNG(1)), np.array([3.0, 4.0]),
         BAD, Guarantee(1.0, relation="replace_one", unit="record",
                        dependence=MQM.guarantee.dependence)),
]


def _ledger(tmp_path, path: Path) -> Ledger:
    return Ledger(tmp_path / f"{path.name}.db", budget=path.budget)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_each_path_spends_and_refuses_once_the_budget_is_gone(tmp_path, path):
    led = _ledger(tmp_path, path)
    out = path.call(led, path.good)
    assert out is not None
    [spend] = led.history()
    assert spend.guarantee.epsilon > 0
    out_guarantee = getattr(out, "guarantee", None)
    if out_guarantee is not None:  # the release states what it spent
        assert out_guarantee == spend.guarantee
    with pytest.raises(BudgetExceeded):
        path.call(led, path.good)
    assert len(led.history()) == 1


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_a_failure_that_depends_on_the_data_comes_after_the_spend(tmp_path, path):
    led = _ledger(tmp_path, path)
    with pytest.raises(DataError):
        path.call(led, path.bad)
    assert len(led.history()) == 1


def test_a_sparse_vector_spends_its_whole_run_before_any_query(tmp_path):
    led = Ledger(tmp_path / "sv.db", budget=Guarantee(1.0))
    sv = bdp.SparseVector(5.0, epsilon=1.0, max_positives=2, ledger=led, rng=RNG(1))
    assert led.spent().epsilon == 1.0
    assert sv.answer([0.0, 100.0]).size == 2
    with pytest.raises(BudgetExceeded):
        bdp.SparseVector(5.0, epsilon=0.5, ledger=led)


def _holdout(led: Ledger | None, **kwargs: Any) -> ReusableHoldout:
    return ReusableHoldout(None, holdout=10_000, threshold=0.05, sigma=0.01, budget=3, ledger=led,
                           rng=RNG(7), **kwargs)


def test_a_holdout_spends_each_overflow_before_answering(tmp_path):
    plain = _holdout(None)
    plain.query_means(np.zeros(3), np.ones(3))  # far above the threshold: three overflows
    led = Ledger(tmp_path / "h.db", budget=Guarantee(1.0, relation="replace_one"))
    h = _holdout(led)
    h.query_means(np.zeros(2), np.ones(2))
    h.query_means(0.0, 1.0)
    assert [s.guarantee.epsilon for s in led.history()] == pytest.approx(
        [2 * h.epsilon_per_overflow, h.epsilon_per_overflow], rel=1e-12)
    assert led.spent().epsilon == pytest.approx(plain.guarantee.epsilon, rel=1e-12)
    # answers from the training set open a run: the threshold's share is spent too
    led2 = Ledger(tmp_path / "h2.db", budget=Guarantee(1.0, relation="replace_one"))
    h2 = _holdout(led2)
    h2.query_means(np.zeros(2), np.zeros(2))
    assert h2.overflows == 0 and h2.guarantee.epsilon > 0
    assert led2.spent().epsilon == pytest.approx(h2.guarantee.epsilon, rel=1e-12)


def test_a_refused_holdout_spend_releases_nothing_and_changes_nothing(tmp_path):
    led = Ledger(tmp_path / "h.db", budget=Guarantee(1.0, relation="replace_one"))
    h = _holdout(led)
    led.spend(Guarantee(1.0 - 0.5 * h.epsilon_per_overflow, relation="replace_one"), "elsewhere")
    with pytest.raises(BudgetExceeded):
        h.query_means(0.0, 1.0)
    assert (h.log, h.overflows, h.budget_left) == ((), 0, 3)
    assert len(led.history()) == 1


def test_a_holdout_that_raises_when_exhausted_has_spent_first(tmp_path):
    led = Ledger(tmp_path / "h.db", budget=Guarantee(1.0, relation="replace_one"))
    h = _holdout(led, on_exhausted="raise")
    with pytest.raises(BudgetExhausted):
        h.query_means(np.zeros(5), np.ones(5))
    assert led.spent().epsilon == pytest.approx(h.guarantee.epsilon, rel=1e-12)
    assert len(h.log) == 3


def test_a_holdout_refuses_a_ledger_for_other_neighbours_before_any_query(tmp_path):
    with pytest.raises(bdp.errors.InvalidParameter, match="relation"):
        _holdout(Ledger(tmp_path / "a.db", budget=Guarantee(1.0)))
    with pytest.raises(bdp.errors.InvalidParameter, match="dependence"):
        _holdout(Ledger(tmp_path / "b.db", budget=Guarantee(1.0, relation="replace_one")),
                 dependence=CHAIN)
