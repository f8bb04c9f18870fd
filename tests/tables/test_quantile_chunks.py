"""The quantile draws run on chunks of groups (quantiles.chunks): every group in exactly one chunk,
in order, each chunk about CHUNK_CELLS window cells."""

import numpy as np

from bayesdp import rng_for_tests
from bayesdp.tables.engines.base import CellWindow
from bayesdp.tables.quantiles import CHUNK_CELLS, chunks


def test_chunks_cover_every_group_once_in_order():
    # Deterministic (seeded data): groups of 0..3·CHUNK_CELLS window cells, some without data (-1).
    rng = rng_for_tests(1)
    groups = 400
    k = rng.integers(0, 3 * CHUNK_CELLS // 100, size=groups)
    group = np.repeat(np.arange(groups), k)
    zero = np.zeros(groups, dtype=np.int64)
    cells = np.zeros(group.size, np.int64)
    win = CellWindow(k, zero, zero, zero, group, cells, cells + 1)
    index = np.where(rng.random(groups) < 0.1, -1, rng.permutation(groups))
    parts = chunks(win, index)
    assert len(parts) > 1
    np.testing.assert_array_equal(np.concatenate([np.arange(index.size)[p] for p in parts]),
                                  np.arange(index.size))
    held = np.where(index >= 0, k[np.maximum(index, 0)], 0) + 3
    for p in parts:
        assert held[p].sum() <= CHUNK_CELLS + held.max()
