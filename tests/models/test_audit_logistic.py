"""Objective-perturbation logistic regression, audited end to end at the ε it claims.

Each run fits the estimator on one of two neighbouring data sets (one row removed, the
add/remove relation its guarantee states) and releases its coefficient; `bdp.audit` picks a threshold
event on separate runs and bounds ε by Clopper–Pearson on fresh ones. The guarantee's δ is the
noise sampler's total variation (about 1e-12 here), far below what these runs can see, so the
audit checks the pure ε claim. Each assertion fails falsely with probability at most α = 1e-6.

One coefficient of at most four rows keeps a fit near a millisecond. The noise is the estimator's own
`gamma_norm_noise` on the audit's seeded generator, its `standard_normals` drawn for all runs in
one call and handed out in order (the same i.i.d. law): one call of the exact sampler costs
about a millisecond.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import bayesdp as bdp
from bayesdp.audit import AuditResult, Event, audit
from bayesdp.models import LogisticRegression, logistic

ALPHA = 1e-6
D0, D1 = np.array([1, 1, 1, 0]), np.array([1, 1, 1])  # labels of rows x = 1; D1 lacks the 0
THRESHOLDS = [Event(f"coefficient > {t:g}", contains=lambda v, t=t: v > t) for t in np.arange(-4, 8.5, 0.25)]


def run_audit(monkeypatch: pytest.MonkeyPatch, C: float, shrink: float = 1.0) -> AuditResult:
    """Audit ε = 1: 600 fresh runs per input after 300 selection runs; the noise norm is divided by shrink."""
    real: Callable[[int, Any], np.ndarray] = logistic.standard_normals
    real_noise = logistic.gamma_norm_noise

    def sample(labels: np.ndarray, size: int, rng: Any) -> np.ndarray:
        est = LogisticRegression(epsilon=1.0, C=C, data_norm=1.0, classes=[0, 1], fit_intercept=False)
        pool = iter(real(size, rng))  # p normals per fit, p = 1
        monkeypatch.setattr(logistic, "standard_normals", lambda k, _rng: np.fromiter(pool, float, k))
        # the noise's uniforms come from the audit's seeded generator too
        noise = lambda d, beta, _rng: real_noise(d, beta * shrink, rng)  # noqa: E731
        monkeypatch.setattr(logistic, "gamma_norm_noise", noise)
        try:
            x = np.ones((labels.size, 1))
            return np.array([est.fit(x, labels).coef_[0, 0] for _ in range(size)])
        finally:
            monkeypatch.setattr(logistic, "standard_normals", real)
            monkeypatch.setattr(logistic, "gamma_norm_noise", real_noise)

    with threadpool_limits(limits=1):  # BLAS threads only slow down a 1-coefficient fit
        return audit(sample, D0, D1, epsilon=1.0, samples=600, selection=300, events=THRESHOLDS,
                     alpha=ALPHA, rng=bdp.rng_for_tests(61))


@pytest.mark.parametrize("C", [1.0, 1e4], ids=["ridge-from-C", "ridge-grown-for-the-jacobian"])
def test_objective_perturbation_passes_at_its_claimed_epsilon(
    monkeypatch: pytest.MonkeyPatch, C: float
) -> None:
    """C = 1: the ridge 1/(nC) already bounds the Jacobian; C = 1e4: it grows by Δ (Alg. 2)."""
    result = run_audit(monkeypatch, C)
    assert result.passed, str(result)  # false failure <= α = 1e-6


def test_the_audit_catches_noise_too_small() -> None:
    """The audit has power: it fails a noise norm 16x too small."""
    with pytest.MonkeyPatch.context() as mp:
        result = run_audit(mp, 1.0, shrink=16.0)
    # The noise's β is then 16ε' >= 8 while the gradient moves by up to 1 on this pair; at
    # 600 runs the event "coefficient > 1" has probabilities near 0.68 and 0.01, whose Clopper–Pearson
    # bounds at α = 1e-6 still give ε >= 2.
    assert not result.passed and result.epsilon_lower > 2, str(result)
