"""Fuzz: the table aggregates' constructors and a release with any parameters."""

import numpy as np
import pandas as pd
import pytest
from fuzzing import SLOW_FUZZ, counts, error_or_finite, numbers, positive, probabilities
from hypothesis import given
from hypothesis import strategies as st

import bayesdp as bdp

bounds = st.tuples(numbers, numbers)
kinds = st.sampled_from(["count", "count_units", "sum", "mean", "std", "quantile", "histogram"])


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({"u": rng.integers(0, 40, 200), "g": rng.choice(["a", "b", "c"], 200),
                         "k": rng.integers(0, 4, 200), "v": rng.normal(0, 5, 200)})


def _aggregate(kind, lo_hi, q, bins):
    if kind in ("count", "count_units"):
        return getattr(bdp, kind)()
    if kind == "quantile":
        return bdp.quantile("v", q, bounds=lo_hi)
    if kind == "histogram":
        return bdp.histogram("v", bins=bins, bounds=lo_hi)
    return getattr(bdp, kind)("v", bounds=lo_hi)


@SLOW_FUZZ
@given(kind=kinds, lo_hi=bounds, q=probabilities, bins=counts, epsilon=positive,
       delta=probabilities, groups=counts, rows=counts,
       keys=st.sampled_from([None, "private", ["a", "b", "z"], [1, 2], [0, 1, 2.5], []]),
       noise=st.sampled_from(["laplace", "gaussian"]), alpha=probabilities,
       where=st.sampled_from([None, "v > 0", "v > 1e9"]))
def test_release(frame, kind, lo_hi, q, bins, epsilon, delta, groups, rows, keys, noise, alpha,
                 where):
    def run():
        t = bdp.table(frame, "u")
        if where is not None:
            t = t.where(where)
        agg = _aggregate(kind, lo_hi, q, bins)
        if keys is None:
            query = t.agg(x=agg)
        else:
            column = "k" if keys and isinstance(keys[0], int | float) else "g"
            query = t.group_by(column, keys=None if keys == "private" else keys).agg(x=agg)
        release = query.release(epsilon, delta, max_groups_per_unit=groups,
                                max_rows_per_group=rows, noise=noise, alpha=alpha,
                                rng=bdp.rng_for_tests(3))
        return release.to_pandas()

    error_or_finite(run)
