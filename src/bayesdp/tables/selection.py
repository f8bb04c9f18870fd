"""Private partition selection: which group keys may be released when the keys are not public."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bayesdp.noise import Rng, bernoulli_exp


@dataclass(frozen=True)
class PartitionSelection:
    """The truncated-geometric selection, (ε, δ)-DP per unit over `max_groups` groups.

    Each unit can appear in at most `max_groups` groups, so each group's decision runs with
    ε/k and δ/k (basic composition over the k groups a unit touches). A group with n units is
    kept with the optimal probability π(n) of Desfontaines et al. (PoPETs 2022, Thm. 1):
    π(0) = 0, π(n) = min(e^ε π(n-1) + δ, 1 + e^-ε (π(n-1) + δ - 1), 1), so a group held by a
    single unit is released with probability exactly δ/k.
    """

    epsilon: float
    delta: float
    max_groups: int

    @property
    def per_group(self) -> tuple[float, float]:
        return self.epsilon / self.max_groups, self.delta / self.max_groups

    def keep_probability(self, units: np.ndarray) -> np.ndarray:
        """π(n) for each count of units n (exact recurrence, evaluated once up to max n)."""
        n = np.asarray(units, dtype=np.int64)
        table = self._table(int(n.max()) if n.size else 0)
        return table[np.minimum(n, table.size - 1)]

    def _table(self, n_max: int) -> np.ndarray:
        eps, delta = self.per_group
        grow, shrink = math.exp(eps), math.exp(-eps)
        out = [0.0]
        # The recurrence reaches 1 after O(ln(1/δ)/ε) steps; the table stops there.
        while len(out) <= n_max and out[-1] < 1.0:
            p = out[-1]
            out.append(min(grow * p + delta, 1.0 + shrink * (p + delta - 1.0), 1.0))
        return np.asarray(out)

    def threshold(self, probability: float = 0.5) -> int:
        """Smallest number of units a group needs to be kept with at least `probability`."""
        table = self._table(1 << 40)
        return int(np.argmax(table >= probability))

    def select(self, units: np.ndarray, rng: Rng) -> np.ndarray:
        """Boolean mask of the groups kept, each drawn exactly as Bernoulli(π(n))."""
        p = self.keep_probability(units)
        keep = p >= 1.0
        partial = np.flatnonzero((p > 0) & (p < 1))
        if partial.size:
            keep[partial] = bernoulli_exp(-np.log(p[partial]), rng)
        return keep

    def describe(self) -> str:
        eps, delta = self.per_group
        return (f"truncated geometric (Desfontaines et al. 2022), ε={self.epsilon:.4g}, "
                f"δ={self.delta:.3g} over ≤{self.max_groups} groups per unit "
                f"(per group ε={eps:.4g}, δ={delta:.3g}); a group needs about "
                f"{self.threshold():d} units to be kept with probability 1/2")
