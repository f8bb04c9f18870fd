"""Float structure of outputs: lattice membership and exact reachability for numpy's Laplace.

Mironov (CCS 2012) showed that a textbook float Laplace sampler reveals its input through the
set of doubles it can produce. These helpers turn that into events an audit can count: "the
output is not a multiple of 2^k" (precision-based attacks, Haney et al. arXiv:2207.13793) and
"the output cannot be produced from the other input" for a sampler whose inverse is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import vectorize

from bayesdp.errors import check_finite, check_positive

# Stand-ins for the lowest set bit of 0 (a multiple of every power of two) and of inf/nan (of none).
ZERO_BITS = 2048
NONFINITE_BITS = -2048
_MANTISSA = 53


def lowest_bit(values: np.ndarray) -> np.ndarray:
    """k such that each value is a multiple of 2^k but not of 2^(k+1) (IEEE 754 binary64)."""
    y = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(y)
    mant, exp = np.frexp(np.where(finite, y, 0.0))
    whole = np.ldexp(np.abs(mant), _MANTISSA).astype(np.int64)
    low = whole & -whole
    _, low_exp = np.frexp(low.astype(np.float64))
    out: np.ndarray = exp.astype(np.int64) - _MANTISSA + low_exp.astype(np.int64) - 1
    out[y == 0] = ZERO_BITS
    out[~finite] = NONFINITE_BITS
    return out


def off_lattice(values: np.ndarray, grid: float) -> np.ndarray:
    """True where a value is not an integer multiple of `grid`."""
    y = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        on: np.ndarray = (np.rint(y / grid) * grid == y) & np.isfinite(y)
    return ~on


_WORDS = 2**53  # numpy's next_double: U = k / 2^53, k uniform in [0, 2^53)


@vectorize(["float64(float64)"], cache=True)  # type: ignore[no-untyped-call, untyped-decorator]
def _libm_log(x: float) -> float:
    """The C library's log, as numpy's random_laplace calls it (numpy's own np.log ufunc uses
    SIMD code that differs from it in the last bit on some inputs, so a replay through it errs)."""
    return math.log(x)


@dataclass(frozen=True)
class NumpyLaplace:
    """The exact inverse of numpy's `Generator.laplace` at (loc, scale) (distributions.c, random_laplace).

    numpy draws U = k/2^53 and returns loc - scale·ln(2-U-U) if U ≥ 1/2, else loc + scale·ln(U+U)
    (U = 0 is redrawn). Rounded float operations are monotone, so the output is non-decreasing
    in k and `reachable` finds the smallest k whose output is ≥ y by a 53-step vectorized
    binary search, then checks equality.
    """

    scale: float

    def __post_init__(self) -> None:
        check_positive("scale", self.scale)

    @property
    def description(self) -> str:
        return f"numpy's Generator.laplace with loc = input, scale = {self.scale!r}"

    def output(self, k: np.ndarray, loc: float) -> np.ndarray:
        """The value numpy returns for the word k (vectorized replay of random_laplace)."""
        u = np.asarray(k, dtype=np.int64).astype(np.float64) / _WORDS
        upper = u >= 0.5
        out = np.empty_like(u)
        uh = u[upper]
        out[upper] = loc - self.scale * _libm_log(2.0 - uh - uh)
        ul = u[~upper]
        out[~upper] = loc + self.scale * _libm_log(ul + ul)
        return out

    def reachable(self, values: np.ndarray, loc: float) -> np.ndarray:
        """True where numpy's `Generator.laplace` at (loc, scale) can return exactly that value."""
        loc = check_finite("input", loc)
        y = np.asarray(values, dtype=np.float64).ravel()
        lo = np.ones(y.size, dtype=np.int64)
        hi = np.full(y.size, _WORDS - 1, dtype=np.int64)
        for _ in range(_MANTISSA):  # one vectorized halving per bit of k
            mid = (lo + hi) // 2
            right = self.output(mid, loc) >= y
            hi = np.where(right, mid, hi)
            lo = np.where(right, lo, np.minimum(mid + 1, hi))
        found: np.ndarray = (self.output(lo, loc) == y) & np.isfinite(y)
        return found
