"""Thresholdout, the reusable holdout (Dwork et al., Science 2015 and NIPS 2015; seed 002, Alg. 1)."""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np

from bayesdp.correlated import dp_to_bdp
from bayesdp.correlated.dependence import NOTION_WORDS, dependence_for, describe_model
from bayesdp.errors import (
    BudgetExhausted,
    check_open_unit,
    check_positive,
    check_positive_int,
    invalid,
)
from bayesdp.holdout.accounting import thresholdout_cost
from bayesdp.holdout.answers import HoldoutAnswer
from bayesdp.holdout.base import HoldoutBase
from bayesdp.holdout.bounds import accuracy_bound
from bayesdp.noise import Rng, discrete_laplace, grid_for, resolve_rng, snap, unsnap
from bayesdp.privacy import Guarantee, Ledger, charge
from bayesdp.privacy.guarantee import check_compatible

OnExhausted = Literal["refuse", "raise"]


class ReusableHoldout(HoldoutBase):
    """Answers adaptively chosen statistical queries from a training set, checked against a holdout.

    Dwork et al. (NIPS 2015, Fig. 1; seed 002, Alg. 1): with T̂ = T + γ, γ ~ Lap(threshold_noise),
    each query draws η ~ Lap(compare_noise); if |E_holdout − E_train| > T̂ + η (an overflow) it
    releases E_holdout + Lap(σ), spends one unit of budget and redraws γ; otherwise it releases
    E_train. After `budget` overflows every answer is refused. Defaults: threshold noise 2σ,
    comparison noise 4σ. All noise is exact discrete Laplace on a power-of-two grid
    (bayesdp.noise), so released values are multiples of the grid. `rng` is for tests only: a
    seeded generator makes the output reproducible and therefore not private.

    The guarantee is pure ε-DP on the holdout (replace-one neighbours, Δ = 1/n):
    ε = overflows·Δ(1/σ + 1/σ_threshold + 2/σ_compare) up to the grid's rounding terms.
    With `dependence` (a bayesdp.correlated model of the holdout's records, e.g. a MarkovChain
    over its rows in order), `guarantee` is the Bayesian-DP ε that this DP level gives on that
    model, dp_to_bdp(ε, model, n) (seed 002, Alg. 1 and Thm 2 via Zhao et al. 2017, Lemmas 2–4),
    and `accuracy` uses it; `dp_guarantee` keeps the plain DP one. With `ledger`, each batch of
    answers spends what it adds to `guarantee` (an overflow, or the threshold's share when a
    run of training answers opens) before any of it is returned or logged; a refused spend
    releases nothing and leaves the holdout as it was.
    """

    def __init__(
        self,
        train: Any,
        *,
        holdout: Any,
        threshold: float,
        sigma: float,
        budget: int,
        threshold_noise: float | None = None,
        compare_noise: float | None = None,
        on_exhausted: OnExhausted = "refuse",
        dependence: Any = None,
        ledger: Ledger | None = None,
        rng: Rng | None = None,
    ) -> None:
        super().__init__(train, holdout=holdout)
        self.threshold = check_positive("threshold", threshold)
        self.sigma = check_positive("sigma", sigma)
        self.budget = check_positive_int("budget", budget)
        self.threshold_noise = check_positive(
            "threshold_noise", 2 * self.sigma if threshold_noise is None else threshold_noise
        )
        self.compare_noise = check_positive(
            "compare_noise", 4 * self.sigma if compare_noise is None else compare_noise
        )
        if on_exhausted not in ("refuse", "raise"):
            raise invalid("on_exhausted", on_exhausted, "'refuse' or 'raise'")
        self.on_exhausted: OnExhausted = on_exhausted
        self._rng = resolve_rng(rng)
        self._g_answer = grid_for(self.sigma)
        self._g_threshold = grid_for(self.threshold_noise)
        self._g_compare = grid_for(self.compare_noise)
        g0 = min(self._g_threshold, self._g_compare)
        # Grids are powers of two, so each is a whole number of the finest one's steps.
        self._r_threshold = int(self._g_threshold / g0)
        self._r_compare = int(self._g_compare / g0)
        self._t_steps = int(snap(np.array([self.threshold]), g0)[0])
        self._cost = thresholdout_cost(self.n, self.sigma, self.threshold_noise, self.compare_noise)
        self._budget_left = self.budget
        self._overflows = 0
        self._open_segment = False
        self.dependence = dependence
        self._bdp: dict[float, float] = {}
        self._bayesian(self.budget * self._cost.overflow)  # checks the model against n now
        self._dependence = None if dependence is None else dependence_for(
            dependence, "bdp", self.n, detail="ε-DP on the holdout converted by Zhao et al. 2017, Lemma 3",
            explanation=f"{NOTION_WORDS['bdp']}, for the holdout's {self.n} records. Correlation "
            f"model assumed: {describe_model(dependence)}. The plain DP guarantee on the holdout "
            "is `dp_guarantee`; if the real dependence is stronger than the model allows, the "
            "real ε is larger.")
        self._ledger = ledger
        if ledger is not None:
            if not isinstance(ledger, Ledger):
                raise invalid("ledger", ledger, "None or a bayesdp Ledger")
            check_compatible(self.budget_guarantee, ledger.budget, "the ledger's budget is stated")
        self._gamma = self._draw_gamma()

    @property
    def budget_left(self) -> int:
        return self._budget_left

    @property
    def overflows(self) -> int:
        """How many answers came from the holdout (each spent one unit of budget)."""
        return self._overflows

    @property
    def epsilon_per_overflow(self) -> float:
        return self._cost.overflow

    @property
    def dp_guarantee(self) -> Guarantee:
        """The DP guarantee spent so far: each overflow, plus the threshold's share of an open run."""
        eps = self._overflows * self._cost.overflow
        if self._open_segment:
            eps += self._cost.open_segment
        return Guarantee(eps, relation="replace_one", unit="row")

    @property
    def guarantee(self) -> Guarantee:
        """The guarantee spent so far: DP, or Bayesian DP under `dependence`."""
        return self._reported(self.dp_guarantee.epsilon)

    @property
    def budget_guarantee(self) -> Guarantee:
        """The guarantee of the whole run, whatever is asked: `budget` overflows."""
        return self._reported(self.budget * self._cost.overflow)

    def _reported(self, epsilon_dp: float) -> Guarantee:
        return Guarantee(self._bayesian(epsilon_dp), relation="replace_one", unit="row",
                         dependence=self._dependence)

    def _bayesian(self, epsilon_dp: float) -> float:
        """ε-DP as Bayesian DP on the dependence model (the same ε for independent records)."""
        if self.dependence is None or epsilon_dp == 0:
            return epsilon_dp
        if epsilon_dp not in self._bdp:
            self._bdp[epsilon_dp] = dp_to_bdp(epsilon_dp, self.dependence, self.n)
        return self._bdp[epsilon_dp]

    def accuracy(self, m: int, beta: float) -> float:
        """τ such that, except with probability β, every answered query among the first m lies within
        τ of its population mean (training set independent of the holdout; the holdout i.i.d., or
        correlated as `dependence` states, with the Bayesian-DP ε); see bounds.py. Answers lie
        in [0, 1], so a τ of 1 or more says nothing: it comes with a warning."""
        tau = accuracy_bound(
            self.n,
            self.budget,
            check_positive_int("m", m),
            check_open_unit("beta", beta),
            threshold=self.threshold,
            sigma=self.sigma,
            threshold_noise=self.threshold_noise,
            compare_noise=self.compare_noise,
            epsilon=self.budget_guarantee.epsilon,
        )
        if tau >= 1:
            warnings.warn(
                f"accuracy(m={m}, beta={beta}) = {tau:.3g} is vacuous: answers lie in [0, 1], so a "
                f"bound of 1 or more says nothing about them. Ask it for fewer queries m, or use a "
                f"larger holdout (bayesdp.holdout.required_holdout_size gives the size)",
                UserWarning, stacklevel=2)
        return tau

    def _charge(self, spent: float, state: tuple[int, int, bool, int]) -> None:
        """Spend what the answers add to the guarantee; if the ledger refuses, undo them."""
        added = self.guarantee.epsilon - spent
        if self._ledger is None or added <= 0:
            return
        try:
            charge(self._ledger, Guarantee(added, relation="replace_one", unit="row",
                                           dependence=self._dependence),
                   f"ReusableHoldout: {self._overflows} overflow(s) of {self.budget}")
        except BaseException:
            self._budget_left, self._overflows, self._open_segment, self._gamma = state
            raise

    def _draw_gamma(self) -> int:
        """Threshold noise in steps of its grid, drawn at the start and after each overflow only."""
        t = self.threshold_noise / self._g_threshold
        return int(discrete_laplace(t, 1, self._rng)[0])

    def _answer(self, train: np.ndarray, holdout: np.ndarray) -> list[HoldoutAnswer]:
        spent = self.guarantee.epsilon
        state = (self._budget_left, self._overflows, self._open_segment, self._gamma)
        q = train.size
        answers: list[HoldoutAnswer] = []
        i = 0
        if q and self._budget_left >= 1:
            rng, g = self._rng, self._g_answer
            # Every query gets its own η, every overflow its own ξ and new γ: all i.i.d. and
            # independent of the data, so drawing them up front changes no distribution.
            eta = discrete_laplace(self.compare_noise / self._g_compare, q, rng)
            noisy_gap = (snap(np.abs(holdout - train), self._g_compare) + eta) * self._r_compare
            spare = min(q, self._budget_left)
            xi = discrete_laplace(self.sigma / g, spare, rng)
            gammas = discrete_laplace(self.threshold_noise / self._g_threshold, spare, rng)
            used = 0
            while i < q and self._budget_left >= 1:
                level = self._t_steps + self._gamma * self._r_threshold
                stop = _first_above(noisy_gap, i, level)
                if stop > i:
                    self._open_segment = True
                    left = self._budget_left
                    answers.extend(HoldoutAnswer(float(v), source="train", budget_left=left)
                                   for v in train[i:stop])
                if stop < q:
                    # E_holdout + Lap(σ) on σ's grid: unsnap(snap(x, g) + discrete_laplace(σ/g), g).
                    steps = snap(holdout[stop : stop + 1], g) + xi[used]
                    self._budget_left -= 1
                    self._overflows += 1
                    self._open_segment = False
                    self._gamma = int(gammas[used])
                    used += 1
                    answers.append(HoldoutAnswer(float(unsnap(steps, g)[0]), source="holdout",
                                                 budget_left=self._budget_left))
                    stop += 1
                i = stop
        self._charge(spent, state)
        self._log.extend(answers)
        if i < q:
            if self.on_exhausted == "raise":
                raise BudgetExhausted(
                    f"the holdout budget of {self.budget} overflows is spent: {len(answers)} of "
                    f"{q} queries were answered (see .log), the rest are refused"
                )
            refused = [HoldoutAnswer(None, source="exhausted", budget_left=0)] * (q - i)
            answers.extend(refused)
            self._log.extend(refused)
        return answers


def _first_above(values: np.ndarray, start: int, level: int) -> int:
    """First index >= start with values > level (len(values) if none), scanning doubling windows."""
    width = 64
    while start < values.size:
        hits = np.flatnonzero(values[start : start + width] > level)
        if hits.size:
            return start + int(hits[0])
        start += width
        width *= 2
    return int(values.size)
