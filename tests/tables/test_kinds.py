"""One class per aggregate kind: a new kind is one class, and every kind rebuilds from its spec."""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.mechanisms import Laplace
from bayesdp.tables.accuracy import one_noise
from bayesdp.tables.aggregates import CONSTRUCTORS, Noisy
from bayesdp.tables.estimate import plus_minus
from bayesdp.tables.spec import aggregate
from bayesdp.tables.sums import Moments


@dataclass(frozen=True)
class SumOfSquares(Moments):
    """Σx² of the values clipped to [lo, hi]: one row moves it by at most max(lo², hi²)."""

    kind: ClassVar[str] = "sum_of_squares"
    noisy: ClassVar[tuple[Noisy, ...]] = (Noisy("squares", 1.0),)

    def sensitivity(self, part, max_rows):
        return max_rows * max(self.bounds[0] ** 2, self.bounds[1] ** 2)

    def estimate(self, step, exact, index, alpha, *, rng, full_grid):
        return plus_minus(step, "squares", self.moments(exact, index)[:, 2], alpha, rng=rng)

    def value_range(self):
        return 0.0, np.inf

    def accuracy(self, step, alpha, n, *, rng):
        return one_noise(step, alpha)


def test_a_kind_defined_in_one_class_plugs_into_the_builder():
    # Statistical, seeded: each group's exact clipped Σx² lies in its interval at α = 1e-7, so
    # the assertion over the two groups fails with probability at most 2e-7.
    rng = bdp.rng_for_tests(1)
    frame = pd.DataFrame({"u": np.arange(4000), "g": rng.choice(["a", "b"], 4000),
                          "x": rng.uniform(0.0, 12.0, 4000)})
    q = bdp.table(frame, "u").group_by("g", keys=["a", "b", "c"]).agg(
        n=bdp.count(), sq=SumOfSquares("x", bounds=(0.0, 10.0)))
    plan = q.plan(1.0, max_groups_per_unit=1, max_rows_per_group=1)
    part = plan.steps["sq"].parts["squares"]
    assert part.sensitivity == 100.0 and isinstance(part.mechanism, Laplace)
    assert part.mechanism.epsilon == pytest.approx(0.5)
    r = q.release(1.0, max_groups_per_unit=1, alpha=1e-7, rng=bdp.rng_for_tests(2)).to_pandas()
    assert list(r.columns) == ["g", "n", "n_low", "n_high", "sq", "sq_low", "sq_high"]
    exact = (frame["x"].clip(0, 10) ** 2).groupby(frame["g"]).sum()
    for key in ("a", "b"):
        row = r[r["g"] == key].iloc[0]
        assert row["sq_low"] <= exact[key] <= row["sq_high"]
    empty = r[r["g"] == "c"].iloc[0]
    assert 0.0 <= empty["sq_low"] <= empty["sq"] <= empty["sq_high"]
    assert "sum_of_squares('x', bounds=(0, 10))" in q.describe()
    preview = q.preview(1.0, max_groups_per_unit=1, group_size=100).set_index("aggregate")
    assert preview.loc["sq", "noise_scale"] == pytest.approx(200.0, rel=1e-5)
    assert not preview.loc["sq", "upper_bound"]


KINDS = [bdp.count_units(), bdp.count(weight=2), bdp.sum("x", (0, 5), epsilon=0.1),
         bdp.mean("x * 2", bounds=(-1, 1)), bdp.share("x > 1"), bdp.std("x", (0, 3)),
         bdp.quantile("x", 0.25, bounds=(0, 9)), bdp.histogram("x", bins=[0, 1, 5]),
         bdp.histogram("x", bins=3, bounds=(0, 6)), bdp.tables.count_where("x > 1")]


@pytest.mark.parametrize("agg", KINDS, ids=lambda a: a.describe())
def test_every_kind_rebuilds_from_its_spec(agg):
    # The spec is what the service's client sends: a share stays a share, not a mean.
    assert set(CONSTRUCTORS) >= {"count_units", "count", "sum", "mean", "share", "std",
                                 "quantile", "histogram"}
    assert aggregate("x", agg.spec()) == agg


def test_count_of_a_column_is_an_integer():
    # SQL's COUNT(x) counts the rows where x is not null: a count, released as an integer with
    # an integer interval, like COUNT(*) (it came out as 5935.084).
    df = pd.DataFrame({"u": np.arange(100), "g": np.repeat(["a", "b"], 50),
                       "x": np.where(np.arange(100) % 3, 1.0, np.nan)})
    out = bdp.sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
                  "privacy_unit_column = u) g, COUNT(x) AS known, COUNT(*) AS n FROM t GROUP BY g",
                  {"t": df}, rng=bdp.rng_for_tests(3)).to_pandas()
    assert len(out)
    for col in ("known", "known_low", "known_high", "n"):
        assert (out[col] == np.round(out[col])).all(), col
