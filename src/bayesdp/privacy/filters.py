"""Privacy filters: budgets that hold when each spend is chosen after seeing earlier answers.

A privacy filter (Rogers, Roth, Ullman & Vadhan 2016, "Privacy Odometers and Filters:
Pay-as-you-Go Composition") decides, from the privacy parameters spent so far and the next one
proposed, whether the interaction may go on; it is valid when everything it lets through is
(ε, δ)-DP for the budget although the analyst picks each mechanism *and its parameters* from
the answers so far. Each rule here reads only the spends' stated parameters, never the data,
and only grows with them: a refusal carries no bit, and refusing a proposal and letting the
analyst propose again is the same as an analyst who proposed an admissible spend in the first
place (the theorems allow each parameter to be any function of the past).

Composing privacy-loss distributions (PLD) and stopping when the (ε, δ) curve would be crossed
is tight for a sequence fixed in advance, but that "natural filter" is not a valid filter when
the parameters are chosen adaptively. Two steps show it: randomized response with ε = 0.0015 on
one bit, then RR with ε = 1.0005 after a 1 or a (0, 9e-4)-DP release after a 0; each path
composes within (1, 1e-3) by PLD, yet the adaptive transcript has δ = 1.18e-3 at ε = 1 (checked
exactly in the tests). PLD therefore serves only `compose(..., method="pld")`, for
compositions fixed before any data is seen.

What a ledger reports as spent is its filter's running total: the guarantee the interaction
would have had if the budget had been set to it in advance. The guarantee that holds whatever
the analyst does is the budget, bounded by the filter named in each reported Guarantee.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace

from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from bayesdp.errors import InvalidParameter
from bayesdp.privacy.accounting import guarantee_rho, zcdp_epsilon
from bayesdp.privacy.guarantee import Guarantee

Sums = tuple[float, ...]  # a filter's running sums of what the spends charge

PLD_REFUSED = (
    "accounting='pld' is not allowed for a ledger or a service budget: composing privacy-loss "
    "distributions and stopping when the (ε, δ) curve would be crossed is tight only for a "
    "sequence of releases fixed before any data is seen; when each spend is chosen after seeing "
    "earlier answers that stopping rule is not a valid privacy filter, and the budget would not "
    "hold. Use accounting='zcdp' (Rényi filter, tight for bayesdp's Gaussian releases), 'gdp' "
    "(continuous Gaussian noise only), 'advanced' (many small spends) or 'basic'; for a "
    "composition fixed in advance, bayesdp.compose(..., method='pld')"
)


class Filter(ABC):
    """A valid privacy filter for a ledger's budget. Each rule reads a few running sums of what
    every spend charges (`charge`), so a ledger keeps those sums instead of re-reading its history."""

    name = ""
    title = ""
    width = 1  # how many sums `charge` adds to

    def __init__(self, budget: Guarantee) -> None:
        self.budget = budget

    def check(self, g: Guarantee) -> None:  # noqa: B027 (most filters account for any spend)
        """Refuse (InvalidParameter) a spend this filter cannot account for; nothing by default."""

    @abstractmethod
    def charge(self, g: Guarantee) -> Sums:
        """What one spend adds to each of this filter's running sums."""

    @abstractmethod
    def fits(self, sums: Sums) -> bool:
        """Whether spends whose charges add up to `sums` fit the budget together."""

    @abstractmethod
    def total_of(self, sums: Sums) -> Guarantee:
        """The running total of spends (at least one) whose charges add up to `sums`."""

    @abstractmethod
    def remaining_of(self, sums: Sums) -> Guarantee:
        """The largest next spend the filter admits after `sums` (for ρ and μ filters: in ρ or μ)."""

    @abstractmethod
    def used_of(self, sums: Sums) -> float:
        """The share of the budget that `sums` uses, in [0, 1], measured by what `fits` compares
        (Σε, Σρ, Σμ², Σε²: each filter's own sums, which add up across spends where ε may not)."""

    def sums(self, spends: Sequence[Guarantee]) -> Sums:
        """The charges of `spends` added up exactly, then rounded once (math.fsum)."""
        charges = [self.charge(g) for g in spends]
        return tuple(math.fsum(c[i] for c in charges) for i in range(self.width))

    def admits(self, spends: Sequence[Guarantee]) -> bool:
        """Whether every spend in `spends` (the last one proposed) fits the budget together."""
        return self.fits(self.sums(spends))

    def total(self, spends: Sequence[Guarantee]) -> Guarantee:
        """The running total of `spends` (not empty) under this filter."""
        return self.total_of(self.sums(spends))

    def remaining(self, spends: Sequence[Guarantee]) -> Guarantee:
        """The largest next spend the filter admits after `spends`."""
        return self.remaining_of(self.sums(spends))

    @property
    def nothing(self) -> Sums:
        """The sums before any spend."""
        return (0.0,) * self.width

    def nothing_spent(self) -> Guarantee:
        """The total before any spend: zero, under this filter."""
        b = self.budget
        return Guarantee(0.0, delta=0.0, relation=b.relation, unit=b.unit, dependence=b.dependence,
                         bound=f"under the {self.title}")

    def _bounded(self, g: Guarantee, detail: str = "") -> Guarantee:
        b = self.budget
        return replace(g, relation=b.relation, unit=b.unit, dependence=b.dependence,
                       bound=f"{detail}{', ' if detail else ''}under the {self.title}")


class BasicFilter(Filter):
    """Σε ≤ ε_g and Σδ ≤ δ_g: the basic-composition filter, valid under fully adaptive choices
    (Rogers, Roth, Ullman & Vadhan 2016); the same sums bound ρ when every spend states one."""

    name = "basic"
    title = "basic composition filter (Rogers, Roth, Ullman & Vadhan 2016)"
    width = 4  # Σε, Σδ, Σρ, and how many spends state no ρ

    def charge(self, g: Guarantee) -> Sums:
        return (g.epsilon, g.delta, g.rho or 0.0, float(g.rho is None))

    def fits(self, sums: Sums) -> bool:
        return sums[0] <= self.budget.epsilon and sums[1] <= self.budget.delta

    def total_of(self, sums: Sums) -> Guarantee:
        eps, delta, rho, unstated = sums
        return self._bounded(Guarantee(eps, delta=delta, rho=None if unstated else rho))

    def remaining_of(self, sums: Sums) -> Guarantee:
        b = self.budget
        return self._bounded(Guarantee(max(0.0, b.epsilon - sums[0]),
                                       delta=max(0.0, b.delta - sums[1])))

    def used_of(self, sums: Sums) -> float:
        return max(share(sums[0], self.budget.epsilon), share(sums[1], self.budget.delta))


class ZcdpFilter(Filter):
    """Σρ_i ≤ ρ_g: each ρ_i-zCDP spend is (α, αρ_i)-RDP at every order α, and a sum of Rényi
    divergences at a fixed order bounded a.s. is a valid filter (Feldman & Zrnic 2021, Thm 3.1),
    so the interaction is ρ_g-zCDP; ρ_g is stated, or the largest ρ whose (ε, δ) by the tight
    conversion fits the budget's (Canonne, Kamath & Steinke 2020, Prop. 12)."""

    name = "zcdp"
    title = "zCDP / Rényi filter (Feldman & Zrnic 2021, Thm 3.1)"

    def __init__(self, budget: Guarantee) -> None:
        super().__init__(budget)
        self.rho = budget_rho(budget)

    def check(self, g: Guarantee) -> None:
        try:
            guarantee_rho(g)
        except InvalidParameter:
            raise InvalidParameter(
                f"guarantee={g} is not allowed under the zcdp filter: an (ε, δ) guarantee with "
                "δ > 0 and no known noise has no ρ-zCDP bound; use a ledger with "
                "accounting='advanced' or 'basic'"
            ) from None

    def charge(self, g: Guarantee) -> Sums:
        return (guarantee_rho(g),)

    def fits(self, sums: Sums) -> bool:
        return sums[0] <= self.rho

    def total_of(self, sums: Sums) -> Guarantee:
        return self._zcdp(sums[0])

    def remaining_of(self, sums: Sums) -> Guarantee:
        return self._zcdp(max(0.0, self.rho - sums[0]))

    def used_of(self, sums: Sums) -> float:
        return share(sums[0], self.rho)

    def _zcdp(self, rho: float) -> Guarantee:
        d = self.budget.delta
        return self._bounded(Guarantee(zcdp_epsilon(rho, d), delta=d, rho=rho))


class GdpFilter(Filter):
    """Σμ_i² ≤ μ_g² for μ_i-GDP spends is a valid filter (Smith & Thakurta 2022, "Fully Adaptive
    Composition for Gaussian DP", Thm 1); μ_g is the largest μ whose (ε, δ) curve passes under
    the budget's (Dong, Roth & Su 2022, Cor. 2.13). Only continuous Gaussian noise is μ-GDP with
    μ = Δ/σ (DRS 2022, Thm 2.7); other spends are refused, never converted. That includes the
    discrete Gaussian on a grid that bayesdp's own `Gaussian` samples: it is exactly ρ-zCDP
    (CKS 2020, Thm 14), so its spends belong in a zcdp ledger, but no μ-GDP bound is proved."""

    name = "gdp"
    title = "Gaussian DP filter (Smith & Thakurta 2022, Thm 1)"

    def __init__(self, budget: Guarantee) -> None:
        super().__init__(budget)
        self.mu = gdp_mu(budget.epsilon, budget.delta)

    def check(self, g: Guarantee) -> None:
        if not g.noise or any(n.family != "gaussian" or n.grid is not None for n in g.noise):
            kinds = ", ".join(n.family + ("" if n.grid is None else " on a grid") for n in g.noise)
            raise InvalidParameter(
                f"guarantee={g} ({kinds or 'a stated guarantee without its noise'}) is not allowed "
                "under the gdp filter: it admits only continuous Gaussian noise, whose μ = Δ/σ is "
                "exact (the discrete Gaussian on a grid that bayesdp's Gaussian samples, Laplace, "
                "selection and stated (ε, δ) have no proved μ); use a ledger with "
                "accounting='zcdp', 'advanced' or 'basic' for them"
            )

    @staticmethod
    def mu_squared(g: Guarantee) -> float:
        """μ² of one spend: Σ repetitions·(Δ/σ)² over its Gaussian noises (DRS 2022, Cor. 3.3)."""
        total = 0.0
        for n in g.noise:
            total += n.repetitions * (n.sensitivity / n.scale) ** 2
        return total

    def charge(self, g: Guarantee) -> Sums:
        return (self.mu_squared(g),)

    def fits(self, sums: Sums) -> bool:
        return sums[0] <= self.mu * self.mu

    def total_of(self, sums: Sums) -> Guarantee:
        return self._gdp(math.sqrt(sums[0]))

    def remaining_of(self, sums: Sums) -> Guarantee:
        return self._gdp(math.sqrt(max(0.0, self.mu * self.mu - sums[0])))

    def used_of(self, sums: Sums) -> float:
        return share(sums[0], self.mu * self.mu)

    def _gdp(self, mu: float) -> Guarantee:
        d = self.budget.delta
        g = Guarantee(gdp_epsilon(mu, d), delta=d, rho=mu * mu / 2)  # μ-GDP ⇒ μ²/2-zCDP
        return self._bounded(g, f"μ={mu:.6g}-GDP")


class AdvancedFilter(Filter):
    """Halt before √(2 ln(1/δ'') Σε_m²) + ½Σε_m² > ε or Σδ_m > δ' (Whitehouse, Ramdas, Rogers &
    Wu 2023, "Fully-Adaptive Composition in DP", ICML, Thm 3.2), with δ' = δ'' = δ/2 fixed here.

    Why: the privacy loss of ε_m-DP steps has conditional mean ≤ ε_m²/2 and is ε_m²-sub-Gaussian,
    so exp(λ(L_n − V_n/2) − λ²V_n/2) is a supermartingale (V_n = Σε_m²); while V_n ≤ V*, Ville's
    inequality at λ = (ε − V*/2)/V* bounds P(L_N ≥ ε) by δ'' exactly when ε = √(2V* ln 1/δ'') + V*/2.
    """

    name = "advanced"
    title = "advanced composition filter (Whitehouse, Ramdas, Rogers & Wu 2023, Thm 3.2)"
    width = 2  # Σε², Σδ

    def __init__(self, budget: Guarantee) -> None:
        super().__init__(budget)
        self.slack = budget.delta / 2  # δ'': the concentration's failure probability
        self.delta_share = budget.delta - self.slack  # δ': what the spends' δ may add up to
        root = math.sqrt(2 * math.log(1 / self.slack))
        # the largest Σε² the bound admits: the root in s = √V of s²/2 + s√(2 ln 1/δ'') = ε
        self.variance = (math.sqrt(root * root + 2 * budget.epsilon) - root) ** 2

    def bound(self, squares: float) -> float:
        """The filter's ε for Σε_m² = `squares` (Whitehouse et al. 2023, Thm 3.2)."""
        return math.sqrt(2 * math.log(1 / self.slack) * squares) + squares / 2

    def charge(self, g: Guarantee) -> Sums:
        return (g.epsilon * g.epsilon, g.delta)

    def fits(self, sums: Sums) -> bool:
        return self.bound(sums[0]) <= self.budget.epsilon and sums[1] <= self.delta_share

    def total_of(self, sums: Sums) -> Guarantee:
        delta = min(sums[1] + self.slack, self.budget.delta)
        return self._bounded(Guarantee(self.bound(sums[0]), delta=delta))

    def remaining_of(self, sums: Sums) -> Guarantee:
        eps = math.sqrt(max(0.0, self.variance - sums[0]))
        return self._bounded(Guarantee(eps, delta=max(0.0, self.delta_share - sums[1])),
                             "the largest next spend")

    def used_of(self, sums: Sums) -> float:
        return max(share(sums[0], self.variance), share(sums[1], self.delta_share))


FILTERS: dict[str, type[Filter]] = {
    f.name: f for f in (BasicFilter, ZcdpFilter, GdpFilter, AdvancedFilter)
}
ACCOUNTINGS: tuple[str, ...] = tuple(FILTERS)


def share(used: float, capacity: float) -> float:
    """`used` as a share of `capacity`, at most 1; of a capacity of 0, all of it once anything is used."""
    if capacity <= 0:
        return 1.0 if used > 0 else 0.0
    return min(1.0, used / capacity)


def budget_rho(b: Guarantee) -> float:
    """The budget as ρ: stated, or the largest ρ whose tight (ε, δ) fits (CKS 2020, Prop. 12)."""
    if b.rho is not None:
        return b.rho
    hi = 1.0
    while zcdp_epsilon(hi, b.delta) < b.epsilon:
        hi *= 2
    return float(brentq(lambda r: zcdp_epsilon(r, b.delta) - b.epsilon, 0.0, hi, xtol=1e-14))


def gdp_delta(epsilon: float, mu: float) -> float:
    """δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) of μ-GDP (Dong, Roth & Su 2022, Cor. 2.13)."""
    if mu == 0:
        return 0.0
    a = -epsilon / mu
    return max(0.0, float(ndtr(a + mu / 2)) - math.exp(epsilon + float(log_ndtr(a - mu / 2))))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest μ whose δ(ε) ≤ `delta` at `epsilon` (DRS 2022, Cor. 2.13; δ(ε) grows with μ)."""
    if delta <= 0:
        raise InvalidParameter(f"delta={delta!r} is not allowed: a Gaussian DP budget needs δ > 0")
    hi = 1.0
    while gdp_delta(epsilon, hi) < delta:
        hi *= 2
    return float(brentq(lambda m: gdp_delta(epsilon, m) - delta, 0.0, hi, xtol=1e-14))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest ε with δ(ε) ≤ `delta` for μ-GDP (DRS 2022, Cor. 2.13; δ(ε) falls with ε)."""
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(hi, mu) > delta:
        hi *= 2
    return float(brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-14))


def filter_for(accounting: str, budget: Guarantee) -> Filter:
    """The filter named `accounting` for `budget` (PLD is refused: see the module)."""
    if accounting == "pld":
        raise InvalidParameter(PLD_REFUSED)
    return FILTERS[accounting](budget)
