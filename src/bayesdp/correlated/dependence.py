"""A correlation model as a guarantee's dependence assumption: its name, fingerprint and meaning."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from bayesdp.correlated.chain import ChainClass, MarkovChain
from bayesdp.privacy import Dependence

NOTION_WORDS = {
    "pufferfish": (
        "Pufferfish privacy (Song, Wang & Chaudhuri 2017): for every record i and any two of its "
        "values a, b, an adversary whose beliefs about how records depend on each other are "
        "in the model below, and who knows nothing else, sees output probabilities that differ "
        "by at most a factor e^ε whether record i is a or b"
    ),
    "bdp": (
        "Bayesian differential privacy (Yang, Sato & Nakagawa 2015; Zhao et al. 2017): for every "
        "record i, any two of its values, and ANY set of other records the adversary already "
        "knows, the output probabilities differ by at most a factor e^ε, with the unknown records "
        "following the model below"
    ),
}


def describe_model(model: Any) -> str:
    """One sentence naming the correlation model that the guarantee assumes."""
    if isinstance(model, MarkovChain):
        start = {"stationary": "started from its stationary distribution",
                 "worst": "started from any distribution"}.get(str(model.initial), "with a given start")
        return f"a {model.k}-state time-homogeneous Markov chain {start}"
    if isinstance(model, ChainClass):
        if model.is_finite:
            return f"any of {len(model.chains)} given {model.chains[0].k}-state Markov chains"
        return (f"any ergodic Markov chain with min stationary probability ≥ {model.pi_min:g} "
                f"and eigengap ≥ {model.eigengap:g}")
    return f"a Bayesian network over {len(model.nodes)} records ({', '.join(model.nodes)})"


def fingerprint(model: Any) -> str:
    """A short hash of the model's parameters: two models are the same assumption iff it matches."""
    h = hashlib.sha256(type(model).__name__.encode())
    for part in _parameters(model):
        h.update(part if isinstance(part, bytes) else np.ascontiguousarray(part, dtype=np.float64).tobytes())
        h.update(b"|")
    return h.hexdigest()[:16]


def _parameters(model: Any) -> list[Any]:
    if isinstance(model, MarkovChain):
        start = model.initial.encode() if isinstance(model.initial, str) else model.initial
        return [model.transition, start]
    if isinstance(model, ChainClass):
        if model.is_finite:
            return [fingerprint(c).encode() for c in model.chains]
        return [np.array([model.pi_min, model.eigengap])]
    return [repr(model.parents).encode(), *(model.cpts[v] for v in model.nodes)]


def dependence_for(model: Any, notion: str, length: int, *, detail: str = "",
                   explanation: str = "") -> Dependence:
    """The Dependence of a guarantee that holds for `length` records correlated as `model`."""
    return Dependence(notion, model=describe_model(model), fingerprint=fingerprint(model), length=length,  # type: ignore[arg-type]
                      detail=detail, explanation=explanation)
