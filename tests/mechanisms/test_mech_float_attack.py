"""The floating-point attack on textbook Laplace noise (Mironov 2012), and why bayesdp resists it.

numpy's `Generator.laplace` returns fl(loc ± s·ln(2U)) with U on the grid k/2^53: the outputs from
loc = 0 form an irregular set of doubles that loc = 1 mostly cannot produce, so seeing one output
can reveal the input (ε = ∞). bayesdp releases multiples of one power-of-two grid whatever the
input, with integer noise whose pmf is positive everywhere.
"""

from __future__ import annotations

import math

import numpy as np

from bayesdp import Gaussian, Laplace, rng_for_tests

SCALE = 10.0
N_ATTACK = 2000
_log = np.frompyfunc(math.log, 1, 1)  # the C library's log, which numpy's sampler calls


def numpy_laplace(k: np.ndarray, loc: float, scale: float) -> np.ndarray:
    """numpy's random_laplace on U = k/2^53 (next_double): loc − s·ln(2 − U − U) if U >= 1/2,
    else loc + s·ln(U + U) (numpy/random/src/distributions/distributions.c)."""
    u = k.astype(np.float64) * 2.0**-53
    upper = u >= 0.5
    arg = np.where(upper, 2.0 - u - u, u + u)
    log = np.asarray(_log(arg), dtype=np.float64)
    return np.where(upper, loc - scale * log, loc + scale * log)


def reachable(y: np.ndarray, loc: float, scale: float) -> np.ndarray:
    """Whether numpy's sampler at `loc` can output each y: the output is nondecreasing in k, so
    binary-search the smallest k in [1, 2^53) with output >= y and compare."""
    lo = np.ones(y.size, dtype=np.int64)
    hi = np.full(y.size, 2**53 - 1, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        high_enough = numpy_laplace(mid, loc, scale) >= y
        hi = np.where(high_enough, mid, hi)
        lo = np.where(high_enough, lo, mid + 1)
    hit: np.ndarray = numpy_laplace(lo, loc, scale) == y
    return hit


def numpy_outputs(loc: float, seed: int) -> np.ndarray:
    out: np.ndarray = np.random.default_rng(seed).laplace(loc, SCALE, N_ATTACK)
    return out


def test_reimplementation_matches_numpy_bit_for_bit() -> None:
    for loc in (0.0, 1.0):
        words = np.random.default_rng(9).bit_generator.random_raw(20_000)
        k = (words >> np.uint64(11)).astype(np.int64)
        assert np.all(k > 0)  # U = 0 (redrawn by numpy) has probability 2^-53 per draw
        expected = np.random.default_rng(9).laplace(loc, SCALE, 20_000)
        assert np.array_equal(numpy_laplace(k, loc, SCALE), expected)


def test_naive_numpy_laplace_outputs_are_mostly_unreachable_from_the_neighbour() -> None:
    for loc, neighbour, seed in ((0.0, 1.0, 21), (1.0, 0.0, 22)):
        y = numpy_outputs(loc, seed)
        assert np.all(reachable(y, loc, SCALE))  # sanity: every output comes from its own input
        unreachable = np.count_nonzero(~reachable(y, neighbour, SCALE))
        # One unreachable output already makes the privacy loss infinite. The rate measured in
        # reference/semantics-audit.md §3.1 is 81%; if it is >= 70%, fewer than half of 2,000
        # has probability < 1e-70.
        assert unreachable > N_ATTACK / 2, unreachable


def test_bayesdp_laplace_outputs_from_neighbours_share_one_lattice() -> None:
    mech = Laplace(1.0, sensitivity=1.0)
    rng = rng_for_tests(31)
    n = 100_000
    y0 = mech.release(np.zeros(n), rng=rng)
    y1 = mech.release(np.ones(n), rng=rng)
    g = mech.grid
    z0, z1 = y0 / g, y1 / g
    assert np.all(z0 == np.rint(z0)) and np.all(z1 == np.rint(z1))  # one lattice for both inputs
    assert np.all(np.abs(z0) < 2**53) and np.all(np.abs(z1) < 2**53)
    s0, s1 = 0.0, 1.0 / g  # the inputs in grid steps (1 is a multiple of g)
    # Every output from either input has probability (1-p)/(1+p) p^{|z - s|} > 0 under the other,
    # and the log-ratio is (|z - s1| - |z - s0|)/t with |.| <= |s1 - s0|/t <= ε.
    for z in (z0, z1):
        loss = np.abs(np.abs(z - s1) - np.abs(z - s0)) / mech.steps
        assert np.all(np.isfinite(loss))
        assert loss.max() <= mech.epsilon * (1 + 1e-12)
    # For outputs beyond both inputs the loss is exactly (s1 - s0)/t, just under ε (rounding paid).
    assert (s1 - s0) / mech.steps == mech.epsilon * (1.0 / g) / math.floor(1.0 / g + 1)


def test_bayesdp_gaussian_outputs_from_neighbours_share_one_lattice() -> None:
    mech = Gaussian(epsilon=1.0, delta=1e-5)
    rng = rng_for_tests(32)
    n = 100_000
    g = mech.grid
    z0 = mech.release(np.zeros(n), rng=rng) / g
    z1 = mech.release(np.ones(n), rng=rng) / g
    assert np.all(z0 == np.rint(z0)) and np.all(z1 == np.rint(z1))
    s1 = 1.0 / g
    sigma = mech.sigma_steps
    for z in (z0, z1):
        # log P(z | input 0) − log P(z | input 1) for the discrete Gaussian: finite for every integer.
        loss = ((z - s1) ** 2 - z**2) / (2 * sigma**2)
        assert np.all(np.isfinite(loss))
        # |loss| <= (2|z| + s1) s1/(2σ²): bounded because z is (with probability 1 - 1e-300) within 40σ.
        assert np.abs(loss).max() <= (2 * 40 * sigma + s1) * s1 / (2 * sigma**2)
