"""Partition selection: exact keep probabilities and the δ of a single-unit key."""

import numpy as np
from scipy import stats

from bayesdp import rng_for_tests
from bayesdp.tables.selection import PartitionSelection


def test_keep_probability_recurrence():
    sel = PartitionSelection(epsilon=1.0, delta=1e-3, max_groups=2)
    eps, delta = 0.5, 5e-4
    p = sel.keep_probability(np.arange(0, 200))
    assert p[0] == 0.0 and p[1] == delta
    assert np.isclose(p[2], np.exp(eps) * delta + delta)
    assert np.all(np.diff(p) >= 0) and p[-1] == 1.0
    # Neighbouring counts: π(n+1) <= e^ε π(n) + δ and 1 - π(n) <= e^ε (1 - π(n+1)) + δ.
    assert np.all(p[1:] <= np.exp(eps) * p[:-1] + delta + 1e-15)
    assert np.all(1 - p[:-1] <= np.exp(eps) * (1 - p[1:]) + delta + 1e-15)
    assert sel.threshold() == int(np.argmax(p >= 0.5))


def test_single_unit_key_released_at_rate_delta():
    sel = PartitionSelection(epsilon=1.0, delta=0.02, max_groups=2)  # per group δ = 0.01
    trials = 200_000
    kept = int(sel.select(np.ones(trials, dtype=np.int64), rng=rng_for_tests(11)).sum())
    # Binomial(200000, 0.01): both exact 1e-7 tail quantiles, so each side fails w.p. < 1e-7.
    assert kept <= stats.binom.ppf(1 - 1e-7, trials, 0.01)
    assert kept >= stats.binom.ppf(1e-7, trials, 0.01)
    assert not sel.select(np.zeros(1000, dtype=np.int64), rng=rng_for_tests(1)).any()
    assert sel.select(np.full(1000, 10_000), rng=rng_for_tests(2)).all()
