"""Least-squares projections used to turn noisy counts into probabilities (post-processing)."""

from __future__ import annotations

import numpy as np


def project_simplex(values: np.ndarray, total: float = 1.0) -> np.ndarray:
    """Euclidean projection of each row onto {x >= 0, sum x = total} (Duchi et al. 2008, Fig. 1)."""
    v = np.atleast_2d(np.asarray(values, dtype=np.float64))
    k = v.shape[1]
    u = -np.sort(-v, axis=1)
    css = np.cumsum(u, axis=1) - total
    idx = np.arange(1, k + 1)
    cond = u - css / idx > 0
    rho = k - 1 - np.argmax(cond[:, ::-1], axis=1)
    theta = css[np.arange(v.shape[0]), rho] / (rho + 1)
    out: np.ndarray = np.maximum(v - theta[:, None], 0.0)
    return out.reshape(np.shape(values)) if np.ndim(values) == 1 else out


def fit_margins(table: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Least-squares change of `table` to row sums `rows` and column sums `cols` (equal totals).

    T = Y + a 1ᵀ/C + 1 bᵀ/R − s 11ᵀ/(RC) with a, b the margin gaps and s their common total: the
    orthogonal projection onto the affine set of tables with those margins.
    """
    r, c = table.shape
    a = rows - table.sum(axis=1)
    b = cols - table.sum(axis=0)
    s = 0.5 * (a.sum() + b.sum())
    out: np.ndarray = table + a[:, None] / c + b[None, :] / r - s / (r * c)
    return out


def project_tables(
    table: np.ndarray, rows: np.ndarray, cols: np.ndarray, iters: int = 300
) -> np.ndarray:
    """Least-squares projection onto non-negative tables with the given margins (Dykstra 1983).

    Alternates the affine margin projection and clipping at 0 with Dykstra's corrections, which
    converge to the projection onto the intersection rather than to some point of it.
    """
    x = np.asarray(table, dtype=np.float64)
    p = np.zeros_like(x)
    q = np.zeros_like(x)
    for _ in range(iters):
        y = fit_margins(x + p, rows, cols)
        p = x + p - y
        x_new = np.maximum(y + q, 0.0)
        q = y + q - x_new
        if np.abs(x_new - x).max() <= 1e-9 * max(float(rows.sum()), 1.0):
            return x_new
        x = x_new
    return x


def ipf(table: np.ndarray, rows: np.ndarray, cols: np.ndarray, iters: int = 200) -> np.ndarray:
    """Iterative proportional fitting of a positive table to given margins (Deming & Stephan 1940)."""
    t = np.array(table, dtype=np.float64)
    for _ in range(iters):
        rs = t.sum(axis=1)
        t *= np.divide(rows, rs, out=np.zeros_like(rs), where=rs > 0)[:, None]
        cs = t.sum(axis=0)
        t *= np.divide(cols, cs, out=np.zeros_like(cs), where=cs > 0)[None, :]
        if np.abs(t.sum(axis=1) - rows).max() <= 1e-9 * max(rows.sum(), 1.0):
            break
    return t
