"""Vectorized exact samplers on integers: Bernoulli(e^-γ), discrete Laplace, discrete Gaussian.

Each sampler inverts the CDF in float64 from uniform words (63 bits for the discrete Laplace,
32 for a Bernoulli trial), in one pass per block (numpy for Bernoulli trials, a compiled kernel
from `kernels.py` for the discrete Laplace and Gaussian), and sends the draws that land within a
proven float-error margin of a decision boundary to `exact.py`, which settles them with interval
arithmetic and lazily drawn bits. The output therefore follows the exact pmf. The margins are
far above the worst-case error of the float path (a few ulp of log/exp, rounding a word to a
float, the word's own width), so the exact path serves about 4e-14·scale + 2^-31 of the discrete
Laplace draws and 2e-6 of the Bernoulli trials."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from mpmath import iv

from bayesdp.noise import exact, kernels
from bayesdp.noise.random import Rng, uint64

# Relative error allowed for the float path's log before a draw is settled exactly (kernels._magnitude).
TOLERANCE = 1e-14
_TWO32 = 2.0**-32
_BLOCK = 1 << 16
_BERNOULLI_MARGIN = np.float32(1e-6)

ExactGamma = Callable[[int], Any]


def _size(size: int) -> int:
    return int(size)


def discrete_laplace(scale: float, size: int, rng: Rng) -> np.ndarray:
    """Integers Z with P(Z=z) = (1-p)/(1+p) p^|z|, p = e^{-1/scale} (CKS 2020, Def. 2 / Alg. 2 target)."""
    n = _size(size)
    t = float(scale)
    out = np.empty(n, dtype=np.int64)
    ambiguous = np.empty(min(n, _BLOCK), dtype=np.bool_)
    for start in range(0, n, _BLOCK):
        block = out[start : start + _BLOCK]
        words = uint64(rng, block.size)
        kernels.discrete_laplace_block(block, ambiguous, words, _shift(t), t, TOLERANCE)
        for i in np.flatnonzero(ambiguous[: block.size]):
            block[i] = _exact_signed(words[i], t, rng)
    return out


def _shift(t: float) -> float:
    """ln((1+p)/2), p = e^{-1/t}: |Z| = floor(-(ln U + ln((1+p)/2)) t) (exact.geometric_magnitude)."""
    return math.log1p(math.exp(-1.0 / t)) - math.log(2.0)


def _exact_signed(word: np.uint64, t: float, rng: Rng) -> int:
    """The discrete Laplace draw of one word whose magnitude the float path could not settle."""
    w = int(word)
    magnitude = exact.geometric_magnitude(exact.LazyUniform(w & (2**63 - 1), 63, rng), t)
    return -magnitude if w >> 63 else magnitude


def bernoulli_exp(gamma: np.ndarray, rng: Rng, exact_gamma: ExactGamma | None = None) -> np.ndarray:
    """Booleans with P(True) = e^{-γ} for each γ >= 0 (CKS 2020, Alg. 1 target).

    `exact_gamma(i)` returns γ_i as an mpmath.iv interval when the float γ_i is only an
    approximation (for example of a rational computed from integers); by default it is exact.
    """
    g = np.asarray(gamma, dtype=np.float64)
    # The fast path compares a 32-bit uniform with e^{-γ} in float32. Its error is at most a few
    # float32 ulp of e^{-γ} times (1 + γ) plus the word's width 2^-32; since (1 + γ)e^{-γ} <= 1,
    # one absolute margin of 1e-6 (about 4x the worst case) covers every γ. Draws inside it are
    # refined bit by bit against the exact threshold.
    u = uint64(rng, (g.size + 1) // 2).view(np.uint32)[: g.size]
    uf = u.astype(np.float32)
    uf *= np.float32(_TWO32)
    c = np.minimum(g, 1e4).astype(np.float32)  # e^{-1e4} is already 0 in float32
    np.negative(c, out=c)
    np.exp(c, out=c)
    accept = uf < c
    uf -= c
    for i in np.flatnonzero(np.abs(uf, out=uf) <= _BERNOULLI_MARGIN):
        accept[i] = exact.below(
            exact.LazyUniform(int(u[i]), 32, rng), _exp_minus(int(i), float(g[i]), exact_gamma)
        )
    return accept


def _exp_minus(i: int, g: float, exact_gamma: ExactGamma | None) -> Callable[[], Any]:
    if exact_gamma is None:
        return _exp_minus_exact(Fraction(g))
    return lambda: iv.exp(-exact_gamma(i))


def _exp_minus_exact(q: Fraction) -> Callable[[], Any]:
    """e^{-q} for a rational q, enclosed at whatever iv precision is current when called."""
    return lambda: iv.exp(-iv.mpf(q.numerator) / q.denominator)


def discrete_gaussian(sigma: float, size: int, rng: Rng) -> np.ndarray:
    """Integers Z with P(Z=z) ∝ exp(-z²/(2σ²)) (CKS 2020, Alg. 3: discrete Laplace proposal, rejection)."""
    n = _size(size)
    s2 = Fraction(float(sigma)) ** 2
    tau = math.floor(sigma) + 1
    center = s2 / tau
    bernoulli_margin = float(_BERNOULLI_MARGIN)
    constants = (_shift(tau), float(tau), TOLERANCE, float(center), 1.0 / float(2 * s2))
    out = np.empty(n, dtype=np.int64)
    values = np.empty(_BLOCK, dtype=np.int64)
    accept = np.empty(_BLOCK, dtype=np.float32)
    ambiguous = np.empty(_BLOCK, dtype=np.bool_)
    flags = np.empty(_BLOCK, dtype=np.uint8)
    filled = 0
    while filled < n:
        # About 1.32 proposals per value (acceptance about 76%); at most a block at a time.
        m = min(int((n - filled) * 1.33) + 64, _BLOCK)
        raw = uint64(rng, m + (m + 1) // 2)
        words, bits = raw[:m], raw[m:].view(np.uint32)[:m]
        kernels.gaussian_proposals(values, accept, ambiguous, words, *constants)
        np.exp(accept[:m], out=accept[:m])  # numpy's exp is vectorized; within a few float32 ulp
        kernels.gaussian_acceptance(flags, accept, ambiguous, bits, bernoulli_margin)
        for i in np.flatnonzero(flags[:m] > kernels.ACCEPTED):
            if flags[i] & kernels.AMBIGUOUS_MAGNITUDE:
                values[i] = _exact_signed(words[i], float(tau), rng)
            threshold = _exp_minus_exact((abs(int(values[i])) - center) ** 2 / (2 * s2))
            flags[i] = exact.below(exact.LazyUniform(int(bits[i]), 32, rng), threshold)
        filled = kernels.compact_accepted(out, filled, values[:m], flags[:m])
    return out
