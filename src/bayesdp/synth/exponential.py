"""The exponential mechanism for sanitized databases on small finite domains (W&Z Sec. 3)."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass

import numpy as np
from scipy.special import gammaln

from bayesdp.errors import DataError, check_positive, check_positive_int
from bayesdp.mechanisms import Exponential
from bayesdp.noise import Rng, resolve_rng
from bayesdp.privacy import Guarantee, Ledger, charge

# Largest number of candidate databases (histograms of k points) enumerated exactly.
MAX_CANDIDATES = 2_000_000


def compositions(total: int, parts: int) -> np.ndarray:
    """All vectors of `parts` non-negative integers summing to `total`, one per row."""
    rows = np.zeros((1, 0), dtype=np.int64)
    rem = np.array([total], dtype=np.int64)
    for _ in range(parts - 1):
        reps = rem + 1
        starts = np.repeat(np.cumsum(reps) - reps, reps)
        vals = np.arange(int(reps.sum())) - starts
        rows = np.hstack([np.repeat(rows, reps, axis=0), vals[:, None]])
        rem = np.repeat(rem, reps) - vals
    return np.hstack([rows, rem[:, None]])


@dataclass(frozen=True)
class SanitizedDatabase:
    """k points released by the exponential mechanism with the KS utility (W&Z Sec. 3, Thm. 2.5)."""

    values: np.ndarray
    _: KW_ONLY
    domain: np.ndarray
    guarantee: Guarantee
    candidates: int


def sanitized_database(
    data: object, domain: object, epsilon: float, k: int, *, ledger: Ledger | None = None,
    rng: Rng | None = None,
) -> SanitizedDatabase:
    """Draw z in domain^k with density ∝ exp(−ε n KS(F̂_x, F̂_z)/2) w.r.t. the uniform base (W&Z Sec. 3).

    The utility ξ = −sup_t |F̂_x(t) − F̂_z(t)| has sensitivity 1/n under replace-one. The output
    depends on z only through its histogram, so all C(k+K−1, K−1) histograms are enumerated with
    their multinomial base weight and one is drawn exactly: practical only for small domains and
    k, which is the point W&Z make about this mechanism. With `ledger`, ε is spent before the
    data are read. A seeded `rng` is for tests only.
    """
    eps = check_positive("epsilon", epsilon)
    k = check_positive_int("k", k)
    dom = np.unique(np.asarray(domain, dtype=np.float64))
    if dom.size < 2:
        raise DataError(f"domain must hold at least 2 distinct values; got {dom.size}")
    size = math.comb(k + dom.size - 1, dom.size - 1)
    if size > MAX_CANDIDATES:
        raise DataError(
            f"{size} candidate databases for k={k} on {dom.size} values exceeds {MAX_CANDIDATES}: "
            "lower k or use a smaller domain (or perturbed_histogram, which scales)"
        )
    charge(ledger, Guarantee(eps, relation="replace_one"), "sanitized_database")
    x = np.asarray(data, dtype=np.float64).ravel()
    if x.size == 0:
        raise DataError("data is empty")
    pos = np.searchsorted(dom, x)
    bad = (pos >= dom.size) | (dom[np.minimum(pos, dom.size - 1)] != x)
    if bad.any():
        raise DataError("values of data are not in the domain",
                        private_detail=f"{int(bad.sum())} values, e.g. {float(x[bad][0])!r}")
    hist = compositions(k, dom.size)
    f_x = np.cumsum(np.bincount(pos, minlength=dom.size)) / x.size
    ks = np.abs(np.cumsum(hist, axis=1) / k - f_x[None, :]).max(axis=1)
    log_base = gammaln(k + 1) - gammaln(hist + 1).sum(axis=1)
    # Utility ξ + (2Δ/ε) log μ(h): the base measure enters the exponent exactly.
    utility = -ks + 2.0 / (eps * x.size) * log_base
    mech = Exponential(eps, sensitivity=1.0 / x.size, relation="replace_one")
    chosen = hist[mech.select_index(utility, rng=resolve_rng(rng))]
    return SanitizedDatabase(
        values=np.repeat(dom, chosen), domain=dom,
        guarantee=mech.guarantee, candidates=size,
    )
