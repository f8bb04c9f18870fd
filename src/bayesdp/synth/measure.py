"""Exact marginals of a coded table, released only through noise, and MST's domain compression."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bayesdp.noise import Rng, discrete_gaussian


class Data:
    """Exact marginals of the coded table (only ever released through noise)."""

    def __init__(self, codes: np.ndarray, sizes: list[int]) -> None:
        self.codes = np.asfortranarray(codes)  # column by column: each marginal reads whole columns
        self.sizes = sizes
        self._pairs: dict[tuple[int, int], np.ndarray] = {}

    def one(self, i: int) -> np.ndarray:
        return np.bincount(self.codes[:, i], minlength=self.sizes[i])

    def two(self, i: int, j: int) -> np.ndarray:
        if (i, j) not in self._pairs:
            ki, kj = self.sizes[i], self.sizes[j]
            flat = np.bincount(self.codes[:, i] * kj + self.codes[:, j], minlength=ki * kj)
            self._pairs[(i, j)] = flat.reshape(ki, kj)
        table: np.ndarray = self._pairs[(i, j)]
        return table

    def errors(self, pair: Callable[[int, int], np.ndarray], n_hat: float,
               pairs: list[tuple[int, int]]) -> np.ndarray:
        """‖M_r(x) − n̂·M_r(p̂)‖₁ per pair r, p̂'s pair marginals from `pair`: the L1 error in counts
        that MST and AIM select by (McKenna et al. 2021; 2022, before AIM's noise correction),
        every pair's cells in one array."""
        if not pairs:
            return np.zeros(0)
        true = np.concatenate([self.two(i, j).ravel() for i, j in pairs])
        model = np.concatenate([pair(i, j).ravel() for i, j in pairs])
        starts = np.cumsum([0, *(self.sizes[i] * self.sizes[j] for i, j in pairs[:-1])])
        out: np.ndarray = np.add.reduceat(np.abs(true - n_hat * model), starts)
        return out


def noisy(counts: np.ndarray, sigma: float, rng: Rng) -> np.ndarray:
    """Counts plus exact discrete Gaussian noise: Δ₂²/(2σ²)-zCDP (Canonne, Kamath & Steinke 2020, Thm. 14)."""
    out: np.ndarray = counts + discrete_gaussian(sigma, counts.size, rng).reshape(counts.shape)
    return out


def compress(y: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Merge levels whose noisy count is below 3σ into one (MST's domain compression, McKenna,
    Miklau & Sheldon 2021, Sec. 4); returns the map to merged levels and within-group weights
    from the noisy counts (post-processing)."""
    rare = y < 3.0 * sigma
    if rare.sum() < 2:
        return np.arange(y.size), np.ones(y.size)
    cmap = np.empty(y.size, dtype=np.int64)
    cmap[~rare] = np.arange(int((~rare).sum()))
    cmap[rare] = int((~rare).sum())
    w = np.ones(y.size)
    v = np.maximum(y[rare], 0.0)
    w[rare] = v / v.sum() if v.sum() > 0 else 1.0 / rare.sum()
    return cmap, w


def compressed(
    data: Data, noisy1: list[np.ndarray], sigma: float
) -> tuple[Data, list[tuple[np.ndarray, np.ndarray]], list[np.ndarray], list[np.ndarray]]:
    """The coded table on compressed domains, its 1-way measurements there (merged counts and
    per-cell variances), and per column the map of levels to merged levels and their weights."""
    pairs = [compress(y, sigma) for y in noisy1]
    maps = [m for m, _ in pairs]
    sizes = [int(m.max()) + 1 for m in maps]
    small = Data(np.column_stack([m[data.codes[:, i]] for i, m in enumerate(maps)]), sizes)
    ones = [(np.bincount(m, weights=y, minlength=k), sigma**2 * np.bincount(m, minlength=k))
            for m, y, k in zip(maps, noisy1, sizes, strict=True)]
    return small, ones, maps, [w for _, w in pairs]
