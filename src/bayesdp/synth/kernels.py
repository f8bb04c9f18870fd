"""Compiled inner loops of Private-PGM's calibration (`pgm.Flat`): a pass over flat buffers a call.

Every maximal clique's table lies in one float64 buffer (C order, clique k at offsets[k]); the
marginals a fit reads (`pgm._summation`) follow them in the same buffer. Summing a table down to
a sub-clique, or spreading a table on one over it, goes through a map (a row of `maps`): the
table's last axes form an inner block all kept (or all summed) of `length` cells, the axes
before it a middle block of the other kind of `middle` cells, and `index` holds per head row
(the axes before both) the sub-clique cell its first cell meets; within a row the cell steps
along the kept block and stays along the summed one. So the inner loops run over contiguous
cells.

The arithmetic is that of Private-PGM's numpy form (McKenna et al. 2019, Alg. 1; Shafer–Shenoy
with max-scaling): the same operations on the same values, only sums taken in another order and
the beliefs normalised through the marginals read from them (`measured_loss`). The exponential
stays numpy's (vectorised, with its own last bits), called between the kernels.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# A row of `maps`: offset of its head rows' cells in `index`, middle and inner block cells, 1 if
# the inner block is kept.
# A row of `edges` (BFS order): child, parent, the child's message [lo, hi) in the message buffers,
# the child's map and the parent's onto their separator (rows of `maps`).
# A row of `steps`: source table [lo, hi), destination table [lo, hi), map.
# A row of `targets`: a measured clique's marginal [lo, hi) in the table buffer and its first cell
# in the flat measurement vectors (mean, weight, gradient).
# A row of `homes`: a measured clique's home clique, its first cell in the flat vectors, the home's
# map onto it.


# What `_mapped` does between a table and a table on a sub-clique.
SUM, TIMES, PLUS = 0, 1, 2


@njit(cache=True, nogil=True, inline="always")
def _mapped(table, lo, hi, index, maps, m, sub, sub_lo, mode):  # type: ignore[no-untyped-def]
    """Through map m between table[lo:hi] and a table on a sub-clique from sub_lo in `sub`: SUM
    adds the table summed down into `sub`; TIMES multiplies, PLUS adds, `sub` spread over the
    table into it."""
    at, middle, length, kept = maps[m, 0], maps[m, 1], maps[m, 2], maps[m, 3]
    first = lo
    for row in range((hi - lo) // (middle * length)):
        base = sub_lo + index[at + row]
        for mid in range(middle):
            if kept:
                for t in range(length):
                    if mode == SUM:
                        sub[base + t] += table[first + t]
                    elif mode == TIMES:
                        table[first + t] *= sub[base + t]
                    else:
                        table[first + t] += sub[base + t]
            elif mode == SUM:
                acc = 0.0
                for t in range(length):
                    acc += table[first + t]
                sub[base + mid] += acc
            else:
                v = sub[base + mid]
                for t in range(length):
                    if mode == TIMES:
                        table[first + t] *= v
                    else:
                        table[first + t] += v
            first += length


@njit(cache=True, nogil=True, inline="always")
def _sum_into(src, lo, hi, index, maps, m, out, out_lo, out_hi):  # type: ignore[no-untyped-def]
    """out[out_lo:out_hi] = src[lo:hi] summed down to a sub-clique through map m."""
    for s in range(out_lo, out_hi):
        out[s] = 0.0
    _mapped(src, lo, hi, index, maps, m, out, out_lo, SUM)


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
    zero) multiplies the child. The beliefs are left unnormalised (a factor per clique)."""
    for e in range(edges.shape[0] - 1, -1, -1):
        i, p, lo, hi = edges[e, 0], edges[e, 1], edges[e, 2], edges[e, 3]
        _sum_into(work, offsets[i], offsets[i + 1], index, maps, edges[e, 4], up, lo, hi)
        _scaled(up, lo, hi)
        _mapped(work, offsets[p], offsets[p + 1], index, maps, edges[e, 5], up, lo, TIMES)
    for e in range(edges.shape[0]):
        i, p, lo, hi = edges[e, 0], edges[e, 1], edges[e, 2], edges[e, 3]
        n = hi - lo
        _sum_into(work, offsets[p], offsets[p + 1], index, maps, edges[e, 5], down, 0, n)
        for s in range(n):
            down[s] = down[s] / up[lo + s] if up[lo + s] > 0 else 0.0
        _scaled(down, 0, n)
        _mapped(work, offsets[i], offsets[i + 1], index, maps, edges[e, 4], down, 0, TIMES)


@njit(cache=True, nogil=True)
def measured_loss(work, index, maps, steps, targets, mean, weight, n_hat, grad, old, old_grad):  # type: ignore[no-untyped-def]
    """The measured cliques' marginals μ_r summed out of the beliefs by the plan `steps` and
    normalised (each by its own sum: the belief it came from, normalised, gives the same), then
    L = ½ Σ_r ‖n̂μ_r − ȳ_r‖²·a_r and its gradient n̂·a_r·(n̂μ_r − ȳ_r) into `grad`; also
    Σ_r ⟨old_grad_r, old μ_r − μ_r⟩ against the accepted state `old` (the Armijo test's drop).
    Returns (L, drop)."""
    for t in range(steps.shape[0]):
        _sum_into(work, steps[t, 0], steps[t, 1], index, maps, steps[t, 4], work, steps[t, 2], steps[t, 3])
    value, drop = 0.0, 0.0
    for r in range(targets.shape[0]):
        lo, hi, f = targets[r, 0], targets[r, 1], targets[r, 2]
        _normalised(work, lo, hi)
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
        k = homes[h, 0]
        _mapped(out, offsets[k], offsets[k + 1], index, maps, homes[h, 2], grad, homes[h, 1], PLUS)


@njit(cache=True, nogil=True)
def normalise(work, offsets):  # type: ignore[no-untyped-def]
    """Each maximal clique's table divided by its sum, in place."""
    for k in range(offsets.size - 1):
        _normalised(work, offsets[k], offsets[k + 1])


@njit(cache=True, nogil=True, inline="always")
def _normalised(work, lo, hi):  # type: ignore[no-untyped-def]
    """work[lo:hi] divided by its sum, in place (summed in order, as a loop over it)."""
    total = 0.0
    for c in range(lo, hi):
        total += work[c]
    for c in range(lo, hi):
        work[c] /= total
