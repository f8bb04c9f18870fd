"""Exact resolution of the rare draws whose float computation is ambiguous.

The fast samplers invert a CDF in float64 from a 63- or 64-bit uniform word. When the float result
lies within a proven error margin of a decision boundary, the draw is sent here: the uniform
U is treated as a real number whose first bits are the word and whose further bits are drawn
lazily, the boundary is enclosed with interval arithmetic (mpmath.iv), and more bits are drawn
until the comparison is certain. The resulting samples follow the exact pmf (no truncation,
no float bias), in the spirit of the "interval refining" of Haney et al. (arXiv:2207.13793).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

from mpmath import iv

from bayesdp.noise.random import Rng, uint64


def _frac(raw: tuple[int, int, int, int]) -> Fraction:
    sign, man, exp, _ = raw
    if man == 0 and exp != 0:
        raise ArithmeticError("interval endpoint is not finite")
    value = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -value if sign else value


def _bounds(value: object) -> tuple[Fraction, Fraction]:
    """Exact rational endpoints of an mpmath.iv interval."""
    lo, hi = value._mpi_  # type: ignore[attr-defined]
    return _frac(lo), _frac(hi)


class LazyUniform:
    """A uniform real in [0, 1) known to `bits` bits; `refine` draws 64 more."""

    def __init__(self, word: int, bits: int, rng: Rng) -> None:
        self.num, self.bits, self.rng = word, bits, rng

    def interval(self) -> tuple[Fraction, Fraction]:
        d = 1 << self.bits
        return Fraction(self.num, d), Fraction(self.num + 1, d)

    def refine(self) -> None:
        self.num = (self.num << 64) | int(uint64(self.rng, 1)[0])
        self.bits += 64


@contextmanager
def _precision(bits: int) -> Iterator[None]:
    saved = iv.prec
    iv.prec = bits
    try:
        yield
    finally:
        iv.prec = saved


def below(u: LazyUniform, threshold: Callable[[], object]) -> bool:
    """Decide exactly whether U < c, where `threshold()` encloses c at the current iv precision."""
    while True:
        with _precision(u.bits + 64):
            c_lo, c_hi = _bounds(threshold())
        lo, hi = u.interval()
        if hi <= c_lo:
            return True
        if lo >= c_hi:
            return False
        u.refine()


def _ratio(x: Fraction, shift: Any, t: Any) -> Any:
    """r(U) = -(ln U + ln((1+p)/2)) t as an interval."""
    return -(iv.log(iv.mpf(x.numerator) / x.denominator) + shift) * t


def geometric_magnitude(u: LazyUniform, t: float) -> int:
    """Exact |Z| for the two-sided geometric with P(|Z| >= k) = 2p^k/(1+p), p = e^{-1/t} (k >= 1).

    |Z| = max{k >= 0 : U <= 2p^k/(1+p)}, i.e. floor(-(ln U + ln((1+p)/2)) * t).
    """
    while True:
        lo, hi = u.interval()
        if lo == 0:
            u.refine()
            continue
        with _precision(u.bits + 64):
            tt = iv.mpf(t)
            shift = iv.log((1 + iv.exp(-1 / tt)) / 2)

            r_hi_u, r_lo_u = _bounds(_ratio(hi, shift, tt)), _bounds(_ratio(lo, shift, tt))
            # r decreases in U: the smallest value is at U = hi, the largest at U = lo.
            k_min, k_max = math.floor(r_hi_u[0]), math.floor(r_lo_u[1])
            if k_min == k_max:
                return max(k_min, 0)
        u.refine()
