"""Small discrete Bayesian networks: moral graph, Markov blankets and quilts, exact max-influence.

Inference is exact, on the full joint table (Π_j P(X_j | PA_j), Koller & Friedman 2009, Def. 3.5),
so networks are limited to MAX_JOINT cells. Quilts follow Zhao et al. 2017, Sec. 2 (after
moralization, X_Q separates X_i from X_R), as used by the MQM (Song, Wang & Chaudhuri 2017).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np

from bayesdp.correlated.calibration import Objective, QuiltCalibration, sigma_objective
from bayesdp.correlated.influence import check_notion
from bayesdp.errors import InvalidParameter, invalid

MAX_JOINT = 1 << 22
MAX_KNOWN = 14  # notion="bdp": 2^14 known sets per quilt at most
_ROW_TOL = 1e-9


@dataclass(frozen=True)
class Quilt:
    """A Markov quilt X_Q of a node with its nearby set X_N (the node included) and remote X_R."""

    nodes: tuple[str, ...]
    _: KW_ONLY
    nearby: tuple[str, ...]
    remote: tuple[str, ...]


class BayesianNetwork:
    """A DAG over named discrete nodes with conditional probability tables.

    `parents[v]` lists v's parents; `cpts[v]` has shape (card(PA_1), ..., card(PA_m), card(v))
    and sums to 1 over its last axis. Nodes keep the order of `parents`.
    """

    def __init__(self, parents: Mapping[str, Sequence[str]], *, cpts: Mapping[str, Any]) -> None:
        self.nodes: tuple[str, ...] = tuple(parents)
        if len(self.nodes) < 2:
            raise invalid("parents", dict(parents), "a mapping over at least two nodes")
        self.parents = {v: tuple(parents[v]) for v in self.nodes}
        for v, ps in self.parents.items():
            for p in ps:
                if p not in self.parents:
                    raise invalid(f"parents[{v!r}]", ps, f"names among the nodes {self.nodes}")
            if v in ps or len(set(ps)) != len(ps):
                raise invalid(f"parents[{v!r}]", ps, "distinct nodes other than the node itself")
        if set(cpts) != set(self.nodes):
            raise invalid("cpts", sorted(cpts), f"one table for each node of {self.nodes}")
        self.order = self._topological()
        self.cpts: dict[str, np.ndarray] = {}
        self.cardinality: dict[str, int] = {}
        for v in self.order:
            t = np.array(cpts[v], dtype=np.float64)
            want = tuple(self.cardinality[p] for p in self.parents[v])
            if t.ndim != len(want) + 1 or t.shape[:-1] != want or t.shape[-1] < 2:
                raise invalid(f"cpts[{v!r}].shape", t.shape,
                              f"{want} + (card({v}) >= 2,): parents' states first, then {v}'s")
            if not np.all(np.isfinite(t)) or np.any(t < 0):
                raise invalid(f"cpts[{v!r}]", "negative or non-finite entries", "probabilities >= 0")
            sums = t.sum(axis=-1)
            if np.any(np.abs(sums - 1.0) > _ROW_TOL):
                raise invalid(f"cpts[{v!r}] row sum", float(sums.flat[np.argmax(np.abs(sums - 1))]),
                              "1 over the node's states")
            self.cpts[v] = t / sums[..., None]
            self.cardinality[v] = int(t.shape[-1])
        size = math.prod(self.cardinality.values())
        if size > MAX_JOINT:
            raise invalid("network size", f"{size} joint states", f"at most {MAX_JOINT} (exact inference)")
        self._joint: np.ndarray | None = None

    def _topological(self) -> tuple[str, ...]:
        done: list[str] = []
        left = dict(self.parents)
        while left:
            ready = [v for v, ps in left.items() if all(p in done for p in ps)]
            if not ready:
                raise invalid("parents", sorted(left), "an acyclic graph (a DAG): these nodes form a cycle")
            done.extend(ready)
            for v in ready:
                del left[v]
        return tuple(done)

    @classmethod
    def from_pgmpy(cls, model: Any) -> BayesianNetwork:
        """Convert a pgmpy discrete Bayesian network (TabularCPDs) into a BayesianNetwork."""
        parents: dict[str, list[str]] = {}
        cpts: dict[str, np.ndarray] = {}
        for cpd in model.get_cpds():
            var = str(cpd.variable)
            ev = [str(e) for e in cpd.variables[1:]]
            values = np.asarray(cpd.get_values(), dtype=np.float64)
            shape = [int(c) for c in cpd.cardinality]
            table = values.reshape(shape)  # (var, ev_1, ..., ev_m)
            parents[var], cpts[var] = ev, np.moveaxis(table, 0, -1)
        ordered = {str(v): parents[str(v)] for v in model.nodes()}
        return cls(ordered, cpts=cpts)

    def index(self, node: str) -> int:
        if node not in self.cardinality:
            raise invalid("node", node, f"one of {self.nodes}")
        return self.nodes.index(node)

    def joint(self) -> np.ndarray:
        """The joint probability table, axes in node order (product of the CPTs)."""
        if self._joint is None:
            n = len(self.nodes)
            joint = np.ones([self.cardinality[v] for v in self.nodes])
            for v in self.nodes:
                axes = [self.index(p) for p in self.parents[v]] + [self.index(v)]
                shape = [1] * n
                for ax, c in zip(axes, self.cpts[v].shape, strict=True):
                    shape[ax] = c
                perm = np.argsort(axes)
                joint = joint * np.transpose(self.cpts[v], perm).reshape(shape)
            self._joint = joint
        return self._joint

    def moral_graph(self) -> dict[str, frozenset[str]]:
        """Undirected graph: every edge made undirected, parents of a common child married."""
        adj: dict[str, set[str]] = {v: set() for v in self.nodes}
        for v, ps in self.parents.items():
            for p in ps:
                adj[v].add(p)
                adj[p].add(v)
            for p, r in itertools.combinations(ps, 2):
                adj[p].add(r)
                adj[r].add(p)
        return {v: frozenset(s) for v, s in adj.items()}

    def markov_blanket(self, node: str) -> frozenset[str]:
        """Parents, children and the children's other parents (Koller & Friedman 2009, Def. 3.8)."""
        self.index(node)
        return self.moral_graph()[node]

    def quilts(self, node: str) -> list[Quilt]:
        """Every minimal Markov quilt: for each connected set N ∋ node, Q = its boundary in the
        moral graph (a larger Q with the same N only has more influence), plus the trivial quilt."""
        self.index(node)
        adj = self.moral_graph()
        found: dict[frozenset[str], Quilt] = {}

        def grow(current: frozenset[str], frontier: frozenset[str], banned: frozenset[str]) -> None:
            boundary = frozenset().union(*(adj[v] for v in current)) - current
            remote = frozenset(self.nodes) - current - boundary
            found[current] = Quilt(self._sorted(boundary), nearby=self._sorted(current),
                                   remote=self._sorted(remote))
            options = sorted(frontier - banned, key=self.nodes.index)
            for j, w in enumerate(options):
                new = current | {w}
                grow(new, (frontier | adj[w]) - new, banned | frozenset(options[:j]))

        start = frozenset({node})
        grow(start, adj[node], frozenset())
        everything = frozenset(self.nodes)
        if everything not in found:
            found[everything] = Quilt((), nearby=self.nodes, remote=())
        return sorted(found.values(), key=lambda q: (len(q.nearby), q.nodes))

    def _sorted(self, names: frozenset[str]) -> tuple[str, ...]:
        return tuple(sorted(names, key=self.nodes.index))

    def _marginal(self, keep: Sequence[str]) -> np.ndarray:
        """P(X_keep) with axes in the order of `keep`."""
        idx = [self.index(v) for v in keep]
        drop = tuple(j for j in range(len(self.nodes)) if j not in idx)
        m = self.joint().sum(axis=drop)
        return np.asarray(np.transpose(m, np.argsort(np.argsort(idx))))

    def _conditional_influence(self, node: str, quilt: Sequence[str], known: Sequence[str]) -> float:
        """max over x_K, pairs a ≠ b possible with x_K, of log sup_x_Q P(x_Q|a,x_K)/P(x_Q|b,x_K)."""
        m = self._marginal([node, *quilt, *known])
        k = m.shape[0]
        nq = math.prod(m.shape[1 : 1 + len(quilt)])
        m = m.reshape(k, nq, -1)
        mass = m.sum(axis=1)  # P(x_i, x_K)
        with np.errstate(divide="ignore", invalid="ignore"):
            lc = np.log(m) - np.log(mass)[:, None, :]
            d = lc[:, None] - lc[None, :]  # (a, b, x_Q, x_K)
        d[np.isnan(d)] = -np.inf
        best = d.max(axis=2)
        ok = (mass[:, None, :] > 0) & (mass[None, :, :] > 0) & ~np.eye(k, dtype=bool)[:, :, None]
        return float(np.max(best[ok], initial=0.0))

    def max_influence(self, node: str, quilt: Sequence[str], notion: str = "pufferfish") -> float:
        """e(X_Q | X_i) (Song et al. 2017, Def. 4.3); for notion="bdp" its sup over known sets X_K
        (Zhao et al. 2017, Eq. 6), enumerated over every K disjoint from the node and the quilt."""
        check_notion(notion)
        q = list(quilt)
        for v in q:
            self.index(v)
        if node in q or len(set(q)) != len(q):
            raise invalid("quilt", tuple(quilt), f"distinct nodes other than {node!r}")
        if not q:
            return 0.0
        if notion == "pufferfish":
            return self._conditional_influence(node, q, [])
        others = [v for v in self.nodes if v != node and v not in q]
        if len(others) > MAX_KNOWN:
            raise InvalidParameter(
                f"notion='bdp' enumerates every set of known records: {len(others)} records "
                f"outside the node and quilt is more than {MAX_KNOWN}; use a smaller network"
            )
        return max(
            self._conditional_influence(node, q, list(known))
            for r in range(len(others) + 1)
            for known in itertools.combinations(others, r)
        )

    def search(self, obj: Objective, notion: str,
               nodes: Sequence[str] | None = None) -> tuple[float, str, Quilt, float]:
        """max over nodes (all, or `nodes`) of min over quilts of obj.score(card(X_N), e(X_Q|X_i))."""
        worst: tuple[float, str, Quilt, float] | None = None
        for v in self.nodes if nodes is None else nodes:
            qs = self.quilts(v)
            infl = np.array([self.max_influence(v, q.nodes, notion) for q in qs])
            scores = obj.score(np.array([float(len(q.nearby)) for q in qs]), infl)
            j = int(np.argmin(scores))
            if worst is None or scores[j] > worst[0]:
                worst = (float(scores[j]), v, qs[j], float(infl[j]))
        assert worst is not None
        return worst

    def calibration(self, epsilon: float, *, length: int | None = None, method: str = "exact",
                    notion: str = "pufferfish", node: str | None = None) -> QuiltCalibration:
        """σ_max = max_i min_Q card(X_N)/(ε − e(X_Q|X_i)) over every node and minimal quilt (MQM);
        with `node`, σ_i of that node alone."""
        self._check_call(length, method)
        only = None if node is None else [self.nodes[self.index(node)]]
        score, v, q, infl = self.search(sigma_objective(epsilon), check_notion(notion), only)
        return QuiltCalibration(score, node=v, quilt=q.nodes, influence=infl if q.nodes else 0.0,
                                nearby=len(q.nearby))

    def _check_call(self, length: int | None, method: str) -> None:
        if length is not None and length != len(self.nodes):
            raise invalid("length", length, f"None or {len(self.nodes)} (the network's node count)")
        if method != "exact":
            raise InvalidParameter(
                f"method={method!r} is not allowed for a BayesianNetwork: the eigengap bound is for "
                "chains; method must be 'exact'"
            )

    def __repr__(self) -> str:
        return f"BayesianNetwork({len(self.nodes)} nodes)"
