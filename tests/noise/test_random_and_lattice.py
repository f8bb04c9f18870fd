from __future__ import annotations

import numpy as np
import pytest

from bayesdp.errors import DataError, InvalidParameter
from bayesdp.noise import grid_for, resolve_rng, secure_rng, snap, unsnap


def test_secure_generators_are_independent_streams() -> None:
    a = secure_rng().integers(0, 2**63, size=4)
    b = secure_rng().integers(0, 2**63, size=4)
    assert not np.array_equal(a, b)  # equal with probability 2^-252


def test_resolve_rng_refuses_other_objects() -> None:
    with pytest.raises(InvalidParameter, match="rng"):
        resolve_rng(42)  # type: ignore[arg-type]
    assert isinstance(resolve_rng(None), np.random.Generator)


def test_grid_is_a_power_of_two_about_a_millionth_of_the_scale() -> None:
    for scale in [1e-9, 0.37, 1.0, 3.0, 1e12]:
        g = grid_for(scale)
        assert np.log2(g) == int(np.log2(g))
        assert 2.0**20 <= scale / g < 2.0**21


def test_snap_rounds_to_nearest_and_unsnap_is_exact() -> None:
    g = 0.25
    steps = snap(np.array([0.1, 0.13, -0.38, 7.0]), g)
    assert steps.tolist() == [0, 1, -2, 28]
    assert unsnap(steps, g).tolist() == [0.0, 0.25, -0.5, 7.0]


def test_snap_refuses_values_beyond_the_grid() -> None:
    with pytest.raises(DataError, match="too large for the noise grid"):
        snap(np.array([1.0, 2.0**70]), 1.0)
