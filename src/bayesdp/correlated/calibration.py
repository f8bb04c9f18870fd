"""Markov-quilt calibration: σ_max = max_i min_Q card(X_N)/(ε − e(X_Q|X_i)) and its DP→BDP dual.

Song, Wang & Chaudhuri 2017, Alg. MQM (Sec. 4): σ(X_Q) = card(X_N)/(ε − e(X_Q|X_i)) when
e < ε, σ_i = min_Q σ(X_Q), σ_max = max_i σ_i; the trivial quilt caps σ_max at T/ε.

For a time-homogeneous chain the influence of quilt {X_{i−a}, X_{i+b}} depends on (a, b) and on
whether each side exists, so only quilts with card ≤ D matter once every node has a quilt scoring
at most score(card = D+1): the search doubles D until that holds, evaluates the D end nodes on
each side one by one and one interior node (all interior nodes score alike for a stationary start
or BDP; for the worst start the score does not increase with i). Memory and time depend on D
(about ε·σ_max), not on the length T.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bayesdp.correlated.chain import ChainClass, MarkovChain
from bayesdp.correlated.influence import (
    ApproxTerms,
    ChainTerms,
    chain_influence,
    check_notion,
    maxplus,
)
from bayesdp.errors import InvalidParameter, check_positive, check_positive_int, invalid

METHODS: tuple[str, ...] = ("exact", "approx")
# The search scores window x window quilt shapes at once (a few float64 matrices): 2^12 keeps
# that near 1 GB; a model correlated over longer distances is refused (use method='approx').
MAX_WINDOW = 1 << 12
_BLOCK = 4096  # interior nodes scored at once for an explicit start


@runtime_checkable
class SelfCalibrating(Protocol):
    """A model that computes its own influences and calibration (a BayesianNetwork): chains are
    searched here; a network, which imports this module, answers for itself."""

    def max_influence(self, node: Any, quilt: Sequence[Any], notion: str = ...) -> float: ...

    def calibration(self, epsilon: float, *, length: int | None = ..., method: str = ...,
                    notion: str = ..., node: Any = ...) -> QuiltCalibration: ...


@dataclass(frozen=True)
class QuiltCalibration:
    """The worst node, its best Markov quilt and the resulting noise scale (MQM, Song et al. 2017).

    `sigma` is the Laplace scale per unit of Lipschitz constant; `node` is 0-based (a name for a
    network); `quilt` lists the quilt's nodes (empty: the trivial quilt, i.e. group privacy);
    `nearby` is card(X_N) (the node and the nodes between it and the quilt).
    """

    sigma: float
    _: KW_ONLY
    node: Any
    quilt: tuple[Any, ...]
    influence: float
    nearby: int

    @property
    def trivial(self) -> bool:
        """True when no quilt beats group privacy over the whole sequence."""
        return not self.quilt


@dataclass(frozen=True)
class Objective:
    """score(card, e) to minimize over quilts and maximize over nodes, with score ≥ floor(card)."""

    score: Callable[[np.ndarray, np.ndarray], np.ndarray]
    floor: Callable[[float], float]


def sigma_objective(epsilon: float) -> Objective:
    """card/(ε − e) for e < ε, ∞ otherwise (MQM, Song et al. 2017)."""

    def score(card: np.ndarray, e: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(e < epsilon, card / (epsilon - e), np.inf)

    return Objective(score, lambda c: c / epsilon)


def forward_objective(epsilon_dp: float) -> Objective:
    """(|N_i| + 1)·ε' + e (Zhao et al. 2017 via the MQM proof; reference note §3)."""

    def score(card: np.ndarray, e: np.ndarray) -> np.ndarray:
        return np.asarray(card * epsilon_dp + e)

    return Objective(score, lambda c: c * epsilon_dp)


@dataclass(frozen=True)
class _Best:
    score: float
    node: int
    a: int | None
    b: int | None
    influence: float
    nearby: int


class _Search:
    """One pass of the windowed search at window D over the terms of every θ in Θ."""

    def __init__(self, terms: Sequence[Any], length: int, window: int, obj: Objective) -> None:
        self.terms, self.T, self.D, self.obj = terms, length, window, obj
        self.prefix: np.ndarray | None = None
        if all(t.left_core is not None for t in terms):
            core = np.max([maxplus(t.left_core, t.right_core) for t in terms], axis=0)
            idx = np.arange(1, window + 1)
            s = obj.score((idx[:, None] + idx[None, :] - 1).astype(np.float64), core)
            self.prefix = np.minimum.accumulate(np.minimum.accumulate(s, axis=0), axis=1)

    def value(self, i: int) -> float:
        """min over windowed quilts of node i (1-based)."""
        v = self.node(i)
        assert isinstance(v, float)
        return v

    def best(self, i: int) -> _Best:
        """The windowed quilt of node i (1-based) with the smallest score."""
        b = self.node(i, full=True)
        assert isinstance(b, _Best)
        return b

    def node(self, i: int, full: bool = False) -> _Best | float:
        """min over windowed quilts of node i (1-based); with full=True also the argmin."""
        T, D, obj = self.T, self.D, self.obj
        na, nb = min(i - 1, D), min(T - i, D)
        rows = [t.left_rows(i, na) for t in self.terms]
        cols = [t.right_rows(i, nb) for t in self.terms]
        lefts = [r for r, _ in rows]
        rights = [c for c, _ in cols]
        core_a = 0 if full or self.prefix is None else min(n for _, n in rows)
        core_b = 0 if full or self.prefix is None else min(n for _, n in cols)
        cands: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        # trivial quilt, then left-none (a = i), right-none (b = T-i+1), then both sides
        cands.append((np.array([T], float), np.zeros(1), np.array([i]), np.array([T - i + 1])))
        if nb:
            b = np.arange(1, nb + 1)
            e = np.max([r.max(axis=1) for r in rights], axis=0)
            cands.append(((i + b - 1).astype(float), e, np.full(nb, i), b))
        if na:
            a = np.arange(1, na + 1)
            e = np.max([r.max(axis=1) for r in lefts], axis=0)
            cands.append(((a + T - i).astype(float), e, a, np.full(na, T - i + 1)))
        if na and nb:
            blocks = []
            if core_a < na:
                blocks.append((slice(core_a, na), slice(0, nb)))
            if core_b < nb and core_a:
                blocks.append((slice(0, core_a), slice(core_b, nb)))
            for ra, rb in blocks:
                e = np.max([maxplus(lt[ra], rt[rb]) for lt, rt in zip(lefts, rights, strict=True)],
                           axis=0)
                ga, gb = np.meshgrid(np.arange(ra.start + 1, ra.stop + 1),
                                     np.arange(rb.start + 1, rb.stop + 1), indexing="ij")
                cands.append(((ga + gb - 1).ravel().astype(float), e.ravel(), ga.ravel(), gb.ravel()))
        card = np.concatenate([c[0] for c in cands])
        infl = np.concatenate([c[1] for c in cands])
        scores = obj.score(card, infl)
        best = float(scores.min())
        if core_a and core_b:
            assert self.prefix is not None
            best = min(best, float(self.prefix[core_a - 1, core_b - 1]))
        if not full:
            return best
        j = int(np.argmin(scores))
        a_j = int(np.concatenate([c[2] for c in cands])[j])
        b_j = int(np.concatenate([c[3] for c in cands])[j])
        return _Best(float(scores[j]), i, a_j if a_j < i else None,
                     b_j if b_j <= T - i else None, float(infl[j]), int(card[j]))

    def run(self) -> tuple[float, int]:
        """max over nodes of the windowed min, and a node attaining it."""
        T, D = self.T, self.D
        ends = list(range(1, min(D, T) + 1)) + list(range(max(D + 1, T - D + 1), T + 1))
        first = [D + 1] if D + 1 <= T - D else []
        varying = bool(first) and any(t.interior == "varying" for t in self.terms)
        if self.prefix is not None and all(t.homogeneous for t in self.terms):
            nodes = ends + first
            values = self._homogeneous(np.array(nodes))
            j = int(np.argmax(values))
            return float(values[j]), nodes[j]
        # Exact max with pruning: a node whose score under some quilt (one that was best at a
        # node seen before) is at most the running max cannot raise it (σ_i ≤ that score).
        self.worst, self.arg = -math.inf, 1
        self.quilts: list[tuple[int | None, int | None]] = []
        for i in first + ends:
            if not self.quilts or self._score_of(i, self.quilts) > self.worst:
                self._visit(i)
        if varying and self.worst <= self.obj.floor(D + 1):
            # An explicit start: every interior node has its own μ_i. Bound every node by the
            # quilts seen so far, then visit nodes in order of their bound until none can win.
            inner = np.arange(D + 2, T - D + 1)
            upper = self._block_scores(inner, self.quilts)
            while inner.size:
                j = int(np.argmax(upper))
                if upper[j] <= self.worst:
                    break
                before = list(self.quilts)
                self._visit(int(inner[j]))
                upper[j] = -np.inf
                new = [q for q in self.quilts if q not in before]
                if new:
                    upper = np.minimum(upper, self._block_scores(inner, new))
        return self.worst, self.arg

    def _visit(self, i: int) -> None:
        best = self.best(i)
        if best.score > self.worst:
            self.worst, self.arg = best.score, i
        if (best.a, best.b) not in self.quilts:
            self.quilts = [(best.a, best.b), *self.quilts[:7]]

    def _block_scores(self, nodes: np.ndarray,
                      quilts: list[tuple[int | None, int | None]]) -> np.ndarray:
        """Upper bounds on interior nodes' scores: min over the given two-sided quilts."""
        both = [(a, b) for a, b in quilts if a is not None and b is not None]
        out = np.full(nodes.size, np.inf)
        for lo in range(0, nodes.size, _BLOCK):
            block = nodes[lo : lo + _BLOCK]
            for a, b in both:
                e = np.max([t.interior_left(block, a) + t.right_core[b - 1] for t in self.terms],
                           axis=0).max(axis=1)
                card = np.full(block.size, float(a + b - 1))
                out[lo : lo + _BLOCK] = np.minimum(out[lo : lo + _BLOCK], self.obj.score(card, e))
        return out

    def _score_of(self, i: int, quilts: list[tuple[int | None, int | None]]) -> float:
        """min score at node i over the given quilts (a or b None: no node on that side)."""
        T, D = self.T, self.D
        na, nb = min(i - 1, D), min(T - i, D)
        lefts = [t.left_rows(i, na)[0] for t in self.terms]
        rights = [t.right_rows(i, nb)[0] for t in self.terms]
        best = math.inf
        for a, b in quilts:
            if (a is not None and a > na) or (b is not None and b > nb):
                continue
            if a is not None and b is not None:
                card = float(a + b - 1)
                e = max(float((lt[a - 1] + rt[b - 1]).max())
                        for lt, rt in zip(lefts, rights, strict=True))
            elif b is not None:
                card, e = float(i + b - 1), max(float(r[b - 1].max()) for r in rights)
            elif a is not None:
                card, e = float(a + T - i), max(float(r[a - 1].max()) for r in lefts)
            else:
                card, e = float(T), 0.0
            best = min(best, float(self.obj.score(np.array([card]), np.array([e]))[0]))
        return best

    def _homogeneous(self, nodes: np.ndarray) -> np.ndarray:
        """Windowed min of many nodes at once when every node sees the same core terms."""
        assert self.prefix is not None
        T, D, obj = self.T, self.D, self.obj
        na, nb = np.minimum(nodes - 1, D), np.minimum(T - nodes, D)
        steps = np.arange(1, D + 1)
        e_right = np.max([t.right_core.max(axis=1) for t in self.terms], axis=0)
        e_left = np.max([t.left_core.max(axis=1) for t in self.terms], axis=0)
        col = nodes[:, None].astype(np.float64)
        left_none = obj.score(col + steps - 1, e_right[None, :])  # a = i: card i + b - 1
        right_none = obj.score(steps + T - col, e_left[None, :])  # b = T-i+1: card a + T - i
        best = np.minimum(
            np.where(steps <= nb[:, None], left_none, np.inf).min(axis=1),
            np.where(steps <= na[:, None], right_none, np.inf).min(axis=1),
        )
        best = np.minimum(best, float(obj.score(np.array([float(T)]), np.zeros(1))[0]))
        both = (na >= 1) & (nb >= 1)
        best[both] = np.minimum(best[both], self.prefix[na[both] - 1, nb[both] - 1])
        return np.asarray(best)


def chain_models(model: Any, method: str) -> tuple[list[MarkovChain], tuple[float, float] | None]:
    """The chains of Θ (exact method) or its bounds (approx method)."""
    if method not in METHODS:
        raise invalid("method", method, f"one of {METHODS}")
    if isinstance(model, MarkovChain):
        chains: list[MarkovChain] = [model]
        cls = ChainClass((model,))
    elif isinstance(model, ChainClass):
        chains, cls = list(model.chains), model
    else:
        raise invalid("model", type(model).__name__, "a MarkovChain, ChainClass or BayesianNetwork")
    if method == "approx":
        for c in chains:
            c.require_ergodic("the approximate method (eigengap bound)")
        return chains, cls.approx_bounds()
    if not chains:
        raise InvalidParameter(
            "method='exact' needs a finite set of chains; a ChainClass given by bounds "
            "(pi_min, eigengap) supports method='approx' only"
        )
    return chains, None


def chain_search(model: Any, length: int, obj: Objective, method: str, notion: str,
                 only: int | None = None) -> _Best:
    """Exact max_i min_Q score over every node and quilt of chains of length T (windowed search);
    with `only` (1-based), min_Q for that node alone."""
    T = check_positive_int("length", length)
    check_notion(notion)
    if only is not None and not 1 <= only <= T:
        raise invalid("node", only - 1, f"an integer in 0..{T - 1}")
    chains, bounds = chain_models(model, method)
    for c in chains:
        c.require_irreducible("the exact max-influence")
    if bounds is None and any(c.period != 1 for c in chains):
        # A periodic chain keeps some P^t entry at 0 between two states for every
        # t, so every non-trivial quilt has infinite influence: only the trivial quilt applies.
        trivial = float(obj.score(np.array([float(T)]), np.zeros(1))[0])
        return _Best(trivial, only or 1, None, None, 0.0, T)
    window = min(T, 16)
    while True:
        if bounds is None:
            terms: list[Any] = [ChainTerms(c, T, notion, window) for c in chains]
        else:
            terms = [ApproxTerms(bounds[0], bounds[1], notion, window)]
        search = _Search(terms, T, window, obj)
        value, node = search.run() if only is None else (search.value(only), only)
        if window >= T - 1 or value <= obj.floor(window + 1):
            return search.best(node)
        # value > floor(D+1); a window of ceil(value/floor(1)) is then enough (value only drops
        # as the window grows), but grow at most geometrically: value may fall a lot.
        grown = 2 * window
        if math.isfinite(value):
            grown = min(grown, math.ceil(value / obj.floor(1.0)))
        if grown > MAX_WINDOW and T - 1 > MAX_WINDOW:
            raise InvalidParameter(
                f"the exact calibration needs quilts wider than {MAX_WINDOW} nodes for this model "
                "(records stay correlated over very long distances); use method='approx' or a "
                "shorter length"
            )
        window = min(grown, T)


def _to_calibration(best: _Best, sigma: float) -> QuiltCalibration:
    i = best.node
    quilt = tuple(n - 1 for n in ((i - best.a) if best.a else None,
                                  (i + best.b) if best.b else None) if n is not None)
    return QuiltCalibration(sigma, node=i - 1, quilt=quilt, influence=best.influence if quilt else 0.0,
                            nearby=best.nearby)


def quilt_calibration(model: Any, length: int | None, epsilon: float, method: str = "exact",
                      notion: str = "pufferfish", *, node: Any = None) -> QuiltCalibration:
    """σ_max = max_i min_Q card(X_N)/(ε − e(X_Q|X_i)) over every node (MQM, Song et al. 2017, Alg. 2).

    `model` is a MarkovChain, a ChainClass or a BayesianNetwork (length None or its node count).
    method="exact" uses the closed-form max-influence (MQMExact), "approx" the eigengap bound
    2δ_a + δ_b, or 2δ_a + 2δ_b for notion="bdp" (MQMApprox). The trivial quilt caps σ at T/ε.
    With `node` (0-based for a chain, a name for a network), σ_i of that record alone.
    """
    eps = check_positive("epsilon", epsilon)
    check_notion(notion)
    if isinstance(model, SelfCalibrating):
        return model.calibration(eps, length=length, method=method, notion=notion, node=node)
    if length is None:
        raise invalid("length", length, "a positive integer (the number of records in a chain)")
    only = None
    if node is not None:
        if isinstance(node, bool) or not isinstance(node, int | np.integer):
            raise invalid("node", node, "an integer record position (0-based)")
        only = int(node) + 1
    best = chain_search(model, length, sigma_objective(eps), method, notion, only)
    return _to_calibration(best, best.score)


def max_influence(model: Any, node: Any, quilt: Sequence[Any], notion: str = "pufferfish", *,
                  length: int | None = None) -> float:
    """e(X_Q | X_i): closed form for a chain (F/B/μ, sup over Θ for a ChainClass), exact inference
    for a BayesianNetwork; notion="bdp" takes the sup over what the adversary knows (Zhao et al.
    2017, Eq. 6). Chain nodes are 0-based; a chain quilt has at most one node on each side."""
    check_notion(notion)
    if isinstance(model, SelfCalibrating):
        return model.max_influence(node, quilt, notion)
    chains, _ = chain_models(model, "exact")
    T = check_positive_int("length", length) if length is not None else 0
    if T == 0:
        raise invalid("length", length, "a positive integer (the number of records in a chain)")
    if isinstance(node, bool) or not isinstance(node, int | np.integer) or not 0 <= node < T:
        raise invalid("node", node, f"an integer in 0..{T - 1}")
    q = sorted(int(v) for v in quilt)
    left = [v for v in q if v < node]
    right = [v for v in q if v > node]
    if len(left) > 1 or len(right) > 1 or len(left) + len(right) != len(q) or (q and q[0] < 0) \
            or (q and q[-1] >= T):
        raise invalid("quilt", tuple(quilt), f"at most one node before and one after {node}, in 0..{T - 1}")
    a = node - left[0] if left else None
    b = right[0] - node if right else None
    for c in chains:
        c.require_irreducible("the exact max-influence")
    return max(chain_influence(c, T, int(node) + 1, a, b, notion) for c in chains)
