"""The quantile's exponential mechanism: its output density moves by at most e^ε per unit."""

import numpy as np
import pytest

import bayesdp.tables as bdp
from bayesdp import rng_for_tests
from bayesdp.tables.estimate import grid_intervals, interval_scores
from bayesdp.tables.plan import make_plan

LO, HI, CELLS = 0.0, 1.0, 64
WIDTH = (HI - LO) / CELLS


def _density(cells: np.ndarray, level: float, offset: float, scale: float, probes: np.ndarray,
             probabilities) -> np.ndarray:
    """Output density at `probes` of the draw aimed at rank level·n + offset (exact, in float)."""
    cell, cnt = np.unique(cells, return_counts=True)
    intervals = grid_intervals(LO, HI, WIDTH, cell, cnt)
    p = probabilities(interval_scores(intervals, level * cnt.sum() + offset, scale))
    i = np.searchsorted(intervals.left, probes, side="right") - 1
    return p[i] / intervals.width[i]


def _worst_log_ratio(q: float, max_rows: int, scale_factor: float = 1.0) -> tuple[float, float]:
    plan = make_plan({"p": bdp.quantile("x", q, bounds=(LO, HI))}, epsilon=1.0, delta=0.0,
                     noise="laplace", unit="row", max_groups=1, max_rows=max_rows,
                     private_keys=False)
    step, worst, eps = plan.steps["p"], 0.0, 0.0
    rng = rng_for_tests(7)  # data only; the densities are computed exactly
    for part in ("value", "low", "high"):
        mech = step.parts[part].mechanism
        eps = max(eps, mech.guarantee.epsilon)
        for _ in range(40):
            base = rng.integers(1, CELLS, size=int(rng.integers(3, 30)))
            added = rng.integers(1, CELLS, size=max_rows)
            probes = (np.arange(CELLS * 4) + 0.5) * WIDTH / 4  # inside every interval of both
            offset = float(rng.uniform(-5, 5))  # a public shift such as the rank slack
            scale = mech.scale * scale_factor
            d0 = _density(base, q, offset, scale, probes, mech.probabilities)
            d1 = _density(np.concatenate([base, added]), q, offset, scale, probes,
                          mech.probabilities)
            worst = max(worst, float(np.max(np.abs(np.log(d0) - np.log(d1)))))
    return worst, eps


@pytest.mark.parametrize("q,max_rows", [(0.5, 1), (0.5, 3), (0.9, 1), (0.2, 2)])
def test_quantile_draws_are_epsilon_dp_under_add_remove(q, max_rows):
    # Deterministic: the exact density ratio of the continuous exponential mechanism between a
    # data set and the same with one unit's rows added never exceeds e^ε of the part.
    worst, eps = _worst_log_ratio(q, max_rows)
    assert worst <= eps * (1 + 1e-9)


def test_half_the_scale_breaks_the_guarantee():
    # Control: with the scale halved (sensitivity understated by 2) some pair exceeds e^ε.
    worst, eps = _worst_log_ratio(0.5, 1, scale_factor=0.5)
    assert worst > eps * 1.2
