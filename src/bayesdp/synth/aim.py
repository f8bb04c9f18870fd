"""AIM (McKenna, Mullins, Sheldon & Miklau 2022): adaptive selection of 2-way marginals beyond a
tree, with budget annealing, fitted by Private-PGM; and the full contingency table when the
domain is small against n·ρ."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from bayesdp.mechanisms import Exponential
from bayesdp.noise import Rng
from bayesdp.synth.measure import Data, compressed, noisy
from bayesdp.synth.pgm import (
    Clique,
    Estimate,
    GraphModel,
    MaskCells,
    Measurement,
    Trail,
    adjacency,
    cells,
    clique_of,
    elimination,
    fit,
    weights,
    within_earlier,
)
from bayesdp.synth.simplex import project_simplex

# AIM's round budget (Alg. 2): ρ/T a round, 0.9 of it measures, 0.1 selects. The paper sets
# T = 16d; T = 8d gives each measurement twice the budget (noise σ/√2) and, on UCI Adult at ε = 1,
# a 6% lower 2-way TVD over ten seeds (bench/RESULTS.md); annealing still ends the rounds when the
# model stops moving, and the model-size limit still grows with the budget used.
ROUNDS_PER_COLUMN = 8
SELECT_SHARE = 0.1
# Largest junction tree (cells) the model may grow to, reached as the budget is used up (Alg. 2,
# line 7, with cells in place of megabytes); also the largest full table measured.
MAX_CELLS = 100_000
# Mirror-descent steps after each round (warm-started) and for the final model.
ROUND_ITERATIONS = 25
FINAL_ITERATIONS = 100
_EXPECTED_ABS = math.sqrt(2.0 / math.pi)  # E|N(0,1)|

Pair = tuple[int, int]
Fitted = tuple[GraphModel, float, list[Pair]]


@dataclass
class Spend:
    """The zCDP cost of every step, in order: what the fit composed (ρ adds, Bun & Steinke 2016)."""

    steps: list[tuple[str, float]] = field(default_factory=list)

    def add(self, what: str, rho: float) -> None:
        self.steps.append((what, rho))

    @property
    def rho(self) -> float:
        return sum(r for _, r in self.steps)


@dataclass(frozen=True)
class Start:
    """The first stage shared by MST and AIM: 1-way marginals measured, rare levels merged."""

    data: Data
    measurements: list[Measurement]
    maps: list[np.ndarray]
    weights: list[np.ndarray]

    def model(self, est: Estimate) -> GraphModel:
        return GraphModel(est, tuple(self.maps), tuple(self.weights))


def start(data: Data, sigma: float, rng: Rng) -> Start:
    """Every 1-way marginal with N(0, σ²) noise, then rare levels merged (MST, Sec. 4)."""
    small, ones, maps, weights = compressed(
        data, [noisy(data.one(i), sigma, rng) for i in range(len(data.sizes))], sigma)
    meas = [Measurement((i,), y, var) for i, (y, var) in enumerate(ones)]
    return Start(small, meas, maps, weights)


def full_table_fits(first: Start, rho: float, s2: float) -> bool:
    """Measure the whole table when its noise costs no more than sampling n records does.

    With the rest ρ' of the budget, each cell gets N(0, σ²), σ² = Δ₂²/(2ρ'); a c-cell 2-way
    marginal sums N/c cells each, so its expected L1 error is about √(2/π)·σ·√(N·c), against
    √(2/π)·√(c·n) for the sampling error of n synthetic records (Cauchy–Schwarz on Σ√p). The
    first is smaller when N·σ² ≤ n, i.e. N ≤ 2ρ'n/Δ₂², with n the noisy count (post-processing).
    """
    n_cells = cells(first.data.sizes, tuple(range(len(first.data.sizes))))
    n_hat = float(np.mean([m.y.sum() for m in first.measurements]))
    return n_cells <= MAX_CELLS and n_cells * s2 <= 2.0 * rho * n_hat


def full_table(first: Start, rho: float, s2: float, rng: Rng, spend: Spend) -> Fitted:
    """The full contingency table with N(0, Δ₂²/(2ρ)) noise per cell (ρ-zCDP, Bun & Steinke 2016,
    Prop. 1.6), projected onto the simplex (its least-squares distribution, Duchi et al. 2008);
    the 1-way measurements enter the record count."""
    d = len(first.data.sizes)
    whole = tuple(range(d))
    sigma = math.sqrt(s2 / (2.0 * rho))
    flat = np.ravel_multi_index(tuple(first.data.codes.T), first.data.sizes)
    counts = np.bincount(flat, minlength=cells(first.data.sizes, whole))
    y = noisy(counts, sigma, rng).reshape(first.data.sizes)
    spend.add("full table", s2 / (2.0 * sigma**2))
    probs = project_simplex(y.ravel() / max(float(y.sum()), 1.0)).reshape(y.shape)
    warm = {whole: np.log(np.maximum(probs, 1e-300))}
    est = fit(tuple(first.data.sizes), [*first.measurements, Measurement(whole, y, sigma**2)],
              warm=warm, iters=0)
    return first.model(est), est.n_hat, list(itertools.combinations(range(d), 2))


class _Triangulated:
    """The greedy triangulation of the measured graph G (`pgm.elimination`) with the state before
    each step, to size G plus one edge ab without starting over: until a or b is eliminated, G
    and G + ab eliminate the same columns with the same cliques (only a's and b's weights differ,
    and they can only grow), so G + ab's elimination resumes from G's state at that step with the
    edge added. Pairs already joined in G's triangulation leave it as it is."""

    def __init__(self, mask_cells: MaskCells, measured: list[Clique], d: int) -> None:
        self.mask_cells = mask_cells
        adj = adjacency(d, measured)
        self.trail: Trail = []
        steps = list(elimination(mask_cells, adj, weights(mask_cells, adj), (1 << d) - 1, self.trail))
        self.step_of = {v: k for k, (v, _) in enumerate(steps)}
        self.found = [c for _, c in steps]
        # kept[k]: the cells of the cliques among found[:k] that no earlier one holds (`eliminate`)
        self.kept = [0]
        for k, c in enumerate(self.found):
            self.kept.append(self.kept[-1] + self._new_cells(c, self.found[:k]))
        self.joined = {1 << a | 1 << b for c in self.found
                       for a, b in itertools.combinations(clique_of(c), 2)}

    def _new_cells(self, c: int, earlier: list[int]) -> int:
        return 0 if within_earlier(c, earlier) else self.mask_cells[c]

    def fits(self, a: int, b: int, limit: float) -> bool:
        """Whether the triangulation of G + ab has at most `limit` cells (stopping once it has more)."""
        if 1 << a | 1 << b in self.joined:
            return self.kept[-1] <= limit
        t = min(self.step_of[a], self.step_of[b])
        total = self.kept[t]
        if total > limit:
            return False
        adj, weight, left = self.trail[t]
        adj, weight = list(adj), list(weight)
        adj[a] |= 1 << b
        adj[b] |= 1 << a
        weight[a], weight[b] = self.mask_cells[adj[a] | 1 << a], self.mask_cells[adj[b] | 1 << b]
        found = self.found[:t]
        for _, c in elimination(self.mask_cells, adj, weight, left):
            total += self._new_cells(c, found)
            if total > limit:
                return False
            found.append(c)
        return True


def _within(measured: list[Clique], pairs: list[Pair], limit: float, mask_cells: MaskCells) -> list[Pair]:
    """The measured pairs, and the others whose model with them added stays within `limit` cells
    (AIM's JT-SIZE filter, `_Triangulated`)."""
    tri = _Triangulated(mask_cells, measured, len(mask_cells.sizes))
    seen = set(measured)
    return [(i, j) for i, j in pairs
            if (i, j) in seen or (mask_cells[1 << i | 1 << j] <= limit and tri.fits(i, j, limit))]


def aim(data: Data, rho: float, s1: float, s2: float, rng: Rng, spend: Spend | None = None) -> Fitted:
    """AIM (McKenna et al. 2022, Alg. 2) on the workload of all 2-way marginals.

    Round 0 measures every 1-way marginal with σ² = Δ₂²T/(2·0.9ρ), T = 8d (`ROUNDS_PER_COLUMN`).
    Each round then selects a 2-way marginal r whose junction tree stays within
    (ρ_used/ρ)·MAX_CELLS by the exponential mechanism (ε = √(8·0.1ρ/T), ε²/8-zCDP, Cesar &
    Rogers 2021) on the score ‖M_r(x) − M_r(p̂)‖₁ − √(2/π)σ·n_r (sensitivity Δ₁), measures it
    with N(0, σ²), and refits the graphical model (Private-PGM). When the model moves less than
    the expected noise (‖M_r(p̂_t) − M_r(p̂_{t−1})‖₁ ≤ √(2/π)σ·n_r) σ halves and ε doubles
    (annealing); when less than two rounds' budget is left, the last round spends all of it. The
    full table replaces the rounds when the domain is small (`full_table_fits`).
    """
    spend = spend if spend is not None else Spend()
    d = len(data.sizes)
    rounds = ROUNDS_PER_COLUMN * d
    sigma = math.sqrt(s2 * rounds / (2.0 * (1 - SELECT_SHARE) * rho))
    eps = math.sqrt(8.0 * SELECT_SHARE * rho / rounds)
    if d == 1:
        sigma = math.sqrt(s2 / (2.0 * rho))
    first = start(data, sigma, rng)
    spend.add("1-way marginals", d * s2 / (2.0 * sigma**2))
    small, sizes = first.data, tuple(first.data.sizes)
    pairs = list(itertools.combinations(range(d), 2))
    if d > 1 and full_table_fits(first, rho - spend.rho, s2):
        return full_table(first, rho - spend.rho, s2, rng, spend)
    meas = list(first.measurements)
    mask_cells = MaskCells(sizes)
    est = fit(sizes, meas, iters=ROUND_ITERATIONS)
    while d > 1 and rho - spend.rho > 1e-12 * rho:
        left = rho - spend.rho
        if left < 2.0 * (s2 / (2.0 * sigma**2) + eps**2 / 8.0):
            sigma = math.sqrt(s2 / (2.0 * (1 - SELECT_SHARE) * left))
            eps = math.sqrt(8.0 * SELECT_SHARE * left)
        measured = [m.clique for m in meas if len(m.clique) > 1]
        limit = MAX_CELLS * spend.rho / rho
        cand = _within(measured, pairs, limit, mask_cells)
        n_r = np.array([sizes[i] * sizes[j] for i, j in cand])
        score = small.errors(est.pair, est.n_hat, cand) - _EXPECTED_ABS * sigma * n_r
        i, j = cand[Exponential(eps, sensitivity=s1).select_index(score, rng=rng)]
        spend.add(f"select {i}~{j}", eps**2 / 8.0)
        before = est.n_hat * est.pair(i, j)
        meas.append(Measurement((i, j), noisy(small.two(i, j), sigma, rng), sigma**2))
        spend.add(f"measure {i}~{j}", s2 / (2.0 * sigma**2))
        est = fit(sizes, meas, warm=est.theta, step=est.step, iters=ROUND_ITERATIONS)
        if np.abs(est.n_hat * est.pair(i, j) - before).sum() <= _EXPECTED_ABS * sigma * sizes[i] * sizes[j]:
            sigma /= 2.0
            eps *= 2.0
    est = fit(sizes, meas, warm=est.theta, step=est.step, iters=FINAL_ITERATIONS)
    kept = list(dict.fromkeys(m.clique for m in meas if len(m.clique) == 2))
    return first.model(est), est.n_hat, [(a, b) for a, b in kept]
