"""Orthogonal-series (cosine basis) density with Laplace-perturbed coefficients, one dimension."""

from __future__ import annotations

import math

import numpy as np

from bayesdp.errors import DataError, check_positive, check_positive_int
from bayesdp.noise import Rng, discrete_laplace, grid_for, resolve_rng, snap_add
from bayesdp.privacy import Guarantee, Ledger, charge
from bayesdp.synth.density import PrivateDensity, as_bounds, as_points, clip_to

# Cells of the piecewise-constant representation used for pdf, cdf and sampling.
RESOLUTION = 1024
_B = math.sqrt(2.0)


def cosine_basis(u: np.ndarray, terms: int) -> np.ndarray:
    """φ_j(u) = √2 cos(πju), j = 1..terms, orthonormal on [0, 1] with |φ_j| <= √2 (W&Z Sec. 4.3)."""
    return _B * np.cos(np.pi * np.outer(u, np.arange(1, terms + 1)))


def series_density(
    data: object,
    bounds: object,
    epsilon: float,
    terms: int | None = None,
    *,
    ledger: Ledger | None = None,
    rng: Rng | None = None,
) -> PrivateDensity:
    """Cosine-series density: coefficients plus Laplace(2Bm/(nε)) noise, n public (W&Z Sec. 4.3).

    Replace-one neighbours. Default terms m = ⌈n^{1/3}⌉ (smoothness s = 1, m ≍ n^{1/(2s+1)}). The
    noisy series is made non-negative and normalised on a fine grid (post-processing). Noise is
    exact discrete Laplace on the power-of-two grid, with the rounding paid in the sensitivity.
    With `ledger`, ε is spent before the data are read.
    """
    eps = check_positive("epsilon", epsilon)
    m_given = None if terms is None else check_positive_int("terms", terms)
    (lo, hi), = as_bounds(bounds, 1)
    guarantee = Guarantee(eps, relation="replace_one")
    charge(ledger, guarantee, "series_density")
    x = as_points(data)
    if x.shape[1] != 1:
        raise DataError(f"series_density is one-dimensional; data has {x.shape[1]} columns")
    n = x.shape[0]
    m = math.ceil(n ** (1.0 / 3.0)) if m_given is None else m_given
    x, clipped = clip_to(x, [(lo, hi)])
    u = (x[:, 0] - lo) / (hi - lo)
    beta = cosine_basis(u, m).mean(axis=0)
    sens = 2.0 * _B * m / n
    grid = grid_for(sens / eps)
    scale_steps = (sens + m * grid) / eps / grid
    g = resolve_rng(rng)
    noisy = snap_add(beta, discrete_laplace(scale_steps, m, g), grid)
    mid = (np.arange(RESOLUTION) + 0.5) / RESOLUTION
    f = np.maximum(1.0 + cosine_basis(mid, m) @ noisy, 0.0)
    total = f.sum()
    probs = f / total if total > 0 else np.full(RESOLUTION, 1.0 / RESOLUTION)
    return PrivateDensity(
        edges=(np.linspace(lo, hi, RESOLUTION + 1),),
        probs=probs,
        guarantee=guarantee,
        method="cosine series",
        n=float(n),
        clipped=clipped,
    )
