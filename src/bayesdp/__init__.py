"""bayesdp: differential privacy with its Bayesian meaning.

The public names load on first use (PEP 562): `import bayesdp` and `bayesdp --help` stay fast,
and pandas, numba, scipy and DuckDB load only with the part of the package that needs them.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bayesdp import (
        correlated,
        errors,
        expressions,
        holdout,
        mechanisms,
        models,
        noise,
        privacy,
        report,
        serve,
        synth,
        tables,
    )
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

# Public subpackages and modules, `bdp.synth.perturbed_histogram` as much as `bdp.synthesize`;
# `models` needs scikit-learn (the `models` extra). `bdp.sql` and `bdp.audit` are the functions
# named like their subpackages (see _Package).
_MODULES = ("correlated", "errors", "expressions", "holdout", "mechanisms", "models", "noise", "privacy",
            "report", "serve", "synth", "tables")
# Every other public name -> the module that defines it.
_HOME: dict[str, str] = {
    **dict.fromkeys(("AuditResult", "audit", "audit_pairs"), "bayesdp.audit"),
    **dict.fromkeys(("BayesianNetwork", "MarkovChain", "MarkovQuiltMechanism"), "bayesdp.correlated"),
    **dict.fromkeys(("Ladder", "ReusableHoldout"), "bayesdp.holdout"),
    **dict.fromkeys(("DiscreteGaussian", "DiscreteLaplace", "Exponential", "Gaussian", "Laplace",
                     "RandomizedResponse", "ReportNoisyMax", "SparseVector"), "bayesdp.mechanisms"),
    **dict.fromkeys(("rng_for_tests", "secure_rng"), "bayesdp.noise"),
    **dict.fromkeys(("Guarantee", "Ledger", "SemanticPrivacy", "compose"), "bayesdp.privacy"),
    "connect": "bayesdp.serve",
    "sql": "bayesdp.sql",
    **dict.fromkeys(("Synthesizer", "synthesize"), "bayesdp.synth"),
    **dict.fromkeys(("Release", "count", "count_units", "histogram", "mean", "quantile", "share",
                     "std", "sum", "table"), "bayesdp.tables"),
}

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
    "correlated",
    "count",
    "count_units",
    "errors",
    "expressions",
    "histogram",
    "holdout",
    "mean",
    "mechanisms",
    "models",
    "noise",
    "privacy",
    "quantile",
    "report",
    "rng_for_tests",
    "secure_rng",
    "serve",
    "share",
    "sql",
    "std",
    "sum",
    "synth",
    "synthesize",
    "table",
    "tables",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """Load a public name from its module on first use (PEP 562), then keep it."""
    if name in _MODULES:
        value: object = importlib.import_module(f"bayesdp.{name}")
    elif name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
    else:
        raise AttributeError(f"module 'bayesdp' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """`bdp.sql` and `bdp.audit` are functions named like their subpackages: importing
    `bayesdp.sql.<module>` must not rebind `bayesdp.sql` to the subpackage, as the import system
    does for a parent's attribute."""

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, types.ModuleType) and _HOME.get(name) == value.__name__:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
