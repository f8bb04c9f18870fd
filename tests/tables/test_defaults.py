"""Defaults that do not drop data silently, and the privacy unit's human name (issue 15, §3, §4)."""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.errors import CuratorWarning, InvalidParameter
from bayesdp.noise import rng_for_tests


@pytest.fixture
def panel() -> pd.DataFrame:
    """A person-year panel: 300 persons, each in all 8 years (as plm's Males wage panel)."""
    return pd.DataFrame({"nr": np.repeat(np.arange(300), 8), "year": np.tile(np.arange(1980, 1988), 300),
                         "wage": np.tile(np.linspace(0.5, 3.0, 8), 300)})


def test_grouping_rows_of_a_unit_needs_max_groups_per_unit(panel):
    q = bdp.table(panel, "nr", unit_name="person").group_by("year", keys=list(range(1980, 1988)))
    q = q.agg(persons=bdp.count_units())
    with pytest.raises(InvalidParameter, match=r"max_groups_per_unit is required .* one person .* 8"):
        q.release(1.0)
    with pytest.raises(InvalidParameter, match="max_groups_per_unit is required"):
        q.preview(1.0)
    # No unit column (each row a person) or no grouping: nothing to choose.
    bdp.table(panel, None).group_by("year", keys=[1980]).agg(n=bdp.count()).release(1.0)
    bdp.table(panel, "nr").agg(n=bdp.count_units()).release(1.0)


def test_bounding_that_drops_most_rows_warns_the_curator(panel):
    q = bdp.table(panel, "nr").group_by("year", keys=list(range(1980, 1988))).agg(n=bdp.count_units())
    with pytest.warns(CuratorWarning, match=r"curator only .* dropped 2,100 of 2,400 rows \(88%\)"):
        q.release(1.0, max_groups_per_unit=1, rng=rng_for_tests(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q.release(1.0, max_groups_per_unit=8, rng=rng_for_tests(0))


def test_the_unit_has_a_human_name(panel):
    r = bdp.table(panel, "nr", unit_name="person").agg(n=bdp.count_units()).release(
        1.0, rng=rng_for_tests(1))
    assert str(r.guarantee) == "ε=1 per person (add/remove neighbours)"
    assert "one person" in r.explain() and "per person" in r.explain()
    assert "one nr" not in r.explain() and "per nr" not in r.explain()
    assert bdp.table(panel, "nr").agg(n=bdp.count()).plan(1.0).guarantee.unit == "nr"
    with pytest.raises(InvalidParameter, match="unit_name"):
        bdp.table(panel, "nr", unit_name="")
