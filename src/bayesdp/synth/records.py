"""Local release: every record with its own Laplace noise, and the estimates that undo the noise."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass

import numpy as np
from scipy.optimize import nnls
from scipy.special import ndtri

from bayesdp.errors import DataError, check_open_unit, check_positive, check_positive_int
from bayesdp.mechanisms import Laplace
from bayesdp.noise import Rng
from bayesdp.privacy import Guarantee, Ledger, charge
from bayesdp.synth.density import PrivateDensity, as_bounds, as_points, clip_to

# Observation cells per deconvolution cell in the corrected histogram.
_OBS_PER_CELL = 4


@dataclass(frozen=True)
class MeanEstimate:
    """A mean recovered from noisy records, with its standard error."""

    estimate: float
    _: KW_ONLY
    standard_error: float

    def interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """Normal-approximation interval estimate ± z_{1-α/2}·se (CLT for the mean of i.i.d. records)."""
        z = float(ndtri(1 - check_open_unit("alpha", alpha) / 2))
        return self.estimate - z * self.standard_error, self.estimate + z * self.standard_error


def _laplace_cdf_integral(u: np.ndarray, b: float) -> np.ndarray:
    """G(u) = ∫_{-∞}^u F(t) dt for the Laplace(b) cdf F: (b/2)e^{u/b} for u < 0, u + (b/2)e^{-u/b} else."""
    neg = 0.5 * b * np.exp(np.minimum(u, 0.0) / b)
    pos = u + 0.5 * b * np.exp(-np.maximum(u, 0.0) / b)
    out: np.ndarray = np.where(u < 0, neg, pos)
    return out


@dataclass(frozen=True)
class PerturbedRecords:
    """Records released as x_i + Laplace(Δ/ε), Δ = hi − lo (W&Z Example 2.1; Dwork 2006 Example 2).

    Each released record is ε-DP on its own: no trusted curator is needed. `noise_scale` is the
    Laplace scale in data units; `clipped` counts records moved into the bounds (curator-side).
    """

    values: np.ndarray
    _: KW_ONLY
    bounds: tuple[float, float]
    noise_scale: float
    guarantee: Guarantee
    clipped: int = 0

    @property
    def n(self) -> int:
        return int(self.values.size)

    def mean(self) -> MeanEstimate:
        """Mean of the released values, unbiased for the clipped data's mean; se from their spread."""
        z = self.values
        return MeanEstimate(float(z.mean()), standard_error=float(z.std(ddof=1) / math.sqrt(z.size)))

    def histogram(self, bins: int = 10) -> PrivateDensity:
        """Cell probabilities of X corrected for the known noise: non-negative least squares deconvolution.

        Observed frequencies of Z = X + L on a grid are matched by A p, A[k, j] = P(Z in cell k |
        X uniform in cell j), computed in closed form from the Laplace cdf (Carroll & Hall 1988 style
        deconvolution by a known error law). Post-processing, so free.
        """
        m = check_positive_int("bins", bins)
        lo, hi = self.bounds
        b = self.noise_scale
        edges = np.linspace(lo, hi, m + 1)
        zlo, zhi = float(self.values.min()), float(self.values.max())
        obs = np.linspace(min(zlo, lo), max(zhi, hi), _OBS_PER_CELL * m + 1)
        freq = np.histogram(self.values, bins=obs)[0] / self.n
        h = np.diff(edges)
        # P(Z <= t | X ~ U[a, a+h]) = (G(t - a) - G(t - a - h)) / h; tails go to the end cells.
        t = obs[None, 1:-1] - edges[:-1, None]
        inner = (_laplace_cdf_integral(t, b) - _laplace_cdf_integral(t - h[:, None], b)) / h[:, None]
        cum = np.hstack([np.zeros((m, 1)), inner, np.ones((m, 1))])
        a = np.diff(cum, axis=1).T
        p, _ = nnls(a, freq)
        total = p.sum()
        probs = p / total if total > 0 else np.full(m, 1.0 / m)
        return PrivateDensity(
            edges=(edges,), probs=probs, guarantee=self.guarantee,
            method="deconvolved local histogram", n=float(self.n), clipped=self.clipped,
        )

    def explain(self) -> str:
        lo, hi = self.bounds
        sd = math.sqrt(2.0) * self.noise_scale
        se = self.mean().standard_error
        return (
            f"Each of the {self.n} records was released on its own with Laplace noise of scale "
            f"{self.noise_scale:.4g} ({self.guarantee}); no trusted curator saw the data. The noise "
            f"has standard deviation {sd:.4g}, {sd / (hi - lo):.3g} times the width of the range "
            f"[{lo:.4g}, {hi:.4g}], so at this ε each released record is almost pure noise and "
            f"says little about its person. Averages still concentrate: the mean has standard "
            f"error {se:.4g}, shrinking as 1/√n (Wasserman & Zhou 2010, Example 2.1). "
            f"{self.guarantee.explain(n=self.n)}"
        )


def perturb_records(
    values: object, bounds: object, epsilon: float, *, ledger: Ledger | None = None,
    rng: Rng | None = None,
) -> PerturbedRecords:
    """Release every record plus Laplace((hi − lo)/ε) noise: each record ε-DP (W&Z Example 2.1, Lemma 2.6(3)).

    The noise is bayesdp's Laplace mechanism (exact discrete Laplace on the power-of-two grid).
    With `ledger`, ε is spent before the values are read. A seeded `rng` is for tests only.
    """
    eps = check_positive("epsilon", epsilon)
    (lo, hi), = as_bounds(bounds, 1)
    mech = Laplace(eps, sensitivity=hi - lo, relation="replace_one")
    charge(ledger, mech.guarantee, "perturb_records")
    x = as_points(values, "values")
    if x.shape[1] != 1:
        raise DataError(f"perturb_records takes one value per record; got {x.shape[1]} columns")
    x, clipped = clip_to(x, [(lo, hi)])
    return PerturbedRecords(
        values=mech.release(x[:, 0], rng=rng), bounds=(lo, hi), noise_scale=mech.scale,
        guarantee=mech.guarantee, clipped=clipped,
    )
