"""Uniforms for inverse-cdf sampling that round expected counts instead of drawing i.i.d."""

from __future__ import annotations

import numpy as np

from bayesdp.noise import Rng


def uniforms(k: int, groups: np.ndarray | None, rng: Rng, *, iid: bool) -> np.ndarray:
    """k uniforms in [0, 1): i.i.d., or spread evenly within each group of records.

    Spread: the record of random rank t among a group's m gets (t + u)/m, one u ~ U(0, 1) per
    group, so an inverse cdf with probabilities p gives each value ⌊m·p⌋ or ⌈m·p⌉ records of the
    group (systematic sampling, Madow & Madow 1944), in random order within the group. Private-PGM
    rounds expected counts the same way, group by group along the tree (McKenna et al. 2019)."""
    if iid:
        out: np.ndarray = rng.random(k)
        return out
    g = np.zeros(k, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    counts = np.bincount(g)
    order = np.lexsort((rng.random(k), g))
    rank = np.empty(k)
    rank[order] = np.arange(k) - (np.cumsum(counts) - counts)[g[order]]
    spread: np.ndarray = (rank + rng.random(counts.size)[g]) / np.maximum(counts[g], 1)
    return spread
