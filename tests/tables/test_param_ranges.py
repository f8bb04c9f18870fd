"""Table releases: parameter ranges enforced up front, finite results at the edges."""

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.errors import InvalidParameter


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.DataFrame({"u": [1, 2, 3, 4], "v": [1.0, 2.0, 3.0, 4.0]})


def test_bounds_beyond_1e100_are_refused_not_an_overflow():
    with pytest.raises(InvalidParameter, match=r"bounds\[0\]=-1e\+300"):
        bdp.mean("v", bounds=(-1e300, 1e300))


def test_epsilon_beyond_700_is_refused(frame):
    q = bdp.table(frame, "u").agg(n=bdp.count())
    with pytest.raises(InvalidParameter, match="epsilon=1e\\+300"):
        q.release(1e300)


def test_a_filter_removing_every_row_gives_a_finite_ungrouped_release(frame):
    q = bdp.table(frame, "u").where("v > 100").agg(
        q=bdp.quantile("v", 0.5, bounds=(0, 10)), m=bdp.mean("v", bounds=(0, 10)),
        h=bdp.histogram("v", bins=3, bounds=(0, 10)))
    df = q.release(1.0, rng=bdp.rng_for_tests(3)).to_pandas()
    assert len(df) == 1 and np.all(np.isfinite(df.to_numpy(dtype=float)))
    assert 0 <= df["q"].iloc[0] <= 10
