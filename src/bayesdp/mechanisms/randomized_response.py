"""Randomized response, binary and k-ary, with its unbiased count estimator (seed 003, Example 1)."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np
from mpmath import iv

from bayesdp.errors import DataError, invalid
from bayesdp.mechanisms.base import Mechanism, as_integers, shaped
from bayesdp.noise import Rng, bernoulli_exp
from bayesdp.privacy import Noise


@dataclass(frozen=True)
class CountEstimate:
    """Unbiased estimates of how many people hold each category, with their standard errors."""

    counts: np.ndarray
    _: KW_ONLY
    stderr: np.ndarray


class RandomizedResponse(Mechanism):
    """Each person reports the truth with probability e^ε/(e^ε + k − 1), else one other category uniformly.

    Sampled exactly: with probability e^{-γ}, γ = ln((e^ε + k − 1)/k), the report is redrawn
    uniformly from all k categories, which gives the same output law (ε-local DP, seed 003 Ex. 1).

    `epsilon` in [1e-12, 700], `categories` an integer in [2, 2^31] (its estimator counts every category).
    """

    family = "randomized_response"

    def __init__(self, epsilon: float, *, categories: int = 2) -> None:
        self._pure(epsilon, "replace_one", "respondent")
        if isinstance(categories, bool) or not isinstance(categories, int | np.integer) or \
                not 2 <= categories <= 2**31:
            raise invalid("categories", categories, "an integer >= 2 and <= 2^31")
        self.categories = int(categories)
        # e^ε/(e^ε + k - 1) and 1/(e^ε + k - 1), divided through by e^ε.
        others = (self.categories - 1) * math.exp(-self.epsilon)
        self.p_truth = 1.0 / (1.0 + others)
        self.p_other = math.exp(-self.epsilon) / (1.0 + others)

    @property
    def scale(self) -> float:
        """The probability of reporting any one given false category."""
        return self.p_other

    @property
    def noise(self) -> Noise:
        return Noise("randomized_response", epsilon=self.epsilon, categories=self.categories)

    def _gamma(self) -> object:
        e, k = iv.mpf(self.epsilon), self.categories
        return iv.log((iv.exp(e) + k - 1) / k)

    def _release(self, values: Any, rng: Rng) -> Any:
        x = as_integers(values).ravel()
        if x.size and (x.min() < 0 or x.max() >= self.categories):
            raise DataError(f"values must be categories 0..{self.categories - 1}",
                            private_detail=f"found {int(x.min())}..{int(x.max())}")
        # γ = ln((e^ε + k - 1)/k), written so that e^ε is never formed.
        gamma = self.epsilon + math.log1p((self.categories - 1) * math.exp(-self.epsilon)) \
            - math.log(self.categories)
        redraw = bernoulli_exp(np.full(x.size, gamma), rng, lambda _i: self._gamma())
        out = np.where(redraw, rng.integers(0, self.categories, size=x.size), x)
        return shaped(out, values) if np.ndim(values) else int(out[0])

    def estimate_counts(self, responses: Any) -> CountEstimate:
        """N̂_c = (n_c − N q)/(p − q), Var = Σ Bernoulli variances /(p − q)² (seed 003 Ex. 1, k-ary)."""
        y = as_integers(responses, "responses").ravel()
        n = y.size
        if y.size and (y.min() < 0 or y.max() >= self.categories):
            raise DataError(f"responses must be categories 0..{self.categories - 1}")
        observed = np.bincount(y, minlength=self.categories).astype(np.float64)
        p, q = self.p_truth, self.p_other
        # p - q = (1 - e^-ε)/(1 + (k-1)e^-ε) without cancellation; >= ~1e-12/k for every valid ε.
        gap = -math.expm1(-self.epsilon) / (1.0 + (self.categories - 1) * math.exp(-self.epsilon))
        counts = (observed - n * q) / gap
        truth = np.clip(counts, 0, n)
        variance = truth * p * (1 - p) + (n - truth) * q * (1 - q)
        return CountEstimate(counts=counts, stderr=np.sqrt(variance) / gap)

    def __repr__(self) -> str:
        return f"RandomizedResponse(epsilon={self.epsilon:g}, categories={self.categories})"
