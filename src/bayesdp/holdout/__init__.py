"""Adaptive data analysis without overfitting: Thresholdout, the naive baseline, the Ladder, size bounds."""

from bayesdp.holdout.answers import HoldoutAnswer
from bayesdp.holdout.bounds import accuracy_bound, nips_parameters, required_holdout_size
from bayesdp.holdout.ladder import Ladder, Leaderboard, NaiveLeaderboard
from bayesdp.holdout.naive import NaiveHoldout
from bayesdp.holdout.queries import statistical_means, table_means
from bayesdp.holdout.thresholdout import ReusableHoldout

__all__ = [
    "HoldoutAnswer",
    "Ladder",
    "Leaderboard",
    "NaiveHoldout",
    "NaiveLeaderboard",
    "ReusableHoldout",
    "accuracy_bound",
    "nips_parameters",
    "required_holdout_size",
    "statistical_means",
    "table_means",
]
