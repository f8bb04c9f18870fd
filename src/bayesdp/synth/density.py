"""PrivateDensity: a piecewise-constant density on a grid of cells, released with DP."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

from bayesdp.errors import DataError, InvalidParameter, check_open_unit, check_positive_int, invalid
from bayesdp.noise import Rng, resolve_rng
from bayesdp.privacy import Guarantee

_EINSUM = {1: "ia,a->i", 2: "ia,ib,ab->i", 3: "ia,ib,ic,abc->i"}


def dlaplace_halfwidth(scale: float, alpha: float) -> int:
    """Smallest w with P(|Z| > w) <= alpha for discrete Laplace Z: P(|Z| >= k) = 2p^k/(1+p), p = e^{-1/b}."""
    p = math.exp(-1.0 / scale)
    return max(0, math.ceil(math.log(alpha * (1 + p) / 2) / math.log(p)) - 1)


@dataclass(frozen=True)
class PrivateDensity:
    """A density constant on the cells of a rectangular grid (Wasserman & Zhou 2010, Sec. 4).

    `edges` holds one array of cell edges per dimension, `probs` the released cell probabilities
    (shape = cells per dimension). Everything computed from it, including `sample(k)`, is
    post-processing and costs no further privacy (W&Z Lemma 2.6(1)-(2)); k sampled points carry
    no more information than the density itself, so k is not an effective sample size.
    `noisy_counts` and `noise_scale` (discrete Laplace scale on counts) are set for histograms and
    give the per-cell intervals; `n` is the record count used (public, or privately estimated).
    `clipped` counts records moved into the bounds: a curator-side diagnostic, not private.
    """

    edges: tuple[np.ndarray, ...]
    _: KW_ONLY
    probs: np.ndarray
    guarantee: Guarantee
    method: str
    n: float
    noisy_counts: np.ndarray | None = field(default=None, repr=False)
    noise_scale: float | None = None
    clipped: int = 0

    @property
    def dim(self) -> int:
        return len(self.edges)

    @property
    def bins(self) -> tuple[int, ...]:
        return tuple(len(e) - 1 for e in self.edges)

    def _points(self, x: object) -> np.ndarray:
        pts = np.asarray(x, dtype=np.float64)
        if self.dim == 1 and pts.ndim <= 1:
            return pts.reshape(-1, 1)
        if pts.ndim == 1 and pts.size == self.dim:
            return pts.reshape(1, -1)
        if pts.ndim != 2 or pts.shape[1] != self.dim:
            raise DataError(f"points must have shape (k, {self.dim}), got {pts.shape}")
        return pts

    def pdf(self, x: object) -> np.ndarray:
        """Density at the points x: cell probability divided by cell volume, 0 outside the bounds."""
        pts = self._points(x)
        idx = []
        inside = np.ones(len(pts), dtype=bool)
        for d, e in enumerate(self.edges):
            j = np.searchsorted(e, pts[:, d], side="right") - 1
            j = np.where(pts[:, d] == e[-1], len(e) - 2, j)
            inside &= (j >= 0) & (j < len(e) - 1)
            idx.append(np.clip(j, 0, len(e) - 2))
        volume = np.ones(len(pts))
        for d, e in enumerate(self.edges):
            volume *= np.diff(e)[idx[d]]
        out: np.ndarray = np.where(inside, self.probs[tuple(idx)] / volume, 0.0)
        return out

    def cdf(self, x: object) -> np.ndarray:
        """P(X <= x coordinatewise), exact for the uniform-within-cell density."""
        pts = self._points(x)
        weights = [
            np.clip((pts[:, [d]] - e[None, :-1]) / np.diff(e)[None, :], 0.0, 1.0)
            for d, e in enumerate(self.edges)
        ]
        out: np.ndarray = np.einsum(_EINSUM[self.dim], *weights, self.probs)
        return out

    def sample(self, k: int, *, rng: Rng | None = None) -> np.ndarray:
        """k points: a cell by its probability, then uniform within it (W&Z Lemma 2.6(2): free).

        Shape (k,) in one dimension, else (k, dim). A seeded `rng` is for tests only.
        """
        k = check_positive_int("k", k)
        g = resolve_rng(rng)
        cum = np.cumsum(self.probs.ravel())
        cell = np.minimum(np.searchsorted(cum, g.random(k) * cum[-1], side="right"), cum.size - 1)
        cells = np.unravel_index(cell, self.probs.shape)
        cols = []
        for d, e in enumerate(self.edges):
            lo = e[cells[d]]
            cols.append(lo + g.random(k) * (e[cells[d] + 1] - lo))
        out = np.column_stack(cols)
        return out[:, 0] if self.dim == 1 else out

    def intervals(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Per-cell (lo, hi) for the true count: noisy count ± w, P(|noise| > w) <= alpha exactly.

        The interval covers the count in the data (noise only, Dwork 2006 Example 2); divide by
        `n` for proportions. Only histograms have per-cell count noise.
        """
        a = check_open_unit("alpha", alpha)
        if self.noisy_counts is None or self.noise_scale is None:
            raise InvalidParameter(
                f"intervals are not defined for a {self.method} density: it has no per-cell "
                "count noise; use perturbed_histogram for per-cell intervals"
            )
        w = dlaplace_halfwidth(self.noise_scale, a)
        return self.noisy_counts - w, self.noisy_counts + w

    def explain(self) -> str:
        cells = "x".join(str(b) for b in self.bins)
        return (
            f"A {self.method} density on {cells} cells, released with {self.guarantee}. Any "
            "number of points may be drawn from it at no further privacy cost (Wasserman & Zhou "
            "2010, Lemma 2.6); they carry no more information than the density, so their count "
            f"is not a sample size. {self.guarantee.explain(n=max(1, round(self.n)))}"
        )


def regular_edges(bounds: list[tuple[float, float]], bins: list[int]) -> tuple[np.ndarray, ...]:
    """Equal-width cell edges per dimension from public bounds."""
    return tuple(np.linspace(lo, hi, m + 1) for (lo, hi), m in zip(bounds, bins, strict=True))


def as_points(data: object, name: str = "data") -> np.ndarray:
    """Records as an (n, r) float array with 1 <= r <= 3, finite."""
    x = np.asarray(data, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or not 1 <= x.shape[1] <= 3:
        raise DataError(f"{name} must be shaped (n,) or (n, r) with r = 1, 2 or 3; got {x.shape}")
    if x.shape[0] == 0:
        raise DataError(f"{name} is empty")
    if not np.isfinite(x).all():
        raise DataError(f"{name} holds NaN or infinite values",
                        private_detail=f"{int((~np.isfinite(x)).sum())} values")
    return x


def as_bounds(bounds: object, dim: int) -> list[tuple[float, float]]:
    """Public bounds: (lo, hi) for one dimension, or one (lo, hi) per dimension."""
    b = np.asarray(bounds, dtype=np.float64)
    if b.shape == (2,) and dim == 1:
        b = b[None, :]
    if b.shape != (dim, 2) or not np.isfinite(b).all() or not (b[:, 0] < b[:, 1]).all():
        raise invalid("bounds", bounds, f"{dim} finite (lo, hi) pair(s) with lo < hi")
    return [(float(lo), float(hi)) for lo, hi in b]


def as_bins(bins: Any, dim: int) -> list[int]:
    """Bins per dimension: one positive integer for all, or one per dimension."""
    if np.ndim(bins) == 0:
        return [check_positive_int("bins", bins)] * dim
    seq = list(bins)
    if len(seq) != dim:
        raise invalid("bins", bins, f"a positive integer or {dim} of them")
    return [check_positive_int("bins", b) for b in seq]


def clip_to(x: np.ndarray, bounds: list[tuple[float, float]]) -> tuple[np.ndarray, int]:
    """Clip records into the public bounds (W&Z Sec. 2: bounded domain); returns the number moved."""
    lo = np.array([b[0] for b in bounds])
    hi = np.array([b[1] for b in bounds])
    outside = ((x < lo) | (x > hi)).any(axis=1)
    return np.clip(x, lo, hi), int(outside.sum())


def cell_counts(x: np.ndarray, edges: tuple[np.ndarray, ...]) -> np.ndarray:
    """Exact integer counts per cell (records already inside the bounds)."""
    counts, _ = np.histogramdd(x, bins=list(edges))
    return counts.astype(np.int64)
