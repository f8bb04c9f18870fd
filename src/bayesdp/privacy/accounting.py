"""Composition of guarantees: basic, advanced, zCDP, and RDP / PLD through dp-accounting."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from scipy.optimize import minimize_scalar

from bayesdp.errors import (
    InvalidParameter,
    check_delta,
    check_nonnegative,
    check_positive,
    invalid,
)
from bayesdp.privacy.guarantee import Guarantee, basic_composition, check_compatible

Method = Literal["basic", "advanced", "zcdp", "rdp", "pld"]
METHODS: tuple[str, ...] = ("basic", "advanced", "zcdp", "rdp", "pld")
NOISES: tuple[str, ...] = (
    "laplace",
    "gaussian",
    "discrete_laplace",
    "discrete_gaussian",
    "randomized_response",
)
# Discretization of privacy-loss values for the PLD accountant (dp-accounting's default).
PLD_INTERVAL = 1e-4


@dataclass(frozen=True)
class Noise:
    """The noise a mechanism adds, as the tight accountants need it (kind from `mechanism.noise`).

    `scale` is the Laplace b or Gaussian σ in data units, `sensitivity` the query's sensitivity,
    `grid` the output lattice spacing when values are rounded to a grid first (then a
    neighbour moves the rounded value by up to floor(Δ/g) + 1 grid steps), `epsilon` and
    `categories` describe randomized response.
    """

    kind: str
    scale: float = 0.0
    sensitivity: float = 0.0
    grid: float | None = None
    epsilon: float = 0.0
    categories: int = 0

    @property
    def steps(self) -> tuple[float, float]:
        """(noise scale, sensitivity) in lattice units: on the grid, or as given."""
        if self.grid is None:
            return self.scale, self.sensitivity
        return self.scale / self.grid, float(math.floor(self.sensitivity / self.grid) + 1)


def noise_of(mechanism: Any) -> Noise | None:
    """Read a mechanism's noise from its `noise` attribute and parameters; None if unknown."""
    if isinstance(mechanism, Noise):
        return mechanism
    kind = getattr(mechanism, "noise", None)
    if kind not in NOISES:
        return None
    if kind == "randomized_response":
        return Noise(
            kind,
            epsilon=check_positive("mechanism.epsilon", mechanism.epsilon),
            categories=int(mechanism.categories),
        )
    grid = getattr(mechanism, "grid", None)
    return Noise(
        kind,
        scale=check_positive("mechanism.scale", mechanism.scale),
        sensitivity=check_positive("mechanism.sensitivity", mechanism.sensitivity),
        grid=None if grid is None else float(grid),
    )


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
    pairs = _pairs(items)
    if method not in METHODS:
        raise invalid("method", method, f"one of {METHODS}")
    first = pairs[0][0]
    if method == "basic":
        if delta is not None:
            raise invalid("delta", delta, "None for basic composition (δ's simply add)")
        return basic_composition([g for g, _ in pairs])
    if delta is None:
        raise invalid("delta", delta, f"a number in (0, 1) for {method} composition")
    d = check_delta("delta", delta)
    if d == 0:
        raise invalid("delta", delta, f"in (0, 1) for {method} composition")
    basic = basic_composition([g for g, _ in pairs])
    if method == "advanced":
        eps, total_delta = _advanced([g for g, _ in pairs], d)
        if eps < basic.epsilon:
            return Guarantee(eps, total_delta, relation=first.relation, unit=first.unit)
        return basic
    rho: float | None = None
    if method == "zcdp":
        rho = math.fsum(rho_of(g, n) for g, n in pairs)
        eps = zcdp_epsilon(rho, d)
    elif method == "rdp":
        eps = _rdp_epsilon(pairs, d)
    else:
        eps = _pld_epsilon(pairs, d)
    if basic.delta <= d and basic.epsilon < eps:
        eps = basic.epsilon  # (ε_basic, Σδ)-DP implies (ε_basic, δ)-DP
    return Guarantee(eps, d, relation=first.relation, unit=first.unit, rho=rho)


def _pairs(items: Iterable[Any]) -> list[tuple[Guarantee, Noise | None]]:
    """Each item as (its guarantee, its noise); all must share relation and unit."""
    pairs: list[tuple[Guarantee, Noise | None]] = []
    for item in items:
        g = item if isinstance(item, Guarantee) else getattr(item, "guarantee", None)
        if not isinstance(g, Guarantee):
            raise invalid("items", item, "Guarantees or mechanisms (objects with a .guarantee)")
        pairs.append((g, noise_of(g.mechanism)))
    if not pairs:
        raise invalid("items", pairs, "a non-empty sequence of Guarantees or mechanisms")
    for g, _ in pairs[1:]:
        check_compatible(g, pairs[0][0], "it is composed with a guarantee")
    return pairs


def _advanced(gs: Sequence[Guarantee], slack: float) -> tuple[float, float]:
    """ε = √(2 ln(1/δ') Σε²) + Σε(e^ε − 1), δ = Σδ + δ' (Dwork–Rothblum–Vadhan 2010, Thm III.3)."""
    eps = np.array([g.epsilon for g in gs])
    bound = math.sqrt(2 * math.log(1 / slack) * float(np.sum(eps**2)))
    with np.errstate(over="ignore"):  # a huge ε makes the bound infinite: basic wins
        bound += float(np.sum(eps * np.expm1(eps)))
    return bound, math.fsum(g.delta for g in gs) + slack


def rho_of(g: Guarantee, noise: Noise | None) -> float:
    """ρ: stated, Δ²/2σ² for Gaussian noise (CKS 2020, Thm 14), ε²/2 if pure (BS16, Prop. 1.4)."""
    if g.rho is not None:
        return g.rho
    if noise is not None and noise.kind in ("gaussian", "discrete_gaussian"):
        sigma, sens = noise.steps
        return sens * sens / (2 * sigma * sigma)
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


def _rdp_epsilon(pairs: Sequence[tuple[Guarantee, Noise | None]], delta: float) -> float:
    """Sum RDP curves from dp-accounting (Mironov 2017) and convert at δ (CKS 2020, Prop. 12)."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib  # heavy: import on use

    total: np.ndarray | None = None
    orders: np.ndarray | None = None
    for (event, relation), count in Counter(_rdp_event(g, n) for g, n in pairs).items():
        acc = rdp_lib.RdpAccountant(neighboring_relation=relation)
        acc.compose(event, count)
        total = acc.rdp if total is None else total + acc.rdp
        orders = acc.orders
    assert total is not None and orders is not None
    eps, _ = rdp_lib.compute_epsilon(orders, total, delta)
    return float(eps)


def _rdp_event(g: Guarantee, noise: Noise | None) -> tuple[Any, Any]:
    """One item as a dp-accounting event and the neighbour relation it is stated for."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    add_remove = rdp_lib.NeighborRel.ADD_OR_REMOVE_ONE
    if noise is not None and noise.kind == "randomized_response":
        event = dp_event.RandomizedResponseDpEvent(_rr_noise_parameter(noise), noise.categories)
        return event, rdp_lib.NeighborRel.REPLACE_ONE
    if noise is not None and noise.grid is None and noise.kind == "laplace":
        return dp_event.LaplaceDpEvent(noise.scale / noise.sensitivity), add_remove
    if noise is not None and noise.grid is None and noise.kind == "gaussian":
        return dp_event.GaussianDpEvent(noise.scale / noise.sensitivity), add_remove
    return dp_event.ZCDpEvent(rho_of(g, noise)), add_remove


def _pld_epsilon(pairs: Sequence[tuple[Guarantee, Noise | None]], delta: float) -> float:
    """Compose privacy-loss distributions in dp-accounting (Doroshenko et al. 2022)."""
    pld: Any = None
    for key, count in Counter(_pld_key(g, n) for g, n in pairs).items():
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


def _pld_key(g: Guarantee, noise: Noise | None) -> _PldKey:
    """A hashable description of one item's privacy-loss distribution."""
    if noise is None:
        return ("dp", g.epsilon, g.delta)
    if noise.kind == "randomized_response":
        return ("rr", _rr_noise_parameter(noise), float(noise.categories))
    scale, sens = noise.steps
    base = noise.kind.removeprefix("discrete_")
    # Adjacent privacy-loss values on the lattice are 2/b (Laplace) or Δ/σ² (Gaussian) apart;
    # when that is finer than the PLD's own discretization the continuous law in grid units
    # gives the same ε up to that rounding (tested against dp-accounting's discrete PLD), and
    # costs O(1/interval) instead of O(lattice size).
    spacing = 2 / scale if base == "laplace" else sens / (scale * scale)
    lattice = (noise.grid is not None or noise.kind != base) and spacing >= PLD_INTERVAL
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
