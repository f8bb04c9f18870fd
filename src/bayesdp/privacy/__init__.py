"""Guarantees, composition and accounting, their Bayesian meaning, and the budget ledger."""

from bayesdp.privacy.guarantee import RELATIONS, Guarantee, Relation

__all__ = ["RELATIONS", "Guarantee", "Relation"]
