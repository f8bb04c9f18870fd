"""A graphical model on a junction tree, fitted to noisy marginals by mirror descent (Private-PGM).

McKenna, Sheldon & Miklau (2019), "Graphical-model based estimation and inference for differential
privacy": among distributions whose log-density is a sum of potentials on the measured cliques,
find the one whose marginals best fit the noisy measurements in inverse-variance weighted least
squares (Sec. 3, eq. (2)); inference is exact belief propagation on a junction tree.
Everything here is post-processing of noisy measurements.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from bayesdp.noise import Rng
from bayesdp.synth.rounding import uniforms

Clique = tuple[int, ...]  # sorted column indices
Variance = float | np.ndarray
# Mirror-descent steps of a cold fit; a warm start (AIM's rounds) needs fewer.
ITERATIONS = 500
_LINE_SEARCH = 25


def cells(sizes: tuple[int, ...] | list[int], clique: Clique) -> int:
    return math.prod(sizes[a] for a in clique)


def _shape(src: Clique, dst: Clique, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape that spreads a table on `src` over `dst` ⊇ `src` (both sorted, so axes keep order)."""
    return tuple(sizes[a] if a in src else 1 for a in dst)


def _axes(src: Clique, dst: Clique) -> tuple[int, ...]:
    """The axes of a table on `src` that summing it down to its sub-clique `dst` removes."""
    return tuple(k for k, a in enumerate(src) if a not in dst)


# The ufunc reductions behind ndarray.sum and .max, called directly (the same arithmetic, less
# call overhead in the thousands of small reductions of a fit).
_add = np.add.reduce
_max = np.maximum.reduce


def _sum_to(arr: np.ndarray, src: Clique, dst: Clique) -> np.ndarray:
    """Sum a table on `src` down to its sub-clique `dst`."""
    out: np.ndarray = _add(arr, axis=_axes(src, dst))
    return out


@dataclass(frozen=True)
class JunctionTree:
    """Maximal cliques of a triangulation of the cliques' graph, joined by a maximum-weight
    spanning tree on separator sizes (Koller & Friedman 2009, Sec. 10.4); `order` is a BFS order
    from clique 0 and `parent[i]` the clique towards the root (-1 for the root)."""

    sizes: tuple[int, ...]
    cliques: tuple[Clique, ...]
    order: tuple[int, ...]
    parent: tuple[int, ...]

    def home(self, r: Clique) -> int:
        """The smallest maximal clique containing r (the cheapest to sum r's marginal from)."""
        return min((k for k, c in enumerate(self.cliques) if set(r) <= set(c)),
                   key=lambda k: cells(self.sizes, self.cliques[k]))

    @cached_property
    def separators(self) -> tuple[Clique, ...]:
        """Per clique, the columns it shares with its parent (empty for a root)."""
        return tuple(() if p < 0 else tuple(a for a in c if a in self.cliques[p])
                     for c, p in zip(self.cliques, self.parent, strict=True))

    @cached_property
    def neighbours(self) -> tuple[tuple[int, ...], ...]:
        out: list[list[int]] = [[] for _ in self.cliques]
        for i, p in enumerate(self.parent):
            if p >= 0:
                out[i].append(p)
                out[p].append(i)
        return tuple(tuple(n) for n in out)

    @cached_property
    def passes(self) -> tuple[tuple[int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...],
                                    tuple[int, ...]], ...]:
        """Per non-root clique i in BFS order: i, its parent p, the axes summing i and p down to
        their separator, and the shapes spreading a separator table over p and over i."""
        out = []
        for i in self.order[1:]:
            p, sep, ci, cp = self.parent[i], self.separators[i], self.cliques[i], self.cliques[self.parent[i]]
            out.append((i, p, _axes(ci, sep), _axes(cp, sep), _shape(sep, cp, self.sizes),
                        _shape(sep, ci, self.sizes)))
        return tuple(out)

    @cached_property
    def _placed(self) -> dict[Clique, tuple[int, tuple[int, ...]]]:
        return {}

    def place(self, r: Clique) -> tuple[int, tuple[int, ...]]:
        """r's home clique (`home`) and the shape spreading a table on r over it (memoised)."""
        if r not in self._placed:
            k = self.home(r)
            self._placed[r] = (k, _shape(r, self.cliques[k], self.sizes))
        return self._placed[r]

    def size(self) -> int:
        """Total cells of the maximal cliques: the memory and time of one inference."""
        return sum(cells(self.sizes, c) for c in self.cliques)


class MaskCells(dict[int, int]):
    """Cells of a column set given as a bit mask (bit a = column a), memoised: masks share their
    lower bits, so each new product costs one multiplication."""

    def __init__(self, sizes: tuple[int, ...]) -> None:
        super().__init__({0: 1})
        self.sizes = sizes

    def __missing__(self, mask: int) -> int:
        low = mask & -mask
        out = self[mask ^ low] * self.sizes[low.bit_length() - 1]
        self[mask] = out
        return out


def adjacency(d: int, measured: list[Clique]) -> list[int]:
    """Per column, the bit mask of the columns it shares a measured clique with."""
    adj = [0] * d
    for r in measured:
        for a, b in itertools.combinations(r, 2):
            adj[a] |= 1 << b
            adj[b] |= 1 << a
    return adj


def eliminate(mask_cells: MaskCells, adj: list[int]) -> list[int]:
    """Greedy elimination (smallest eliminated clique first, ties to the lowest column)
    triangulates the graph `adj` (bit masks, consumed); its elimination cliques, pruned to the
    maximal ones, are the cliques of a junction tree (Koller & Friedman 2009, Thm. 9.6)."""
    d = len(adj)
    weight = [mask_cells[adj[u] | 1 << u] for u in range(d)]
    left = (1 << d) - 1
    found: list[int] = []
    while left:
        v, rest = -1, left
        while rest:
            low = rest & -rest
            u = low.bit_length() - 1
            if v < 0 or weight[u] < weight[v]:
                v = u
            rest ^= low
        nv, bit = adj[v], 1 << v
        found.append(nv | bit)
        rest = nv
        while rest:  # only v's neighbours change: they become a clique, without v
            low = rest & -rest
            u = low.bit_length() - 1
            adj[u] = (adj[u] | nv) & ~(low | bit)
            weight[u] = mask_cells[adj[u] | low]
            rest ^= low
        left &= ~bit
    # found[k] holds the k-th eliminated column, which no later clique holds: it can only lie
    # inside an earlier clique (and no two are equal).
    return [c for k, c in enumerate(found) if not any(c & o == c for o in found[:k])]


def clique_of(mask: int) -> Clique:
    return tuple(a for a in range(mask.bit_length()) if mask >> a & 1)


def triangulate(sizes: tuple[int, ...], measured: list[Clique]) -> list[Clique]:
    """The maximal cliques of the greedy triangulation of the measured cliques' graph (`eliminate`)."""
    return [clique_of(c) for c in eliminate(MaskCells(sizes), adjacency(len(sizes), measured))]


def junction_tree(sizes: tuple[int, ...], measured: list[Clique]) -> JunctionTree:
    """The triangulation's maximal cliques joined by a maximum-weight spanning tree on separator
    sizes (Koller & Friedman 2009, Sec. 10.4)."""
    maximal = triangulate(sizes, measured)
    # Maximum spanning tree (Prim from clique 0) on separator sizes; empty separators join forests.
    m = len(maximal)
    parent = [-1] * m
    order = [0]
    best = {k: (len(set(maximal[0]) & set(maximal[k])), 0) for k in range(1, m)}
    while best:
        k = max(best, key=lambda j: (best[j][0], -j))
        parent[k] = best.pop(k)[1]
        order.append(k)
        for j in best:
            w = len(set(maximal[k]) & set(maximal[j]))
            if w > best[j][0]:
                best[j] = (w, k)
    return JunctionTree(sizes, tuple(maximal), tuple(order), tuple(parent))


def log_potentials(jt: JunctionTree, theta: dict[Clique, np.ndarray], *,
                   compact: bool = False) -> list[np.ndarray]:
    """Σ_r θ_r on each maximal clique, each θ_r on its home clique (`JunctionTree.place`).
    Linear in θ, so a mirror-descent trial θ − αg costs one subtraction per maximal clique.
    With `compact` each sum keeps only the axes of the columns its terms hold (length one
    elsewhere, to broadcast): the same values, fewer cells."""
    sz = jt.sizes
    held: list[set[int]] = [set(c) if not compact else set() for c in jt.cliques]
    for r in theta:
        held[jt.place(r)[0]].update(r)
    logpot = [np.zeros(_shape(tuple(h), c, sz)) for h, c in zip(held, jt.cliques, strict=True)]
    for r, t in theta.items():
        k, shape = jt.place(r)
        logpot[k] += t.reshape(shape)
    return logpot


def calibrate(jt: JunctionTree, theta: dict[Clique, np.ndarray]) -> list[np.ndarray]:
    """Clique marginals of P(x) ∝ exp Σ_r θ_r(x_r) (`propagate`)."""
    return propagate(jt, log_potentials(jt, theta))


def propagate(jt: JunctionTree, logpot: list[np.ndarray]) -> list[np.ndarray]:
    """Clique marginals from log-potentials on the maximal cliques by two-pass sum-product
    (Shafer–Shenoy), in probability space with every potential and message scaled to a maximum
    of one. In place on tables it made (the arithmetic of the out-of-place form)."""
    inner = [p - _max(p, axis=None) for p in logpot]  # potential times the children's messages
    for t in inner:
        np.exp(t, out=t)
    up: dict[int, np.ndarray] = {}
    for i, p, axes, _, to_parent, _ in reversed(jt.passes):
        msg = _add(inner[i], axis=axes)
        up[i] = msg / max(float(_max(msg, axis=None)), 1e-300)
        inner[p] *= up[i].reshape(to_parent)
    # Beliefs in place of the inner tables: a clique's own is no longer read once it has sent
    # its message up, and its parent's is final before its children's are formed (BFS order).
    for i, p, _, axes, _, to_child in jt.passes:
        # The parent's belief without i's message: up[i] lives on the separator, so dividing the
        # parent's sum over the rest by it equals summing the divided belief.
        on_sep = _add(inner[p], axis=axes)
        down = np.divide(on_sep, up[i], out=np.zeros_like(on_sep), where=up[i] > 0)
        down /= max(float(_max(down, axis=None)), 1e-300)
        inner[i] *= down.reshape(to_child)
    for b in inner:
        b /= _add(b, axis=None)
    return inner


def _union(sep: Clique, keep: Clique) -> Clique:
    return tuple(sorted({*sep, *keep}))


def _through(ratio: np.ndarray, sep: Clique, on_u: np.ndarray, keep: Clique,
             sizes: tuple[int, ...]) -> np.ndarray:
    """P(x_a, x_keep) = Σ P(x_a, x_S)/P(x_S) · P(x_U) over U = S ∪ keep minus keep, from `ratio`
    = P(x_a, x_S)/P(x_S) (x_a leading) and `on_u` = P(x_U) (`Estimate.pairs_of`)."""
    u = _union(sep, keep)
    spread = ratio.reshape((ratio.shape[0], *_shape(sep, u, sizes))) * on_u[None]
    out: np.ndarray = _add(spread, axis=tuple(1 + k for k in _axes(u, keep)))
    return out


@dataclass
class Measurement:
    """A noisy count table on a clique and its noise variance (scalar or per cell)."""

    clique: Clique
    y: np.ndarray
    var: Variance


def total(measurements: list[Measurement]) -> float:
    """Inverse-variance weighted estimate of the record count from every table's sum."""
    w = np.array([1.0 / float(np.sum(np.broadcast_to(m.var, m.y.shape))) for m in measurements])
    t = np.array([float(m.y.sum()) for m in measurements])
    return max(float(np.dot(w, t) / w.sum()), 1.0)


@dataclass
class Estimate:
    """The fitted potentials θ (kept to warm-start the next fit) and the calibrated model."""

    jt: JunctionTree
    theta: dict[Clique, np.ndarray]
    beliefs: list[np.ndarray]
    n_hat: float
    step: float = 0.0  # the last accepted mirror-descent step, to warm-start the next fit
    _pairs: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    _sums: dict[tuple[int, Clique], np.ndarray] = field(default_factory=dict)

    def inside(self, k: int, r: Clique) -> np.ndarray:
        """Probability table of r ⊆ maximal clique k, summed from k's belief (memoised: the
        walks of `pairs_of` from every column need the same sums)."""
        if (k, r) not in self._sums:
            self._sums[(k, r)] = _sum_to(self.beliefs[k], self.jt.cliques[k], r)
        return self._sums[(k, r)]

    def marginal(self, r: Clique) -> np.ndarray:
        """Probability table of a clique inside one maximal clique (`inside` its home clique)."""
        return self.inside(self.jt.place(r)[0], r)

    def pair(self, a: int, b: int) -> np.ndarray:
        """P(x_a, x_b) for any two columns (`pairs_of`, cached)."""
        lo, hi = min(a, b), max(a, b)
        if (lo, hi) not in self._pairs:
            self._pairs.update(self.pairs_of(lo))
        out = self._pairs[(lo, hi)]
        return out if a < b else out.T

    def pairs_of(self, a: int) -> dict[tuple[int, int], np.ndarray]:
        """P(x_a, x_b) for every b > a in one walk over the tree from a clique holding a, carrying
        only P(x_a, S) on each separator S: a is independent of clique C given the separator S
        it is entered by (Koller & Friedman 2009, Sec. 10.2), so for U ⊆ C holding S,
        P(x_a, x_U) = P(x_a, x_S) P(x_U) / P(x_S); U = S ∪ {b} gives the pair, U = S ∪ S' the
        separator S' onwards."""
        jt, sz = self.jt, self.jt.sizes
        start = jt.home((a,))
        # Entering the start clique by S = (a,): P(x_a, x_a') is diagonal.
        stack: list[tuple[int, int, Clique, np.ndarray]] = [
            (start, -1, (a,), np.diag(self.inside(start, (a,))))]
        out: dict[tuple[int, int], np.ndarray] = {}
        while stack and len(out) < len(sz) - 1 - a:
            i, came, sep, joint = stack.pop()
            ci = jt.cliques[i]
            p_sep = self.inside(i, sep)
            ratio = np.divide(joint, p_sep[None], out=np.zeros_like(joint), where=p_sep[None] > 0)
            for b in ci:
                if b > a and (a, b) not in out:
                    out[(a, b)] = _through(ratio, sep, self.inside(i, _union(sep, (b,))), (b,), sz)
            for j in jt.neighbours[i]:
                if j != came:
                    nxt = tuple(x for x in ci if x in jt.cliques[j])
                    stack.append((j, i, nxt, _through(ratio, sep, self.inside(i, _union(sep, nxt)), nxt, sz)))
        return out

    def sample(self, k: int, *, rng: Rng, iid: bool = False) -> np.ndarray:
        """k records: each maximal clique in BFS order given its separator's sampled values
        (inverse cdf on the rows of its conditional table, one search for all records). The
        records sharing separator values get the expected counts of each row rounded
        (`rounding.uniforms`), or i.i.d. draws with `iid`."""
        jt, sz = self.jt, self.jt.sizes
        out = np.zeros((k, len(sz)), dtype=np.int64)
        for i in jt.order:
            c = jt.cliques[i]
            sep = jt.separators[i]
            new = tuple(x for x in c if x not in sep)
            if not new:
                continue
            table = np.transpose(self.beliefs[i], [c.index(x) for x in (*sep, *new)])
            table = table.reshape(cells(sz, sep), cells(sz, new))
            cum = np.cumsum(table, axis=1)
            cum = np.divide(cum, cum[:, -1:], out=np.tile(np.linspace(1 / cum.shape[1], 1, cum.shape[1]),
                                                         (cum.shape[0], 1)), where=cum[:, -1:] > 0)
            row = (np.ravel_multi_index(tuple(out[:, x] for x in sep), [sz[x] for x in sep])
                   if sep else np.zeros(k, dtype=np.int64))
            flat = (cum + np.arange(cum.shape[0])[:, None]).ravel()
            u = row + uniforms(k, row, rng, iid=iid)
            pick = np.searchsorted(flat, u, side="right") - row * cum.shape[1]
            pick = np.clip(pick, 0, cum.shape[1] - 1)
            for x, v in zip(new, np.unravel_index(pick, [sz[x] for x in new]), strict=True):
                out[:, x] = v
        return out


Summation = list[tuple[int, int, tuple[int, ...]]]  # (table made, table summed, axes summed)


def _summation(jt: JunctionTree, measured: list[Clique]) -> tuple[Summation, dict[Clique, int]]:
    """A plan summing every measured clique's marginal out of the maximal cliques' beliefs
    (tables 0..m−1, then one new table a step): from its smallest measured superset, else from
    its maximal clique, where the cliques homed together share partial sums (`_share`).
    `measured` is longest first; the returned tables keep its order."""
    program: Summation = []
    found: dict[Clique, int] = {}
    homed: dict[int, list[Clique]] = {}
    for r in measured:
        if not any(set(r) < set(q) for q in measured):
            homed.setdefault(jt.place(r)[0], []).append(r)
    for k, targets in homed.items():
        _share(jt, k, jt.cliques[k], targets, program, found)
    for r in measured:
        sup = [q for q in measured if set(r) < set(q)]
        if sup:  # longer, so found already
            q = min(sup, key=lambda q: cells(jt.sizes, q))
            program.append((len(jt.cliques) + len(program), found[q], _axes(q, r)))
            found[r] = program[-1][0]
    return program, {r: found[r] for r in measured}


def _share(jt: JunctionTree, src: int, cols: Clique, targets: list[Clique], program: Summation,
           found: dict[Clique, int]) -> None:
    """Marginals of `targets` ⊆ `cols` from table `src` on `cols`: those holding the column in
    fewest targets (the largest on ties) are summed from it directly, the rest from it summed
    over that column, recursively: a large table is read about once per column summed out."""
    def step(frm: int, axes: tuple[int, ...]) -> int:
        program.append((len(jt.cliques) + len(program), frm, axes))
        return program[-1][0]

    if len(targets) == 1:
        found[targets[0]] = step(src, _axes(cols, targets[0]))
        return
    x = min(cols, key=lambda c: (sum(c in r for r in targets), -jt.sizes[c]))
    for r in targets:
        if x in r:
            found[r] = step(src, _axes(cols, r))
    rest = [r for r in targets if x not in r]
    if rest:
        _share(jt, step(src, (cols.index(x),)), tuple(c for c in cols if c != x), rest, program, found)


def fit(sizes: tuple[int, ...], measurements: list[Measurement], *,
        warm: dict[Clique, np.ndarray] | None = None, step: float = 0.0,
        iters: int = ITERATIONS) -> Estimate:
    """Private-PGM estimation (McKenna et al. 2019, Alg. 1): entropic mirror descent on the
    potentials θ_r of the measured cliques for L(μ) = ½ Σ_r ‖n̂ μ_r − y_r‖²/σ_r², with Armijo
    backtracking on the step; every column is a clique of its own at least."""
    cl = sorted({m.clique for m in measurements} | {(a,) for a in range(len(sizes))})
    jt = junction_tree(sizes, cl)
    n_hat = total(measurements)
    theta = {r: np.zeros([sizes[a] for a in r]) for r in cl}
    for r, t in (warm or {}).items():
        if r in theta:
            theta[r] = t
    # Per clique, Σ_m ‖n̂μ − y_m‖²/σ_m² = ‖n̂μ − ȳ‖²·a + const with weights a = Σ_m 1/σ_m² and
    # ȳ = Σ_m (y_m/σ_m²)/a (the inverse-variance average): one table per clique, constant dropped.
    weight: dict[Clique, np.ndarray] = {}
    mean: dict[Clique, np.ndarray] = {}
    for m in measurements:
        w = np.broadcast_to(1.0 / np.asarray(m.var, dtype=float), m.y.shape)
        weight[m.clique] = weight.get(m.clique, 0.0) + w
        mean[m.clique] = mean.get(m.clique, 0.0) + m.y * w
    mean = {r: b / weight[r] for r, b in mean.items()}

    program, slot_of = _summation(jt, sorted(weight, key=len, reverse=True))

    def marginals(beliefs: list[np.ndarray]) -> dict[Clique, np.ndarray]:
        tables = [*beliefs, *[beliefs[0]] * len(program)]  # slots past the beliefs: filled in order
        for dst, src, axes in program:
            tables[dst] = _add(tables[src], axis=axes)
        return {r: tables[k] for r, k in slot_of.items()}

    def loss(mus: dict[Clique, np.ndarray]) -> tuple[float, dict[Clique, np.ndarray]]:
        value, grad = 0.0, {}
        for r, mu1 in mus.items():
            diff = n_hat * mu1 - mean[r]
            wdiff = weight[r] * diff
            value += 0.5 * float(np.vdot(wdiff, diff))
            grad[r] = n_hat * wdiff
        return value, grad

    logpot = log_potentials(jt, theta)
    beliefs = propagate(jt, logpot)
    mus = marginals(beliefs)
    value, grad = loss(mus)
    # 1/L for the loss's curvature bound, or the previous fit's last accepted step when larger
    # (a warm start skips the doublings back up to it).
    alpha = max(step, 1.0 / max(sum(float(np.max(n_hat**2 / np.asarray(m.var))) for m in measurements),
                                1e-300))
    grow = True
    for _ in range(iters):
        # Try a longer step only after one was accepted at once: each backtrack costs a calibration.
        alpha *= 2.0 if grow else 1.0
        step_pot = log_potentials(jt, grad, compact=True)
        grow = True
        for _ in range(_LINE_SEARCH):
            trial = [lp - alpha * g for lp, g in zip(logpot, step_pot, strict=True)]
            b_new = propagate(jt, trial)
            new = marginals(b_new)
            v_new, g_new = loss(new)
            drop = sum(float(np.vdot(grad[r], mus[r] - new[r])) for r in grad)
            if value - v_new >= 0.5 * drop:
                break
            alpha *= 0.5
            grow = False
        theta = {r: t - alpha * grad[r] if r in grad else t for r, t in theta.items()}
        logpot, beliefs, mus, value, grad = trial, b_new, new, v_new, g_new
    return Estimate(jt, theta, beliefs, n_hat, alpha)


@dataclass(frozen=True)
class GraphModel:
    """The fitted model on the original levels: level k of column c was merged into
    `maps[c][k]` and is drawn within its group with probability `weights[c][k]` (MST's domain
    compression undone, McKenna, Miklau & Sheldon 2021, Sec. 4)."""

    estimate: Estimate
    maps: tuple[np.ndarray, ...]
    weights: tuple[np.ndarray, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(m) for m in self.maps)

    def marginals(self) -> list[np.ndarray]:
        return [self.estimate.marginal((c,))[m] * w
                for c, (m, w) in enumerate(zip(self.maps, self.weights, strict=True))]

    def pair(self, a: int, b: int) -> np.ndarray:
        t = self.estimate.pair(a, b)[self.maps[a]][:, self.maps[b]]
        out: np.ndarray = t * self.weights[a][:, None] * self.weights[b][None, :]
        return out

    def sample(self, k: int, *, rng: Rng, iid: bool = False) -> np.ndarray:
        small = self.estimate.sample(k, rng=rng, iid=iid)
        out = np.empty_like(small)
        for c, (m, w) in enumerate(zip(self.maps, self.weights, strict=True)):
            # Original levels grouped by merged level (weights sum to one in each group);
            # inverse cdf of the weights within the sampled group.
            order = np.argsort(m, kind="stable")
            cum = np.cumsum(w[order])
            start = np.searchsorted(m[order], np.arange(int(m.max()) + 2))
            g = small[:, c]
            u = np.concatenate([[0.0], cum])[start[g]] + uniforms(k, g, rng, iid=iid)
            pos = np.clip(np.searchsorted(cum, u, side="right"), start[g], start[g + 1] - 1)
            out[:, c] = order[pos]
        return out
