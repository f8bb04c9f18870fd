"""Numeric cells honour `bins`; integer columns stay integer, one cell per value when they fit."""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.synth.encode import numeric_spec


@pytest.mark.parametrize(("bounds", "bins"), [((21, 36), 15), ((15, 45), 30), ((0, 3), 16), ((0, 1000), 7)])
def test_integer_cells_honour_bins(bounds, bins):
    values = bounds[1] - bounds[0] + 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = numeric_spec("age", pd.Series([bounds[0]], dtype="int64"), bounds, bins)
    assert [str(w.message).endswith(f"pass bins >= {values} for one cell per value")
            for w in caught] == ([True] if values > bins else [])
    assert spec.size == min(bins, values)
    widths = np.diff(spec.edges)
    assert spec.edges[0] == bounds[0] - 0.5 and spec.edges[-1] == bounds[1] + 0.5
    assert np.all(widths == np.round(widths)) and widths.max() - widths.min() <= 1


def test_a_small_integer_domain_keeps_its_values():
    """A 0/1 column and ages 21 to 36 come back as the same integers, never in between."""
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"work": rng.integers(0, 2, 2000), "age": rng.integers(21, 37, 2000)})
    syn = bdp.synthesize(df, epsilon=2.0, bounds={"work": (0, 1), "age": (21, 36)}, bins=16,
                         method="independent", rng=bdp.rng_for_tests(4))
    rows = syn.sample(4000, rng=bdp.rng_for_tests(5))
    assert rows["work"].dtype == df["work"].dtype and set(rows["work"]) <= {0, 1}
    assert set(rows["age"]) <= set(range(21, 37))
    # Each of 2 work cells has ~1000 rows and noise of scale ~1: the synthetic share of zeros is
    # within 0.1 of the real one except with probability far below 1e-6 (4000 samples, sd 0.008).
    assert abs((rows["work"] == 0).mean() - (df["work"] == 0).mean()) < 0.1
