"""Guarantees, composition and accounting, their Bayesian meaning, and the budget ledger."""

from bayesdp.privacy.accounting import (
    METHODS,
    compose,
    zcdp_epsilon,
    zcdp_epsilon_simple,
)
from bayesdp.privacy.dependence import Dependence
from bayesdp.privacy.guarantee import RELATIONS, Guarantee, Relation, dp_from_semantic
from bayesdp.privacy.ledger import Ledger, Spend, charge
from bayesdp.privacy.noise import Noise
from bayesdp.privacy.semantics import (
    BayesCheck,
    SemanticPrivacy,
    bayes_check,
    product_prior,
)

__all__ = [
    "METHODS",
    "RELATIONS",
    "BayesCheck",
    "Dependence",
    "Guarantee",
    "Ledger",
    "Noise",
    "Relation",
    "SemanticPrivacy",
    "Spend",
    "bayes_check",
    "charge",
    "compose",
    "dp_from_semantic",
    "product_prior",
    "zcdp_epsilon",
    "zcdp_epsilon_simple",
]
