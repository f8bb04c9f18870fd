"""DP ↔ Bayesian DP on correlated records (Zhao et al. 2017, Lemmas 2–4 as restated in seed 002).

Any ε'-DP mechanism is ε-BDP with ε = max_i min_Q [(|N_i|+1)·ε' + e(X_Q|X_i)] (reference note §3,
checked against brute force); the inverse gives ε' = min_i max_Q (ε − e)/(|N_i|+1) = 1/σ_max.
"""

from __future__ import annotations

from typing import Any

from bayesdp.correlated.calibration import chain_search, forward_objective, quilt_calibration
from bayesdp.correlated.influence import check_notion
from bayesdp.correlated.network import BayesianNetwork
from bayesdp.errors import check_positive, invalid


def dp_to_bdp(epsilon_dp: float, model: Any, length: int | None, *, method: str = "exact",
              notion: str = "bdp") -> float:
    """ε = max_i min_Q [(|N_i|+1)·ε' + e(X_Q|X_i)] reached by any ε'-DP mechanism (Zhao et al. 2017,
    Lemma 3; Lemma 4 for a time-homogeneous chain; notion="pufferfish" gives Lemma 2)."""
    eps = check_positive("epsilon_dp", epsilon_dp)
    obj = forward_objective(eps)
    check_notion(notion)
    if isinstance(model, BayesianNetwork):
        model._check_call(length, method)
        return model.search(obj, notion)[0]
    if length is None:
        raise invalid("length", length, "a positive integer (the number of records in a chain)")
    return chain_search(model, length, obj, method, notion).score


def bdp_to_dp(epsilon_bdp: float, model: Any, length: int | None, *, method: str = "exact",
              notion: str = "bdp") -> float:
    """ε' = min_i max_Q (ε − e(X_Q|X_i))/(|N_i|+1) = 1/σ_max: the DP level a mechanism must meet
    so that it is ε-BDP on this model (inverse of Zhao et al. 2017, Lemma 3; reference note §3)."""
    return 1.0 / quilt_calibration(model, length, epsilon_bdp, method=method, notion=notion).sigma
