"""What noise a release adds, stated by the mechanism and read by the accountants (no sampling here)."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass
from typing import Literal, get_args

from bayesdp.errors import check_positive, check_positive_int, invalid

Family = Literal[
    "laplace",
    "gaussian",
    "discrete_laplace",
    "discrete_gaussian",
    "randomized_response",
    "exponential",
    "report_noisy_max",
    "sparse_vector",
]
FAMILIES: tuple[str, ...] = get_args(Family)
# The families whose privacy-loss distribution the tight accountants (RDP, PLD, zCDP) know;
# a guarantee with any other noise enters them through its stated ε, δ.
ACCOUNTED: tuple[str, ...] = FAMILIES[:5]


@dataclass(frozen=True)
class Noise:
    """One noise draw per query, `repetitions` queries, each of the stated sensitivity.

    `scale` is the Laplace b or Gaussian σ in data units (for selection, the utility gap that
    costs a factor e), `sensitivity` the query's, `grid` the output lattice spacing when
    values are rounded to a grid first (then a neighbour moves the rounded value by up to
    floor(Δ/g) + 1 grid steps). Randomized response states `epsilon` and `categories` instead.
    """

    family: Family
    _: KW_ONLY
    scale: float = 0.0
    sensitivity: float = 0.0
    repetitions: int = 1
    grid: float | None = None
    epsilon: float = 0.0
    categories: int = 0

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise invalid("family", self.family, f"one of {FAMILIES}")
        object.__setattr__(self, "repetitions", check_positive_int("repetitions", self.repetitions))
        if self.family == "randomized_response":
            object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
            if isinstance(self.categories, bool) or not isinstance(self.categories, int) \
                    or self.categories < 2:
                raise invalid("categories", self.categories, "an integer >= 2")
            return
        object.__setattr__(self, "scale", check_positive("scale", self.scale))
        object.__setattr__(self, "sensitivity", check_positive("sensitivity", self.sensitivity))
        if self.grid is not None:
            object.__setattr__(self, "grid", check_positive("grid", self.grid))

    @property
    def accounted(self) -> bool:
        """Whether the tight accountants know this family's privacy loss."""
        return self.family in ACCOUNTED

    @property
    def steps(self) -> tuple[float, float]:
        """(noise scale, sensitivity) in lattice units: on the grid, or as given."""
        if self.grid is None:
            return self.scale, self.sensitivity
        return self.scale / self.grid, float(math.floor(self.sensitivity / self.grid) + 1)

    @property
    def is_gaussian(self) -> bool:
        return self.family in ("gaussian", "discrete_gaussian")

    def pure_epsilon(self) -> float:
        """ε of one draw of pure-DP noise: Δ/b in lattice units (Dwork 2006, Thm 2), or RR's ε."""
        if self.family == "randomized_response":
            return self.epsilon
        if self.family not in ("laplace", "discrete_laplace"):
            raise invalid("family", self.family, "laplace, discrete_laplace or randomized_response")
        scale, sens = self.steps
        return sens / scale

    def rho(self) -> float:
        """ρ-zCDP of one draw: Δ²/2σ² (CKS 2020, Thm 14) or ε²/2 if pure (Bun & Steinke, Prop. 1.4)."""
        if self.is_gaussian:
            sigma, sens = self.steps
            return sens * sens / (2 * sigma * sigma)
        eps = self.pure_epsilon()
        return eps * eps / 2
