"""Vectorized exact samplers on integers: Bernoulli(e^-γ), discrete Laplace, discrete Gaussian.

Each sampler inverts the CDF in float64 from uniform words (63 bits for the discrete Laplace,
32 for a Bernoulli trial), in one pass per block (numpy for Bernoulli trials, a compiled kernel
from `kernels.py` for the discrete Laplace and Gaussian), and sends the draws that land within a
proven float-error margin of a decision boundary to `exact.py`, which settles them with interval
arithmetic and lazily drawn bits. The output therefore follows the exact pmf. The margins are
far above the worst-case error of the float path (a few ulp of log/exp, rounding a word to a
float, the word's own width), so the exact path serves about 4e-14·scale + 2^-31 of the discrete
Laplace draws and 2e-6 of the Bernoulli trials.

The discrete Gaussian of a release (σ of 2^12 to 2^28 steps) is drawn by rejection under a step
envelope (`Strips`): one word per proposal, 99% of proposals accepted, 98% by a table lookup
without exp; the others compare with exp in float64 or, within its margin, exactly."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
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
    """Integers Z with P(Z=z) ∝ exp(-z²/(2σ²)): by strips (`Strips`) for σ in STRIP_SIGMA, else by
    CKS 2020, Alg. 3 (discrete Laplace proposal, rejection)."""
    strips = Strips.of(float(sigma)) if STRIP_SIGMA[0] <= sigma <= STRIP_SIGMA[1] else None
    if strips is not None:
        return strips.sample(_size(size), rng)
    return _cks_gaussian(sigma, size, rng)


def _cks_gaussian(sigma: float, size: int, rng: Rng) -> np.ndarray:
    """CKS 2020, Alg. 3: discrete Laplace proposals of scale floor(σ) + 1, accepted with
    probability exp(-(|y| - σ²/t)²/(2σ²))."""
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


# σ (in integer steps) for which the strip sampler runs: from where its envelope is tight (99%
# acceptance) to where a strip stays narrower than 2^32 (one 32-bit offset per proposal).
STRIP_SIGMA = (4096.0, 2.0**28)
STRIPS = 255
# Relative safety factors of the float computations that lay the strips out (their error is
# below 1e-13 relative), and the margin of the acceptance test (`kernels.strip_proposals`).
_LAYOUT_SAFETY = 1e-12
_SQUEEZE_SAFETY = 1e-9
_STRIP_MARGIN = 1e-12
# Spare words per block for redrawn offsets and refined acceptance uniforms (about 1 in 10^4
# proposals needs one; the caller settles any proposal left when they run out).
_POOL_SHARE, _POOL_MIN = 256, 64


@dataclass(frozen=True)
class Strips:
    """An exact rejection sampler of the half discrete Gaussian w(x) = e^{-x²/2σ²}, x >= 0, under a
    step envelope of 255 strips of equal mass A and a geometric tail of mass A (a discrete,
    vertical form of Marsaglia & Tsang's ziggurat, 2000), signed at the end.

    Strip j covers the integers b_j <= x < b_j + d_j with height A/d_j >= w(b_j), d_j =
    floor(A/w(b_j)) (rounded down with a safety factor, so the bound holds exactly). The tail,
    x = B + G from B = b_255 with G geometric of ratio p = e^{-1/t}, t >= σ²/B, has height
    A(1-p)p^{x-B}, above w(x) wherever A(1-p) >= w(B) (then log w falls at least as fast as the
    envelope's log). A proposal picks one of the 256 parts uniformly and a point under it; it is
    accepted with probability w(x)/height(x), so accepted points follow w exactly (rejection
    sampling, von Neumann 1951). A negative sign turns x into -x, and -0 is rejected, so zero
    is not counted twice. The float decisions carry proven margins; the rest are settled with
    interval arithmetic (`exact.below`, `bernoulli_exp`)."""

    sigma: float
    mass: float  # A
    base: np.ndarray
    width: np.ndarray
    lower: np.ndarray  # below the smallest acceptance probability in each strip, in 2^-23
    upper: np.ndarray  # above the largest, in 2^-23
    scale: np.ndarray  # d_j / A
    tail_start: int  # B
    tail_scale: float  # t

    @staticmethod
    @lru_cache(maxsize=64)
    def of(sigma: float) -> Strips | None:
        """The strips for σ: A from the equal-mass start (√(2π)σ/2 + 1)/256, raised by 0.5% until
        the tail fits; None when a strip would reach 2^32 integers."""
        mass = max(1.01, (math.sqrt(2 * math.pi) * sigma / 2 + 1) / (STRIPS + 1))
        while True:
            layout = _layout(sigma, mass)
            if layout is None:
                return None
            base, width, end, tail = layout
            if tail is not None:
                break
            mass *= 1.005
        inv = 1.0 / (2.0 * sigma * sigma)
        last = (base + width - 1).astype(np.float64)
        scale = width / mass
        # In units of 2^-23: Y's first 23 bits y accept when y + 1 <= lower, reject when y >= upper.
        lower = np.floor(np.exp(-(last * last) * inv) * scale * (1 - _SQUEEZE_SAFETY) * 2**23)
        upper = np.ceil(np.exp(-(base.astype(np.float64) ** 2) * inv) * scale * (1 + _SQUEEZE_SAFETY)
                        * 2**23)
        lower, upper = lower.astype(np.uint64), upper.astype(np.uint64)
        return Strips(sigma, mass, base, width, lower, upper, scale, end, tail)

    def sample(self, n: int, rng: Rng) -> np.ndarray:
        """n draws: the kernel fills `out` in proposal order, leaving places for the proposals it
        cannot settle; those are settled here, and the places of the rejected ones closed up."""
        out = np.empty(n, dtype=np.int64)
        slots = np.empty(_BLOCK, dtype=np.int64)
        kinds = np.empty(_BLOCK, dtype=np.uint8)
        state = np.empty(_BLOCK, dtype=np.uint64)
        inv = 1.0 / (2.0 * self.sigma * self.sigma)
        filled = 0
        while filled < n:
            m = min(int((n - filled) * 1.02) + 64, _BLOCK)  # about 1.01 proposals per value
            raw = uint64(rng, m + m // _POOL_SHARE + _POOL_MIN)
            start = filled
            filled, left, _ = kernels.strip_proposals(
                out, filled, slots, kinds, state, raw[:m], raw[m:], self.base, self.width,
                self.lower, self.upper, self.scale, inv, _STRIP_MARGIN)
            if left:
                rejected = slots[:left][~self._settle(out, slots[:left], kinds[:left], state[:left],
                                                      raw[:left], rng)]
                if rejected.size:
                    kept = np.delete(out[start:filled], rejected - start)
                    out[start : start + kept.size] = kept
                    filled = start + kept.size
        return out

    def _settle(self, out: np.ndarray, slots: np.ndarray, kinds: np.ndarray, state: np.ndarray,
                words: np.ndarray, rng: Rng) -> np.ndarray:
        """Settle the proposals the kernel left (tails all together, then redrawn offsets and
        ambiguous uniforms one by one), writing their values at `slots`; which are accepted."""
        accept = np.zeros(slots.size, dtype=np.bool_)
        tail = np.flatnonzero(kinds == kernels.TAIL)
        if tail.size:
            x, accept[tail] = self._tail(tail.size, rng)
            signs = (words[tail] >> np.uint64(55)) & np.uint64(1)
            out[slots[tail]] = np.where(signs == 1, -x, x)
        for i in np.flatnonzero(kinds != kernels.TAIL):
            word = int(words[i])
            j, negative = word >> 56, word >> 55 & 1
            if kinds[i] == kernels.NEEDS_OFFSET:
                x_i = int(self.base[j]) + _offset(int(self.width[j]), rng)
                u = exact.LazyUniform(word & (2**23 - 1), 23, rng)
            else:
                x_i = abs(int(out[slots[i]]))  # the kernel wrote ±x
                u = exact.LazyUniform(int(state[i]), 23 if kinds[i] == kernels.AMBIGUOUS_23 else 64, rng)
            out[slots[i]] = -x_i if negative else x_i
            accept[i] = not (x_i == 0 and negative) and exact.below(u, self._ratio(x_i, int(self.width[j])))
        return accept

    def _ratio(self, x: int, d: int) -> Callable[[], Any]:
        """w(x)·d/A, enclosed at the current iv precision."""
        s2 = Fraction(self.sigma) ** 2
        a = Fraction(self.mass)
        return lambda: (iv.exp(-iv.mpf(x * x) * s2.denominator / (2 * s2.numerator))
                        * d * a.denominator / a.numerator)

    def _tail(self, k: int, rng: Rng) -> tuple[np.ndarray, np.ndarray]:
        """k tail proposals x = B + G and their acceptance, P = w(x)/(A(1-p)p^G) = e^{-γ} with
        γ = x²/2σ² - G/t + ln A + ln(1-p)."""
        g = np.empty(0, dtype=np.int64)
        while g.size < k:  # a discrete Laplace draw that is >= 0 is geometric of ratio p
            z = discrete_laplace(self.tail_scale, 2 * (k - g.size) + 16, rng)
            g = np.concatenate([g, z[z >= 0]])
        g = g[:k]
        x = self.tail_start + g
        t, mass, sigma = self.tail_scale, self.mass, self.sigma
        gamma = ((x.astype(np.float64) ** 2) / (2 * sigma * sigma) - g / t + math.log(mass)
                 + math.log(-math.expm1(-1.0 / t)))
        s2, tt, a = Fraction(sigma) ** 2, Fraction(t), Fraction(mass)

        def exact_gamma(i: int) -> Any:
            xi, gi = int(x[i]), int(g[i])
            inv_t = iv.mpf(tt.denominator) / tt.numerator
            return (iv.mpf(xi * xi) * s2.denominator / (2 * s2.numerator) - gi * inv_t
                    + iv.log(iv.mpf(a.numerator) / a.denominator) + iv.log(1 - iv.exp(-inv_t)))

        return x, bernoulli_exp(np.maximum(gamma, 0.0), rng, exact_gamma)


def _layout(sigma: float, mass: float) -> tuple[np.ndarray, np.ndarray, int, float | None] | None:
    """Strip starts and widths for mass A, the tail's start B, and its scale t if A(1-p) >= w(B)
    holds with room for the float error (else None there); None when a strip reaches 2^32."""
    inv = 1.0 / (2.0 * sigma * sigma)
    base, width = np.empty(STRIPS, dtype=np.int64), np.empty(STRIPS, dtype=np.int64)
    b = 0
    for j in range(STRIPS):
        d = math.floor(mass * (1 - _LAYOUT_SAFETY) / math.exp(-(b * b) * inv))
        if d >= 2**32:
            return None
        base[j], width[j] = b, d
        b += d
    t = sigma * sigma / b * (1 + _LAYOUT_SAFETY)
    tail_mass = mass * -math.expm1(-1.0 / t) * (1 - _LAYOUT_SAFETY)
    fits = tail_mass >= math.exp(-(b * b) * inv) * (1 + _LAYOUT_SAFETY)
    return base, width, b, t if fits else None


def _offset(d: int, rng: Rng) -> int:
    """A uniform integer in [0, d) from 32-bit words (Lemire 2019, multiply-shift with rejection)."""
    while True:
        m = (int(uint64(rng, 1)[0]) >> 32) * d
        if m & (2**32 - 1) >= (2**32 - d) % d:
            return m >> 32
