"""Every table entry point finishes in time proportional to its data or refuses its parameters."""

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.errors import InvalidParameter
from bayesdp.tables.selection import PartitionSelection


@pytest.fixture
def small() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({"user": rng.integers(0, 300, 3000), "g": rng.integers(0, 5, 3000),
                         "v": rng.uniform(0, 1, 3000)})


@pytest.mark.timeout(30)
def test_tiny_delta_with_private_keys_releases_quickly(small):
    q = bdp.table(small, "user").group_by("g").agg(n=bdp.count())
    r = q.release(1.0, 1e-300, max_groups_per_unit=1, rng=bdp.rng_for_tests(1))
    assert r.plan.selection is not None and r.plan.selection.threshold() > 100


@pytest.mark.timeout(30)
def test_huge_max_groups_per_unit_releases_quickly(small):
    q = bdp.table(small, "user").group_by("g").agg(n=bdp.count())
    with pytest.warns(UserWarning, match="almost certainly no group"):
        r = q.release(1.0, 1e-6, max_groups_per_unit=10**9, rng=bdp.rng_for_tests(2))
    assert r.plan.selection.threshold() > 10**9


@pytest.mark.timeout(30)
def test_per_group_delta_below_the_normal_floats_is_refused(small):
    q = bdp.table(small, "user").group_by("g").agg(n=bdp.count())
    with pytest.raises(InvalidParameter, match="per-group"):
        q.plan(1.0, 1e-300, max_groups_per_unit=10**9)


@pytest.mark.timeout(30)
def test_selection_threshold_is_closed_form_at_extreme_parameters():
    # A per-group ε of 1e-9 puts the threshold near 1.3e10 units: the recurrence would need that
    # many steps; the closed form answers at once and agrees with π at the threshold.
    sel = PartitionSelection(1.0, 1e-6, 10**9)
    t = sel.threshold()
    p = sel.keep_probability(np.array([t - 1, t]))
    assert p[0] < 0.5 <= p[1]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_million_public_keys_release_in_time_proportional_to_them(small):
    keys = list(range(1_000_000))
    r = bdp.table(small, "user").group_by("g", keys=keys).agg(n=bdp.count()).release(
        1.0, max_groups_per_unit=5, rng=bdp.rng_for_tests(3))
    assert len(r) == 1_000_000
    assert r.diagnostics.dropped_by_keys == 0 and r.diagnostics.rows == len(small)


@pytest.mark.timeout(30)
def test_rows_outside_public_keys_are_counted(small):
    r = bdp.table(small, "user").group_by("g", keys=[0, 1, 99]).agg(n=bdp.count()).release(
        1.0, max_groups_per_unit=5, rng=bdp.rng_for_tests(4))
    assert r.diagnostics.dropped_by_keys == int((~small["g"].isin([0, 1])).sum())


@pytest.mark.timeout(30)
def test_two_hundred_thousand_bins_release_quickly(small):
    q = bdp.table(small, "user").group_by("g", keys=[0, 1]).agg(
        h=bdp.histogram("v", bins=200_000, bounds=(0, 1)))
    r = q.release(1.0, max_groups_per_unit=5, rng=bdp.rng_for_tests(5))
    assert r.estimates["h"].value.shape == (2, 200_000)
