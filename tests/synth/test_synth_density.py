"""Perturbed, smoothed and series densities (Wasserman & Zhou 2010, Sec. 4) and PrivateDensity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from synth_stats import chi2_upper, within_binomial

from bayesdp import rng_for_tests
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.synth import perturbed_histogram, series_density, smoothed_histogram
from bayesdp.synth.density import dlaplace_halfwidth
from bayesdp.synth.series import RESOLUTION, cosine_basis


def test_noise_scale_follows_the_neighbour_relation():
    x = rng_for_tests(1).random(500)
    rep = perturbed_histogram(x, (0, 1), 0.5, bins=8, relation="replace_one", rng=rng_for_tests(2))
    add = perturbed_histogram(x, (0, 1), 0.5, bins=8, rng=rng_for_tests(2))  # the default
    assert str(add.guarantee) == "ε=0.5 per row (add/remove neighbours)"
    assert rep.noise_scale == 4.0  # 2/ε, not the variance 8/ε²
    assert add.noise_scale == 2.0
    assert rep.guarantee.epsilon == 0.5 and rep.guarantee.relation == "replace_one"
    assert add.guarantee.relation == "add_remove"


def test_intervals_cover_the_true_counts_at_the_exact_rate():
    # 20,000 cells with noise scale 2: the number of cells whose true count falls outside its
    # interval is Binomial(20000, q), q = P(|Z| > w) exactly; checked at 1e-7 per side.
    rng = rng_for_tests(3)
    x = rng.random(40_000)
    dens = perturbed_histogram(x, (0, 1), 1.0, bins=20_000, relation="replace_one", rng=rng)
    lo, hi = dens.intervals(0.1)
    truth = np.histogram(x, bins=20_000, range=(0, 1))[0]
    w = dlaplace_halfwidth(2.0, 0.1)
    p = math.exp(-1 / 2.0)
    q = 2 * p ** (w + 1) / (1 + p)
    assert q <= 0.1 < 2 * p**w / (1 + p)  # w is the smallest half-width with coverage 0.9
    miss = int(((truth < lo) | (truth > hi)).sum())
    assert within_binomial(np.array([miss]), truth.size, np.array([q]))


def test_density_is_a_probability_and_cdf_pdf_agree():
    rng = rng_for_tests(4)
    dens = perturbed_histogram(rng.beta(2, 5, 5000), (0, 1), 1.0, relation="replace_one", rng=rng)
    assert dens.bins == (math.ceil(5000 ** (1 / 3)),)  # m ≍ n^{1/3}
    assert np.all(dens.probs >= 0) and math.isclose(dens.probs.sum(), 1.0)
    e = dens.edges[0]
    mids = 0.5 * (e[1:] + e[:-1])
    np.testing.assert_allclose(dens.pdf(mids) * np.diff(e), dens.probs)
    np.testing.assert_allclose(dens.cdf(e), np.concatenate([[0], np.cumsum(dens.probs)]), atol=1e-12)
    assert dens.pdf([-0.1, 1.1]).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("dim", [2, 3])
def test_multivariate_histogram(dim):
    rng = rng_for_tests(5)
    x = rng.random((20_000, dim))
    dens = perturbed_histogram(x, [(0, 1)] * dim, 2.0, relation="replace_one", rng=rng)
    per_dim = math.ceil(20_000 ** (1 / (dim + 2)))
    assert dens.bins == (per_dim,) * dim
    assert math.isclose(float(dens.cdf(np.ones(dim))[0]), 1.0)
    assert float(dens.cdf(np.zeros(dim))[0]) == 0.0
    pts = dens.sample(1000, rng=rng)
    assert pts.shape == (1000, dim) and (pts >= 0).all() and (pts <= 1).all()


def test_sample_draws_cells_by_their_probability():
    # 200,000 points: each cell's count is Binomial(k, p_j); every cell within its band (1e-7 total).
    rng = rng_for_tests(6)
    dens = perturbed_histogram(rng.beta(2, 5, 5000), (0, 1), 1.0, bins=12, relation="replace_one", rng=rng)
    k = 200_000
    pts = dens.sample(k, rng=rng)
    counts = np.histogram(pts, bins=dens.edges[0])[0]
    assert within_binomial(counts, k, dens.probs)


def test_add_remove_spends_a_little_on_n_for_the_default_bins():
    rng = rng_for_tests(7)
    dens = perturbed_histogram(rng.random(8000), (0, 1), 1.0, relation="add_remove", rng=rng)
    assert dens.noise_scale == pytest.approx(1 / 0.95)
    assert dens.guarantee.epsilon == 1.0
    # ñ = 8000 + Z, Z discrete Laplace of scale 20: P(|Z| > 322) < 1e-7, so ⌈ñ^{1/3}⌉ is 20 or 21.
    assert dens.bins[0] in (20, 21)


def test_clipped_records_are_counted():
    x = np.array([-1.0, 0.2, 0.5, 2.0, 3.0])
    dens = perturbed_histogram(x, (0, 1), 1.0, bins=2, relation="replace_one", rng=rng_for_tests(8))
    assert dens.clipped == 3


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"bins": 0}, InvalidParameter),
        ({"bins": [3, 3]}, InvalidParameter),
        ({"epsilon": 0}, InvalidParameter),
        ({"bounds": (1, 0)}, InvalidParameter),
        ({"relation": "swap"}, InvalidParameter),
        ({"data": np.zeros((10, 4))}, DataError),
        ({"data": [0.1, float("nan")]}, DataError),
    ],
)
def test_bad_input(kwargs, error):
    args = {"data": [0.1, 0.2, 0.7], "bounds": (0, 1), "epsilon": 1.0} | kwargs
    with pytest.raises(error):
        perturbed_histogram(**args)


def test_bad_sample_size_and_missing_intervals():
    dens = series_density(rng_for_tests(9).random(100), (0, 1), 1.0, rng=rng_for_tests(9))
    with pytest.raises(InvalidParameter, match="k"):
        dens.sample(0)
    with pytest.raises(InvalidParameter, match="intervals"):
        dens.intervals(0.05)


def test_smoothed_histogram_meets_its_privacy_condition_and_mixture():
    rng = rng_for_tests(10)
    n = 20_000
    x = rng.beta(2, 5, n)
    rel = smoothed_histogram(x, (0, 1), 1.0, rng=rng)
    m = rel.density.bins[0]
    k = rel.points.size
    assert m == math.ceil(n ** (1 / 5)) and k == math.ceil(n ** (3 / 5))
    # W&Z eq. (6) with equality: k log(1 + (1-δ)m/(nδ)) = ε.
    assert k * math.log1p((1 - rel.mix) * m / (n * rel.mix)) == pytest.approx(1.0, rel=1e-12)
    # Points follow (1-δ) C_j/n + δ/m per cell: Pearson statistic below its 1 - 1e-7 quantile.
    p = (1 - rel.mix) * np.histogram(x, bins=m, range=(0, 1))[0] / n + rel.mix / m
    obs = np.histogram(rel.points, bins=m, range=(0, 1))[0]
    assert ((obs - k * p) ** 2 / (k * p)).sum() < chi2_upper(m - 1)


def test_series_density_is_the_cosine_estimate_when_noise_is_negligible():
    rng = rng_for_tests(11)
    x = rng.beta(3, 3, 4000)
    dens = series_density(x, (0, 1), 1e9, terms=8, rng=rng)
    beta = cosine_basis(x, 8).mean(axis=0)
    mid = (np.arange(RESOLUTION) + 0.5) / RESOLUTION
    f = np.maximum(1 + cosine_basis(mid, 8) @ beta, 0)
    # Coefficient noise has scale 2√2·8/(4000·1e9) < 1e-11, so the match is exact to 1e-9.
    np.testing.assert_allclose(dens.probs, f / f.sum(), atol=1e-9)
    assert dens.guarantee.relation == "replace_one"


def test_ise_reproduces_the_reference_rates():
    # Reference note (W&Z rates, measured): Beta(2, 5), ε = 1, mean ISE over 30 releases is
    # 5.2e-2 / 2.7e-3 (perturbed) and 2.5e-1 / 5.9e-2 (smoothed) at n = 1e3 / 1e5. Per-release
    # sds from a 60-release pilot (seeds 0-59): 4.5e-3, 1.4e-4, 3.9e-2, 7.9e-3; each band is
    # 5.3 sds of a 30-release mean (false failure < 1e-7 each) plus the note's 2-digit rounding.
    from scipy import stats

    f = stats.beta(2, 5).pdf
    grid = (np.arange(20_000) + 0.5) / 20_000
    rng = rng_for_tests(100)
    mean = {}
    for n in (1_000, 100_000):
        pert, smooth = [], []
        for _ in range(30):
            x = rng.beta(2, 5, n)
            dens = perturbed_histogram(x, (0, 1), 1.0, relation="replace_one", rng=rng)
            pert.append(np.mean((dens.pdf(grid) - f(grid)) ** 2))
            rel = smoothed_histogram(x, (0, 1), 1.0, rng=rng)
            smooth.append(np.mean((rel.density.pdf(grid) - f(grid)) ** 2))
        mean[n] = (np.mean(pert), np.mean(smooth))
    band = 5.3 / math.sqrt(30)
    assert abs(mean[1_000][0] - 5.2e-2) <= band * 4.5e-3 + 5e-4
    assert abs(mean[100_000][0] - 2.7e-3) <= band * 1.4e-4 + 5e-5
    assert abs(mean[1_000][1] - 2.5e-1) <= band * 3.9e-2 + 5e-3
    assert abs(mean[100_000][1] - 5.9e-2) <= band * 7.9e-3 + 5e-4
    # Perturbed slope over two decades near W&Z's -2/3 (its sd is about 0.004 here).
    slope = math.log(mean[100_000][0] / mean[1_000][0]) / math.log(100)
    assert -0.70 < slope < -0.62
