"""The Guarantee: what a release costs, for which neighbour relation and privacy unit."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from bayesdp.errors import InvalidParameter, check_delta, check_nonnegative, invalid

Relation = Literal["add_remove", "replace_one"]
RELATIONS: tuple[str, ...] = ("add_remove", "replace_one")


@dataclass(frozen=True)
class Guarantee:
    """(ε, δ)-DP, or ρ-zCDP when `rho` is set, per `unit` under the neighbour `relation` (Dwork 2006, Def. 2).

    `mechanism` is the mechanism that produced it (None for a stated guarantee); tight
    accountants use it to know the noise. It does not take part in equality.
    """

    epsilon: float
    delta: float = 0.0
    relation: Relation = "add_remove"
    unit: str = "row"
    rho: float | None = None
    mechanism: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta("delta", self.delta))
        if self.relation not in RELATIONS:
            raise invalid("relation", self.relation, f"one of {RELATIONS}")
        if not isinstance(self.unit, str) or not self.unit:
            raise invalid("unit", self.unit, "a non-empty string naming the privacy unit")
        if self.rho is not None:
            object.__setattr__(self, "rho", check_nonnegative("rho", self.rho))

    @classmethod
    def zcdp(
        cls,
        rho: float,
        *,
        delta: float = 1e-9,
        relation: Relation = "add_remove",
        unit: str = "row",
        mechanism: Any = None,
    ) -> Guarantee:
        """ρ-zCDP, with ε reported at `delta` by ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
        r = check_nonnegative("rho", rho)
        d = check_delta("delta", delta)
        if d == 0 and r > 0:
            raise invalid("delta", delta, "> 0 to state a zCDP guarantee as (ε, δ)")
        eps = r + 2 * math.sqrt(r * math.log(1 / d)) if r > 0 else 0.0
        return cls(eps, d, relation=relation, unit=unit, rho=r, mechanism=mechanism)

    @property
    def is_pure(self) -> bool:
        return self.delta == 0.0 and self.rho is None

    def __str__(self) -> str:
        head = f"ρ={self.rho:.6g}-zCDP (ε={self.epsilon:.6g}, δ={self.delta:.3g})" if self.rho is not None \
            else (f"ε={self.epsilon:.6g}" + (f", δ={self.delta:.3g}" if self.delta else ""))
        return f"{head} per {self.unit} ({self.relation.replace('_', '/')} neighbours)"


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
