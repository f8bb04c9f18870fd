"""A private table release, audited part by part at the shares its plan claims.

A grouped release is exact bounded aggregates (no randomness), partition selection per group,
and one mechanism per noisy part; its guarantee composes those shares (plan.guarantee). One
full release runs a DuckDB query (hundreds of ms), so the audit runs the plan's own selection
and mechanism objects, vectorized over runs, on each part's worst-case neighbours.
"""

import numpy as np
import pandas as pd
import pytest

from bayesdp.audit import audit, audit_pairs
from bayesdp.noise import rng_for_tests
from bayesdp.tables import count, mean, table
from bayesdp.tables import sum as total
from bayesdp.tables.selection import PartitionSelection

ALPHA = 1e-6


@pytest.fixture(scope="module")
def plan():
    df = pd.DataFrame({"unit": np.arange(10), "g": ["a"] * 10, "v": np.linspace(0, 9, 10)})
    query = table(df, "unit").group_by("g").agg(
        n=count(), s=total("v", bounds=(0, 10)), m=mean("v", bounds=(0, 10))
    )
    return query.plan(1.0, 1e-3, max_groups_per_unit=2)


def kept(selection):
    """One group per run, holding n units: is it released?"""
    return lambda n, size, rng: selection.select(np.full(size, n), rng=rng)


def test_partition_selection_keeps_its_per_group_share(plan):
    eps, delta = plan.selection.per_group
    t = plan.selection.threshold()
    pairs = [(1, 0), (2, 1), (t, t - 1), (t + 1, t)]  # a group gains one unit
    result = audit_pairs(kept(plan.selection), pairs, epsilon=eps, delta=delta, samples=10**6,
                         alpha=ALPHA, rng=rng_for_tests(41))
    assert result.passed  # false failure <= α = 1e-6
    # Ten times the δ: a group held by one unit is kept with probability 5e-3 instead of
    # 5e-4. At 10^6 runs the bound on it is 5e-3 - 5·7e-5 - e^0.125·(≈0) > 4e-3 (5 σ).
    loose = PartitionSelection(plan.selection.epsilon, 10 * plan.selection.delta, 2)
    broken = audit_pairs(kept(loose), pairs, epsilon=eps, delta=delta, samples=10**6,
                         alpha=ALPHA, rng=rng_for_tests(42))
    assert not broken.passed and broken.delta_lower > 4e-3


def test_every_noisy_part_keeps_its_share(plan):
    for step in plan.steps.values():
        for part in step.parts.values():
            mechanism = part.mechanism
            claim = mechanism.guarantee
            sensitivity = part.sensitivity
            if float(sensitivity).is_integer():
                sensitivity = int(sensitivity)
            result = audit(mechanism, 0, sensitivity, epsilon=claim.epsilon, delta=claim.delta,
                           samples=2 * 10**5, alpha=ALPHA, rng=rng_for_tests(43))
            assert result.passed, (step.name, part.name)  # each: false failure <= α = 1e-6
    # A group spends the parts of one branch (a mean's second stage is one of two); every
    # branch of an aggregate spends the same.
    per_branch = [{sum(step.parts[p].mechanism.guarantee.epsilon for p in b)
                   for b in step.aggregate.branches} for step in plan.steps.values()]
    assert all(max(v) - min(v) <= 1e-12 for v in per_branch)
    shares = sum(max(v) for v in per_branch)
    # Per group the parts and the selection add up to the release's ε over ≤ 2 groups per unit.
    assert np.isclose(2 * (shares + plan.selection.per_group[0]), plan.guarantee.epsilon)
