"""Quantile grids counted in numpy, for a table bounded once: one packed BIGINT per bounded row
(group · stride + cell), sorted and run-length encoded; every later request reads its window from
the counts.

DuckDB's hash aggregate of 4.25M bounded rows into 2.56M (group, cell) pairs took 0.28 s, and
reading them back per request (a join with the request's groups, a fetch and a sort) 0.07–0.11 s;
fetching the packed keys and sorting them with numpy takes about 0.07 s in all (10M-row events
table of bench/tables.py). The keys arrive in batches, counted every BATCH_ROWS rows, so memory
holds the counts and BATCH_ROWS keys, not a key per row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numba import njit

from bayesdp.tables.engines.base import COARSE_SHIFT, Cells, CellWindow

# Packed keys sorted together (128 MiB of int64): most bounded tables' grids are one sort.
BATCH_ROWS = 1 << 24


@njit(cache=True, nogil=True)
def _count_runs(keys: np.ndarray, weights: np.ndarray,
                stride: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, cell, count) of each distinct value group·stride + cell of the sorted `keys`: its
    occurrences, or the sum of its `weights` when they are given (keys.size of them). One pass,
    no temporary array: the grid's size is written once."""
    n = keys.size
    distinct = 0
    for i in range(n):
        if i == 0 or keys[i] != keys[i - 1]:
            distinct += 1
    group = np.empty(distinct, np.int32)
    cell = np.empty(distinct, np.int32)
    count = np.zeros(distinct, np.int64)
    weighted = weights.size == n
    j = -1
    for i in range(n):
        if i == 0 or keys[i] != keys[i - 1]:
            j += 1
            group[j] = keys[i] // stride
            cell[j] = keys[i] % stride
        count[j] += weights[i] if weighted else 1
    return group, cell, count


def whole_window(n: np.ndarray, group: np.ndarray, cell: np.ndarray, count: np.ndarray) -> CellWindow:
    """Every group's window as its whole grid (the cells, sorted by group, then cell): from the
    coarse bin of its first cell to the end of the bin of its last."""
    start, stop, below = (np.zeros(n.size, dtype=np.int64) for _ in range(3))
    lead = np.flatnonzero(np.diff(group, prepend=-1))
    last = np.append(lead[1:], group.size) - 1 if lead.size else lead  # no cells: no window
    start[group[lead]] = (cell[lead] >> COARSE_SHIFT) << COARSE_SHIFT
    stop[group[last]] = ((cell[last] >> COARSE_SHIFT) + 1) << COARSE_SHIFT
    return CellWindow(n, start, stop, below, group, cell, count)


@dataclass(frozen=True)
class CountedGrid:
    """Counts of a quantile grid per (group, cell), sorted by group, then cell. The groups are
    the bounded table's, numbered from 0 in key order (nulls last); groups and cells are int32
    (a grid has at most 2^24 + 1 cells)."""

    group: np.ndarray
    cell: np.ndarray
    count: np.ndarray

    @classmethod
    def of(cls, batches: Iterable[np.ndarray], stride: int) -> CountedGrid:
        """The grid of the packed keys group · stride + cell, arriving in `batches`."""
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        held: list[np.ndarray] = []
        none = np.empty(0, dtype=np.int64)

        def flush() -> None:  # the held batches, sorted together in place
            keys = np.concatenate(held).astype(np.int64, copy=False)
            keys.sort()
            parts.append(_count_runs(keys, none, stride))
            held.clear()

        for batch in batches:
            held.append(batch)
            if sum(b.size for b in held) >= BATCH_ROWS:
                flush()
        if held:
            flush()
        if len(parts) == 1:
            return cls(*parts[0])
        # More than BATCH_ROWS rows: the parts' counts merged.
        group, cell, count = (np.concatenate([p[i] for p in parts]) if parts else
                              np.empty(0, dtype=np.int64) for i in range(3))
        key = group.astype(np.int64) * stride + cell
        order = np.argsort(key)
        return cls(*_count_runs(key[order], count[order], stride))

    def window(self, renumber: np.ndarray, n: np.ndarray, spec: Cells) -> CellWindow:
        """The cells of `spec`'s window (`Cells`: the whole coarse bins whose rank range meets
        (q·n - margin, q·n + margin)) for a request whose group g is this grid's group
        renumber[g] (-1: not one of its groups), with `n` non-null values per group. Both
        number their groups in key order, so the renumbered grid stays sorted."""
        group, cell, count = self.group, self.cell, self.count
        if renumber.size != n.size or (renumber != np.arange(n.size)).any():  # not the grid's groups
            new = renumber[group]
            kept = new >= 0
            group, cell, count = new[kept], cell[kept], count[kept]
        start, stop, below = (np.zeros(n.size, dtype=np.int64) for _ in range(3))
        if not group.size:
            return CellWindow(n, start, stop, below, group, cell, count)
        if float(spec.margin) > float(n.max()) + 1.0:  # every bin meets: the whole grid, in fewer passes
            return whole_window(n, group, cell, count)
        coarse = cell >> COARSE_SHIFT
        bin_first = np.flatnonzero((np.diff(group, prepend=-1) != 0) | (np.diff(coarse, prepend=-1) != 0))
        bin_group, bin_count = group[bin_first], np.add.reduceat(count, bin_first)
        cum = np.cumsum(bin_count)
        group_first = np.flatnonzero(np.diff(bin_group, prepend=-1))
        bins_of = np.diff(np.append(group_first, bin_first.size))
        cum -= np.repeat(cum[group_first] - bin_count[group_first], bins_of)  # running count per group
        total = np.repeat(cum[np.append(group_first[1:], bin_first.size) - 1], bins_of)
        # The rank check of the engines' SQL, in the same float arithmetic.
        q, m = float(spec.q), float(spec.margin)
        low, high = cum.astype(np.float64), (cum - bin_count).astype(np.float64)
        meets = (low > q * total - m) & (high < q * total + m)
        chosen = np.flatnonzero(meets)
        g = bin_group[chosen]
        lead = np.flatnonzero(np.diff(g, prepend=-1))
        last = np.append(lead[1:], g.size) - 1
        start[g[lead]] = coarse[bin_first[chosen[lead]]] << COARSE_SHIFT
        stop[g[last]] = (coarse[bin_first[chosen[last]]] + 1) << COARSE_SHIFT
        below[g[lead]] = (cum - bin_count)[chosen[lead]]
        inside = np.repeat(meets, np.diff(np.append(bin_first, group.size)))
        return CellWindow(n, start, stop, below, group[inside], cell[inside], count[inside])


@dataclass(frozen=True)
class BoundedGrids:
    """The grids a request reads from a table bounded once: `table` numbers the bounded rows'
    groups (`__g`, in key order; None without group keys), `groups` counts them."""

    table: str | None
    groups: int
    counted: dict[Cells, CountedGrid]
