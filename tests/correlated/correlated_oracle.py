"""Brute-force oracle: every sequence of a small chain, its probability, and influences by summing."""

from __future__ import annotations

import itertools

import numpy as np


def sequences(k: int, length: int) -> np.ndarray:
    """All k^T state sequences, one per row."""
    return np.array(list(itertools.product(range(k), repeat=length)), dtype=np.int64)


def chain_probabilities(p: np.ndarray, q: np.ndarray, seqs: np.ndarray) -> np.ndarray:
    """P(x) = q(x_1) Π P(x_t, x_{t+1}) for every row of seqs."""
    prob = q[seqs[:, 0]].copy()
    for t in range(1, seqs.shape[1]):
        prob *= p[seqs[:, t - 1], seqs[:, t]]
    return prob


def conditional_influence(seqs: np.ndarray, prob: np.ndarray, k: int, node: int,
                          quilt: list[int], known: list[int]) -> float:
    """max over x_K and a ≠ b (both possible) of log max_{x_Q} P(x_Q|a,x_K)/P(x_Q|b,x_K)."""
    if not quilt:
        return 0.0
    best = 0.0
    kq = [k] * len(quilt)
    for xk in itertools.product(range(k), repeat=len(known)):
        sel = np.all(seqs[:, known] == np.array(xk, dtype=np.int64), axis=1) if known else \
            np.ones(len(seqs), bool)
        tables = []
        for a in range(k):
            rows = sel & (seqs[:, node] == a)
            mass = prob[rows].sum()
            if mass <= 0:
                tables.append(None)
                continue
            flat = np.ravel_multi_index(seqs[rows][:, quilt].T, kq)
            tables.append(np.bincount(flat, weights=prob[rows], minlength=int(np.prod(kq))) / mass)
        for a, b in itertools.permutations(range(k), 2):
            ta, tb = tables[a], tables[b]
            if ta is None or tb is None:
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                d = np.log(ta) - np.log(tb)
            d[np.isnan(d)] = -np.inf
            best = max(best, float(d.max()))
    return best


def bdp_influence(seqs: np.ndarray, prob: np.ndarray, k: int, node: int, quilt: list[int]) -> float:
    """sup over every known set K (disjoint from node and quilt) of the conditional influence."""
    others = [j for j in range(seqs.shape[1]) if j != node and j not in quilt]
    return max(
        conditional_influence(seqs, prob, k, node, quilt, list(kn))
        for r in range(len(others) + 1)
        for kn in itertools.combinations(others, r)
    )


def chain_quilts(node: int, length: int) -> list[tuple[list[int], int]]:
    """Every chain quilt of a 0-based node with card(X_N): {i−a, i+b}, one-sided, trivial."""
    out = []
    for a in range(1, node + 2):
        for b in range(1, length - node + 1):
            q = ([node - a] if a <= node else []) + ([node + b] if node + b < length else [])
            out.append((q, a + b - 1))
    return out


def leakage(seqs: np.ndarray, prob: np.ndarray, k: int, scale: float, notion: str) -> float:
    """Largest log ratio of the noisy-histogram pmfs given X_i = a vs b, over every adversary.

    Output: histogram + i.i.d. Laplace(scale) per bin on a lattice that holds the integers.
    Per cell of the breakpoint grid, the ratio of two Laplace mixtures is monotone in each
    coordinate, so its sup over all outputs is attained on the grid {0..T}^k: this is exact.
    """
    length = seqs.shape[1]
    hist = np.stack([(seqs == s).sum(axis=1) for s in range(k)], axis=1).astype(float)
    points = np.array(list(itertools.product(range(length + 1), repeat=k)), dtype=float)
    kernel = -np.abs(points[None, :, :] - hist[:, None, :]).sum(axis=2) / scale  # (N, P)
    worst = 0.0
    for node in range(length):
        others = [j for j in range(length) if j != node]
        knowns = [()] if notion == "pufferfish" else [
            kn for r in range(len(others) + 1) for kn in itertools.combinations(others, r)]
        for kn in knowns:
            for xk in itertools.product(range(k), repeat=len(kn)):
                sel = np.all(seqs[:, list(kn)] == np.array(xk, dtype=np.int64), axis=1) \
                    if kn else np.ones(len(seqs), bool)
                logs = []
                for a in range(k):
                    w = prob * (sel & (seqs[:, node] == a))
                    if w.sum() <= 0:
                        continue
                    with np.errstate(divide="ignore"):
                        z = np.log(w / w.sum())[:, None] + kernel
                    top = z.max(axis=0)
                    logs.append(top + np.log(np.exp(z - top).sum(axis=0)))
                for la, lb in itertools.permutations(logs, 2):
                    worst = max(worst, float((la - lb).max()))
    return worst
