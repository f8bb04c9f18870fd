"""AboveThreshold / sparse vector (Dwork & Roth 2014, Alg. 1 and Alg. 2) on the secure grid."""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesdp.errors import BudgetExhausted, check_finite, check_positive_int
from bayesdp.mechanisms.base import Mechanism, as_array, check_epsilon, check_sensitivity
from bayesdp.mechanisms.laplace import grid_steps
from bayesdp.noise import Rng, discrete_laplace, grid_for, resolve_rng, snap
from bayesdp.privacy import Ledger, Relation, charge


class SparseVector(Mechanism):
    """Answers "is query_i above T?" until `max_positives` positives, ε-DP in total.

    Each positive closes one AboveThreshold run with ε' = ε/c (Dwork & Roth, Alg. 2): threshold
    noise Lap(2Δ/ε'), query noise Lap(4Δ/ε'), the threshold redrawn after every positive. Values
    and threshold are rounded to one power-of-two grid and the noise is exact discrete Laplace.

    `epsilon` and ε/max_positives in [1e-12, 700], `sensitivity` in [1e-200, 1e200], `threshold`
    finite. With `ledger`, the whole run's ε is spent at construction, before any query is seen.
    """

    family = "sparse_vector"
    grid: float

    def __init__(
        self,
        threshold: float,
        *,
        epsilon: float,
        sensitivity: float = 1.0,
        max_positives: int = 1,
        relation: Relation = "add_remove",
        unit: str = "row",
        ledger: Ledger | None = None,
        rng: Rng | None = None,
    ) -> None:
        self.threshold = check_finite("threshold", threshold)
        self._pure(epsilon, relation, unit)
        self.sensitivity = check_sensitivity(sensitivity)
        self.max_positives = check_positive_int("max_positives", max_positives)
        per_run = check_epsilon(self.epsilon / self.max_positives, "epsilon / max_positives")
        self.grid = grid_for(2 * self.sensitivity / per_run, self.sensitivity)
        steps = grid_steps(self.sensitivity, self.grid)
        self.threshold_steps_scale = 2 * steps / per_run
        self.query_steps_scale = 4 * steps / per_run
        self._rng = resolve_rng(rng)
        charge(ledger, self.guarantee, f"SparseVector(epsilon={self.epsilon:g}, max_positives="
                                       f"{self.max_positives})")
        self.positives = 0
        self._noisy_threshold = self._draw_threshold()

    @property
    def scale(self) -> float:
        """The query noise scale in data units (4Δc/ε, rounding included)."""
        return self.query_steps_scale * self.grid

    @property
    def remaining(self) -> int:
        return self.max_positives - self.positives

    def _draw_threshold(self) -> int:
        t = int(snap(np.array([self.threshold]), self.grid)[0])
        return t + int(discrete_laplace(self.threshold_steps_scale, 1, self._rng)[0])

    def answer(self, values: Any) -> np.ndarray:
        """Above/below for each query in order, stopping after the last allowed positive.

        The result may be shorter than `values`: queries after the cap are not answered.
        Raises BudgetExhausted if no positive answer is left.
        """
        if self.remaining == 0:
            raise BudgetExhausted(f"all {self.max_positives} positive answers are spent")
        q = snap(as_array(values).ravel(), self.grid)
        out: list[np.ndarray] = []
        start = 0
        while start < q.size and self.remaining:
            noisy = q[start:] + discrete_laplace(self.query_steps_scale, q.size - start, self._rng)
            hits = np.flatnonzero(noisy >= self._noisy_threshold)
            if hits.size == 0:
                out.append(np.zeros(q.size - start, dtype=bool))
                break
            first = int(hits[0])
            out.append(np.arange(first + 1) == first)
            self.positives += 1
            self._noisy_threshold = self._draw_threshold()
            start += first + 1
        return np.concatenate(out) if out else np.zeros(0, dtype=bool)

    def _release(self, values: Any, rng: Rng) -> Any:
        """A fresh, independent run over `values` (same parameters); the original is untouched."""
        fresh = SparseVector(
            self.threshold,
            epsilon=self.epsilon,
            sensitivity=self.sensitivity,
            max_positives=self.max_positives,
            relation=self._relation,
            unit=self._unit,
            rng=rng,
        )
        return fresh.answer(values)
