"""Choose among classifiers: by holdout accuracy through Thresholdout, or by a search budgeted up front."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.utils import _safe_indexing

from bayesdp.errors import BudgetExhausted, DataError, check_positive, invalid
from bayesdp.holdout import HoldoutAnswer, NaiveHoldout, ReusableHoldout
from bayesdp.mechanisms import ReportNoisyMax
from bayesdp.models.base import PrivateMixin, spend_in
from bayesdp.noise import Rng, resolve_rng
from bayesdp.privacy import Guarantee, Ledger
from bayesdp.privacy.guarantee import check_compatible

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


@dataclass(frozen=True)
class Search:
    """The chosen candidate refitted on every row, its index, and the whole search's guarantee."""

    model: Any
    _: KW_ONLY
    index: int
    guarantee: Guarantee


def search(
    candidates: Sequence[Any],
    X: Any,
    y: Any,
    *,
    epsilon: float,
    ledger: Ledger | None = None,
    rng: Rng | None = None,
) -> Search:
    """Choose among private classifiers and refit the choice, the whole search budgeted in one spend.

    The rows are dealt independently at random into m + 1 disjoint slices for m candidates:
    candidate j is fitted on slice j, and report-noisy-max (McKenna & Sheldon 2020) at `epsilon`
    picks the candidate with the most correct predictions on the last slice (each count moves by
    at most 1 when a row is added or removed). A row sits in one slice only, so this stage costs
    the largest of the candidates' guarantees and the selection's (parallel composition on a
    data-independent partition: McSherry 2009, Thm 4); the refit on every row adds the largest
    candidate guarantee (basic composition), whichever is chosen, so the amount spent does not
    depend on the choice. That total is spent before anything is returned: a refused spend
    raises BudgetExceeded and releases nothing. The candidates' own `ledger` is not used; no
    score is reported (report-noisy-max releases only the index). Every fit sees rows of X's own
    type, so a model chosen on a frame keeps its `feature_names_in_`.
    """
    eps = check_positive("epsilon", epsilon)
    given = list(candidates)
    if not given or not all(isinstance(m, PrivateMixin) and is_classifier(m) for m in given):
        raise invalid("candidates", candidates, "a non-empty sequence of bayesdp classifiers")
    models = [clone(m).set_params(ledger=None) for m in given]
    y = np.asarray(y)
    if len(X) != len(y):
        raise DataError(f"search: X has {len(X)} rows but y has {len(y)}")
    gen = resolve_rng(rng)
    # Each fit draws independent noise: a fresh secure generator, or a child of the test generator.
    streams = [None] * (len(models) + 1) if rng is None else gen.spawn(len(models) + 1)
    part = gen.integers(0, len(models) + 1, len(y))
    # Slices keep X's type (a frame keeps its column names, which the refit's feature_names_in_ holds).
    slices = [np.flatnonzero(part == j) for j in range(len(models) + 1)]
    for j, model in enumerate(models):
        model.set_params(rng=streams[j]).fit(_safe_indexing(X, slices[j]), y[slices[j]])
    chooser = ReportNoisyMax(eps)
    costs = [m.guarantee for m in models]
    refit = _parallel(costs)
    total = _parallel([*costs, chooser.guarantee]) + refit
    if ledger is not None:  # in the ledger's relation: a replace-one ledger is charged (2ε, (1 + e^ε)δ)
        kinds = Counter(type(m).__name__ for m in models)
        searched = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
        spend_in(ledger, total, f"search among {len(models)} candidates ({searched})")
    X_valid, y_valid = _safe_indexing(X, slices[-1]), y[slices[-1]]
    correct = np.array([float((m.predict(X_valid) == y_valid).sum()) for m in models])
    best = chooser.select_index(correct, rng=gen)
    chosen = clone(given[best]).set_params(ledger=None, rng=streams[-1]).fit(X, y)
    if chosen.guarantee != costs[best]:  # every guarantee is a function of public parameters
        raise AssertionError("a refit's guarantee differs from the candidate's")
    return Search(chosen, index=best, guarantee=total)


def _parallel(gs: Sequence[Guarantee]) -> Guarantee:
    """Mechanisms on disjoint parts of the rows: the largest ε, δ and ρ (McSherry 2009, Thm 4)."""
    for g in gs[1:]:
        check_compatible(g, gs[0], "it runs in parallel with a guarantee")
    rhos = [g.rho for g in gs]
    return Guarantee(
        max(g.epsilon for g in gs),
        delta=max(g.delta for g in gs),
        relation=gs[0].relation,
        unit=gs[0].unit,
        rho=max(r for r in rhos if r is not None) if all(r is not None for r in rhos) else None,
    )
