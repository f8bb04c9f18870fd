"""Vectorized exact samplers on integers: Bernoulli(e^-γ), discrete Laplace, discrete Gaussian.

Each sampler inverts the CDF in float64 from uniform words (63 bits for the discrete Laplace,
32 for a Bernoulli trial), in one vectorized pass per block with no loop per sample, and sends
the draws that land within a proven float-error margin of a decision boundary to `exact.py`,
which settles them with interval arithmetic and lazily drawn bits. The output therefore follows
the exact pmf. The margins are far above the worst-case error of the float path (a few ulp of
log/exp, rounding a word to a float, the word's own width), so the exact path serves about
3e-12·scale of the discrete Laplace draws and 2e-6 of the Bernoulli trials."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from mpmath import iv

from bayesdp.noise import exact
from bayesdp.noise.random import Rng, uint64

# Relative margin around a decision boundary inside which the float path is not trusted.
TOLERANCE = 1e-13
_TWO63 = 2.0**-63
_TWO32 = 2.0**-32
_MASK63 = np.uint64(2**63 - 1)
_SMALL_WORD = np.uint64(2**44)
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
    for start in range(0, n, _BLOCK):
        block = out[start : start + _BLOCK]
        magnitude, negative = _dlap_magnitudes(t, block.size, rng)
        np.copyto(block, magnitude, casting="unsafe")
        _apply_sign(block, negative)
    return out


def _apply_sign(values: np.ndarray, negative: np.ndarray) -> None:
    """values <- -values where negative, as (v XOR s) - s with s = 0 or -1 (cheaper than a masked negate)."""
    s = negative.astype(np.int64)
    np.negative(s, out=s)
    values ^= s
    values -= s


def _dlap_magnitudes(t: float, size: int, rng: Rng) -> tuple[np.ndarray, np.ndarray]:
    """|Z| as exact integers in float64, and the signs, for `size` discrete Laplace draws."""
    words = uint64(rng, size)
    u = words & _MASK63
    negative = words != u
    # |Z| = floor(r), r = -(ln U + ln((1+p)/2)) t with U in [u, u+1) 2^-63 (exact.geometric_magnitude);
    # the word's width moves ln U by at most 2^-44 once u >= 2^44, well inside the margin below.
    r = u.astype(np.float64)
    r *= _TWO63
    np.log(r, out=r)
    r += math.log1p(math.exp(-1.0 / t)) - math.log(2.0)
    r *= -t
    magnitude = np.floor(r)
    r -= magnitude
    # Below 2^44 the word's own width could exceed the margin: settle those exactly.
    margin = TOLERANCE * (1.0 + 15.0 * t)
    r -= 0.5
    ambiguous = np.abs(r, out=r) >= 0.5 - margin
    ambiguous |= u < _SMALL_WORD
    for i in np.flatnonzero(ambiguous):
        magnitude[i] = exact.geometric_magnitude(exact.LazyUniform(int(u[i]), 63, rng), t)
    return magnitude, negative


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
        q = Fraction(g)
        return lambda: iv.exp(-iv.mpf(q.numerator) / q.denominator)
    return lambda: iv.exp(-exact_gamma(i))


def discrete_gaussian(sigma: float, size: int, rng: Rng) -> np.ndarray:
    """Integers Z with P(Z=z) ∝ exp(-z²/(2σ²)) (CKS 2020, Alg. 3: discrete Laplace proposal, rejection)."""
    n = _size(size)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        _dgauss_block(float(sigma), out[start : start + _BLOCK], rng)
    return out


def _dgauss_block(sigma: float, out: np.ndarray, rng: Rng) -> None:
    s2 = Fraction(sigma) ** 2
    tau = math.floor(sigma) + 1
    center = s2 / tau
    c_f, two_s2 = float(center), float(2 * s2)
    filled = 0
    while filled < out.size:
        magnitude, negative = _dlap_magnitudes(tau, int((out.size - filled) * 1.35) + 16, rng)
        gamma = magnitude - c_f
        np.square(gamma, out=gamma)
        gamma /= two_s2

        def exact_gamma(i: int, magnitude: np.ndarray = magnitude) -> object:
            q = (int(magnitude[i]) - center) ** 2 / (2 * s2)
            return iv.mpf(q.numerator) / q.denominator

        kept = bernoulli_exp(gamma, rng, exact_gamma)
        take = min(int(np.count_nonzero(kept)), out.size - filled)
        chosen = out[filled : filled + take]
        np.copyto(chosen, magnitude[kept][:take], casting="unsafe")
        _apply_sign(chosen, negative[kept][:take])
        filled += take
