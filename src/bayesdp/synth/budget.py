"""The zCDP budget of a synthesizer: ρ from a target (ε, δ), and the guarantee it states."""

from __future__ import annotations

from bayesdp.errors import check_delta, check_positive, invalid
from bayesdp.privacy import Guarantee, Relation

_BISECT_STEPS = 200


def rho_for(epsilon: float, delta: float) -> float:
    """Largest ρ whose ρ-zCDP guarantee, stated at δ by Guarantee.zcdp, has ε no larger than `epsilon`."""
    eps = check_positive("epsilon", epsilon)
    d = check_delta("delta", delta)
    if d == 0:
        raise invalid("delta", delta, "> 0: zCDP accounting states (ε, δ) with δ > 0")
    lo, hi = 0.0, eps
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        if Guarantee.zcdp(mid, delta=d).epsilon <= eps:
            lo = mid
        else:
            hi = mid
    return lo


def stated(rho: float, delta_zcdp: float, delta_extra: float, relation: Relation) -> Guarantee:
    """ρ-zCDP stated at δ (Bun & Steinke 2016, Prop. 1.3), plus δ spent outside zCDP by thresholding."""
    g = Guarantee.zcdp(rho, delta=delta_zcdp, relation=relation)
    if delta_extra == 0:
        return g
    return Guarantee(g.epsilon, delta=delta_zcdp + delta_extra, relation=relation)
