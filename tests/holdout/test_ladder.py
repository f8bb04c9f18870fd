from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from bayesdp import rng_for_tests
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.holdout import Ladder, NaiveLeaderboard
from bayesdp.holdout.experiment import boosting_attack

LABELS = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 1])


def _with_errors(k: int) -> np.ndarray:
    """Predictions wrong on the first k examples: 0/1 loss exactly k/10."""
    pred = LABELS.copy()
    pred[:k] = 1 - pred[:k]
    return pred


def test_fixed_step_ladder_follows_algorithm_1() -> None:
    ladder = Ladder(LABELS, step=0.15)
    released = [ladder.submit(_with_errors(k)) for k in (5, 4, 3, 1, 2, 0)]
    # 0.5 -> round(0.5/0.15)·0.15 = 0.45; 0.4 is not below 0.45 − 0.15; 0.3 is not (0.3 = 0.3);
    # 0.1 < 0.3 -> 0.15; 0.2 is not; 0.0 < 0.0 is not.
    assert released == pytest.approx([0.45, 0.45, 0.45, 0.15, 0.15, 0.15])
    assert ladder.updates == 2 and ladder.leader == 3
    assert ladder.scores == released


def test_parameter_free_ladder_uses_the_paired_t_test() -> None:
    ladder = Ladder(LABELS)
    assert ladder.submit(_with_errors(6)) == 0.6  # the first submission is always accepted
    # Errors on examples 2..6 instead of 0..5: loss 0.5, paired differences (−1, −1, +1, 0 × 7)
    # with sd 0.568, so the margin s/√n = 0.180 is not met.
    shifted = LABELS.copy()
    shifted[2:7] = 1 - shifted[2:7]
    diffs = np.r_[-1.0, -1.0, 1.0, np.zeros(7)]
    assert np.std(diffs, ddof=1) / math.sqrt(10) == pytest.approx(0.1795, abs=1e-4)
    assert ladder.submit(shifted) == 0.6
    # Errors on 0..1 only: loss 0.2, differences four −1 (margin 0.163): accepted.
    assert ladder.submit(_with_errors(2)) == 0.2
    assert ladder.updates == 2 and ladder.leader == 2


def test_losses_are_checked() -> None:
    with pytest.raises(InvalidParameter, match="loss"):
        Ladder(LABELS, loss="hinge")
    with pytest.raises(InvalidParameter, match="step"):
        Ladder(LABELS, step=0)
    with pytest.raises(DataError, match="shape"):
        Ladder(LABELS).submit(np.zeros(3))
    with pytest.raises(DataError, match="bounded"):
        Ladder(LABELS, loss=lambda y, p: 2.0 * (y != p)).submit(_with_errors(3))
    squared = Ladder(LABELS, loss=lambda y, p: (y - p) ** 2)
    assert squared.submit(np.full(10, 0.5)) == 0.25


def _max_selected_loss_drop(n: int, k: int, size: int, sets: int) -> float:
    """t with C(k, size)·exp(−2t²n) = 1e-7/sets (Hoeffding + union bound over selected sets)."""
    log_sets = special.gammaln(k + 1) - special.gammaln(size + 1) - special.gammaln(k - size + 1)
    return math.sqrt((log_sets + math.log(sets / 1e-7)) / (2 * n))


def test_boosting_attack_fools_the_naive_board_but_not_the_ladder() -> None:
    # Blum & Hardt 2015 §4: k random 0/1 vectors against n uniform labels, then the majority of
    # those the board scored as good. Every submission has true loss exactly 1/2.
    n, k, step = 20_000, 1_000, 0.01
    rng = rng_for_tests(21)
    labels = rng.integers(0, 2, size=n)
    naive = boosting_attack(NaiveLeaderboard(labels), k, rng=rng)
    # Naive: measured over 200 seeds, holdout loss 0.450 with SD 0.0026 (max 0.456); 0.47 is
    # 7.7 SD above the mean.
    assert naive.reported <= 0.47 and naive.holdout_loss <= 0.47
    # Ladder: the majority vote of a set S of selected vectors is independent of the labels for
    # each fixed S, so its holdout loss is below 1/2 − t only with probability exp(−2t²n)
    # (Hoeffding). A union bound over all C(k, |S|) sets, for each of the at most 1/η + 1
    # possible sizes, bounds it for the selected set except with probability 1e-7; the released
    # score adds at most η/2 of rounding and the best random vector (union over k) below it.
    ladder = Ladder(labels, step=step)
    attack = boosting_attack(ladder, k, rng=rng)
    sizes = int(1 / step) + 1
    drop = _max_selected_loss_drop(n, k, attack.selected, sizes)
    single = math.sqrt(math.log(k / 1e-7) / (2 * n))
    assert attack.holdout_loss >= 0.5 - drop
    assert attack.reported >= 0.5 - max(drop, single) - step / 2
    assert attack.reported - naive.reported > 0.02


def test_parameter_free_ladder_resists_the_attack() -> None:
    n, k = 20_000, 1_000
    rng = rng_for_tests(22)
    labels = rng.integers(0, 2, size=n)
    attack = boosting_attack(Ladder(labels), k, rng=rng)
    # Same union bound as above, over all k + 1 possible sizes of the selected set.
    drop = _max_selected_loss_drop(n, k, attack.selected, k + 1)
    assert attack.holdout_loss >= 0.5 - drop
