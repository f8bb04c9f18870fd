"""Max-influence of a record on a Markov quilt of a chain: closed forms and eigengap bounds.

Notation of the reference note (Song, Wang & Chaudhuri 2017, Sec. 4.2 and its MATLAB code):
F_t(x, x') = max_z log P^t[x,z]/P^t[x',z], B_t(x, x') = max_y log P^t[y,x]/P^t[y,x'],
μ_i = q P^{i-1}. Positions are 1-based inside this module; the public API is 0-based.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from bayesdp.correlated.chain import MarkovChain
from bayesdp.errors import invalid

Notion = Literal["pufferfish", "bdp"]
NOTIONS: tuple[str, ...] = ("pufferfish", "bdp")
_CHUNK = 1 << 22  # elements per temporary array in max-plus products


def check_notion(notion: str) -> str:
    if notion not in NOTIONS:
        raise invalid("notion", notion, f"one of {NOTIONS}")
    return notion


def _log(m: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(m))


def logratio_max(logm: np.ndarray) -> np.ndarray:
    """R[x, x'] = max_z (logm[x,z] − logm[x',z]), skipping z impossible under both rows."""
    with np.errstate(invalid="ignore"):
        d = logm[:, None, :] - logm[None, :, :]
    d[np.isnan(d)] = -np.inf
    return np.asarray(d.max(axis=2))


class Pairs:
    """Ordered pairs (x, x') with x ≠ x' over k states, and the index of the swapped pair."""

    def __init__(self, k: int) -> None:
        x, y = np.nonzero(~np.eye(k, dtype=bool))
        self.x, self.y = x, y
        index = np.full((k, k), -1)
        index[x, y] = np.arange(x.size)
        self.swap = index[y, x]

    def of(self, matrix: np.ndarray) -> np.ndarray:
        return np.asarray(matrix[self.x, self.y])


def forward_term(pt: np.ndarray, pairs: Pairs) -> np.ndarray:
    """F_t over pairs: the log-ratio of P(X_{i+t} | X_i = x) to that given x' (reference note §2)."""
    return pairs.of(logratio_max(_log(pt)))


def backward_term(pt: np.ndarray, pairs: Pairs) -> np.ndarray:
    """B_t over pairs: max_y log P^t[y,x]/P^t[y,x'] (reference note §2)."""
    return pairs.of(logratio_max(_log(pt).T))


class ChainTerms:
    """The F/B/μ terms of one chain θ up to distance D, for the quilt search (reference note §2)."""

    def __init__(self, chain: MarkovChain, length: int, notion: str, window: int) -> None:
        self.chain, self.T, self.notion, self.D = chain, length, notion, window
        self.pairs = Pairs(chain.k)
        p = chain.transition
        powers = np.empty((window + 2, chain.k, chain.k))
        powers[0] = np.eye(chain.k)
        for t in range(1, window + 2):
            m = powers[t - 1] @ p
            powers[t] = m / m.sum(axis=1, keepdims=True)
        self.powers = powers
        self.F = np.stack([forward_term(powers[t], self.pairs) for t in range(window + 2)])
        self.B = np.stack([backward_term(powers[t], self.pairs) for t in range(window + 2)])
        self.kind = initial_kind(chain)
        if self.kind == "stationary":
            self.M_const = mu_term(chain, self.pairs, powers[0])
        self._far: tuple[int, np.ndarray] | None = None
        bdp = notion == "bdp"
        s = self.pairs.swap
        self.right_core = self.F[1 : window + 1] + (self.F[2 : window + 2][:, s] if bdp else 0.0)
        if bdp:
            self.left_core: np.ndarray | None = self.B[1 : window + 1] + self.B[2 : window + 2][:, s]
        elif self.kind == "stationary":
            self.left_core = self.B[1 : window + 1] + self.M_const
        else:
            self.left_core = None
        # homogeneous: every node's terms are the core rows (no node-dependent start, no BDP edge)
        self.homogeneous = not bdp and self.kind == "stationary"
        # How σ_i behaves on interior nodes (both quilt sides inside the window):
        # identical; non-increasing in i (worst start: B_{i-1} decreases); or varying.
        if bdp or self.kind == "stationary":
            self.interior = "constant"
        else:
            self.interior = "decreasing" if self.kind == "worst" else "varying"

    def power(self, t: int) -> np.ndarray:
        """P^t, from the table or by advancing a cached far power (nodes are visited in order)."""
        if t <= self.D + 1:
            return np.asarray(self.powers[t])
        if self._far is None or self._far[0] > t:
            self._far = (t, self.chain.power(t))
        t0, m = self._far
        if t - t0 > 64:
            m = m @ self.chain.power(t - t0)
        else:
            for _ in range(t - t0):
                m = m @ self.chain.transition
        m = np.asarray(m / m.sum(axis=1, keepdims=True))
        self._far = (t, m)
        return m

    def mu_term(self, i: int) -> np.ndarray:
        if self.kind == "stationary":
            return np.asarray(self.M_const)
        return mu_term(self.chain, self.pairs, self.power(i - 1))

    def mu_block(self, nodes: np.ndarray) -> np.ndarray:
        """log μ_i(x')/μ_i(x) over pairs for consecutive interior nodes, μ_i = q P^{i-1} by doubling."""
        if self.kind != "given":
            return np.stack([self.mu_term(int(i)) for i in nodes])
        mu = (np.asarray(self.chain.initial) @ self.power(int(nodes[0]) - 1))[None, :]
        step = self.chain.transition
        while mu.shape[0] < nodes.size:
            mu = np.vstack([mu, mu @ step])
            step = step @ step
        mu = mu[: nodes.size]
        lm = np.log(mu / mu.sum(axis=1, keepdims=True))
        return np.asarray(lm[:, self.pairs.y] - lm[:, self.pairs.x])

    def interior_left(self, nodes: np.ndarray, a: int) -> np.ndarray:
        """Left term at distance a for interior nodes (no BDP edge), one row per node."""
        if self.left_core is not None:
            return np.broadcast_to(self.left_core[a - 1], (nodes.size, self.pairs.x.size))
        return np.asarray(self.B[a] + self.mu_block(nodes))

    def left_rows(self, i: int, count: int) -> tuple[np.ndarray, int]:
        """Left terms for a = 1..count at node i, and how many leading rows equal the core rows."""
        if self.left_core is not None:
            rows = self.left_core[:count]
            if self.notion == "bdp" and count == i - 1 and count >= 1:
                rows = rows.copy()
                rows[-1] = self.B[count] + self.mu_term(i)  # left quilt node is X_1
                return rows, count - 1
            return rows, count
        return self.B[1 : count + 1] + self.mu_term(i), 0

    def right_rows(self, i: int, count: int) -> tuple[np.ndarray, int]:
        """Right terms for b = 1..count at node i, and how many leading rows equal the core rows."""
        rows = self.right_core[:count]
        if self.notion == "bdp" and count == self.T - i and count >= 1:
            rows = rows.copy()
            rows[-1] = self.F[count]  # right quilt node is X_T: nothing beyond it to know
            return rows, count - 1
        return rows, count


class ApproxTerms:
    """Eigengap bounds e ≤ 2δ_a + δ_b (BDP: 2δ_a + 2δ_b), δ_t = log((1+Δ_t)/(1−Δ_t)), Δ_t = e^{−gt}/π_min.

    Song, Wang & Chaudhuri 2017, Lemma on MQMApprox (code k_findBest_2dir.m); the BDP form is the
    reference note's §2 derivation.
    """

    interior = "constant"
    homogeneous = True
    left_core: np.ndarray
    right_core: np.ndarray

    def __init__(self, pi_min: float, eigengap: float, notion: str, window: int) -> None:
        d = approx_delta(np.arange(1, window + 1), pi_min, eigengap)
        self.left_core = (2.0 * d)[:, None]
        self.right_core = ((2.0 if notion == "bdp" else 1.0) * d)[:, None]

    def interior_left(self, nodes: np.ndarray, a: int) -> np.ndarray:
        return np.broadcast_to(self.left_core[a - 1], (nodes.size, 1))

    def left_rows(self, i: int, count: int) -> tuple[np.ndarray, int]:
        return self.left_core[:count], count

    def right_rows(self, i: int, count: int) -> tuple[np.ndarray, int]:
        return self.right_core[:count], count


def approx_delta(t: np.ndarray, pi_min: float, eigengap: float) -> np.ndarray:
    """δ_t = log((1+Δ_t)/(1−Δ_t)) with Δ_t = e^{−g t}/π_min, ∞ when Δ_t ≥ 1 (MQMApprox bound)."""
    big = np.exp(-eigengap * np.asarray(t, dtype=np.float64)) / pi_min
    out = np.full(big.shape, np.inf)
    ok = big < 1
    out[ok] = np.log1p(big[ok]) - np.log1p(-big[ok])
    return out


def initial_kind(chain: MarkovChain) -> str:
    """"stationary", "worst" or "given"."""
    return chain.initial if isinstance(chain.initial, str) else "given"


def mu_term(chain: MarkovChain, pairs: Pairs, pt: np.ndarray) -> np.ndarray:
    """log μ_i(x')/μ_i(x) over pairs given P^{i-1}; for the worst start its sup over initial laws,
    max_y log P^{i-1}[y,x']/P^{i-1}[y,x] (reference note §2, code exactRatioBinaryGenerate.m)."""
    kind = initial_kind(chain)
    if kind == "worst":
        return np.asarray(backward_term(pt, pairs)[pairs.swap])
    lm = np.log(chain.stationary if kind == "stationary" else np.asarray(chain.initial) @ pt)
    return np.asarray(lm[pairs.y] - lm[pairs.x])


def maxplus(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """(A, B) array of max_p left[a, p] + right[b, p], in cache-sized chunks."""
    a, p = left.shape
    b = right.shape[0]
    out = np.empty((a, b))
    step = max(1, _CHUNK // max(1, b * p))
    for s in range(0, a, step):
        out[s : s + step] = (left[s : s + step, None, :] + right[None, :, :]).max(axis=2)
    return out


def chain_influence(chain: MarkovChain, length: int, i: int, a: int | None, b: int | None,
                    notion: str) -> float:
    """e(X_{i−a}, X_{i+b} | X_i), 1-based i, a/b None when that side has no quilt node.

    Pufferfish: max_{x≠x'} [F_b + B_a + log μ_i(x')/μ_i(x)] (Song, Wang & Chaudhuri 2017, MQMExact);
    BDP adds F_{b+1}(x', x) if i+b < T and replaces the μ term by B_{a+1}(x', x) if i−a ≥ 2
    (reference note §2, the adversary also knows X_{i+b+1} and X_{i−a−1}). The BDP form equals
    the sup over known sets when P has no zero entry and bounds it from above otherwise (F_t and
    B_t do not increase with t, and the separate maxima ignore which (X_{i+b}, X_{i+b+1}) pairs
    can occur).
    """
    if a is None and b is None:
        return 0.0
    pairs = Pairs(chain.k)
    total = np.zeros(pairs.x.size)
    bdp = notion == "bdp"
    if b is not None:
        total += forward_term(chain.power(b), pairs)
        if bdp and i + b < length:
            total += forward_term(chain.power(b + 1), pairs)[pairs.swap]
    if a is not None:
        total += backward_term(chain.power(a), pairs)
        if bdp and i - a >= 2:
            total += backward_term(chain.power(a + 1), pairs)[pairs.swap]
        else:
            total += mu_term(chain, pairs, chain.power(i - 1))
    return float(total.max())
