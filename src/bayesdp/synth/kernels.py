"""Compiled inner loops of Private-PGM's calibration (`pgm.Flat`): a pass over flat buffers a call.

Every maximal clique's table lies in one float64 buffer (C order, clique k at offsets[k]); the
marginals a fit reads (`pgm._summation`) follow them in the same buffer. Summing a table down to
a sub-clique, or multiplying it by a table on one, goes through a map (a row of `maps`): the
table's trailing axes that are all kept (or all summed) form rows of `length` cells, and `index`
holds per row the sub-clique cell its first cell meets; along a row that cell steps by one if
the axes are kept, and stays if they are summed. So the inner loops run over contiguous cells.

The arithmetic is that of Private-PGM's numpy form (McKenna et al. 2019, Alg. 1; Shafer–Shenoy
with max-scaling): the same operations on the same values, only sums taken in another order.
The exponential stays numpy's (vectorised, with its own last bits), called between the kernels.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# A row of `maps`: offset of its per-row cells in `index`, row length, 1 if the row's axes are kept.
# A row of `edges` (BFS order): child, parent, the child's message [lo, hi) in the message buffers,
# the child's map and the parent's onto their separator (rows of `maps`).
# A row of `steps`: source table [lo, hi), destination table [lo, hi), map.
# A row of `targets`: a measured clique's marginal [lo, hi) in the table buffer and its first cell
# in the flat measurement vectors (mean, weight, gradient).
# A row of `homes`: a measured clique's home clique, its first cell in the flat vectors, the home's
# map onto it.


@njit(cache=True, nogil=True, inline="always")
def _sum_into(src, lo, hi, index, maps, m, out, out_lo, out_hi):  # type: ignore[no-untyped-def]
    """out[out_lo:out_hi] = src[lo:hi] summed down to a sub-clique through map m."""
    for s in range(out_lo, out_hi):
        out[s] = 0.0
    at, length, kept = maps[m, 0], maps[m, 1], maps[m, 2]
    for row in range((hi - lo) // length):
        base, first = out_lo + index[at + row], lo + row * length
        if kept:
            for t in range(length):
                out[base + t] += src[first + t]
        else:
            acc = 0.0
            for t in range(length):
                acc += src[first + t]
            out[base] += acc


@njit(cache=True, nogil=True, inline="always")
def _times(dst, lo, hi, index, maps, m, msg, msg_lo):  # type: ignore[no-untyped-def]
    """dst[lo:hi] times a table on a sub-clique (from msg_lo in `msg`) spread through map m."""
    at, length, kept = maps[m, 0], maps[m, 1], maps[m, 2]
    for row in range((hi - lo) // length):
        base, first = msg_lo + index[at + row], lo + row * length
        if kept:
            for t in range(length):
                dst[first + t] *= msg[base + t]
        else:
            v = msg[base]
            for t in range(length):
                dst[first + t] *= v


@njit(cache=True, nogil=True, inline="always")
def _scaled(msg, lo, hi):  # type: ignore[no-untyped-def]
    """msg[lo:hi] divided by its maximum (at least 1e-300), in place."""
    top = 1e-300
    for s in range(lo, hi):
        if msg[s] > top:
            top = msg[s]
    for s in range(lo, hi):
        msg[s] /= top


@njit(cache=True, nogil=True)
def trial_potentials(lp, step, alpha, offsets, trial, work):  # type: ignore[no-untyped-def]
    """trial = lp − α·step (a mirror-descent trial, linear in θ), and into `work` each maximal
    clique's trial minus its maximum (the max-scaling before the exponential)."""
    for k in range(offsets.size - 1):
        lo, hi = offsets[k], offsets[k + 1]
        top = -np.inf
        for c in range(lo, hi):
            t = lp[c] - alpha * step[c]
            trial[c] = t
            if t > top:
                top = t
        for c in range(lo, hi):
            work[c] = trial[c] - top


@njit(cache=True, nogil=True)
def propagate(work, offsets, index, maps, edges, up, down):  # type: ignore[no-untyped-def]
    """Clique marginals in place of the exponentiated, max-scaled potentials `work[:offsets[-1]]`
    by two-pass sum-product (Shafer–Shenoy), every message scaled to a maximum of one.

    Upward (reverse BFS) each child's table, already times its children's messages, is summed
    onto the separator into `up` and multiplies its parent. Downward (BFS) the parent's final
    belief summed onto the separator and divided by the child's own message (zero where that is
    zero) multiplies the child. Each belief is then normalised to sum to one."""
    for e in range(edges.shape[0] - 1, -1, -1):
        i, p, lo, hi = edges[e, 0], edges[e, 1], edges[e, 2], edges[e, 3]
        _sum_into(work, offsets[i], offsets[i + 1], index, maps, edges[e, 4], up, lo, hi)
        _scaled(up, lo, hi)
        _times(work, offsets[p], offsets[p + 1], index, maps, edges[e, 5], up, lo)
    for e in range(edges.shape[0]):
        i, p, lo, hi = edges[e, 0], edges[e, 1], edges[e, 2], edges[e, 3]
        n = hi - lo
        _sum_into(work, offsets[p], offsets[p + 1], index, maps, edges[e, 5], down, 0, n)
        for s in range(n):
            down[s] = down[s] / up[lo + s] if up[lo + s] > 0 else 0.0
        _scaled(down, 0, n)
        _times(work, offsets[i], offsets[i + 1], index, maps, edges[e, 4], down, 0)
    for k in range(offsets.size - 1):
        total = 0.0
        for c in range(offsets[k], offsets[k + 1]):
            total += work[c]
        for c in range(offsets[k], offsets[k + 1]):
            work[c] /= total


@njit(cache=True, nogil=True)
def measured_loss(work, index, maps, steps, targets, mean, weight, n_hat, grad, old, old_grad):  # type: ignore[no-untyped-def]
    """The measured cliques' marginals μ_r summed out of the beliefs by the plan `steps`, then
    L = ½ Σ_r ‖n̂μ_r − ȳ_r‖²·a_r and its gradient n̂·a_r·(n̂μ_r − ȳ_r) into `grad`; also
    Σ_r ⟨old_grad_r, old μ_r − μ_r⟩ against the accepted state `old` (the Armijo test's drop).
    Returns (L, drop)."""
    for t in range(steps.shape[0]):
        _sum_into(work, steps[t, 0], steps[t, 1], index, maps, steps[t, 4], work, steps[t, 2], steps[t, 3])
    value, drop = 0.0, 0.0
    for r in range(targets.shape[0]):
        lo, hi, f = targets[r, 0], targets[r, 1], targets[r, 2]
        part, moved = 0.0, 0.0
        for j in range(hi - lo):
            mu = work[lo + j]
            diff = n_hat * mu - mean[f + j]
            wdiff = weight[f + j] * diff
            part += wdiff * diff
            grad[f + j] = n_hat * wdiff
            moved += old_grad[f + j] * (old[lo + j] - mu)
        value += 0.5 * part
        drop += moved
    return value, drop


@njit(cache=True, nogil=True)
def spread(grad, offsets, index, maps, homes, out):  # type: ignore[no-untyped-def]
    """out = Σ_r grad_r spread over r's home clique (the step's log-potentials, `pgm.log_potentials`),
    each cell's terms added in the measured cliques' order."""
    for c in range(out.size):
        out[c] = 0.0
    for h in range(homes.shape[0]):
        k, f = homes[h, 0], homes[h, 1]
        at, length, kept = maps[homes[h, 2], 0], maps[homes[h, 2], 1], maps[homes[h, 2], 2]
        for row in range((offsets[k + 1] - offsets[k]) // length):
            base, first = f + index[at + row], offsets[k] + row * length
            if kept:
                for t in range(length):
                    out[first + t] += grad[base + t]
            else:
                g = grad[base]
                for t in range(length):
                    out[first + t] += g
