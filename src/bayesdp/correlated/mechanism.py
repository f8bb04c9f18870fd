"""The Markov Quilt Mechanism: a state histogram (or any L-Lipschitz statistic) of correlated records
with Laplace noise of scale L·σ_max (Song, Wang & Chaudhuri 2017, Alg. 2 and Thm 4.4)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesdp.correlated.calibration import QuiltCalibration, quilt_calibration
from bayesdp.correlated.chain import ChainClass, MarkovChain, as_sequences, check_sequences
from bayesdp.correlated.dependence import NOTION_WORDS, dependence_for, describe_model
from bayesdp.correlated.influence import check_notion
from bayesdp.correlated.network import BayesianNetwork
from bayesdp.errors import DataError, check_open_unit, check_positive_int, invalid
from bayesdp.mechanisms import dlap_quantile
from bayesdp.mechanisms.base import (
    SENSITIVITY_RANGE,
    check_epsilon,
    check_in_range,
    check_noise_steps,
)
from bayesdp.noise import Rng, discrete_laplace, grid_for, resolve_rng, snap_add
from bayesdp.privacy import Guarantee, Ledger, Noise, charge

MAX_LENGTH = 10**9  # records per sequence; the quilt search indexes them with int64

def explain_quilt(epsilon: float, notion: str, model: str, length: int, method: str,
                  cal: QuiltCalibration) -> str:
    """What the MQM guarantee promises, what it assumes, and what happens if the model is wrong."""
    lines = [
        f"{NOTION_WORDS[notion]}, with ε = {epsilon:g} per record over sequences of up to "
        f"{length} records.",
        f"Correlation model assumed: {model}.",
    ]
    if cal.trivial:
        lines.append(
            f"No Markov quilt helps here (the records stay too dependent for ε = {epsilon:g}), "
            f"so the noise is that of group privacy over all {cal.nearby} records: this part of "
            "the guarantee holds for ANY correlation, model or not."
        )
    else:
        lines.append(
            f"Noise scale σ = {cal.sigma:.6g} per unit of Lipschitz constant, set by record "
            f"{cal.node} whose quilt {cal.quilt} leaves {cal.nearby} nearby record(s) and lets "
            f"the model carry at most {cal.influence:.4g} of ε ({method} max-influence)."
        )
        lines.append(
            "If the real dependence is stronger than the model allows, records beyond the "
            "quilt reveal more about a record than accounted for and the real ε is larger. "
            f"Whatever the dependence, the release stays {1 / cal.sigma:.4g}-DP for a change "
            f"of one record, and {length / cal.sigma:.4g}-DP at worst, for an adversary "
            f"to whom all {length} records move together (group privacy). If the "
            "dependence is weaker than modelled, the guarantee holds with room to spare."
        )
    return " ".join(lines)


class MarkovQuiltMechanism:
    """Release a state histogram (L = 2) or an L-Lipschitz statistic with noise L·σ_max (MQM).

    Song, Wang & Chaudhuri 2017, Alg. 2: ε-Pufferfish (or ε-BDP with notion="bdp") for records
    correlated as in `model`. The noise is discrete Laplace on the power-of-two grid (as
    bayesdp.Laplace), so floating point leaks nothing. rng=None uses the OS CSPRNG; a seeded
    generator (tests only) gives no privacy. `length` is the longest sequence the release may
    contain (several people, each an independent chain, are covered: σ_max does not decrease
    with T); `states` gives the bins for a ChainClass given by bounds. `epsilon` in [1e-12, 700],
    `lipschitz` in [1e-200, 1e200] (the mechanisms' ranges), `length` at most 10^9, noise of at
    most 2^50 grid steps.
    """

    def __init__(self, model: Any, *, length: int | None, epsilon: float, lipschitz: float = 2.0,
                 method: str = "exact", notion: str = "pufferfish",
                 states: int | None = None) -> None:
        self.model = model
        self.epsilon = check_epsilon(epsilon)
        self.lipschitz = check_in_range("lipschitz", lipschitz, SENSITIVITY_RANGE)
        if length is not None and not isinstance(length, bool) and isinstance(length, int) and \
                length > MAX_LENGTH:
            raise invalid("length", length, f"a positive integer up to {MAX_LENGTH:,}")
        self.notion = check_notion(notion)
        self.calibration = quilt_calibration(model, length, self.epsilon, method, notion)
        self.length = len(model.nodes) if isinstance(model, BayesianNetwork) else int(length or 0)
        self.states = self._states(states)
        raw = self.lipschitz * self.calibration.sigma
        self.grid = grid_for(raw)
        cal = self.calibration
        detail = (f"{method} max-influence; record {cal.node}, quilt {cal.quilt}, σ = {cal.sigma:.6g}"
                  if not cal.trivial else f"group privacy over {cal.nearby} records")
        words = explain_quilt(self.epsilon, notion, describe_model(model), self.length, method, cal)
        noise = Noise("laplace", scale=self.scale, sensitivity=self.lipschitz, grid=self.grid)
        self._guarantee = Guarantee(
            self.epsilon, delta=0.0, relation="replace_one", unit="record", noise=(noise,),
            dependence=dependence_for(model, notion, self.length, detail=detail,
                                      explanation=words),
        )

    def _states(self, given: int | None) -> int | None:
        """Histogram bins: the model's state count (or `states` for a class given by bounds)."""
        if isinstance(self.model, MarkovChain):
            known: int | None = self.model.k
        elif isinstance(self.model, ChainClass):
            known = self.model.chains[0].k if self.model.is_finite else None
        else:
            cards = set(self.model.cardinality.values())
            known = cards.pop() if len(cards) == 1 else None
        if given is None:
            return known
        k = check_positive_int("states", given)
        if known is not None and k != known:
            raise invalid("states", given, f"None or {known} (the model's state count)")
        return k

    @property
    def scale(self) -> float:
        """Laplace b = L·σ_max in data units (before the grid's rounding allowance)."""
        return self.lipschitz * self.calibration.sigma

    @property
    def guarantee(self) -> Guarantee:
        """ε-Pufferfish (or ε-BDP) per record under the model: its `dependence` says which."""
        return self._guarantee

    def steps(self, size: int, on_grid: bool) -> float:
        """Noise scale in grid steps: σ_max·(L + size·g)/g, or L·σ_max/g for values on the grid.

        Rounding moves each of `size` entries by at most g/2, so neighbouring statistics differ
        by at most card·L + size·g in L1 after rounding; with card ≥ 1 this scale keeps every
        quilt's bound card/σ_max (MQM proof, Song et al. 2017, Thm 4.4).
        """
        sigma, g = self.calibration.sigma, self.grid
        return sigma * (self.lipschitz + (0.0 if on_grid else size * g)) / g

    def histogram(self, sequences: Any) -> np.ndarray:
        """Exact state counts over all sequences (each at most `length` long)."""
        seqs = as_sequences(sequences)
        if self.states is None:
            raise DataError("this model has no common state count: pass states= or use release_values")
        check_sequences(seqs, self.states)
        longest = max(s.size for s in seqs)
        if longest > self.length:
            raise DataError(
                f"a sequence is longer than the length={self.length} the mechanism was calibrated "
                "for; recalibrate with the longest sequence length",
                private_detail=f"longest sequence: {longest} records")
        return np.bincount(np.concatenate(seqs), minlength=self.states).astype(np.int64)

    def release(self, sequences: Any, *, ledger: Ledger | None = None,
                rng: Rng | None = None) -> np.ndarray:
        """Noisy state histogram of one sequence or many (people, each a chain), after spending
        `guarantee` in `ledger` (if any)."""
        generator = self._spend(ledger, rng)
        counts = self.histogram(sequences)
        on_grid = self.grid <= 1.0  # integer counts are exact multiples of a grid ≤ 1
        return self._noisy(counts, self.steps(counts.size, on_grid), generator)

    __call__ = release

    def release_values(self, values: Any, *, ledger: Ledger | None = None,
                       rng: Rng | None = None) -> np.ndarray:
        """Noisy copy of an L-Lipschitz statistic the caller computed exactly (a vector), after
        spending `guarantee` in `ledger` (if any)."""
        generator = self._spend(ledger, rng)
        x = np.asarray(values, dtype=np.float64).ravel()
        if x.size == 0 or not np.all(np.isfinite(x)):
            raise DataError("values must be a non-empty vector of finite numbers")
        return self._noisy(x, self.steps(x.size, False), generator)

    def _spend(self, ledger: Ledger | None, rng: Rng | None) -> Rng:
        generator = resolve_rng(rng)
        charge(ledger, self._guarantee, repr(self))
        return generator

    def _noisy(self, values: np.ndarray, scale: float, rng: Rng) -> np.ndarray:
        check_noise_steps(scale, f"length={self.length} with epsilon={self.epsilon!r}")
        return snap_add(values, discrete_laplace(scale, values.size, rng), self.grid)

    def interval(self, alpha: float = 0.05, size: int | None = None) -> float:
        """Half-width w with P(|noise| ≤ w) ≥ 1 − α for each histogram entry (exact for the
        discrete Laplace used); with `size`, for a release_values vector of that length (adds the
        rounding allowance g/2)."""
        a = check_open_unit("alpha", alpha)
        if size is None:
            if self.states is None:
                raise invalid("size", size, "the statistic's length (the model has no state count)")
            on_grid = self.grid <= 1.0
            steps = self.steps(self.states, on_grid)
            extra = 0.0 if on_grid else 0.5
        else:
            steps, extra = self.steps(int(size), False), 0.5
        return (dlap_quantile(steps, a) + extra) * self.grid

    def __repr__(self) -> str:
        return (f"MarkovQuiltMechanism(epsilon={self.epsilon:g}, notion={self.notion!r}, "
                f"sigma={self.calibration.sigma:.6g}, scale={self.scale:.6g})")

