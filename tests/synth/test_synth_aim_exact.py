"""AIM's speed-ups change no number: a seeded fit on a small table keeps the selections, the
model's pair marginals (to 1e-12) and the sampled rows that the plain implementation gave.

The expected values below were computed with the code at 8e70f7f (before AIM's speed-ups) and
are stored as fingerprints."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pandas as pd

from bayesdp import rng_for_tests
from bayesdp.synth import synthesize

SIZES = [3, 5, 2, 8, 4, 6, 3, 7]
EDGES = (("c1", "c3"), ("c6", "c7"), ("c3", "c4"), ("c0", "c1"), ("c5", "c6"), ("c4", "c5"),
         ("c0", "c5"), ("c2", "c3"), ("c1", "c5"), ("c1", "c2"), ("c0", "c4"), ("c3", "c7"),
         ("c3", "c6"), ("c2", "c5"), ("c2", "c4"), ("c1", "c4"), ("c0", "c2"), ("c5", "c7"),
         ("c3", "c5"))
N_ESTIMATE = 5982.339705218535
# Σ P(a, b)·((i + 1) + 2j) over each pair's cells (i, j), pairs in combinations order.
MOMENTS = [5.015634150806547, 2.5995033104750447, 8.57602501524836, 5.070898828551492,
           7.331625798589116, 4.04258011727591, 8.06855113372215, 3.097470693748505,
           9.07399239852182, 5.56886621182495, 7.829593181862576, 4.540547500549371,
           8.56651851699561, 7.865926978356069, 4.3608007916592, 6.621527761696824,
           3.3324820803836186, 7.358453096829857, 7.349061644045856, 9.609788614083481,
           6.320742932770275, 10.346713949216513, 7.857225520735048, 4.568179839421842,
           8.594150855868083, 5.698543324440656, 9.724514340886895, 8.079991500230289]
ROWS_SHA256 = "5b76c1cdd4e73ffaeab5b03711e371fc940505ef425eae8726e643c72f1cec03"


def chained_table() -> tuple[pd.DataFrame, dict[str, object]]:
    """6,000 rows of 8 coded columns, each depending on one or two earlier ones (cycles included,
    so AIM goes beyond a tree and its model-size filter matters: 241,920 cells in all)."""
    g = np.random.default_rng(7)  # data generation only
    n = 6000
    x = np.zeros((n, len(SIZES)), dtype=int)
    x[:, 0] = g.integers(0, 3, n)
    x[:, 1] = (x[:, 0] + g.integers(0, 2, n)) % 5
    x[:, 2] = (x[:, 1] > 2) ^ (g.random(n) < 0.2)
    x[:, 3] = (x[:, 1] * 2 + x[:, 2] + g.integers(0, 2, n)) % 8
    x[:, 4] = (x[:, 3] // 2 + (g.random(n) < 0.3)) % 4
    x[:, 5] = (x[:, 4] + x[:, 0] + g.integers(0, 2, n)) % 6
    x[:, 6] = (x[:, 5] % 3 + (g.random(n) < 0.25)) % 3
    x[:, 7] = (x[:, 6] * 2 + x[:, 3] % 2 + g.integers(0, 2, n)) % 7
    cols = [f"c{i}" for i in range(len(SIZES))]
    domain: dict[str, object] = {c: [str(v) for v in range(k)] for c, k in zip(cols, SIZES, strict=True)}
    return pd.DataFrame(x.astype(str), columns=cols), domain


def test_seeded_aim_fit_is_unchanged():
    df, domain = chained_table()
    m = synthesize(df, epsilon=2.0, delta=1e-9, method="aim", domain=domain, rng=rng_for_tests(11))
    assert m.edges == EDGES
    assert m.n_estimate == N_ESTIMATE
    moments = [float((m.model.pair(a, b) * np.add.outer(np.arange(SIZES[a]) + 1.0,
                                                         2.0 * np.arange(SIZES[b]))).sum())
               for a, b in itertools.combinations(range(len(SIZES)), 2)]
    np.testing.assert_allclose(moments, MOMENTS, rtol=0, atol=1e-12)
    rows = m.sample(500, rng=rng_for_tests(12))
    assert hashlib.sha256(rows.to_numpy().astype(str).tobytes()).hexdigest() == ROWS_SHA256
