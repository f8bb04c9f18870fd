"""The zCDP budget of a synthesizer: ρ from a target (ε, δ), and the guarantee it states."""

from __future__ import annotations

from bayesdp.errors import check_delta, check_positive, invalid
from bayesdp.privacy import Guarantee, Relation, compose, zcdp_epsilon

_BISECT_STEPS = 60


def rho_for(epsilon: float, delta: float) -> float:
    """Largest ρ whose ρ-zCDP is (ε, δ)-DP by the tight conversion (Canonne, Kamath & Steinke 2020)."""
    eps = check_positive("epsilon", epsilon)
    d = check_delta("delta", delta)
    if d == 0:
        raise invalid("delta", delta, "> 0: zCDP accounting states (ε, δ) with δ > 0")
    lo, hi = 0.0, eps
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        if zcdp_epsilon(mid, d) <= eps:
            lo = mid
        else:
            hi = mid
    return lo


def stated(
    rhos: list[float], delta_zcdp: float, delta_extra: float, relation: Relation
) -> Guarantee:
    """The stages' ρ-zCDP composed (ρ adds, Bun & Steinke 2016) and stated at δ, plus δ
    spent outside zCDP by thresholding (basic composition of the δ's)."""
    parts = [Guarantee.zcdp(r, delta=delta_zcdp, relation=relation) for r in rhos if r > 0]
    g = compose(parts, method="zcdp", delta=delta_zcdp)
    if delta_extra == 0:
        return g
    return Guarantee(g.epsilon, delta=delta_zcdp + delta_extra, relation=relation)
