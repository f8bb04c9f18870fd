"""bayesdp: differential privacy with its Bayesian meaning."""

from bayesdp import errors, noise
from bayesdp.audit import AuditResult, audit, audit_pairs
from bayesdp.correlated import BayesianNetwork, MarkovChain, MarkovQuiltMechanism
from bayesdp.holdout import Ladder, ReusableHoldout
from bayesdp.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    RandomizedResponse,
    ReportNoisyMax,
    SparseVector,
)
from bayesdp.noise import rng_for_tests, secure_rng
from bayesdp.privacy import Guarantee, Ledger, SemanticPrivacy, compose
from bayesdp.serve import connect
from bayesdp.sql import sql
from bayesdp.synth import Synthesizer, synthesize
from bayesdp.tables import (
    Release,
    count,
    count_units,
    histogram,
    mean,
    quantile,
    share,
    std,
    sum,
    table,
)

__all__ = [
    "AuditResult",
    "BayesianNetwork",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Exponential",
    "Gaussian",
    "Guarantee",
    "Ladder",
    "Laplace",
    "Ledger",
    "MarkovChain",
    "MarkovQuiltMechanism",
    "RandomizedResponse",
    "Release",
    "ReportNoisyMax",
    "ReusableHoldout",
    "SemanticPrivacy",
    "SparseVector",
    "Synthesizer",
    "audit",
    "audit_pairs",
    "compose",
    "connect",
    "count",
    "count_units",
    "errors",
    "histogram",
    "mean",
    "models",
    "noise",
    "quantile",
    "rng_for_tests",
    "secure_rng",
    "share",
    "sql",
    "std",
    "sum",
    "synthesize",
    "table",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """`bayesdp.models` loads on first use: it needs scikit-learn (the `models` extra)."""
    if name == "models":
        import importlib

        return importlib.import_module("bayesdp.models")
    raise AttributeError(f"module 'bayesdp' has no attribute {name!r}")
