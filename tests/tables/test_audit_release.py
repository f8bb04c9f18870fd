"""The auditor on a small table release: bounding holds the claimed ε, a false claim is refuted."""

import numpy as np
import pandas as pd

import bayesdp as bdp
from bayesdp import audit
from bayesdp.tables.estimate import estimate

BASE = pd.DataFrame({"user_id": [1, 2, 3], "v": [1.0, 2.0, 3.0]})
# The neighbour adds one user with five rows: bounding keeps two of them.
HEAVY = pd.concat([BASE, pd.DataFrame({"user_id": [9] * 5, "v": [4.0] * 5})], ignore_index=True)


def _mechanism(epsilon: float):
    def run(which: int, size: int, rng: np.random.Generator) -> np.ndarray:
        df = (BASE, HEAVY)[which]
        q = bdp.table(df, "user_id").agg(rows=bdp.count())
        plan = q.plan(epsilon, max_rows_per_group=2)
        exact = q.table.engine.aggregate(q._request(plan, 0.05, int(rng.integers(0, 2**62))))
        # The engine-independent path, once per run: each entry is one release of the count.
        return estimate(plan.steps["rows"], exact, np.zeros(size, dtype=np.int64), 0.05, rng=rng).value

    return run


def test_table_release_passes_its_audit_and_a_false_claim_fails():
    # alpha=1e-6: a correct claim is refuted with probability at most 1e-6.
    ok = audit(_mechanism(1.0), 0, 1, epsilon=1.0, samples=100_000, alpha=1e-6,
               rng=bdp.rng_for_tests(3))
    assert ok.passed, ok
    # Without bounding the heavy user would shift the count by 5 (ε = 5 per user); with it, by 2:
    # claiming ε = 0.5 for the same mechanism is refuted at confidence 1 - 1e-6.
    bad = audit(_mechanism(1.0), 0, 1, epsilon=0.5, samples=100_000, alpha=1e-6,
                rng=bdp.rng_for_tests(4))
    assert not bad.passed and bad.epsilon_lower > 0.5
