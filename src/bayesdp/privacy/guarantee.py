"""The Guarantee: what a release costs, for which neighbour relation and privacy unit.

Post-processing is free: any function of a release computed without going back to the data
keeps the release's guarantee (Dwork 2006; Wasserman & Zhou 2010, Lemma 2.6). Only new
accesses to the data cost budget, and they compose (see `bayesdp.privacy.accounting`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, Literal

from bayesdp.errors import (
    InvalidParameter,
    check_delta,
    check_finite,
    check_nonnegative,
    check_positive_int,
    invalid,
)
from bayesdp.privacy import semantics
from bayesdp.privacy.dependence import Dependence
from bayesdp.privacy.noise import Noise
from bayesdp.privacy.semantics import SemanticPrivacy

Relation = Literal["add_remove", "replace_one"]
RELATIONS: tuple[str, ...] = ("add_remove", "replace_one")
RELATION_NAMES = {"add_remove": "add/remove", "replace_one": "replace-one"}  # as printed
KNOWN_PLURALS = {"row": "rows"}  # the plural of the library's own default unit


@dataclass(frozen=True)
class Guarantee:
    """(ε, δ)-DP, or ρ-zCDP when `rho` is set, per `unit` under neighbour `relation` (Dwork 2006).

    `noise` is what the mechanisms behind it add (empty for a stated guarantee); tight
    accountants read it. It does not take part in equality. When `rho` is set, the guarantee
    is both ρ-zCDP and (ε, δ)-DP. `dependence` is None for independent records, else the
    correlation model under which ε holds (Pufferfish privacy or Bayesian DP); guarantees
    under different dependence assumptions never compose. `bound` names what bounds a total
    that a ledger reports (its privacy filter); it does not take part in equality either.
    """

    epsilon: float
    _: KW_ONLY
    delta: float = 0.0
    relation: Relation = "add_remove"
    unit: str = "row"
    rho: float | None = None
    noise: tuple[Noise, ...] = field(default=(), compare=False, repr=False)
    dependence: Dependence | None = None
    bound: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta("delta", self.delta))
        if self.relation not in RELATIONS:
            raise invalid("relation", self.relation, f"one of {RELATIONS}")
        if not isinstance(self.unit, str) or not self.unit:
            raise invalid("unit", self.unit, "a non-empty string naming the privacy unit")
        if self.rho is not None:
            object.__setattr__(self, "rho", check_nonnegative("rho", self.rho))
        if not isinstance(self.noise, tuple) or not all(isinstance(n, Noise) for n in self.noise):
            raise invalid("noise", self.noise, "a tuple of Noise descriptions")
        if self.dependence is not None and not isinstance(self.dependence, Dependence):
            raise invalid("dependence", self.dependence, "None (independent records) or a Dependence")
        if self.bound is not None and not isinstance(self.bound, str):
            raise invalid("bound", self.bound, "None or a string naming what bounds the total")

    @classmethod
    def zcdp(
        cls,
        rho: float,
        *,
        delta: float = 1e-9,
        relation: Relation = "add_remove",
        unit: str = "row",
        noise: tuple[Noise, ...] = (),
    ) -> Guarantee:
        """ρ-zCDP, stated at `delta` as ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
        r = check_nonnegative("rho", rho)
        d = check_delta("delta", delta)
        if d == 0 and r > 0:
            raise invalid("delta", delta, "> 0 to state a zCDP guarantee as (ε, δ)")
        eps = r + 2 * math.sqrt(r * math.log(1 / d)) if r > 0 else 0.0
        return cls(eps, delta=d, relation=relation, unit=unit, rho=r, noise=noise)

    @property
    def is_pure(self) -> bool:
        return self.delta == 0.0 and self.rho is None

    def __str__(self) -> str:
        head = (
            f"ρ={self.rho:.6g}-zCDP (ε={self.epsilon:.6g}, δ={self.delta:.3g})"
            if self.rho is not None
            else (f"ε={self.epsilon:.6g}" + (f", δ={self.delta:.3g}" if self.delta else ""))
        )
        tail = "" if self.dependence is None else f", {self.dependence}"
        tail += "" if self.bound is None else f", {self.bound}"
        return f"{head} per {self.unit} ({RELATION_NAMES[self.relation]} neighbours){tail}"

    # -- composition and conversion ------------------------------------------------------

    def __add__(self, other: Guarantee) -> Guarantee:
        """Basic composition: ε, δ (and ρ) add (Dwork et al. 2006; Dwork & Roth 2014, Thm 3.16)."""
        if not isinstance(other, Guarantee):
            return NotImplemented
        check_compatible(other, self, "it is composed with a guarantee")
        return basic_composition([self, other])

    def __radd__(self, other: Any) -> Guarantee:
        """Lets `sum(guarantees)` start from 0."""
        if isinstance(other, int) and other == 0:
            return self
        return NotImplemented

    def group(self, k: int, *, unit: str | None = None, plural: str | None = None) -> Guarantee:
        """Any k units at once: kε, δΣ_{j<k}e^{jε} ≤ k·e^{(k−1)ε}·δ, k²ρ (Vadhan 2017, L. 2.2).

        The ρ factor is Bun & Steinke 2016, Prop. 1.9. `unit` names the new privacy unit; by
        default "group of k <plural>" with `plural` the unit's plural as configured (a service
        dataset's `unit_plural`), never one guessed: without it, "<unit> group of size k".
        """
        k = check_positive_int("k", k)
        if plural is not None and (not isinstance(plural, str) or not plural):
            raise invalid("plural", plural, f"a non-empty string: the plural of unit {self.unit!r}")
        if unit is None:
            plural = plural or KNOWN_PLURALS.get(self.unit)
            unit = self.unit if k == 1 else \
                f"group of {k} {plural}" if plural else f"{self.unit} group of size {k}"
        return self._scaled(k, unit=unit, relation=self.relation)

    def to_relation(self, relation: Relation) -> Guarantee:
        """Restate under another neighbour relation (Dwork 2006, Remark 2.1; seed 003).

        A replacement is a removal then an addition, so add/remove (ε, δ) gives replace-one
        (2ε, (1 + e^ε)δ), and ρ-zCDP gives 4ρ. The converse does not hold: replace-one
        neighbours always have the same size, so a replace-one guarantee says nothing when a
        row is added or removed (a mechanism may publish n exactly).
        """
        if relation not in RELATIONS:
            raise invalid("relation", relation, f"one of {RELATIONS}")
        if relation == self.relation:
            return self
        if relation == "add_remove":
            raise InvalidParameter(
                "relation='add_remove' is not allowed from a replace_one guarantee: replace-one "
                "neighbours keep the size, so nothing bounds what adding or removing a row "
                "reveals; state the mechanism's guarantee under add/remove instead"
            )
        return self._scaled(2, unit=self.unit, relation=relation)

    def _scaled(self, k: int, *, unit: str, relation: Relation) -> Guarantee:
        """Group privacy for k steps along a chain of neighbours (Dwork & Roth 2014, Thm 2.2)."""
        if k == 1:
            return replace(self, unit=unit, relation=relation, noise=())
        if self.dependence is not None:
            raise InvalidParameter(
                f"k={k} is not allowed for a guarantee under {self.dependence}: the model already "
                "states how records depend on each other; calibrate for the larger unit instead"
            )
        e = self.epsilon
        # δ(1 + e^ε + ... + e^{(k-1)ε}): a geometric sum, written to stay exact at ε = 0.
        if self.delta == 0:
            delta = 0.0
        elif e == 0:
            delta = self.delta * k
        elif k * e > 700:  # the factor overflows: δ is certainly >= 1
            delta = math.inf
        else:
            delta = self.delta * (math.expm1(k * e) / math.expm1(e))
        if delta >= 1:
            raise InvalidParameter(
                f"k={k} is not allowed: the group guarantee would have δ={delta:.3g} >= 1, "
                "which protects nothing"
            )
        rho = None if self.rho is None else k * k * self.rho
        return Guarantee(k * e, delta=delta, relation=relation, unit=unit, rho=rho)

    # -- meaning (bayesdp.privacy.semantics) ---------------------------------------------

    def semantic(self, n: int) -> SemanticPrivacy:
        """Semantic privacy on databases of n rows (Kasiviswanathan & Smith, Thms 2.2 and 2.4)."""
        return semantics.semantic(self, n)

    def posterior(self, prior: float) -> float:
        """Largest posterior on a yes/no fact about one person from prior p: pe^ε/(1 − p + pe^ε)."""
        return semantics.posterior(self, prior)

    def tradeoff(self, alpha: float) -> float:
        """Smallest type-II error of any test at type-I error α (Kairouz et al. 2015, Thm 2.1)."""
        return semantics.tradeoff(self, alpha)

    def min_total_error(self) -> float:
        """min(α + β) = 2(1 − δ)/(1 + e^ε) over all tests (Kairouz, Oh & Viswanath 2015)."""
        return semantics.min_total_error(self)

    def explain(self, n: int | None = None, prior: float | None = None) -> str:
        """A short paragraph in plain words on what this guarantee lets an adversary conclude."""
        return semantics.explain(self, n=n, prior=prior)


def basic_composition(gs: Sequence[Guarantee]) -> Guarantee:
    """Basic composition: Σε, Σδ, Σρ (Dwork & Roth 2014, Thm 3.16; Bun & Steinke 2016, L. 1.7)."""
    rhos = [g.rho for g in gs]
    rho = math.fsum(r for r in rhos if r is not None) if all(r is not None for r in rhos) else None
    delta = math.fsum(g.delta for g in gs)
    if delta >= 1:
        raise InvalidParameter(
            f"delta={delta:.3g} is not allowed: the composed δ (sum of the parts) must be < 1"
        )
    return Guarantee(
        math.fsum(g.epsilon for g in gs),
        delta=delta,
        relation=gs[0].relation,
        unit=gs[0].unit,
        rho=rho,
        dependence=gs[0].dependence,
    )


def dp_from_semantic(epsilon: float, delta: float = 0.0) -> Guarantee:
    """The converse (KS Thm 2.2: ε/2-SP ⇒ 3ε-DP for ε ≤ 0.45; Thm 2.4: (ε, δ)-SP ⇒ (3ε, 2δ)-DP).

    `epsilon`, `delta` are semantic-privacy parameters. The DP is under replace-one neighbours,
    the relation in which seed 000 states DP (databases of n entries, one entry changed).
    """
    d = check_delta("delta", delta)
    e = check_finite("epsilon", epsilon)
    if d == 0:
        if not 0 < e <= 0.225:
            raise invalid("epsilon", epsilon, "in (0, 0.225] (Thm 2.2 needs ε/2-SP with ε ≤ 0.45)")
        return Guarantee(6 * e, relation="replace_one")
    if not 0 < e <= 0.45:
        raise invalid("epsilon", epsilon, "in (0, 0.45] (Thm 2.4's converse)")
    if 2 * d >= 1:
        raise invalid("delta", delta, "< 0.5, so that 2δ < 1")
    return Guarantee(3 * e, delta=2 * d, relation="replace_one")



def check_compatible(g: Guarantee, ref: Guarantee, context: str) -> None:
    """Refuse to combine guarantees stated for different neighbour relations or privacy units."""
    if g.relation != ref.relation:
        raise InvalidParameter(
            f"relation={g.relation!r} is not allowed here: {context} for "
            f"relation={ref.relation!r}; convert with .to_relation() first"
        )
    if g.unit != ref.unit:
        raise InvalidParameter(
            f"unit={g.unit!r} is not allowed here: {context} for unit={ref.unit!r}; restate "
            "both for one privacy unit first (e.g. .group(k, unit=...))"
        )
    if g.dependence != ref.dependence:
        raise InvalidParameter(
            f"dependence={_assumption(g)} is not allowed here: {context} for "
            f"dependence={_assumption(ref)}; guarantees under different dependence assumptions "
            "do not compose (keep a ledger per assumption)"
        )


def _assumption(g: Guarantee) -> str:
    if g.dependence is None:
        return "None (independent records)"
    return f"{g.dependence} (model {g.dependence.fingerprint}, {g.dependence.length} records)"


def _epsilon(value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise invalid("epsilon", value, "a finite number >= 0") from None
    if math.isnan(x) or x < 0:
        raise invalid("epsilon", value, "a finite number >= 0")
    if math.isinf(x):
        raise InvalidParameter(f"epsilon={value!r} is not allowed: an infinite ε is no guarantee")
    return x
