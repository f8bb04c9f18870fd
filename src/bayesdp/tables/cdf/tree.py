"""The b-ary tree of a hierarchical histogram: its node counts, the least-squares consistent leaves
and the exact spread of any range estimated from them (engine and noise independent).

The leaves (bins) are padded with empty bins to P = b^H and every level below the root is
measured: level l has P/b^l nodes of s_l = b^l leaves (the root's count is the sum of its
children's, so measuring it would only add to the sensitivity). With A the
node-by-leaf incidence matrix, A^T A = Σ_l s_l Π_l, Π_l the projection onto vectors constant on
blocks of s_l leaves. The Π_l are nested, so A^T A = Σ_k λ_k (Π_k - Π_{k+1}) with λ_k = s_0 + ... +
s_k, and (A^T A)^{-1} = Σ_k μ_k Π_k with μ_k = 1/λ_k - 1/λ_{k-1} (1/λ_{-1} = 0): the ordinary
least-squares leaves x̂ = (A^T A)^{-1} A^T y are block means added up, the consistent estimate
of Hay, Rastogi, Miklau & Suciu 2010 (Thm. 3) in closed form, and a range c^T x̂ is the linear
function w^T y of the noisy nodes with w = A (A^T A)^{-1} c.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

# Ranges whose Laplace half-widths are minimised together over the grid of λ.
CHUNK = 4096


@dataclass(frozen=True)
class Tree:
    """A complete `branching`-ary tree over `bins` leaves (padded to a power of the branching)."""

    bins: int
    branching: int

    @cached_property
    def height(self) -> int:
        """H: the padded leaves number b^H."""
        h = 0
        while self.branching**h < self.bins:
            h += 1
        return h

    @property
    def padded(self) -> int:
        return int(self.branching**self.height)

    @cached_property
    def sizes(self) -> tuple[int, ...]:
        """Leaves per node of each measured level, leaves first (all levels but the root)."""
        return tuple(self.branching**level for level in range(max(self.height, 1)))

    @property
    def depth(self) -> int:
        """Measured levels: the nodes one row's value falls in."""
        return len(self.sizes)

    @property
    def nodes(self) -> int:
        return sum(self.padded // s for s in self.sizes)

    @cached_property
    def _mu(self) -> np.ndarray:
        lam = np.cumsum(np.asarray(self.sizes, dtype=np.float64))
        return 1.0 / lam - np.concatenate(([0.0], 1.0 / lam[:-1]))

    def _pad(self, leaves: np.ndarray) -> np.ndarray:
        out = np.zeros((leaves.shape[0], self.padded), dtype=leaves.dtype)
        out[:, :self.bins] = leaves
        return out

    def counts(self, leaves: np.ndarray) -> np.ndarray:
        """The node counts (groups x nodes, level by level, leaves first) of leaf counts (groups x bins)."""
        full = self._pad(leaves)
        return np.concatenate([full.reshape(len(full), -1, s).sum(axis=2) for s in self.sizes], axis=1)

    def _split(self, nodes: np.ndarray) -> list[np.ndarray]:
        cuts = np.cumsum([self.padded // s for s in self.sizes])[:-1]
        return np.split(nodes, cuts, axis=1)

    def _inverse(self, z: np.ndarray) -> np.ndarray:
        """(A^T A)^{-1} z for rows z of P leaf values: Σ_k μ_k Π_k z (the module)."""
        out = np.zeros_like(z, dtype=np.float64)
        for mu, s in zip(self._mu, self.sizes, strict=True):
            out += mu * np.repeat(z.reshape(len(z), -1, s).mean(axis=2), s, axis=1)
        return out

    def consistent(self, noisy: np.ndarray) -> np.ndarray:
        """The least-squares leaves (groups x bins) of noisy node counts (groups x nodes): post-
        processing, so free (Dwork & Roth 2014, Prop. 2.1); unbiased, and of least variance
        among unbiased linear estimates for nodes of equal noise (Gauss-Markov)."""
        z = np.zeros((len(noisy), self.padded))
        for y, s in zip(self._split(np.asarray(noisy, dtype=np.float64)), self.sizes, strict=True):
            z += np.repeat(y, s, axis=1)  # A^T y: each leaf sums its ancestors
        return self._inverse(z)[:, :self.bins]

    def weights(self, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the ranges of leaves [start, stop): ||w||² and a bound on max |w| of the node
        weights w with which the consistent range sum reads the noisy nodes (its variance is
        ||w||² σ²). ||w||² = c^T (A^T A)^{-1} c = Σ_k μ_k ||Π_k c||², where ||Π_k c||² adds up
        overlap²/s_k over the blocks of level k (the module); O(depth) a range."""
        start, stop = np.asarray(start, dtype=np.int64), np.asarray(stop, dtype=np.int64)
        norm2 = np.zeros(start.size)
        some = stop > start
        last = np.maximum(stop - 1, start)
        for mu, s in zip(self._mu, self.sizes, strict=True):
            first_block, last_block = start // s, last // s
            left = np.minimum((first_block + 1) * s, stop) - start
            right = stop - last_block * s
            full = np.maximum(last_block - first_block - 1, 0)
            squares = np.where(first_block == last_block, (stop - start) ** 2,
                               left**2 + right**2 + full * s * s)
            norm2 += mu * np.where(some, squares, 0) / s
        return norm2, np.where(some, self.top, 0.0)

    @cached_property
    def top(self) -> float:
        """A bound on |w| at any node for any range: a node of level l with overlap f·s_l and
        ancestors' overlaps a_k·s_k has w = s_l (f/λ_l + Σ_{k>l} μ_k a_k), μ_k < 0 for k >= 1,
        and f s_l/s_k <= a_k <= (f s_l + s_k - s_l)/s_k; w is linear in each, so its extremes
        are at the ends (f in {0, 1}, each a_k at a bound)."""
        sizes, lam, mu = np.asarray(self.sizes, dtype=np.float64), np.cumsum(self.sizes), self._mu
        out = 0.0
        for level, s in enumerate(sizes):
            up, ratio = mu[level + 1:], s / sizes[level + 1:]
            ends = (1.0 / lam[level] + np.sum(up * ratio), np.sum(up * (1.0 - ratio)),
                    1.0 / lam[level] + np.sum(up))
            out = max(out, s * max(abs(e) for e in ends))
        return float(out)


def half_widths(family: str, scale: float, norm2: np.ndarray, top: np.ndarray,
                alpha: float) -> np.ndarray:
    """Half-widths u with P(|w^T Z| > u) <= α for Z iid discrete noise of `scale` on the nodes,
    given ||w||² (`norm2`) and a bound on max |w| (`top`) per range.

    Discrete Gaussian: σ²-sub-Gaussian (Canonne, Kamath & Steinke 2020), so u = σ||w||√(2 ln(2/α)).
    Discrete Laplace (p = e^{-1/t}): log E e^{λZ} = g(λ) = Σ_m (2p^m/m)(cosh(mλ) - 1), a series in
    λ² with nonnegative terms, so g(λ)/λ² grows with |λ| and Σ_i g(λw_i) <= (||w||²/max|w|²)
    g(λ max|w|); the Chernoff bound P(|w^T Z| > u) <= 2 exp(Σ_i g(λw_i) - λu) then gives
    u = min over λ of (||w||²/max|w|² g(λ max|w|) + ln(2/α))/λ, taken over a grid of λ (any λ
    is valid)."""
    log_terms = math.log(2.0 / alpha)
    norm2, top = np.asarray(norm2, dtype=np.float64), np.asarray(top, dtype=np.float64)
    if family == "discrete_gaussian":
        return scale * np.sqrt(2.0 * norm2 * log_terms)
    if family != "discrete_laplace":
        raise ValueError(f"hierarchical counts take discrete noise, not {family!r}")
    theta = np.linspace(0.002, 0.998, 499)  # λ·max|w|·t
    t = scale
    g = (2.0 * np.log(-np.expm1(-1.0 / t)) - np.log(-np.expm1((theta - 1.0) / t))
         - np.log(-np.expm1(-(theta + 1.0) / t)))
    safe = np.where(top > 0, top, 1.0)
    ratio, scale_of = norm2 / safe**2, t * safe
    out = np.zeros(norm2.size)
    for lo in range(0, norm2.size, CHUNK):  # CHUNK x grid floats at a time
        part = slice(lo, lo + CHUNK)
        u = (ratio[part, None] * g[None, :] + log_terms) / theta[None, :]
        out[part] = u.min(axis=1) * scale_of[part]
    return np.where(top > 0, out, 0.0)
