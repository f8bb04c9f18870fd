"""Float structure: lowest set bit, lattices, and the exact inverse of numpy's Laplace sampler."""

import numpy as np
import pytest

from bayesdp.audit.floats import NONFINITE_BITS, ZERO_BITS, NumpyLaplace, lowest_bit, off_lattice
from bayesdp.errors import InvalidParameter


def test_lowest_bit_of_known_doubles():
    # 0.1 is 0x3FB999999999999A: exponent -4, lowest mantissa bit 2^-51 of it, so 2^-55.
    values = np.array([1.0, 3.0, 0.5, 0.75, 6.0, -6.0, 2.0**-1074, 0.1, 0.0, np.inf, np.nan])
    expected = [0, 0, -1, -2, 1, 1, -1074, -55, ZERO_BITS, NONFINITE_BITS, NONFINITE_BITS]
    np.testing.assert_array_equal(lowest_bit(values), expected)


def test_off_lattice():
    grid = 2.0**-20
    on = np.arange(-5, 6) * grid
    assert not off_lattice(on, grid).any()
    assert off_lattice(on + grid / 3, grid).all()
    assert off_lattice(np.array([np.nan, np.inf]), grid).all()


def test_replays_numpy_laplace_bit_for_bit():
    # numpy's Generator.laplace takes k = raw >> 11 from one 64-bit word per draw.
    raw = np.random.PCG64(5).random_raw(50_000)
    k = (raw >> np.uint64(11)).astype(np.int64)
    assert k.min() > 0  # k = 0 (redrawn by numpy) does not occur in this stream
    drawn = np.random.Generator(np.random.PCG64(5)).laplace(1.5, 10.0, 50_000)
    np.testing.assert_array_equal(NumpyLaplace(10.0).output(k, 1.5), drawn)


def test_reachability_separates_neighbouring_inputs():
    inverse = NumpyLaplace(10.0)
    y = np.random.default_rng(3).laplace(0.0, 10.0, 5_000)
    # Exact: every output numpy produced from loc = 0 is reachable from loc = 0.
    assert inverse.reachable(y, 0.0).all()
    # Mironov 2012 via semantics-audit.md §3.1: about 81% are unreachable from loc = 1.
    # Binomial(5000, 0.81) has sd 0.0055: the band ±0.04 is 7 sd (false failure < 1e-11).
    assert abs((~inverse.reachable(y, 1.0)).mean() - 0.81) < 0.04
    assert not inverse.reachable(np.array([np.nan, np.inf]), 0.0).any()


def test_scale_is_validated():
    with pytest.raises(InvalidParameter, match="scale"):
        NumpyLaplace(0.0)
