"""Empirical lower bounds on the ε and δ a mechanism delivers, with float-attack checks.

`audit(mechanism, d0, d1, epsilon=...)` runs a mechanism on two neighbouring inputs, searches
an event that separates them, and bounds ε (and δ at the claimed ε) with Clopper–Pearson
intervals on fresh runs (StatDP, Ding et al. 2018; DP-Sniper, Bichsel et al. 2021).
A bound above the claim is a proof, at the stated confidence, that the claim is false.
"""

from bayesdp.audit.events import Event
from bayesdp.audit.floats import NumpyLaplace
from bayesdp.audit.result import AuditResult
from bayesdp.audit.runner import audit, audit_pairs

__all__ = ["AuditResult", "Event", "NumpyLaplace", "audit", "audit_pairs"]
