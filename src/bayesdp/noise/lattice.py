"""The power-of-two grid on which continuous mechanisms release values (Mironov 2012 defence).

A continuous mechanism with noise scale b and sensitivity Δ rounds its input to a grid g (a power
of two), adds g times exact integer noise, and returns (rounded input + noise)·g. Every output is
a multiple of g whatever the input, so outputs from neighbouring inputs lie on the same lattice
and the low bits reveal nothing. Rounding moves each input by at most g/2, so the mechanism
calibrates to the integer sensitivity D = floor(Δ/g) + 1 steps, as Google's secure noise does.

The grid is about 2^-20 of min(b, Δ): the noise is then at most 2^-20 larger than for exact
input, and the integer noise has 2^20 or more steps per scale, where the exact samplers take
their float path almost always. For tiny ε (b > 2^12 Δ) the grid stops shrinking at 2^-32 b,
keeping the integer scale below 2^33 steps at a noise cost of at most 2^-32/ε relative.
"""

from __future__ import annotations

import math

import numpy as np

from bayesdp.errors import DataError
from bayesdp.noise import kernels

GRID_BITS = 20
_LIMIT = 2.0**62


def grid_for(scale: float, sensitivity: float | None = None) -> float:
    """The grid spacing for noise of scale `scale` (Laplace b or Gaussian σ) and the given sensitivity."""
    base = scale if sensitivity is None else min(scale, sensitivity)
    finest = math.floor(math.log2(scale)) - GRID_BITS - 12
    return 2.0 ** max(math.floor(math.log2(base)) - GRID_BITS, finest)


def snap(values: np.ndarray, grid: float) -> np.ndarray:
    """Round to the nearest multiple of `grid`, as int64 multiples; refuses values too large for the grid."""
    q = np.asarray(values, dtype=np.float64) / grid
    np.rint(q, out=q)
    if q.size:
        _check_steps(max(q.max(), -q.min()), values, grid)
    return q.astype(np.int64)


def snap_add(values: np.ndarray, noise: np.ndarray, grid: float) -> np.ndarray:
    """unsnap(snap(values, grid) + noise, grid) in one pass; the int64 `noise` buffer receives the result.

    Equal to the three steps bit for bit: the integer sum is formed in int64 and rounded to float64
    once, and ·g is exact.
    """
    x = np.ascontiguousarray(values, dtype=np.float64)
    out = noise.view(np.float64)  # each entry is read before it is overwritten
    _check_steps(kernels.snap_add(x, noise, grid, out), x, grid)
    return out


def _check_steps(largest: float, values: np.ndarray, grid: float) -> None:
    if largest >= _LIMIT:
        worst = float(np.max(np.abs(values)))
        raise DataError(
            f"a value is too large for the noise grid {grid!r}: |value| must be below "
            f"{_LIMIT * grid:.6g} (2^62 grid steps); rescale the data or raise the noise scale",
            private_detail=f"largest |value| {worst!r}")


def unsnap(steps: np.ndarray, grid: float) -> np.ndarray:
    """Grid steps back to floats; a deterministic function of the integers, so it is post-processing."""
    return steps.astype(np.float64) * grid
