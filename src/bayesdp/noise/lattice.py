"""The power-of-two grid on which continuous mechanisms release values (Mironov 2012 defence).

A continuous mechanism with noise scale b rounds its input to the grid g = 2^(floor(log2 b) - 20),
adds g times exact integer noise, and returns (rounded input + noise) * g. Every output is a
multiple of g whatever the input, so outputs from neighbouring inputs lie on the same lattice and
the low bits reveal nothing. Rounding moves each input by at most g/2, so the mechanism pays for
it by calibrating to the sensitivity Δ + g (as Google's secure noise does); with 2^20 grid steps
per noise scale this costs a factor of at most 1 + 2^-20/ε in ε. Integer noise on this grid has a
scale of 2^20 to 2^21 steps, where the exact samplers take their float fast path almost always.
"""

from __future__ import annotations

import math

import numpy as np

from bayesdp.errors import DataError

GRID_BITS = 20
_LIMIT = 2.0**62


def grid_for(scale: float) -> float:
    """The grid spacing for noise of scale (Laplace b or Gaussian σ) `scale`."""
    return 2.0 ** (math.floor(math.log2(scale)) - GRID_BITS)


def snap(values: np.ndarray, grid: float) -> np.ndarray:
    """Round to the nearest multiple of `grid`, as int64 multiples; refuses values too large for the grid."""
    q = np.rint(np.asarray(values, dtype=np.float64) / grid)
    if q.size and np.max(np.abs(q)) >= _LIMIT:
        worst = float(np.max(np.abs(values)))
        raise DataError(
            f"value {worst!r} is too large for the noise grid {grid!r}: |value| must be below "
            f"{_LIMIT * grid:.6g} (2^62 grid steps); rescale the data or raise the noise scale"
        )
    return q.astype(np.int64)


def unsnap(steps: np.ndarray, grid: float) -> np.ndarray:
    """Grid steps back to floats; a deterministic function of the integers, so it is post-processing."""
    return steps.astype(np.float64) * grid
