"""The plan: how the budget is split, which mechanism each noisy part uses, the total guarantee.

Default split (documented, overridable): every aggregate has weight 1 and, when keys are
private, partition selection has weight 1 too; each gets ε·weight/Σweights. An aggregate's own
parts share its budget by their fractions (`Aggregate.noisy`; a mean's second stage is one of two
branches, each completing the aggregate's budget: `Aggregate.branches`). With
Laplace noise δ goes entirely to partition selection. With Gaussian noise, partition selection
(if any) gets half of δ and the aggregates compose in zCDP (Bun & Steinke 2016, Lemma 2.3):
their total ρ is the largest whose tight (ε, δ) conversion (Canonne, Kamath & Steinke 2020,
Prop. 12, via `privacy.zcdp_epsilon`) stays within the rest of the budget.

Every noisy value is one entry per group; a unit touches at most `max_groups` groups, so each
entry runs with 1/max_groups of its part's budget and the groups compose to the part's budget.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass
from typing import Any

from bayesdp.errors import InvalidParameter, invalid
from bayesdp.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    Mechanism,
)
from bayesdp.privacy import Guarantee, compose, zcdp_epsilon
from bayesdp.tables.aggregates import Aggregate, Noisy
from bayesdp.tables.selection import PartitionSelection

NOISES = ("laplace", "gaussian")


@dataclass(frozen=True)
class Part:
    """One noisy component of an aggregate: its mechanism (per group) and its share."""

    name: str
    sensitivity: float
    mechanism: Any  # a bayesdp.mechanisms object: scale, guarantee, release, interval or select

    @property
    def scale(self) -> float:
        return float(self.mechanism.scale)


@dataclass(frozen=True)
class Step:
    """The budget of one aggregate, the mechanisms of its parts, the rows a unit keeps per group.

    The aggregates read it as an `estimate.PlannedStep`, so they need not import this module."""

    name: str
    aggregate: Aggregate
    epsilon: float | None
    rho: float | None
    parts: dict[str, Part]
    max_rows: int = 1


@dataclass(frozen=True)
class Plan:
    """Budget split, mechanisms and noise scales, bounding, and the total guarantee per unit."""

    noise: str
    _: KW_ONLY
    epsilon: float
    delta: float
    unit: str
    max_groups: int
    max_rows: int
    selection: PartitionSelection | None
    steps: dict[str, Step]
    guarantee: Guarantee

    def table(self) -> list[dict[str, Any]]:
        """One row per noisy part: aggregate, part, budget, mechanism, sensitivity, scale."""
        rows: list[dict[str, Any]] = []
        if self.selection is not None:
            eps, delta = self.selection.per_group
            rows.append({"aggregate": "(partition selection)", "part": "keys",
                         "epsilon": self.selection.epsilon, "rho": None,
                         "mechanism": "truncated geometric", "sensitivity": 1.0,
                         "noise scale": None, "per group": f"ε={eps:.4g}, δ={delta:.3g}"})
        for step in self.steps.values():
            for part in step.parts.values():
                g = part.mechanism.guarantee
                rows.append({"aggregate": step.name, "part": part.name, "epsilon": step.epsilon,
                             "rho": step.rho, "mechanism": type(part.mechanism).__name__,
                             "sensitivity": part.sensitivity, "noise scale": part.scale,
                             "per group": str(g).split(" per ")[0]})
        return rows

    def describe(self) -> str:
        lines = [f"total: {self.guarantee}",
                 f"noise: {self.noise}; bounding: each {self.unit} keeps at most "
                 f"{self.max_groups} group(s) and {self.max_rows} row(s) per group, chosen at random"]
        if self.selection is not None:
            lines.append(f"keys: private, {self.selection.describe()}")
        for r in self.table():
            if r["noise scale"] is None:
                continue
            budget = f"ε={r['epsilon']:.4g}" if r["rho"] is None else f"ρ={r['rho']:.4g}"
            lines.append(f"{r['aggregate']}.{r['part']}: {r['mechanism']} ({budget} for the "
                         f"aggregate), sensitivity {r['sensitivity']:.6g}, scale {r['noise scale']:.6g}")
        for step in self.steps.values():
            agg = step.aggregate
            if len(agg.branches) > 1:
                uses = " or ".join(" + ".join(b) for b in agg.branches)
                rule = f" ({agg.branch_rule})" if agg.branch_rule else ""
                lines.append(f"{step.name}: each group uses {uses}{rule}, so it spends the "
                             "aggregate's budget once")
        return "\n".join(lines)


def make_plan(aggregates: dict[str, Aggregate], *, epsilon: float, delta: float, noise: str,
              unit: str, max_groups: int, max_rows: int, private_keys: bool,
              selection_weight: float = 1.0) -> Plan:
    """Split (ε, δ) over partition selection and the aggregates; build every mechanism."""
    if noise not in NOISES:
        raise invalid("noise", noise, f"one of {NOISES}")
    if private_keys and delta == 0:
        raise InvalidParameter(
            "delta=0 is not allowed with private keys: partition selection needs delta > 0 "
            "(for example 1e-6; on the command line --delta 1e-6), or make the keys public "
            "(keys=[...] in group_by or in the spec)")
    if noise == "gaussian" and delta == 0:
        raise invalid("delta", delta, "> 0 with noise='gaussian' (Gaussian noise is never pure ε-DP)")
    fixed = {n: a.epsilon for n, a in aggregates.items() if a.epsilon is not None}
    if fixed and noise == "gaussian":
        raise InvalidParameter("epsilon= per aggregate needs noise='laplace'; with Gaussian "
                               "noise set shares with weight= instead")
    spare = epsilon - math.fsum(fixed.values())
    weights = {n: a.weight for n, a in aggregates.items() if a.epsilon is None}
    total_w = math.fsum(weights.values()) + (selection_weight if private_keys else 0.0)
    if (spare <= 0 and total_w > 0) or spare < -1e-12 * epsilon:
        raise InvalidParameter(f"the per-aggregate epsilons sum to {epsilon - spare:g}, which "
                               f"leaves nothing of epsilon={epsilon:g} for the rest")
    k = max_groups
    selection = None
    if private_keys:
        sel_delta = delta if noise == "laplace" else delta / 2
        selection = PartitionSelection(spare * selection_weight / total_w, sel_delta, k)
    steps: dict[str, Step] = {}
    if noise == "laplace":
        for name, agg in aggregates.items():
            eps = fixed[name] if name in fixed else spare * weights[name] / total_w
            steps[name] = _step(name, agg, eps, None, k, max_rows, unit)
        used = [Guarantee(math.fsum(s.epsilon or 0.0 for s in steps.values()), delta=0.0, unit=unit)]
    else:
        agg_eps = spare * math.fsum(weights.values()) / total_w
        agg_delta = delta - (selection.delta if selection else 0.0)
        rho = rho_for(agg_eps, agg_delta)
        w_sum = math.fsum(weights.values())
        for name, agg in aggregates.items():
            steps[name] = _step(name, agg, None, rho * weights[name] / w_sum, k, max_rows, unit)
        used = [Guarantee(zcdp_epsilon(rho, agg_delta), delta=agg_delta, unit=unit, rho=rho)]
    if selection is not None:
        used.append(Guarantee(selection.epsilon, delta=selection.delta, unit=unit))
    total = compose(used, "basic")
    return Plan(noise, epsilon=epsilon, delta=delta, unit=unit, max_groups=k, max_rows=max_rows,
                selection=selection, steps=steps, guarantee=total)


def rho_for(epsilon: float, delta: float) -> float:
    """Largest ρ with zcdp_epsilon(ρ, δ) <= ε, by bisection on log ρ."""
    lo, hi = 1e-12, max(epsilon, 1e-6)
    while zcdp_epsilon(hi, delta) < epsilon:
        lo, hi = hi, hi * 2
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        if zcdp_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


def _step(name: str, agg: Aggregate, eps: float | None, rho: float | None, k: int,
          max_rows: int, unit: str) -> Step:
    parts = {}
    for part in agg.noisy:
        frac = part.fraction
        sens = agg.sensitivity(part.name, max_rows)
        try:
            mech = _mechanism(part, sens, eps and eps * frac, rho and rho * frac, k, unit)
        except InvalidParameter as exc:  # say which share of the budget is out of range
            raise InvalidParameter(
                f"{name}.{part.name} gets {frac:g} of its aggregate's budget, per group over "
                f"max_groups_per_unit={k}, with sensitivity {sens:g}: {exc} (raise epsilon, "
                "lower max_groups_per_unit or max_rows_per_group, or narrow the bounds)") from None
        parts[part.name] = Part(part.name, sens, mech)
    return Step(name, agg, eps, rho, parts, max_rows)


def _mechanism(part: Noisy, sens: float, eps: float | None, rho: float | None, k: int,
               unit: str) -> Mechanism:
    if part.select:
        # An ε-DP exponential mechanism is ε²/8-zCDP (Cesar & Rogers 2021, Lemma 3.2).
        e = eps if eps is not None else math.sqrt(8 * (rho or 0.0))
        return Exponential(e / k, sensitivity=sens, unit=unit)
    integer = part.integer and sens == int(sens)
    if eps is not None:
        return DiscreteLaplace(eps / k, sensitivity=int(sens), unit=unit) if integer else \
            Laplace(eps / k, sensitivity=sens, unit=unit)
    r = (rho or 0.0) / k
    return DiscreteGaussian(rho=r, sensitivity=int(sens), unit=unit) if integer else \
        Gaussian(rho=r, sensitivity=sens, unit=unit)
