"""Compiled inner loops of the exact samplers: one pass per block of uniform words, no temporaries.

Each kernel turns words into integers exactly as the float path in `samplers.py` describes and
flags the draws whose float computation falls inside its error margin; the caller settles those
exactly (`exact.py`). The kernels only read the words they are given: all randomness comes from
the caller's generator. They write every draw and a flag instead of branching on the outcome,
because a branch that is taken at random costs more than the arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_MASK63 = np.uint64(2**63 - 1)
_SHIFT63 = np.uint64(63)
# Words below 2^32 (U < 2^-31) always take the exact path; this also keeps ln 0 out.
_SMALL_WORD = np.uint64(2**32)
_TWO63 = 2.0**-63
_TWO32 = np.float32(2.0**-32)

# Flag bits of a discrete Gaussian proposal (0: rejected); anything above ACCEPTED needs the exact path.
ACCEPTED, AMBIGUOUS_TEST, AMBIGUOUS_MAGNITUDE = 1, 2, 4


@njit(cache=True, nogil=True, inline="always")
def _magnitude(word: np.uint64, shift: float, t: float, tolerance: float) -> tuple[int, np.bool_]:
    """|Z| = floor(-(ln U + shift)·t) from the low 63 bits (exact.geometric_magnitude); is it ambiguous?

    U lies in [u, u+1)·2^-63, so the word's width moves ln U by at most 1/u; rounding u, log,
    the sum and the product move r by a few ulp of t·(1 + |ln U|). A draw is settled here only
    when r is farther than t/u + tolerance·(1 + t·(1 + |ln U|)) from an integer, with
    tolerance (1e-14) twenty times the float bound.
    """
    u = word & _MASK63
    ln = math.log(float(u) * _TWO63)
    r = -(ln + shift) * t
    m = math.floor(r)
    f = r - m
    margin = t / float(u) + tolerance * (1.0 + t * (1.0 - ln))
    return m, (u < _SMALL_WORD) | (f < margin) | (f > 1.0 - margin)


@njit(cache=True, nogil=True, inline="always")
def _signed(m: int, word: np.uint64) -> np.int64:
    """m with the sign of the word's top bit, branch-free: (m XOR s) - s with s = 0 or -1."""
    s = -np.int64(word >> _SHIFT63)
    return (np.int64(m) ^ s) - s


@njit(cache=True, nogil=True)
def discrete_laplace_block(values, ambiguous, words, shift, t, tolerance):  # type: ignore[no-untyped-def]
    """One two-sided geometric draw per word into `values`; `ambiguous` marks those to settle exactly."""
    for i in range(words.size):
        m, ambiguous[i] = _magnitude(words[i], shift, t, tolerance)
        values[i] = _signed(m, words[i])


@njit(cache=True, nogil=True)
def gaussian_proposals(  # type: ignore[no-untyped-def]
    values, log_accept, ambiguous, words, shift, t, tolerance, center, inv_two_s2
):
    """CKS 2020 Alg. 3 proposals: discrete Laplace y into `values`, and -(|y| - σ²/t)²/(2σ²), the log
    of its acceptance probability, into `log_accept` as float32 for numpy's vectorized exp."""
    for i in range(words.size):
        m, ambiguous[i] = _magnitude(words[i], shift, t, tolerance)
        g = m - center
        log_accept[i] = np.float32(-(g * g * inv_two_s2))
        values[i] = _signed(m, words[i])


@njit(cache=True, nogil=True)
def gaussian_acceptance(flags, accept, ambiguous, bits, bernoulli_margin):  # type: ignore[no-untyped-def]
    """Flags of the proposals: the 32-bit uniform bits[i]·2^-32 against the float32 acceptance
    probability, with the margin and reasoning of `samplers.bernoulli_exp`."""
    for i in range(bits.size):
        d = np.float32(bits[i]) * _TWO32 - accept[i]
        test_ambiguous = abs(d) <= bernoulli_margin
        flags[i] = (np.uint8(d < 0.0) * ACCEPTED | np.uint8(test_ambiguous) * AMBIGUOUS_TEST
                    | np.uint8(ambiguous[i]) * AMBIGUOUS_MAGNITUDE)


@njit(cache=True, nogil=True)
def compact_accepted(out, filled, values, flags):  # type: ignore[no-untyped-def]
    """Append the accepted proposals, in order, to out[filled:] until it is full; return the new fill."""
    for i in range(values.size):
        if filled == out.size:
            break
        out[filled] = values[i]
        filled += np.int64(flags[i] == ACCEPTED)
    return filled


@njit(cache=True, nogil=True)
def snap_add(values, noise, grid, out):  # type: ignore[no-untyped-def]
    """out = (rint(values/g) + noise)·g (`lattice.snap_add`); returns the largest |rint(values/g)|."""
    largest = 0.0
    for i in range(values.size):
        q = np.rint(values[i] / grid)
        largest = max(largest, abs(q))
        # The sum in int64, rounded to float64 once: a function of the exact integer sum only.
        out[i] = float(np.int64(q) + noise[i]) * grid
    return largest


# What the caller must settle of a strip proposal (`strip_proposals`).
TAIL, NEEDS_OFFSET, AMBIGUOUS_23, AMBIGUOUS_64 = 2, 3, 4, 5
_MASK32 = np.uint64(2**32 - 1)
_MASK23 = np.uint64(2**23 - 1)
_TWO23 = 2.0**-23
_TWO64 = 2.0**-64


@njit(cache=True, nogil=True)
def strip_proposals(  # type: ignore[no-untyped-def]
    out, filled, slots, kinds, state, words, pool, base, width, lower, upper, scale, inv_two_s2, margin
):
    """Proposals of the strip sampler (`samplers.Strips`), one word each, in order, until `out` is
    full: accepted values go to out[filled:]; a proposal the caller must settle keeps its place
    there (its index in `slots`, its kind in `kinds`, its refined uniform in `state`).

    A word holds the strip j (top 8 bits; 255 is the tail, left to the caller), the sign (bit 55),
    a 32-bit uniform for the offset in the strip (Lemire's multiply-shift; its rare rejections
    redraw from `pool`) and the first 23 bits of the acceptance uniform Y. Y is accepted below
    the strip's lower bound, rejected above its upper bound (both in units of 2^-23, so that
    Y's 23 bits compare as integers), else compared with
    e^{-x²/2σ²}·scale[j] (error below 1e-13, `margin` 1e-12 above it); an ambiguous Y takes 41
    more bits from `pool`, and is left to the caller with its 64 bits if still ambiguous.
    Returns (fill, proposals left to the caller, pool words used)."""
    used = 0
    left = 0
    for i in range(words.size):
        if filled == out.size:
            break
        word = words[i]
        j = np.int64(word >> np.uint64(56))
        kind = 0
        if j == base.size:
            kind = TAIL
        else:
            d = np.uint64(width[j])
            m = ((word >> np.uint64(23)) & _MASK32) * d
            if (m & _MASK32) < d:
                t = (np.uint64(2**32) - d) % d
                while (m & _MASK32) < t and used < pool.size:
                    m = (pool[used] >> np.uint64(32)) * d
                    used += 1
                if (m & _MASK32) < t:
                    kind = NEEDS_OFFSET
        if kind == 0:
            x = base[j] + np.int64(m >> np.uint64(32))
            out[filled] = _signed(x, word << np.uint64(8))  # the sign is bit 55
            # Zero once, not twice (-0 is rejected): P(0) ∝ e^0 like every other value. Folded
            # into the accepting sums; a branch on it doubles the kernel's time.
            keep = np.int64(1) - (np.int64(x == 0) & np.int64((word >> np.uint64(55)) & np.uint64(1)))
            y = word & _MASK23
            if y < lower[j]:
                filled += keep
                continue
            if y >= upper[j]:
                continue
            y_lo = float(y) * _TWO23
            y_hi = y_lo + _TWO23
            r = math.exp(-float(x * x) * inv_two_s2) * scale[j]
            if y_hi <= r - margin or y_lo >= r + margin or keep == 0:
                filled += np.int64(y_hi <= r - margin) & keep
                continue
            kind = AMBIGUOUS_23
            if used < pool.size:
                y = (y << np.uint64(41)) | (pool[used] >> np.uint64(23))
                used += 1
                y_lo = float(y) * _TWO64
                y_hi = y_lo + _TWO64
                if y_hi <= r - margin or y_lo >= r + margin:
                    filled += np.int64(y_hi <= r - margin)
                    continue
                kind = AMBIGUOUS_64
            state[left] = y
        slots[left] = filled
        kinds[left] = kind
        words[left] = word  # the caller reads the word again; words before i are done with
        left += 1
        filled += 1
    return filled, left, used
