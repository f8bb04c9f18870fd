"""Composition of guarantees: basic, advanced, zCDP, and RDP / PLD through dp-accounting."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from scipy.optimize import minimize_scalar

from bayesdp.errors import (
    InvalidParameter,
    check_delta,
    check_nonnegative,
    invalid,
)
from bayesdp.privacy.guarantee import Guarantee, basic_composition, check_compatible
from bayesdp.privacy.noise import Noise

Method = Literal["basic", "advanced", "zcdp", "rdp", "pld"]
METHODS: tuple[str, ...] = ("basic", "advanced", "zcdp", "rdp", "pld")
# Discretization of privacy-loss values for the PLD accountant (dp-accounting's default).
PLD_INTERVAL = 1e-4
# One accounted item: a stated guarantee (noise None), or one noise (its guarantee when that
# noise alone produced it), and how many times it runs.
Event = tuple[Guarantee | None, Noise | None, int]


# -- zCDP -> (ε, δ) ----------------------------------------------------------------------


def zcdp_epsilon_simple(rho: float, delta: float) -> float:
    """ε = ρ + 2√(ρ ln(1/δ)) for ρ-zCDP at δ (Bun & Steinke 2016, Prop. 1.3)."""
    r, d = _rho_delta(rho, delta)
    return r + 2 * math.sqrt(r * math.log(1 / d)) if r > 0 else 0.0


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Tight ε of ρ-zCDP: inf_α αρ + ln(1−1/α) − ln(αδ)/(α−1) (CKS 2020, Prop. 12)."""
    r, d = _rho_delta(rho, delta)
    if r == 0:
        return 0.0
    log_d = math.log(d)

    def eps(u: np.ndarray) -> np.ndarray:  # α = 1 + e^u keeps α > 1 and spans all scales
        a = 1.0 + np.exp(u)
        out: np.ndarray = a * r + np.log1p(-1.0 / a) - (np.log(a) + log_d) / (a - 1.0)
        return out

    grid = np.linspace(-30.0, 40.0, 1401)
    best = int(np.argmin(eps(grid)))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    res = minimize_scalar(
        lambda u: float(eps(np.array([u]))[0]), bounds=(lo, hi), method="bounded"
    )
    tight = min(float(res.fun), float(eps(grid[best : best + 1])[0]))
    return max(0.0, min(tight, zcdp_epsilon_simple(r, d)))


def _rho_delta(rho: float, delta: float) -> tuple[float, float]:
    r = check_nonnegative("rho", rho)
    d = check_delta("delta", delta)
    if d == 0 and r > 0:
        raise invalid("delta", delta, "in (0, 1) to state a zCDP guarantee as (ε, δ)")
    return r, d


# -- composition -------------------------------------------------------------------------


def compose(
    items: Iterable[Any], method: Method | str = "basic", delta: float | None = None
) -> Guarantee:
    """The guarantee of running all `items` (Guarantees or mechanisms) on the same data.

    basic: ε, δ, ρ add. advanced: Dwork–Rothblum–Vadhan with slack `delta`. zcdp: ρ adds,
    reported at `delta` by the tight Canonne–Kamath–Steinke conversion. rdp, pld: Google's
    dp-accounting on the noise each mechanism adds (a Guarantee without a known mechanism
    enters through its stated parameters). The result is never worse than basic composition.
    """
    gs = _guarantees(items)
    if method not in METHODS:
        raise invalid("method", method, f"one of {METHODS}")
    first = gs[0]
    if method == "basic":
        if delta is not None:
            raise invalid("delta", delta, "None for basic composition (δ's simply add)")
        return basic_composition(gs)
    if delta is None:
        raise invalid("delta", delta, f"a number in (0, 1) for {method} composition")
    d = check_delta("delta", delta)
    if d == 0:
        raise invalid("delta", delta, f"in (0, 1) for {method} composition")
    if gs[0].dependence is not None:
        raise invalid("method", method, f"'basic' for guarantees under {gs[0].dependence}")
    basic = basic_composition(gs)
    if method == "advanced":
        eps, total_delta = _advanced(gs, d)
        if eps < basic.epsilon:
            return Guarantee(eps, delta=total_delta, relation=first.relation, unit=first.unit)
        return basic
    rho: float | None = None
    events = [e for g in gs for e in events_of(g)]
    if method == "zcdp":
        rho = math.fsum(n * rho_of(g, noise) for g, noise, n in events)
        eps = zcdp_epsilon(rho, d)
    elif method == "rdp":
        eps = _rdp_epsilon(events, d)
    else:
        eps = _pld_epsilon(events, d)
    if basic.delta <= d and basic.epsilon < eps:
        eps = basic.epsilon  # (ε_basic, Σδ)-DP implies (ε_basic, δ)-DP
    return Guarantee(eps, delta=d, relation=first.relation, unit=first.unit, rho=rho)


def _guarantees(items: Iterable[Any]) -> list[Guarantee]:
    """Each item's guarantee (a Guarantee, or a mechanism's); all must share relation and unit."""
    gs: list[Guarantee] = []
    for item in items:
        g = item if isinstance(item, Guarantee) else getattr(item, "guarantee", None)
        if not isinstance(g, Guarantee):
            raise invalid("items", item, "Guarantees or mechanisms (objects with a .guarantee)")
        gs.append(g)
    if not gs:
        raise invalid("items", gs, "a non-empty sequence of Guarantees or mechanisms")
    for g in gs[1:]:
        check_compatible(g, gs[0], "it is composed with a guarantee")
    return gs


def events_of(g: Guarantee) -> list[Event]:
    """What the tight accountants compose for `g`: its noises, or its stated ε, δ when some
    noise is not one they know (or none is stated)."""
    if not g.noise or not all(n.accounted for n in g.noise):
        return [(g, None, 1)]
    if len(g.noise) == 1 and g.noise[0].repetitions == 1:
        return [(g, g.noise[0], 1)]
    return [(None, n, n.repetitions) for n in g.noise]


def guarantee_rho(g: Guarantee) -> float:
    """ρ of a whole guarantee: stated, or the sum over its noises (Bun & Steinke 2016, L. 1.7)."""
    if g.rho is not None:
        return g.rho
    return math.fsum(n * rho_of(part, noise) for part, noise, n in events_of(g))


def _advanced(gs: Sequence[Guarantee], slack: float) -> tuple[float, float]:
    """ε = √(2 ln(1/δ') Σε²) + Σε(e^ε − 1), δ = Σδ + δ' (Dwork–Rothblum–Vadhan 2010, Thm III.3)."""
    eps = np.array([g.epsilon for g in gs])
    bound = math.sqrt(2 * math.log(1 / slack) * float(np.sum(eps**2)))
    with np.errstate(over="ignore"):  # a huge ε makes the bound infinite: basic wins
        bound += float(np.sum(eps * np.expm1(eps)))
    return bound, math.fsum(g.delta for g in gs) + slack


def rho_of(g: Guarantee | None, noise: Noise | None) -> float:
    """ρ: stated, Δ²/2σ² for Gaussian noise (CKS 2020, Thm 14), ε²/2 if pure (BS16, Prop. 1.4)."""
    if g is not None and g.rho is not None:
        return g.rho
    if noise is not None and (noise.is_gaussian or g is None):
        return noise.rho()
    assert g is not None
    if g.delta == 0:
        return g.epsilon * g.epsilon / 2
    raise InvalidParameter(
        f"{g} has no zCDP bound: an (ε, δ) guarantee with δ > 0 and unknown noise cannot be "
        "stated as ρ-zCDP; compose it with method='basic', 'advanced' or 'pld'"
    )


def _rr_noise_parameter(noise: Noise) -> float:
    """k-ary ε-RR redraws a uniform bucket with probability k/(e^ε + k − 1) (seed 003, Ex. 1)."""
    k = noise.categories
    return k / (math.exp(noise.epsilon) + k - 1)


def _rdp_epsilon(events: Sequence[Event], delta: float) -> float:
    """Sum RDP curves from dp-accounting (Mironov 2017) and convert at δ (CKS 2020, Prop. 12)."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib  # heavy: import on use

    total: np.ndarray | None = None
    orders: np.ndarray | None = None
    counts: Counter[tuple[Any, Any]] = Counter()
    for g, noise, n in events:
        counts[_rdp_event(g, noise)] += n
    for (event, relation), count in counts.items():
        acc = rdp_lib.RdpAccountant(neighboring_relation=relation)
        acc.compose(event, count)
        total = acc.rdp if total is None else total + acc.rdp
        orders = acc.orders
    assert total is not None and orders is not None
    eps, _ = rdp_lib.compute_epsilon(orders, total, delta)
    return float(eps)


def _rdp_event(g: Guarantee | None, noise: Noise | None) -> tuple[Any, Any]:
    """One item as a dp-accounting event and the neighbour relation it is stated for."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    add_remove = rdp_lib.NeighborRel.ADD_OR_REMOVE_ONE
    if noise is not None and noise.family == "randomized_response":
        event = dp_event.RandomizedResponseDpEvent(_rr_noise_parameter(noise), noise.categories)
        return event, rdp_lib.NeighborRel.REPLACE_ONE
    if noise is not None and noise.grid is None and noise.family == "laplace":
        return dp_event.LaplaceDpEvent(noise.scale / noise.sensitivity), add_remove
    if noise is not None and noise.grid is None and noise.family == "gaussian":
        return dp_event.GaussianDpEvent(noise.scale / noise.sensitivity), add_remove
    return dp_event.ZCDpEvent(rho_of(g, noise)), add_remove


def _pld_epsilon(events: Sequence[Event], delta: float) -> float:
    """Compose privacy-loss distributions in dp-accounting (Doroshenko et al. 2022)."""
    counts: Counter[_PldKey] = Counter()
    for g, noise, n in events:
        counts[_pld_key(g, noise)] += n
    pld: Any = None
    for key, count in counts.items():
        part = _pld_of(key).self_compose(count) if count > 1 else _pld_of(key)
        pld = part if pld is None else pld.compose(part)
    assert pld is not None
    eps = float(pld.get_epsilon_for_delta(delta))
    if not math.isfinite(eps):
        raise invalid(
            "delta", delta, "larger than the δ the composed items already spend at ε = ∞"
        )
    return eps


_PldKey = tuple[str, float, float]


def _pld_key(g: Guarantee | None, noise: Noise | None) -> _PldKey:
    """A hashable description of one item's privacy-loss distribution."""
    if noise is None:
        assert g is not None
        return ("dp", g.epsilon, g.delta)
    if noise.family == "randomized_response":
        return ("rr", _rr_noise_parameter(noise), float(noise.categories))
    scale, sens = noise.steps
    base = noise.family.removeprefix("discrete_")
    # Adjacent privacy-loss values on the lattice are 2/b (Laplace) or Δ/σ² (Gaussian) apart;
    # when that is finer than the PLD's own discretization the continuous law in grid units
    # gives the same ε up to that rounding (tested against dp-accounting's discrete PLD), and
    # costs O(1/interval) instead of O(lattice size).
    spacing = 2 / scale if base == "laplace" else sens / (scale * scale)
    lattice = (noise.grid is not None or noise.family != base) and spacing >= PLD_INTERVAL
    return (("discrete_" if lattice else "") + base, scale, sens)


@lru_cache(maxsize=256)
def _pld_of(key: _PldKey) -> Any:
    """The dp-accounting privacy-loss distribution of one item."""
    from dp_accounting.pld import common as pld_common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    kind, a, b = key
    step = PLD_INTERVAL
    if kind == "dp":
        params = pld_common.DifferentialPrivacyParameters(a, b)
        return pld_lib.from_privacy_parameters(params, value_discretization_interval=step)
    if kind == "rr":
        return pld_lib.from_randomized_response(a, int(b), value_discretization_interval=step)
    if kind == "laplace":
        return pld_lib.from_laplace_mechanism(a, b, value_discretization_interval=step)
    if kind == "gaussian":
        return pld_lib.from_gaussian_mechanism(a, b, value_discretization_interval=step)
    sens = _integer_sensitivity(b)
    if kind == "discrete_laplace":
        return pld_lib.from_discrete_laplace_mechanism(
            1.0 / a, sens, value_discretization_interval=step
        )
    return pld_lib.from_discrete_gaussian_mechanism(a, sens, value_discretization_interval=step)


def _integer_sensitivity(value: float) -> int:
    if value != math.floor(value) or value < 1:
        raise invalid("sensitivity", value, "a positive integer for integer-valued noise")
    return int(value)
