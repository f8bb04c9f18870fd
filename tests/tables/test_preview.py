"""The preview tells the truth: its expected half-widths and errors are what releases realise."""

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.noise import rng_for_tests

GROUPS = 1000


def _query(n: int, mu: float):
    """GROUPS public groups of n rows, one per person, values evenly spread with mean mu in [0, 10]."""
    half = min(mu, 10 - mu)
    x = np.linspace(mu - half, mu + half, n)
    df = pd.DataFrame({"g": np.repeat(np.arange(GROUPS), n), "x": np.tile(x, GROUPS)})
    return bdp.table(df, None).group_by("g", keys=list(range(GROUPS))).agg(
        n=bdp.count(), s=bdp.sum("x", bounds=(0, 10)), m=bdp.mean("x", bounds=(0, 10)))


@pytest.mark.parametrize("n", [100, 2000])  # a mean's small-group stage, and its re-centred one
def test_preview_figures_are_what_releases_realise(n):
    """Each realised figure averages GROUPS independent groups (|noise| has coefficient of
    variation <= 1, so the average's is <= 3.2%) and a mean's preview averages 4,000 simulated
    draws (<= 1.6%): a 25% gap is over 6 standard deviations, false-failure probability < 1e-6
    per assertion by Bernstein's inequality for these sub-exponential averages."""
    q = _query(n, 5.0)
    preview = q.preview(3.0, group_size=n, rng=rng_for_tests(20)).set_index("aggregate")
    out = q.release(3.0, rng=rng_for_tests(21)).to_pandas()
    truth = {"n": n, "s": 5.0 * n, "m": 5.0}
    for name, value in truth.items():
        half_width = ((out[f"{name}_high"] - out[f"{name}_low"]) / 2).mean()
        error = (out[name] - value).abs().mean()
        assert half_width == pytest.approx(preview.loc[name, "half_width"], rel=0.25), name
        assert error == pytest.approx(preview.loc[name, "abs_error"], rel=0.25), name
        assert not preview.loc[name, "upper_bound"]
    assert preview.loc["n", "noise_scale"] == 1.0 and np.isnan(preview.loc["m", "noise_scale"])


def test_a_mean_off_centre_stays_within_the_maximum():
    """Realised averages over GROUPS groups (as above): within 25% above the simulated maximum
    only with probability < 1e-6."""
    q = _query(2000, 7.5)
    preview = q.preview(3.0, group_size=2000, rng=rng_for_tests(22)).set_index("aggregate")
    out = q.release(3.0, rng=rng_for_tests(23)).to_pandas()
    assert ((out["m_high"] - out["m_low"]) / 2).mean() <= 1.25 * preview.loc["m", "half_width_max"]
    assert (out["m"] - 7.5).abs().mean() <= 1.25 * preview.loc["m", "abs_error_max"]
    assert preview.loc["m", "half_width_max"] > preview.loc["m", "half_width"]


def test_bounds_are_marked():
    t = bdp.table(pd.DataFrame({"x": np.arange(10.0)}), None)
    p = t.agg(sd=bdp.std("x", bounds=(0, 10)), med=bdp.quantile("x", 0.5, bounds=(0, 10))).preview(
        1.0, group_size=1000).set_index("aggregate")
    assert p["upper_bound"].all() and p["abs_error"].isna().all() and p["noise_scale"].isna().all()


def test_a_preview_is_repeatable():
    q = _query(10, 5.0)
    pd.testing.assert_frame_equal(q.preview(1.0, group_size=300), q.preview(1.0, group_size=300))


@pytest.mark.parametrize("share", [0.5, 0.1, 0.01, 0.001])
def test_a_share_near_zero_stays_within_the_maximum(share):
    """A share of 555,849 rows at ε = 0.1: its errors grow as it nears 0 until clipping at 0 cuts
    them, so the maxima must be taken just off the bound. The realised figures average 4,000
    groups run through the release's estimator (`_simulated`, fed exact aggregates, another
    seed); each average and the preview's have relative standard error under 1.2%, so realised
    above 1.1 x the maximum is over 5.8 standard deviations of their difference: false-failure
    probability < 1e-6 per assertion."""
    n = 555_849
    q = bdp.table(pd.DataFrame({"x": [0.0, 1.0]}), None).agg(s=bdp.share("x > 0"))
    preview = q.preview(0.1, group_size=n).iloc[0]
    step = q.plan(0.1).steps["s"]
    half_width, error = step.aggregate._simulated(step, 0.05, n, share, rng=rng_for_tests(24))
    assert half_width <= 1.1 * preview["half_width_max"]
    assert error <= 1.1 * preview["abs_error_max"]
