"""Guarantees, composition and accounting, their Bayesian meaning, and the budget ledger."""

from bayesdp.privacy.accounting import (
    METHODS,
    compose,
    zcdp_epsilon,
    zcdp_epsilon_simple,
)
from bayesdp.privacy.guarantee import RELATIONS, Guarantee, Relation

__all__ = [
    "METHODS",
    "RELATIONS",
    "Guarantee",
    "Relation",
    "compose",
    "zcdp_epsilon",
    "zcdp_epsilon_simple",
]
