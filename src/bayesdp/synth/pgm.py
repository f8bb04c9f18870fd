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
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from bayesdp.noise import Rng
from bayesdp.synth import kernels
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


def _sum_to(arr: np.ndarray, src: Clique, dst: Clique) -> np.ndarray:
    """Sum a table on `src` down to its sub-clique `dst`."""
    out: np.ndarray = np.add.reduce(arr, axis=_axes(src, dst))
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


Trail = list[tuple[list[int], list[int], int]]  # per step: the graph, the weights, the columns left


def elimination(mask_cells: MaskCells, adj: list[int], weight: list[int], left: int,
                trail: Trail | None = None) -> Iterator[tuple[int, int]]:
    """Greedy elimination of the columns in `left` (smallest eliminated clique first, ties to
    the lowest column) on the graph `adj` (bit masks) with `weight[u]` the cells of u and its
    neighbours; yields each eliminated column and its clique, updating `adj` and `weight` in
    place. With `trail`, each step first appends a copy of the state it starts from."""
    while left:
        if trail is not None:
            trail.append((list(adj), list(weight), left))
        v, rest = -1, left
        while rest:
            low = rest & -rest
            u = low.bit_length() - 1
            if v < 0 or weight[u] < weight[v]:
                v = u
            rest ^= low
        nv, bit = adj[v], 1 << v
        rest = nv
        while rest:  # only v's neighbours change: they become a clique, without v
            low = rest & -rest
            u = low.bit_length() - 1
            adj[u] = (adj[u] | nv) & ~(low | bit)
            weight[u] = mask_cells[adj[u] | low]
            rest ^= low
        left &= ~bit
        yield v, nv | bit


def weights(mask_cells: MaskCells, adj: list[int]) -> list[int]:
    """Per column, the cells of it and its neighbours in `adj`."""
    return [mask_cells[m | 1 << u] for u, m in enumerate(adj)]


def within_earlier(c: int, earlier: list[int]) -> bool:
    """Whether elimination clique c (a bit mask) lies inside one found before it. The k-th clique
    holds the k-th eliminated column, which no later clique holds, so only an earlier clique can
    hold it whole (and no two are equal): the maximal cliques are those this is false for."""
    return any(c & o == c for o in earlier)


def eliminate(mask_cells: MaskCells, adj: list[int]) -> list[int]:
    """Greedy elimination (`elimination`) triangulates the graph `adj` (bit masks, consumed);
    its elimination cliques, pruned to the maximal ones (`within_earlier`), are the cliques of a
    junction tree (Koller & Friedman 2009, Thm. 9.6)."""
    found = [c for _, c in elimination(mask_cells, adj, weights(mask_cells, adj), (1 << len(adj)) - 1)]
    return [c for k, c in enumerate(found) if not within_earlier(c, found[:k])]


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


def log_potentials(jt: JunctionTree, theta: dict[Clique, np.ndarray]) -> list[np.ndarray]:
    """Σ_r θ_r on each maximal clique, each θ_r on its home clique (`JunctionTree.place`)."""
    logpot = [np.zeros([jt.sizes[a] for a in c]) for c in jt.cliques]
    for r, t in theta.items():
        k, shape = jt.place(r)
        logpot[k] += t.reshape(shape)
    return logpot


def calibrate(jt: JunctionTree, theta: dict[Clique, np.ndarray]) -> list[np.ndarray]:
    """Clique marginals of P(x) ∝ exp Σ_r θ_r(x_r) (`Flat.calibrate`)."""
    flat = Flat(jt, [])
    lp = np.concatenate([p.ravel() for p in log_potentials(jt, theta)])
    work = flat.buffer()
    flat.calibrate(lp, np.zeros_like(lp), 0.0, np.empty_like(lp), work)
    return flat.beliefs(work)


def _index(src: Clique, dst: Clique, sizes: tuple[int, ...]) -> np.ndarray:
    """Per cell of a table on `src` (C order), the cell of its sub-clique `dst` it sums into."""
    idx = np.arange(cells(sizes, dst), dtype=np.int32).reshape(_shape(dst, src, sizes))
    return np.broadcast_to(idx, [sizes[a] for a in src]).ravel()


@lru_cache(maxsize=4096)
def _rows(src: Clique, dst: Clique, sizes: tuple[int, ...]) -> tuple[np.ndarray, int, int, bool]:
    """`_index` by blocks of `src`'s axes: the last ones all in `dst` or all not (the inner
    block, kept or summed), the ones before them all of the other kind (the middle block), the
    rest (the head). Returns per head row the `dst` cell of its first cell, the middle and inner
    blocks' cells, and whether the inner block is kept. Memoised (AIM's successive models share
    most maps); the array is only read."""
    kept = src[-1] in dst
    inner = len(src)
    while inner and (src[inner - 1] in dst) == kept:
        inner -= 1
    head = inner
    while head and (src[head - 1] in dst) != kept:
        head -= 1
    middle, length = cells(sizes, src[head:inner]), cells(sizes, src[inner:])
    base = _index(src[:head], tuple(a for a in dst if a in src[:head]), sizes)
    return base * (length if kept else middle), middle, length, kept


class Flat:
    """A junction tree and the measured cliques' marginals (`_summation`) laid out flat for the
    compiled calibration (`kernels`): one buffer holds the maximal cliques' tables, then the
    plan's tables; `index` and `maps` every map from a table onto a sub-clique (`_rows`)."""

    def __init__(self, jt: JunctionTree, measured: list[Clique]) -> None:
        sz = jt.sizes
        self.jt = jt
        self.measured = measured
        program, slot_of = _summation(jt, measured)
        cols = [*jt.cliques]
        for _, src, axes in program:
            cols.append(tuple(a for k, a in enumerate(cols[src]) if k not in axes))
        self.table = np.cumsum([0, *(cells(sz, c) for c in cols)])
        self.offsets = self.table[:len(jt.cliques) + 1]
        self.n = int(self.offsets[-1])
        index: list[np.ndarray] = []
        maps: list[tuple[int, int, int, int]] = []
        at = 0

        def put(src: Clique, dst: Clique) -> int:
            nonlocal at
            base, middle, length, kept = _rows(src, dst, sz)
            maps.append((at, middle, length, int(kept)))
            index.append(base)
            at += base.size
            return len(maps) - 1

        edges, msg = [], 0
        for i in jt.order[1:]:
            p, sep = jt.parent[i], jt.separators[i]
            edges.append((i, p, msg, msg + cells(sz, sep), put(jt.cliques[i], sep), put(jt.cliques[p], sep)))
            msg += cells(sz, sep)
        self.edges = np.array(edges, dtype=np.int64).reshape(-1, 6)
        self.up = np.empty(msg)
        self.down = np.empty(max((cells(sz, s) for s in jt.separators), default=1))
        self.steps = np.array([(self.table[src], self.table[src + 1], self.table[dst], self.table[dst + 1],
                                put(cols[src], cols[dst])) for dst, src, _ in program],
                              dtype=np.int64).reshape(-1, 5)
        # Measured cliques in order, flat: where each one's marginal is and its cells' first.
        self.flat = np.cumsum([0, *(cells(sz, r) for r in measured)])
        self.targets = np.array([(self.table[slot_of[r]], self.table[slot_of[r] + 1], self.flat[j])
                                 for j, r in enumerate(measured)], dtype=np.int64).reshape(-1, 3)
        homes = [jt.place(r)[0] for r in measured]
        self.homes = np.array([(k, self.flat[j], put(jt.cliques[k], r))
                               for j, (k, r) in enumerate(zip(homes, measured, strict=True))],
                              dtype=np.int64).reshape(-1, 3)
        self.maps = np.array(maps, dtype=np.int64).reshape(-1, 4)
        self.index = np.concatenate(index) if index else np.zeros(0, dtype=np.int32)

    def buffer(self) -> np.ndarray:
        """A table buffer: the maximal cliques' beliefs, then the plan's marginals."""
        return np.zeros(int(self.table[-1]))

    def vector(self, tables: dict[Clique, np.ndarray] | None = None) -> np.ndarray:
        """The measured cliques' tables flat, in order (zeros without `tables`)."""
        if tables is None:
            return np.zeros(int(self.flat[-1]))
        return np.concatenate([np.broadcast_to(tables[r], [self.jt.sizes[a] for a in r]).ravel()
                               for r in self.measured]) if self.measured else np.zeros(0)

    def tables(self, vec: np.ndarray) -> dict[Clique, np.ndarray]:
        """The measured cliques' tables (views) of a flat vector."""
        return {r: vec[self.flat[k]:self.flat[k + 1]].reshape([self.jt.sizes[a] for a in r])
                for k, r in enumerate(self.measured)}

    def beliefs(self, work: np.ndarray) -> list[np.ndarray]:
        """The maximal cliques' beliefs: their tables in `work`, normalised in place (views)."""
        kernels.normalise(work, self.offsets)
        return [work[self.offsets[k]:self.offsets[k + 1]].reshape([self.jt.sizes[a] for a in c])
                for k, c in enumerate(self.jt.cliques)]

    def calibrate(self, lp: np.ndarray, step: np.ndarray, alpha: float, trial: np.ndarray,
                  work: np.ndarray) -> None:
        """Beliefs of the log-potentials trial = lp − α·step into `work` (`kernels.propagate`)."""
        kernels.trial_potentials(lp, step, alpha, self.offsets, trial, work)
        np.exp(work[:self.n], out=work[:self.n])
        kernels.propagate(work, self.offsets, self.index, self.maps, self.edges, self.up, self.down)

    def spread(self, grad: np.ndarray, out: np.ndarray) -> None:
        """out = Σ_r grad_r on each home clique (`log_potentials` of the step)."""
        kernels.spread(grad, self.offsets, self.index, self.maps, self.homes, out)


@dataclass(frozen=True)
class _Contraction:
    """How `_through` lays out its tables for one (S, keep): U = S ∪ keep; I = S ∩ keep (batch
    axes), A = S minus keep (summed), B = keep minus S; the axes of P(x_a, x_S) taken as
    (I, a, A), of P(x_keep | x_S) as (I, A, B), and of their product (I, a, B) as (a, keep)."""

    u: Clique
    n_i: int
    joint_axes: tuple[int, ...]
    table_axes: tuple[int, ...]
    out_axes: tuple[int, ...]


@lru_cache(maxsize=4096)
def _contraction(sep: Clique, keep: Clique) -> _Contraction:
    u = tuple(sorted({*sep, *keep}))
    both = [c for c in sep if c in keep]
    gone = [c for c in sep if c not in keep]
    new = [c for c in keep if c not in sep]
    joint_axes = (*(1 + sep.index(c) for c in both), 0, *(1 + sep.index(c) for c in gone))
    table_axes = tuple(u.index(c) for c in (*both, *gone, *new))
    out_axes = (len(both), *(both.index(c) if c in both else len(both) + 1 + new.index(c)
                             for c in keep))
    return _Contraction(u, len(both), joint_axes, table_axes, out_axes)


Conditional = tuple[_Contraction, np.ndarray, tuple[int, ...]]  # `_through`'s last three arguments


def _through(joint: np.ndarray, plan: _Contraction, given: np.ndarray,
             new: tuple[int, ...]) -> np.ndarray:
    """P(x_a, x_keep) = Σ P(x_a, x_S) · P(x_keep | x_S) over S minus keep, from `joint` =
    P(x_a, x_S) (x_a leading) and `given` = P(x_keep | x_S) laid out by `plan` (I, A, B)
    (`Estimate._conditional`), `new` the shape of B: one matrix product per value of I."""
    r = joint.transpose(plan.joint_axes)
    batch = r.shape[:plan.n_i]
    prod = np.matmul(r.reshape(*batch, r.shape[plan.n_i], given.shape[-2]), given)
    out: np.ndarray = prod.reshape(*batch, r.shape[plan.n_i], *new).transpose(plan.out_axes)
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
    _given: dict[tuple[int, Clique, Clique], Conditional] = field(default_factory=dict)

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

    def _conditional(self, k: int, sep: Clique, keep: Clique) -> Conditional:
        """P(x_keep | x_S) for S, keep ⊆ maximal clique k (0 where P(x_S) = 0), laid out for
        `_through`, with its plan and the shape of keep minus S (memoised: it does not depend
        on the column a walk of `pairs_of` starts from)."""
        if (k, sep, keep) not in self._given:
            sz, plan = self.jt.sizes, _contraction(sep, keep)
            p_u, p_sep = self.inside(k, plan.u), self.inside(k, sep).reshape(_shape(sep, plan.u, sz))
            cond = np.divide(p_u, p_sep, out=np.zeros_like(p_u), where=p_sep > 0).transpose(plan.table_axes)
            new = cond.shape[len(sep):]
            batch = cond.shape[:plan.n_i]
            flat = cond.reshape(*batch, math.prod(cond.shape[plan.n_i:len(sep)]), math.prod(new))
            self._given[(k, sep, keep)] = (plan, flat, new)
        return self._given[(k, sep, keep)]

    def pairs_of(self, a: int) -> dict[tuple[int, int], np.ndarray]:
        """P(x_a, x_b) for every b > a in one walk over the tree from a clique holding a, carrying
        only P(x_a, S) on each separator S: a is independent of clique C given the separator S
        it is entered by (Koller & Friedman 2009, Sec. 10.2), so for U ⊆ C holding S,
        P(x_a, x_U) = Σ P(x_a, x_S) P(x_U | x_S) over S minus U; U = {b} gives the pair, U = S'
        the separator S' onwards."""
        jt = self.jt
        start = jt.home((a,))
        # Entering the start clique by S = (a,): P(x_a, x_a') is diagonal.
        stack: list[tuple[int, int, Clique, np.ndarray]] = [
            (start, -1, (a,), np.diag(self.inside(start, (a,))))]
        out: dict[tuple[int, int], np.ndarray] = {}
        while stack and len(out) < len(jt.sizes) - 1 - a:
            i, came, sep, joint = stack.pop()
            ci = jt.cliques[i]
            for b in ci:
                if b > a and (a, b) not in out:
                    out[(a, b)] = _through(joint, *self._conditional(i, sep, (b,)))
            for j in jt.neighbours[i]:
                if j != came:
                    nxt = tuple(x for x in ci if x in jt.cliques[j])
                    stack.append((j, i, nxt, _through(joint, *self._conditional(i, sep, nxt))))
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
    as_set = [frozenset(r) for r in measured]
    supersets = [[q for q, b in zip(measured, as_set, strict=True) if a < b] for a in as_set]
    for r, sup in zip(measured, supersets, strict=True):
        if not sup:
            homed.setdefault(jt.place(r)[0], []).append(r)
    for k, targets in homed.items():
        _share(jt, k, jt.cliques[k], targets, program, found)
    for r, sup in zip(measured, supersets, strict=True):
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

    flat = Flat(jt, sorted(weight, key=len, reverse=True))
    means, weights = flat.vector(mean), flat.vector(weight)
    # The fit's state, flat: θ of the measured cliques, the log-potentials, the table buffer
    # (beliefs and marginals) and the gradient; a trial fills the second copy of the last three,
    # and an accepted one swaps them.
    th = flat.vector(theta)
    lp = np.concatenate([p.ravel() for p in log_potentials(jt, theta)])
    lp_new, step_pot = np.empty_like(lp), np.zeros_like(lp)
    work, work_new = flat.buffer(), flat.buffer()
    grad, grad_new = flat.vector(), flat.vector()

    def calibrated(alpha: float) -> tuple[float, float]:
        """Beliefs, marginals, loss and gradient of lp − α·step_pot into the second copies; the
        loss and the drop Σ ⟨∇L, μ − μ_new⟩ from the accepted state."""
        flat.calibrate(lp, step_pot, alpha, lp_new, work_new)
        out: tuple[float, float] = kernels.measured_loss(
            work_new, flat.index, flat.maps, flat.steps, flat.targets, means, weights, n_hat,
            grad_new, work, grad)
        return out

    value, _ = calibrated(0.0)  # the step potentials are still zero: the trial is lp itself
    lp, lp_new, work, work_new, grad, grad_new = lp_new, lp, work_new, work, grad_new, grad
    # 1/L for the loss's curvature bound, or the previous fit's last accepted step when larger
    # (a warm start skips the doublings back up to it).
    alpha = max(step, 1.0 / max(sum(float(np.max(n_hat**2 / np.asarray(m.var))) for m in measurements),
                                1e-300))
    grow = True
    for _ in range(iters):
        # Try a longer step only after one was accepted at once: each backtrack costs a calibration.
        alpha *= 2.0 if grow else 1.0
        flat.spread(grad, step_pot)
        grow = True
        for _ in range(_LINE_SEARCH):
            v_new, drop = calibrated(alpha)
            if value - v_new >= 0.5 * drop:
                break
            alpha *= 0.5
            grow = False
        th -= alpha * grad
        value = v_new
        lp, lp_new, work, work_new, grad, grad_new = lp_new, lp, work_new, work, grad_new, grad
    theta.update(flat.tables(th))
    return Estimate(jt, theta, flat.beliefs(work), n_hat, alpha)


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
