"""Private partition selection: which group keys may be released when the keys are not public."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bayesdp.errors import InvalidParameter
from bayesdp.noise import Rng, bernoulli_exp


@dataclass(frozen=True)
class PartitionSelection:
    """The truncated-geometric selection, (ε, δ)-DP per unit over `max_groups` groups.

    Each unit can appear in at most `max_groups` groups, so each group's decision runs with
    ε/k and δ/k (basic composition over the k groups a unit touches). A group with n units is
    kept with the optimal probability π(n) of Desfontaines et al. (PoPETs 2022, Thm. 1):
    π(0) = 0, π(n) = min(e^ε π(n-1) + δ, 1 + e^-ε (π(n-1) + δ - 1), 1), so a group held by a
    single unit is released with probability exactly δ/k. π is evaluated in closed form (see
    `_pi`), so any count of units costs O(1) and every ε, δ whose per-group share is a normal
    float (ε/k > 0, δ/k ≥ 2.2e-308) is served.
    """

    epsilon: float
    delta: float
    max_groups: int

    def __post_init__(self) -> None:
        eps, delta = self.per_group
        if not (math.isfinite(eps) and eps > 0 and sys.float_info.min <= delta < 1):
            raise InvalidParameter(
                f"partition selection with epsilon={self.epsilon!r}, delta={self.delta!r} over "
                f"max_groups_per_unit={self.max_groups!r} leaves a per-group ε={eps!r}, δ={delta!r}; "
                f"they must be ε > 0 and {sys.float_info.min:.3g} <= δ < 1 (raise delta or lower "
                "max_groups_per_unit, or give public keys)")

    @property
    def per_group(self) -> tuple[float, float]:
        return self.epsilon / self.max_groups, self.delta / self.max_groups

    def keep_probability(self, units: np.ndarray) -> np.ndarray:
        """π(n) for each count of units n."""
        n = np.asarray(units, dtype=np.int64)
        return self._pi(np.maximum(n, 0).astype(np.float64))

    @property
    def _grow(self) -> float:
        """e^ε - 1 per group (numpy's expm1 throughout, so δ·expm1(ε)/expm1(ε) is exactly δ)."""
        eps = self.per_group[0]
        return float(np.expm1(eps)) if eps < 700 else math.inf

    def _growth_end(self) -> tuple[int, float]:
        """(m, π(m)): the last n reached by the growth branch π(n) = δ (e^{nε} - 1)/(e^ε - 1).

        The growth branch is the smaller one while π(n-1) <= p* = (1 - δ)/(1 + e^ε) (equate the
        two branches of Thm. 1), so m is one past the largest n with δ·expm1(nε)/expm1(ε) <= p*.
        """
        eps, delta = self.per_group
        grow = self._grow
        p_star = (1 - delta) / (2 + grow)
        if grow == math.inf:
            return 1, delta
        n1 = math.floor(math.log1p(p_star * grow / delta) / eps)
        # The logarithm is exact up to rounding: settle n1 on the branch itself (a few steps).
        n1 = _settle(n1, lambda n: delta * float(np.expm1(n * eps) / grow) <= p_star)
        m = n1 + 1
        return m, delta * float(np.expm1(m * eps) / grow)

    def _pi(self, n: np.ndarray) -> np.ndarray:
        """π(n) in closed form (Desfontaines et al., PoPETs 2022, Thm. 1 solved branch by branch).

        Up to m (`_growth_end`): π(n) = δ (e^{nε} - 1)/(e^ε - 1). After m, q(n) = 1 - π(n)
        follows q(n) = e^-ε (q(n-1) - δ), whose fixed point is q* = -δ/(e^ε - 1), so
        q(n) = q* + e^{-(n-m)ε} (q(m) - q*) until it reaches 0, where π stays at 1.
        """
        eps, delta = self.per_group
        m, p_m = self._growth_end()
        grow = self._grow
        out = np.empty(n.shape, dtype=np.float64)
        low = n <= m
        with np.errstate(over="ignore"):  # nε overflows only where e^{-nε} is 0 anyway
            out[low] = delta * (np.expm1(n[low] * eps) / grow) if grow < math.inf else \
                np.where(n[low] >= 1, delta, 0.0)
            # q* + e^{-jε}(q(m) - q*) written without the large q* (no cancellation when δ >> ε).
            j = n[~low] - m
            out[~low] = 1.0 - (np.exp(-j * eps) * (1.0 - p_m) + delta / grow * np.expm1(-j * eps))
        return np.clip(out, 0.0, 1.0)

    def threshold(self, probability: float = 0.5) -> int:
        """Smallest number of units a group needs to be kept with at least `probability`."""
        eps, delta = self.per_group
        m, p_m = self._growth_end()
        grow = self._grow
        if probability <= p_m:  # invert the growth branch
            guess = math.ceil(math.log1p(probability * grow / delta) / eps) if grow < math.inf else 1
        else:  # invert q(n) = q* + e^{-(n-m)ε} (q(m) - q*) <= 1 - probability
            q_star = -delta / grow
            ratio = ((1.0 - p_m) - q_star) / ((1.0 - probability) - q_star)
            guess = m + math.ceil(math.log(ratio) / eps)
        # The inversions are exact up to rounding: settle the last step on π itself.
        return _settle(guess, lambda n: self._pi(np.array([n], dtype=np.float64))[0] < probability) + 1

    def select(self, units: np.ndarray, *, rng: Rng) -> np.ndarray:
        """Boolean mask of the groups kept, each drawn exactly as Bernoulli(π(n))."""
        p = self.keep_probability(units)
        keep = p >= 1.0
        partial = np.flatnonzero((p > 0) & (p < 1))
        if partial.size:
            keep[partial] = bernoulli_exp(-np.log(p[partial]), rng=rng)
        return keep

    def describe(self) -> str:
        eps, delta = self.per_group
        return (f"truncated geometric (Desfontaines et al. 2022), ε={self.epsilon:.4g}, "
                f"δ={self.delta:.3g} over ≤{self.max_groups} groups per unit "
                f"(per group ε={eps:.4g}, δ={delta:.3g}); a group needs about "
                f"{self.threshold():,d} units to be kept with probability 1/2")


def _settle(n: int, below: Callable[[int], bool], steps: int = 8) -> int:
    """The largest n' near `n` (within `steps`) with below(n') true and below(n' + 1) false, for a
    monotone predicate; past 2^53 consecutive integers are one float, so `n` is returned as is."""
    if n >= 1 << 53:
        return n
    n = max(n, 0)
    for _ in range(steps):
        if n > 0 and not below(n):
            n -= 1
        elif below(n + 1):
            n += 1
        else:
            break
    return n
