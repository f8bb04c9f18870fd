"""A tree-structured (forest) model fitted to noisy 1- and 2-way marginals, and exact ancestral sampling."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from bayesdp.noise import Rng
from bayesdp.synth.rounding import uniforms
from bayesdp.synth.simplex import ipf, project_simplex, project_tables

# Positive floor (relative to the cell mean) so that proportional fitting can fill any cell.
_FLOOR = 1e-6


@dataclass(frozen=True)
class TreeModel:
    """P(x) = Π_roots P(x_r) Π_{c} P(x_c | x_parent(c)) over coded columns (Chow & Liu 1968).

    `order` lists the columns parents first; `parent[c]` is -1 for a root; `probs[c]` is the
    root marginal (roots) and `cond[c]` the K_parent x K_c conditional table (children).
    """

    sizes: tuple[int, ...]
    order: tuple[int, ...]
    parent: tuple[int, ...]
    probs: dict[int, np.ndarray]
    cond: dict[int, np.ndarray]

    def marginals(self) -> list[np.ndarray]:
        """The model's one-way marginals, by propagation from the roots."""
        out: list[np.ndarray] = [np.empty(0)] * len(self.sizes)
        for c in self.order:
            p = self.parent[c]
            out[c] = self.probs[c] if p < 0 else out[p] @ self.cond[c]
        return out

    def _path(self, a: int, b: int) -> list[int] | None:
        up_a = [a]
        while self.parent[up_a[-1]] >= 0:
            up_a.append(self.parent[up_a[-1]])
        up_b = [b]
        while self.parent[up_b[-1]] >= 0:
            up_b.append(self.parent[up_b[-1]])
        common = set(up_a) & set(up_b)
        if not common:
            return None
        lca = next(v for v in up_a if v in common)
        return up_a[: up_a.index(lca) + 1] + up_b[: up_b.index(lca)][::-1]

    def pair(self, a: int, b: int) -> np.ndarray:
        """The model's exact joint of columns a and b: products of conditionals along the tree path."""
        marg = self.marginals()
        path = self._path(a, b)
        if path is None:
            return np.outer(marg[a], marg[b])
        joint = np.diag(marg[a])
        for x, y in itertools.pairwise(path):
            if self.parent[y] == x:
                step = self.cond[y]
            else:  # y is x's parent: P(y | x) by Bayes' rule
                back = marg[y][:, None] * self.cond[x]
                step = np.divide(back, marg[x][None, :], out=np.zeros_like(back),
                                 where=marg[x][None, :] > 0).T
            joint = joint @ step
        return joint

    def expand(self, maps: list[np.ndarray], weights: list[np.ndarray]) -> TreeModel:
        """The model on original levels when level k of column c was merged into maps[c][k].

        A merged level is drawn within its group with probability weights[c][k], independently
        of everything else (MST's domain compression undone, McKenna et al. 2021, Sec. 4).
        """
        probs = {c: p[maps[c]] * weights[c] for c, p in self.probs.items()}
        cond = {c: t[maps[self.parent[c]]][:, maps[c]] * weights[c][None, :]
                for c, t in self.cond.items()}
        return TreeModel(tuple(len(m) for m in maps), self.order, self.parent, probs, cond)

    def sample(self, k: int, *, rng: Rng, iid: bool = False) -> np.ndarray:
        """k records by ancestral sampling (inverse cdf per column, vectorized over records);
        records sharing a parent value get rounded expected counts (`rounding.uniforms`), or
        i.i.d. draws with `iid`."""
        out = np.empty((k, len(self.sizes)), dtype=np.int64)
        for c in self.order:
            p = self.parent[c]
            u = uniforms(k, None if p < 0 else out[:, p], rng, iid=iid)
            if p < 0:
                cum = np.cumsum(self.probs[c])
                out[:, c] = np.searchsorted(cum / cum[-1], u, side="right")
            else:
                cum = np.cumsum(self.cond[c], axis=1)
                cum /= cum[:, -1:]
                out[:, c] = (u[:, None] >= cum[out[:, p]]).sum(axis=1)
        np.minimum(out, np.array(self.sizes) - 1, out=out)
        return out


def fit_tree(
    sizes: list[int],
    one_way: list[np.ndarray],
    var1: list[float | np.ndarray],
    edges: list[tuple[int, int]],
    two_way: list[np.ndarray],
    var2: list[float],
) -> tuple[TreeModel, float]:
    """Consistent marginals from noisy measurements, then the tree model; returns it and the estimated n.

    Totals and each column's marginal are inverse-variance weighted averages of every measurement
    that determines them (the 1-way table, the margins of each 2-way table); marginals are
    projected onto non-negative counts with the common total, and each 2-way table is projected
    by least squares onto the non-negative tables with those margins (then proportional fitting
    removes the last rounding), so the model
    reproduces every estimated marginal (a tree-structured analogue of Private-PGM's consistent
    estimation, McKenna et al. 2019). `var1` (scalar or per cell) and `var2` are noise variances.
    """
    d = len(sizes)
    den = [np.broadcast_to(1.0 / np.asarray(var1[i], dtype=np.float64), (sizes[i],)).copy()
           for i in range(d)]
    tot_w = [1.0 / float(np.sum(1.0 / den[i])) for i in range(d)]
    tot_v = [float(y.sum()) for y in one_way]
    for (i, j), y, v in zip(edges, two_way, var2, strict=True):
        tot_w.append(1.0 / (sizes[i] * sizes[j] * v))
        tot_v.append(float(y.sum()))
    n_hat = max(float(np.dot(tot_w, tot_v) / np.sum(tot_w)), 1.0)
    num = [one_way[i] * den[i] for i in range(d)]
    for (i, j), y, v in zip(edges, two_way, var2, strict=True):
        num[i] = num[i] + y.sum(axis=1) / (sizes[j] * v)
        den[i] = den[i] + 1.0 / (sizes[j] * v)
        num[j] = num[j] + y.sum(axis=0) / (sizes[i] * v)
        den[j] = den[j] + 1.0 / (sizes[i] * v)
    marg = [project_simplex(num[i] / den[i] / n_hat) * n_hat for i in range(d)]
    tables = {}
    for (i, j), y in zip(edges, two_way, strict=True):
        t = project_tables(y, marg[i], marg[j]) + _FLOOR * n_hat / y.size
        t = ipf(t, marg[i], marg[j])
        tables[(i, j)] = t
        tables[(j, i)] = t.T
    neighbours: list[list[int]] = [[] for _ in range(d)]
    for i, j in edges:
        neighbours[i].append(j)
        neighbours[j].append(i)
    parent = [-2] * d
    order: list[int] = []
    probs: dict[int, np.ndarray] = {}
    cond: dict[int, np.ndarray] = {}
    for root in range(d):
        if parent[root] != -2:
            continue
        parent[root] = -1
        probs[root] = marg[root] / marg[root].sum()
        queue = [root]
        while queue:
            node = queue.pop(0)
            order.append(node)
            for child in neighbours[node]:
                if parent[child] == -2:
                    parent[child] = node
                    t = tables[(node, child)]
                    rows = t.sum(axis=1, keepdims=True)
                    cond[child] = np.divide(t, rows, out=np.full_like(t, 1.0 / t.shape[1]),
                                            where=rows > 0)
                    queue.append(child)
    model = TreeModel(tuple(sizes), tuple(order), tuple(parent), probs, cond)
    return model, n_hat
