"""Perturbed and smoothed histograms (Wasserman & Zhou 2010, Sec. 4), in one to three dimensions."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass

import numpy as np

from bayesdp.errors import check_positive, check_positive_int, invalid
from bayesdp.noise import Rng, bernoulli_exp, discrete_laplace, resolve_rng
from bayesdp.privacy import RELATIONS, Guarantee, Ledger, Relation, charge
from bayesdp.synth.density import (
    PrivateDensity,
    as_bins,
    as_bounds,
    as_points,
    cell_counts,
    clip_to,
    regular_edges,
)
from bayesdp.synth.simplex import project_simplex

# Share of ε spent on the record count when n is private (add/remove) and bins are not given.
COUNT_SHARE = 0.05


def sensitivity(relation: str) -> int:
    """L1 sensitivity of a histogram: 2 if one record is replaced, 1 if added or removed (W&Z Sec. 4.2)."""
    if relation not in RELATIONS:
        raise invalid("relation", relation, f"one of {RELATIONS}")
    return 2 if relation == "replace_one" else 1


def default_bins(n: float, dim: int) -> int:
    """Bins per dimension for the rate-optimal total m ≍ n^{r/(r+2)} (W&Z Sec. 4.2)."""
    return max(1, math.ceil(math.pow(max(float(n), 1.0), 1.0 / (dim + 2))))


def perturbed_histogram(
    data: object,
    bounds: object,
    epsilon: float,
    bins: object = None,
    relation: Relation = "add_remove",
    *,
    ledger: Ledger | None = None,
    rng: Rng | None = None,
) -> PrivateDensity:
    """The perturbed histogram: counts plus Laplace(Δ/ε) noise, projected onto the simplex (W&Z Sec. 4.2).

    Noise is exact discrete Laplace on the integer counts, Δ = 1 (add/remove, the default, as
    everywhere in bayesdp) or 2 (replace-one, n public; W&Z's setting); the guarantee states
    which. Under add/remove without `bins`, 5% of ε buys a noisy n for the default bin
    rule m ≍ n^{r/(r+2)}. Records outside `bounds` are clipped and counted in `clipped`.
    With `ledger`, ε is spent before the data are read. A seeded `rng` is for tests only: it
    makes the noise predictable.
    """
    eps = check_positive("epsilon", epsilon)
    delta_1 = sensitivity(relation)
    guarantee = Guarantee(eps, relation=relation)
    charge(ledger, guarantee, "perturbed_histogram")
    x = as_points(data)
    dim = x.shape[1]
    box = as_bounds(bounds, dim)
    g = resolve_rng(rng)
    eps_counts = eps
    if bins is None:
        if relation == "replace_one":
            n_bins = float(len(x))
        else:
            eps_n = COUNT_SHARE * eps
            eps_counts = eps - eps_n
            n_bins = float(len(x) + discrete_laplace(1.0 / eps_n, 1, g)[0])
        per_dim = [default_bins(n_bins, dim)] * dim
    else:
        per_dim = as_bins(bins, dim)
    edges = regular_edges(box, per_dim)
    x, clipped = clip_to(x, box)
    counts = cell_counts(x, edges)
    scale = delta_1 / eps_counts
    noisy = counts + discrete_laplace(scale, counts.size, g).reshape(counts.shape)
    n = float(len(x)) if relation == "replace_one" else float(max(noisy.sum(), 1))
    probs = project_simplex(noisy.ravel() / n).reshape(counts.shape)
    return PrivateDensity(
        edges=edges,
        probs=probs,
        guarantee=guarantee,
        method="perturbed histogram",
        n=n,
        noisy_counts=noisy,
        noise_scale=scale,
        clipped=clipped,
    )


@dataclass(frozen=True)
class SmoothedHistogram:
    """k points drawn from the histogram mixed with the uniform density (W&Z Sec. 4.1).

    `points` are the release; `density` is their histogram on the same cells (post-processing),
    `mix` the uniform weight δ chosen as the smallest with k·log(1 + (1−δ)m/(nδ)) <= ε.
    """

    points: np.ndarray
    _: KW_ONLY
    density: PrivateDensity
    mix: float
    guarantee: Guarantee


def smoothing_weight(n: int, cells: int, k: int, epsilon: float) -> float:
    """Smallest uniform weight δ with k·log(1 + (1−δ)m/(nδ)) <= ε (W&Z eq. (6)): δ = m/(n(e^{ε/k}−1) + m)."""
    return cells / (n * math.expm1(epsilon / k) + cells)


def smoothed_histogram(
    data: object,
    bounds: object,
    epsilon: float,
    k: int | None = None,
    bins: object = None,
    *,
    ledger: Ledger | None = None,
    rng: Rng | None = None,
) -> SmoothedHistogram:
    """The smoothed histogram of Machanavajjhala et al. (2008) as analysed by W&Z (Sec. 4.1), replace-one.

    Defaults follow the L2 tuning m ≍ n^{r/(2r+3)}, k ≍ n^{(r+2)/(2r+3)}. A baseline: the
    perturbed histogram is more accurate at every n (see bench/RESULTS.md). With `ledger`, ε is
    spent before the data are read.
    """
    eps = check_positive("epsilon", epsilon)
    draws_given = None if k is None else check_positive_int("k", k)
    guarantee = Guarantee(eps, relation="replace_one")
    charge(ledger, guarantee, "smoothed_histogram")
    x = as_points(data)
    n, dim = x.shape
    box = as_bounds(bounds, dim)
    per_dim = [max(1, math.ceil(n ** (1.0 / (2 * dim + 3))))] * dim if bins is None \
        else as_bins(bins, dim)
    draws = math.ceil(n ** ((dim + 2) / (2 * dim + 3))) if draws_given is None else draws_given
    edges = regular_edges(box, per_dim)
    x, clipped = clip_to(x, box)
    m = int(np.prod(per_dim))
    mix = smoothing_weight(n, m, draws, eps)
    g = resolve_rng(rng)
    from_data = bernoulli_exp(np.full(draws, -math.log1p(-mix)), g)
    # A record's cell (histogram part) or a uniform cell (uniform part); both exact integer draws.
    cell_of = np.column_stack([
        np.clip(np.searchsorted(e, x[:, d], side="right") - 1, 0, len(e) - 2)
        for d, e in enumerate(edges)
    ])
    picked = cell_of[g.integers(0, n, size=draws)]
    uniform = np.column_stack([g.integers(0, b, size=draws) for b in per_dim])
    cells = np.where(from_data[:, None], picked, uniform)
    pts = np.column_stack([
        e[cells[:, d]] + g.random(draws) * np.diff(e)[cells[:, d]] for d, e in enumerate(edges)
    ])
    counts = cell_counts(pts, edges)
    density = PrivateDensity(
        edges=edges,
        probs=counts / draws,
        guarantee=guarantee,
        method="smoothed histogram",
        n=float(n),
        clipped=clipped,
    )
    return SmoothedHistogram(
        points=pts[:, 0] if dim == 1 else pts, density=density, mix=mix, guarantee=guarantee
    )
