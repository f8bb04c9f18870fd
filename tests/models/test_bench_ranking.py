"""bench/models.py ranks Gaussian NB by agreement with the non-private model and by AUC, not accuracy."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from bayesdp.models import GaussianNB

BENCH = Path(__file__).resolve().parents[2] / "bench" / "models.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_models", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gaussian_nb_is_ranked_by_agreement_and_auc() -> None:
    assert bench().NB_RANKING == ("agreement with scikit-learn's predictions", "AUC")


def test_auc_scores_the_positive_class_probability() -> None:
    """On imbalanced labels (10% positive) a model near the majority class keeps its AUC from its ranking."""
    gen = np.random.default_rng(2)
    x = gen.uniform(0, 1, (3000, 2))
    y = (x[:, 0] + 0.3 * gen.normal(size=3000) > 1.1).astype(int)
    model = GaussianNB(bounds=(0, 1), classes=[0, 1], epsilon=2.0, rng=np.random.default_rng(3)).fit(x, y)
    expected = roc_auc_score(y, model.predict_proba(x)[:, 1])
    assert bench().auc(model, x, y) == pytest.approx(expected)
    assert bench().auc(model, x, y) > 0.8
