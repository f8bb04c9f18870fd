"""Time-homogeneous Markov chains over k states, and classes of them (the adversary's beliefs)."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np
from scipy.sparse.csgraph import breadth_first_order, connected_components

from bayesdp.errors import DataError, InvalidParameter, check_nonnegative, invalid

_ROW_TOL = 1e-9
_INITIALS = ("stationary", "worst")


def _stochastic(matrix: Any) -> np.ndarray:
    """Validate a square row-stochastic matrix with at least two states; renormalize rows."""
    try:
        p = np.array(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise invalid("transition", matrix, "a square matrix of probabilities") from None
    if p.ndim != 2 or p.shape[0] != p.shape[1] or p.shape[0] < 2:
        raise invalid("transition", p.shape, "a square k x k matrix with k >= 2 states")
    if not np.all(np.isfinite(p)):
        raise invalid("transition", "non-finite entries", "finite probabilities")
    if np.any(p < 0):
        r, c = np.argwhere(p < 0)[0]
        raise invalid(f"transition[{r}, {c}]", float(p[r, c]), "a probability >= 0")
    sums = p.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > _ROW_TOL)
    if bad.size:
        raise invalid(f"transition row {bad[0]} sum", float(sums[bad[0]]), "1 (a row-stochastic matrix)")
    p /= sums[:, None]
    p.setflags(write=False)
    return p


def _period(p: np.ndarray) -> int:
    """Period of an irreducible chain: gcd of level[u] + 1 - level[v] over edges u -> v (BFS levels)."""
    order, pred = breadth_first_order(p > 0, 0, directed=True, return_predecessors=True)
    level = np.zeros(p.shape[0], dtype=np.int64)
    for node in order[1:]:  # BFS order: a node's predecessor already has its level
        level[node] = level[pred[node]] + 1
    u, v = np.nonzero(p > 0)
    return int(np.gcd.reduce(np.abs(level[u] + 1 - level[v])))


def _second_modulus(matrix: np.ndarray) -> float:
    """Second largest modulus among the eigenvalues."""
    mods = np.sort(np.abs(np.linalg.eigvals(matrix)))[::-1]
    return float(min(mods[1], 1.0))


@dataclass(frozen=True, eq=False)
class MarkovChain:
    """A time-homogeneous chain θ = (q, P) over states 0..k-1 (Song, Wang & Chaudhuri 2017, Sec. 4.2).

    `initial` is "stationary" (q = π), "worst" (the adversary may believe any start; the sup over
    initial distributions is taken) or an explicit strictly positive distribution q.
    """

    transition: np.ndarray
    _: KW_ONLY
    initial: Any = "stationary"
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "transition", _stochastic(self.transition))
        init = self.initial
        if isinstance(init, str):
            if init not in _INITIALS:
                raise invalid("initial", init, f"one of {_INITIALS} or a probability vector")
            if init == "stationary":
                self.require_irreducible("initial='stationary'")
        else:
            q = np.array(init, dtype=np.float64)
            if q.shape != (self.k,) or not np.all(np.isfinite(q)) or np.any(q <= 0):
                raise invalid(
                    "initial", init,
                    f"a vector of {self.k} probabilities, all > 0 (use 'worst' to cover every start)",
                )
            if abs(q.sum() - 1.0) > _ROW_TOL:
                raise invalid("initial sum", float(q.sum()), "1")
            q = q / q.sum()
            q.setflags(write=False)
            object.__setattr__(self, "initial", q)

    @property
    def k(self) -> int:
        """Number of states."""
        return int(self.transition.shape[0])

    @property
    def is_irreducible(self) -> bool:
        if "irreducible" not in self._cache:
            n, _ = connected_components(self.transition > 0, directed=True, connection="strong")
            self._cache["irreducible"] = n == 1
        return bool(self._cache["irreducible"])

    @property
    def period(self) -> int:
        """The period (1 means aperiodic); defined for irreducible chains."""
        self.require_irreducible("the period")
        if "period" not in self._cache:
            self._cache["period"] = _period(self.transition)
        return int(self._cache["period"])

    @property
    def is_aperiodic(self) -> bool:
        return self.is_irreducible and self.period == 1

    def require_irreducible(self, what: str) -> None:
        """Raise unless every state can reach every other."""
        if not self.is_irreducible:
            raise InvalidParameter(
                f"transition is reducible (some state cannot reach another), so {what} is not "
                "defined: transition must be irreducible"
            )

    def require_ergodic(self, what: str) -> None:
        """Raise unless the chain is irreducible and aperiodic (needed by eigengap bounds)."""
        self.require_irreducible(what)
        if self.period != 1:
            raise InvalidParameter(
                f"transition is periodic (period {self.period}), so {what} is not defined: "
                "transition must be aperiodic"
            )

    @property
    def stationary(self) -> np.ndarray:
        """π with π P = π and Σπ = 1, by a linear solve (Levin, Peres & Wilmer 2009, Prop. 1.14)."""
        if "pi" not in self._cache:
            self.require_irreducible("the stationary distribution")
            a = self.transition.T - np.eye(self.k)
            a[-1, :] = 1.0
            b = np.zeros(self.k)
            b[-1] = 1.0
            pi = np.linalg.solve(a, b)
            pi = np.maximum(pi, 0.0)
            pi /= pi.sum()
            pi.setflags(write=False)
            self._cache["pi"] = pi
        return np.asarray(self._cache["pi"])

    @property
    def pi_min(self) -> float:
        return float(self.stationary.min())

    @property
    def is_reversible(self) -> bool:
        """Detailed balance π_x P_xy = π_y P_yx (Levin, Peres & Wilmer 2009, Sec. 1.6)."""
        flow = self.stationary[:, None] * self.transition
        return bool(np.allclose(flow, flow.T, rtol=0.0, atol=1e-12))

    def reversal(self) -> MarkovChain:
        """The time reversal P*_xy = π_y P_yx / π_x (Levin, Peres & Wilmer 2009, Sec. 1.6)."""
        pi = self.stationary
        rev = (self.transition.T * pi[None, :]) / pi[:, None]
        return MarkovChain(rev, initial="stationary")

    @property
    def eigengap_reversible(self) -> float:
        """1 − |λ₂(P)| (Song, Wang & Chaudhuri 2017, MQMApprox for reversible chains)."""
        self.require_ergodic("the eigengap")
        return 1.0 - _second_modulus(self.transition)

    @property
    def eigengap_general(self) -> float:
        """(1 − |λ₂(P P*)|)/2, valid for any ergodic chain (Song, Wang & Chaudhuri 2017; Fill 1991)."""
        self.require_ergodic("the eigengap")
        return (1.0 - _second_modulus(self.transition @ self.reversal().transition)) / 2.0

    @property
    def eigengap(self) -> float:
        """The reversible gap when detailed balance holds, else the general one."""
        return self.eigengap_reversible if self.is_reversible else self.eigengap_general

    def power(self, t: int) -> np.ndarray:
        """P^t with its rows renormalized."""
        m = np.linalg.matrix_power(self.transition, int(t))
        return np.asarray(m / m.sum(axis=1, keepdims=True))

    @classmethod
    def fit(cls, sequences: Any, k: int | None = None, *, pseudocount: float = 0.0,
            initial: Any = "stationary") -> MarkovChain:
        """Maximum-likelihood transition counts (plus a pseudocount) from state sequences 0..k-1."""
        seqs = as_sequences(sequences)
        kk = int(max(int(s.max()) for s in seqs) + 1) if k is None else int(k)
        check_sequences(seqs, kk)
        alpha = check_nonnegative("pseudocount", pseudocount)
        counts = np.full((kk, kk), alpha)
        for s in seqs:
            np.add.at(counts, (s[:-1], s[1:]), 1.0)
        rows = counts.sum(axis=1)
        if np.any(rows == 0):
            raise DataError(
                "a state is never left in the sequences, so its transition row is unknown: pass "
                "pseudocount > 0", private_detail=f"state {int(np.flatnonzero(rows == 0)[0])}")
        return cls(counts / rows[:, None], initial=initial)

    def __repr__(self) -> str:
        init = self.initial if isinstance(self.initial, str) else "given"
        return f"MarkovChain(k={self.k}, initial={init!r})"


def as_sequences(sequences: Any) -> list[np.ndarray]:
    """One sequence (1-D) or many (a 2-D array or a list of 1-D arrays) as int64 arrays."""
    arr = sequences
    many = (isinstance(arr, np.ndarray) and arr.ndim == 2) or (
        isinstance(arr, list | tuple) and len(arr) > 0 and np.ndim(arr[0]) == 1
    )
    seqs = list(arr) if many else [arr]
    out = []
    for j, s in enumerate(seqs):
        a = np.asarray(s)
        if a.ndim != 1 or a.size == 0:
            raise DataError(f"sequence {j} must be a non-empty 1-D array of states")
        whole = np.issubdtype(a.dtype, np.floating) and bool(np.all(a == np.round(a)))
        if not np.issubdtype(a.dtype, np.integer) and not whole:
            raise DataError(f"sequence {j} holds non-integer states (dtype {a.dtype})")
        out.append(a.astype(np.int64))
    return out


def check_sequences(seqs: list[np.ndarray], k: int) -> None:
    """Every state must be in 0..k-1; the error's private detail counts the offending entries."""
    for j, s in enumerate(seqs):
        bad = (s < 0) | (s >= k)
        if np.any(bad):
            raise DataError(
                f"a sequence has states outside the model's 0..{k - 1}",
                private_detail=f"sequence {j}: {int(bad.sum())} state(s), first {int(s[bad][0])} "
                f"at position {int(np.flatnonzero(bad)[0])}")


@dataclass(frozen=True, eq=False)
class ChainClass:
    """Θ: a finite set of chains (exact method) or bounds (π_Θ, g_Θ) (approximate method).

    Song, Wang & Chaudhuri 2017, Sec. 4.2: MQMExact needs a finite Θ; MQMApprox needs only
    π_Θ = min π_θ(x) > 0 and an eigengap g_Θ > 0.
    """

    chains: tuple[MarkovChain, ...] = ()
    _: KW_ONLY
    pi_min: float | None = None
    eigengap: float | None = None

    def __post_init__(self) -> None:
        chains = tuple(self.chains)
        for j, c in enumerate(chains):
            if not isinstance(c, MarkovChain):
                raise invalid(f"chains[{j}]", type(c).__name__, "a MarkovChain")
        if chains and len({c.k for c in chains}) != 1:
            raise invalid("chains", [c.k for c in chains], "chains over the same number of states")
        object.__setattr__(self, "chains", chains)
        if chains:
            if self.pi_min is not None or self.eigengap is not None:
                raise InvalidParameter("give either chains or the bounds (pi_min, eigengap), not both")
            return
        if self.pi_min is None or self.eigengap is None:
            raise InvalidParameter("a ChainClass needs chains, or both pi_min and eigengap")
        pm = float(self.pi_min)
        if not 0 < pm <= 0.5 or math.isnan(pm):
            raise invalid("pi_min", self.pi_min, "in (0, 1/2] (the smallest stationary probability)")
        g = float(self.eigengap)
        if not 0 < g <= 1 or math.isnan(g):
            raise invalid("eigengap", self.eigengap, "in (0, 1]")

    @classmethod
    def bounds(cls, pi_min: float, eigengap: float) -> ChainClass:
        """Every ergodic chain with min π ≥ pi_min and eigengap ≥ eigengap (possibly infinitely many)."""
        return cls((), pi_min=pi_min, eigengap=eigengap)

    @property
    def is_finite(self) -> bool:
        return bool(self.chains)

    def approx_bounds(self) -> tuple[float, float]:
        """(π_Θ, g_Θ): the given bounds, or the worst over the finite set."""
        if self.chains:
            return (min(c.pi_min for c in self.chains), min(c.eigengap for c in self.chains))
        assert self.pi_min is not None and self.eigengap is not None
        return (float(self.pi_min), float(self.eigengap))

    def __repr__(self) -> str:
        if self.chains:
            return f"ChainClass({len(self.chains)} chains, k={self.chains[0].k})"
        return f"ChainClass(pi_min={self.pi_min}, eigengap={self.eigengap})"
