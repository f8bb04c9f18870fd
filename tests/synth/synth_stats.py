"""Statistical bands for the synth tests: each fails falsely with probability <= 1e-7 per side."""

from __future__ import annotations

import numpy as np
from scipy import stats

TAIL = 1e-7


def within_binomial(counts: np.ndarray, k: int, probs: np.ndarray) -> bool:
    """Every cell count within its exact Binomial(k, p) quantiles at TAIL / cells per side (Bonferroni)."""
    p = np.clip(np.asarray(probs, dtype=np.float64).ravel(), 0.0, 1.0)
    c = np.asarray(counts).ravel()
    tail = TAIL / p.size
    lo = stats.binom.ppf(tail, k, p)
    hi = stats.binom.isf(tail, k, p)
    return bool(((c >= lo) & (c <= hi)).all())


def chi2_upper(dof: int) -> float:
    """The 1 - 1e-7 quantile of chi-square with `dof` degrees of freedom."""
    return float(stats.chi2.isf(TAIL, dof))
