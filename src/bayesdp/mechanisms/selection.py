"""Private selection: the exponential mechanism and report-noisy-max (seed 004 §2; seed 002)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from bayesdp.errors import DataError, check_positive
from bayesdp.mechanisms.base import Mechanism, as_array
from bayesdp.noise import Rng, bernoulli_exp, resolve_rng
from bayesdp.privacy import Ledger, Relation, charge


def _scores(candidates: Sequence[Any], utilities: Any, losses: Any) -> np.ndarray:
    if (utilities is None) == (losses is None):
        raise DataError("give exactly one of utilities (higher is better) or losses (lower is better)")
    name = "utilities" if losses is None else "losses"
    u = as_array(utilities if losses is None else losses, name)
    if u.ndim != 1:
        raise DataError(f"{name} must be one-dimensional (one score per candidate); got shape {u.shape}")
    if u.size == 0 or u.size != len(candidates):
        raise DataError(f"need one score per candidate: {len(candidates)} candidates, {u.size} scores")
    return u if losses is None else -u


class _Selection(Mechanism):
    """`epsilon` and `sensitivity` (of the utility) any finite positive numbers: selection works
    on the gaps ε(max u - u)/(2Δu), which never overflow, and draws no lattice noise."""

    def __init__(
        self,
        epsilon: float,
        *,
        sensitivity: float = 1.0,
        relation: Relation = "add_remove",
        unit: str = "row",
    ) -> None:
        self._pure(epsilon, relation, unit, lambda e: check_positive("epsilon", e))
        self.sensitivity = check_positive("sensitivity", sensitivity)

    @property
    def scale(self) -> float:
        """2Δu/ε: the utility gap that costs a factor e in selection probability."""
        return 2 * self.sensitivity / self.epsilon

    def _gaps(self, u: np.ndarray) -> np.ndarray:
        """γ_i = ε (max u − u_i)/(2Δu) >= 0: never overflows, whatever the utilities."""
        gaps: np.ndarray = (u.max() - u) / self.scale
        return gaps

    def select(
        self,
        candidates: Sequence[Any],
        utilities: Any = None,
        *,
        losses: Any = None,
        ledger: Ledger | None = None,
        rng: Rng | None = None,
    ) -> Any:
        """One candidate, chosen privately, after spending `guarantee` in `ledger` (if any)."""
        generator = resolve_rng(rng)
        charge(ledger, self.guarantee, repr(self))
        return candidates[self.select_index(_scores(candidates, utilities, losses), rng=generator)]

    @abstractmethod
    def select_index(self, utilities: np.ndarray, *, rng: Rng) -> int:
        """The index chosen for these utilities."""

    def _release(self, values: Any, rng: Rng) -> Any:
        """The index of the chosen entry of `values` (utilities); used by auditors."""
        u = as_array(values)
        if u.ndim != 1 or u.size == 0:
            raise DataError(f"values must be a non-empty 1-D array of utilities; got shape {u.shape}")
        return self.select_index(u, rng=rng)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, sensitivity={self.sensitivity:g})"


class Exponential(_Selection):
    """P(r) ∝ exp(ε u(r)/(2Δu)) (McSherry–Talwar 2007; seed 004 uses losses: exp(−ε ℓ/(2Δ))).

    Sampled exactly by rejection: propose uniformly, accept with Bernoulli(e^{−γ}), γ the gap to
    the best utility, and return the first accepted proposal. The trials are i.i.d., so they can
    be drawn in rounds of any size: rounds start small and double, because a peaked mechanism
    over many candidates accepts one proposal in thousands, not one in N.
    """

    family = "exponential"

    def select_index(self, utilities: np.ndarray, *, rng: Rng) -> int:
        gaps = self._gaps(utilities)
        size = min(gaps.size, 4096)
        while True:
            proposals = rng.integers(0, gaps.size, size=size)
            accepted = np.flatnonzero(bernoulli_exp(gaps[proposals], rng))
            if accepted.size:
                return int(proposals[accepted[0]])
            size = min(2 * size, gaps.size)

    def probabilities(self, utilities: Any) -> np.ndarray:
        """The selection probabilities, for checks and reports (computed in float)."""
        w = np.exp(-self._gaps(as_array(utilities).ravel()))
        p: np.ndarray = w / w.sum()
        return p


class ReportNoisyMax(_Selection):
    """Report-noisy-max with exponential noise of scale 2Δu/ε, sampled as permute-and-flip.

    The two are the same distribution (Ding et al. 2021) and ε-DP (McKenna & Sheldon 2020): visit
    the candidates in random order and stop at the first that passes Bernoulli(e^{−γ}).
    """

    family = "report_noisy_max"

    def select_index(self, utilities: np.ndarray, *, rng: Rng) -> int:
        order = rng.permutation(utilities.size)
        passed = bernoulli_exp(self._gaps(utilities)[order], rng)
        # The best candidate has γ = 0 and always passes, so some candidate is chosen.
        return int(order[np.argmax(passed)])
