"""How close Thresholdout's answers are to the population, and the holdout size that makes them close.

The decomposition is that of Dwork et al., NIPS 2015 (arXiv:1506.02629), Thresholdout accuracy
theorem, with its parameters T = 3τ/4 and σ = τ/(96 ln(4m/β)): a training answer is within
T + |γ| + |η| of the holdout mean, a holdout answer within |ξ|; the holdout mean of each
adaptively chosen query is within τ_gen of its population mean by the transfer theorem as
stated in seed 002 (Zhao 2017, proof of Thm 2, from its Lemma 1): an ε-DP (or ε-Bayesian-DP)
analysis with ε ≤ τ_gen/3 has P[|Q(S) − Q(P)| ≥ τ_gen] ≤ 4 exp(−τ_gen² n / 9). The failure
probability β is split β/6 to each of the three noises and β/2 to sampling (union bound over
the m queries).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from bayesdp.correlated import dp_to_bdp
from bayesdp.errors import InvalidParameter, check_open_unit, check_positive, check_positive_int
from bayesdp.holdout.accounting import thresholdout_cost
from bayesdp.noise import grid_for


def laplace_tail(scale: float, count: int, beta: float) -> float:
    """w with P(any of `count` grid-Laplace(b) draws > w) <= β: P(|Z|g > w) <= 2e^{-w/b}/(1+p), CKS 2020."""
    p = math.exp(-grid_for(scale) / scale)
    return scale * math.log(2.0 * count / ((1.0 + p) * beta))


def generalization_error(epsilon: float, n: int, queries: int, beta: float) -> float:
    """τ_gen = max(3ε, 3·sqrt(ln(8m/β)/n)): then 4m·exp(−τ_gen² n/9) <= β/2 (seed 002, Lemma 1)."""
    return max(3.0 * epsilon, 3.0 * math.sqrt(math.log(8.0 * queries / beta) / n))


def accuracy_bound(
    n: int,
    budget: int,
    queries: int,
    beta: float,
    *,
    threshold: float,
    sigma: float,
    threshold_noise: float,
    compare_noise: float,
    epsilon: float | None = None,
) -> float:
    """τ such that, except with probability β, every answered query among m is within τ of its mean.

    `epsilon` is the (Bayesian-)DP level of the whole run; by default B overflows' worth.
    """
    if epsilon is None:
        epsilon = budget * thresholdout_cost(n, sigma, threshold_noise, compare_noise).overflow
    # Distance between an answer and the holdout mean, except with probability β/2: a training
    # answer is within T + |γ| + |η| (plus grid rounding), a holdout answer within |ξ|.
    g0 = min(grid_for(threshold_noise), grid_for(compare_noise))
    overflows = min(budget, queries)
    eta = laplace_tail(compare_noise, queries, beta / 6)
    gamma = laplace_tail(threshold_noise, overflows + 1, beta / 6)
    xi = laplace_tail(sigma, overflows, beta / 6)
    train_side = threshold + g0 / 2 + grid_for(compare_noise) / 2 + gamma + eta
    noise = max(train_side, xi + grid_for(sigma) / 2)
    return noise + generalization_error(epsilon, n, queries, beta)


def nips_parameters(queries: int, tau: float, beta: float) -> tuple[float, float]:
    """(T, σ) = (3τ/4, τ/(96 ln(4m/β))), the parameters of the NIPS 2015 Thresholdout theorem."""
    return 0.75 * tau, tau / (96.0 * math.log(4.0 * queries / beta))


def required_holdout_size(
    budget: int, queries: int, tau: float, beta: float, *, dependence: Any = None
) -> int:
    """Smallest holdout size n for which Thresholdout with the NIPS 2015 parameters (T = 3τ/4,
    σ = τ/(96 ln(4m/β)), threshold noise 2σ, comparison noise 4σ) answers m adaptive queries with
    at most B overflows within τ of the population, except with probability β.

    This is the pure-DP (B) branch of the theorem's n0 = O(ln(m/β)/τ²)·min{B, ...}, with every
    constant explicit: about 3400·B·ln(4m/β)/τ². With `dependence` (a bayesdp.correlated model
    of the holdout's records) the generalization step uses the Bayesian-DP ε = dp_to_bdp(ε, model,
    n), as seed 002's n_# and n_* do (Thm 2, eqs. 15–16): the size grows with the quilts' reach.
    """
    b = check_positive_int("budget", budget)
    m = check_positive_int("queries", queries)
    t = check_positive("tau", tau)
    if t > 1:
        raise InvalidParameter(f"tau={tau!r} is not allowed: tau must be in (0, 1] for [0,1] queries")
    be = check_open_unit("beta", beta)
    threshold, sigma = nips_parameters(m, t, be)

    def bound(n: int, dependent: bool) -> float:
        eps = b * thresholdout_cost(n, sigma, 2 * sigma, 4 * sigma).overflow
        if dependent:
            eps = dp_to_bdp(eps, dependence, n)
        return accuracy_bound(
            n, b, m, be, threshold=threshold, sigma=sigma,
            threshold_noise=2 * sigma, compare_noise=4 * sigma, epsilon=eps,
        )

    independent = smallest_size(lambda n: bound(n, False), t)
    if dependence is None:
        return independent
    # Bayesian DP is never below DP (|N_i| >= 0, e >= 0 in Lemma 3), so start from that size.
    return smallest_size(lambda n: bound(n, True), t, start=independent)


def smallest_size(bound: Callable[[int], float], tau: float, start: int = 1) -> int:
    """Smallest n >= start with bound(n) <= τ, for a bound decreasing in n and an answer >= start
    (doubling, then bisection)."""
    lo, hi = start - 1, start
    while bound(hi) > tau:
        lo, hi = hi, 2 * hi
        if hi > 2**62:
            raise InvalidParameter(
                f"tau={tau!r} is not reachable at any holdout size: the noise alone exceeds it"
            )
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if bound(mid) <= tau:
            hi = mid
        else:
            lo = mid
    return hi
