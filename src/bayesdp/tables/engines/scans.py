"""Compiled one-pass scans of an in-memory column for the array engine (`arrays.py`): what numpy
would compute in several passes and temporaries, read once."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def grid_cells(v: np.ndarray, lo: float, hi: float, width: float, out: np.ndarray) -> int:
    """out[i] = round((clip(v[i], lo, hi) - lo) / width), rounding half away from zero as DuckDB's
    round does, or -1 for NaN; returns how many values were clipped. x - floor(x) is exact in
    binary floating point, so the half test is exact."""
    clipped = 0
    for i in range(v.size):
        x = v[i]
        if x != x:
            out[i] = -1
            continue
        if x < lo:
            x = lo
            clipped += 1
        elif x > hi:
            x = hi
            clipped += 1
        r = (x - lo) / width
        f = math.floor(r)
        out[i] = np.int64(f) + np.int64(r - f >= 0.5)
    return clipped
