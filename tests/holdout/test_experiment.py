from __future__ import annotations

import math

import numpy as np
import pytest

from bayesdp import rng_for_tests
from bayesdp.holdout.experiment import science2015

KS = (0, 10, 20, 30, 45, 70, 100)
N = D = 2000
THRESHOLD = 4 / math.sqrt(N)


def test_science2015_small_no_signal() -> None:
    # Dwork et al., Science 2015, Fig. 1 at n = d = 2000, 10 repetitions. Spreads per repetition
    # measured over 100 repetitions (seed 123): naive holdout at k=100 .630 (SD .0085), fresh
    # .500 (SD .0125, binomial .0112), Thresholdout holdout at k=100 .503 (SD .028). Bands:
    # 0.60 is 11 standard errors below .630; 0.53 is 7.6 above .500; 0.56 is 6.4 above .503.
    r = science2015(N, D, ks=KS, reps=10, rng=rng_for_tests(31))
    std, thr = r.mean("standard"), r.mean("thresholdout")
    k100 = KS.index(100)
    assert std[k100, 1] >= 0.60
    assert std[k100, 2] <= 0.53 and thr[k100, 2] <= 0.53
    assert thr[k100, 1] <= 0.56
    assert std.shape == (len(KS), 3) and r.standard.shape == (10, len(KS), 3)
    assert np.all(r.epsilon > 0) and r.clipped > 0  # ≈ 6e-5 of the 2·n·d products are clipped


@pytest.mark.slow
def test_science2015_thresholdout_stays_within_its_threshold_of_fresh() -> None:
    # Over 100 repetitions (seed 123) the per-repetition gap between Thresholdout's holdout
    # answer and fresh accuracy has mean at most .047 and SD at most .053 for every k. With 48
    # repetitions the standard error is at most .0077, and T = .089 is at least 5.5 standard
    # errors above every mean gap (and 11.5 below).
    r = science2015(N, D, ks=KS, reps=48, rng=rng_for_tests(32))
    gap = r.mean("thresholdout")[:, 1] - r.mean("thresholdout")[:, 2]
    assert np.all(np.abs(gap) <= THRESHOLD)
    naive_gap = r.mean("standard")[:, 1] - r.mean("standard")[:, 2]
    assert naive_gap[KS.index(100)] > THRESHOLD  # the standard holdout leaves the band
