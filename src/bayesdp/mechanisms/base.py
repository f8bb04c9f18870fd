"""What every mechanism has: a noise scale, a vectorized release, its guarantee and its accuracy."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from bayesdp.errors import DataError, InvalidParameter, check_finite, check_open_unit, invalid
from bayesdp.noise import Rng, resolve_rng
from bayesdp.privacy import Guarantee, Ledger, Noise, Relation, charge
from bayesdp.privacy.noise import Family

# Valid ranges of every mechanism's parameters. ε <= 700 keeps e^ε a finite float; ε >= 1e-12 and
# a noise scale of at most 2^50 integer steps keep every draw, and a value plus its noise, far
# inside int64; sensitivities within 1e±200 keep the power-of-two grid a normal float and every
# output finite.
EPSILON_RANGE = (1e-12, 700.0)
RHO_RANGE = (1e-24, 2.5e5)
SENSITIVITY_RANGE = (1e-200, 1e200)
MAX_NOISE_STEPS = 2.0**50


def check_in_range(name: str, value: Any, bounds: tuple[float, float], why: str = "") -> float:
    """A finite number within the closed range `bounds`, else InvalidParameter naming it."""
    x = check_finite(name, value)
    lo, hi = bounds
    if not lo <= x <= hi:
        raise invalid(name, value, f"a number in [{lo:g}, {hi:g}]{why}")
    return x


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    return check_in_range(name, value, EPSILON_RANGE)


def check_sensitivity(value: Any) -> float:
    return check_in_range("sensitivity", value, SENSITIVITY_RANGE)


def check_noise_steps(steps: float, what: str) -> None:
    """Refuse a noise scale of more than MAX_NOISE_STEPS integer steps (its draws could overflow)."""
    if not steps <= MAX_NOISE_STEPS:
        raise InvalidParameter(
            f"{what} gives a noise scale of {steps:.3g} integer steps; at most 2^50 are allowed "
            "(raise epsilon or lower the sensitivity)")


class Mechanism(ABC):
    """A DP mechanism. `release(values)` treats each entry as one query of the stated sensitivity."""

    family: ClassVar[Family]
    grid: float | None = None  # the output lattice, for mechanisms that round to one
    epsilon: float
    sensitivity: float
    _relation: Relation
    _unit: str

    @property
    @abstractmethod
    def scale(self) -> float:
        """The noise scale in data units."""

    @property
    def noise(self) -> Noise:
        """The noise one release of one entry adds, as the accountants read it."""
        return Noise(self.family, scale=self.scale, sensitivity=self.sensitivity, grid=self.grid)

    @cached_property
    def guarantee(self) -> Guarantee:
        """The guarantee of one release of one entry (k entries changed by a neighbour compose)."""
        return self._stated((self.noise,))

    def _stated(self, noise: tuple[Noise, ...]) -> Guarantee:
        """Pure ε-DP for the mechanism's neighbours, carrying its noise."""
        return Guarantee(self.epsilon, delta=0.0, relation=self._relation, unit=self._unit, noise=noise)

    def _pure(self, epsilon: float, relation: Relation, unit: str,
              check: Callable[[Any], float] = check_epsilon) -> None:
        """Validate ε (by default in EPSILON_RANGE) for a pure ε-DP mechanism with these neighbours."""
        self.epsilon = check(epsilon)
        self._relation, self._unit = relation, unit

    def release(self, values: Any, *, ledger: Ledger | None = None, rng: Rng | None = None) -> Any:
        """Noisy values, same shape as `values`, after spending `guarantee` in `ledger` (if any);
        `rng` is for tests only (not private)."""
        generator = resolve_rng(rng)
        charge(ledger, self.guarantee, repr(self))
        return self._release(values, generator)

    @abstractmethod
    def _release(self, values: Any, rng: Rng) -> Any:
        """The noisy values (the budget is already spent)."""

    def __call__(self, values: Any, *, ledger: Ledger | None = None, rng: Rng | None = None) -> Any:
        return self.release(values, ledger=ledger, rng=rng)


def as_array(values: Any, name: str = "values") -> np.ndarray:
    """Numeric data as a float64 array, refusing non-numeric, NaN and infinite entries."""
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{name} must be numeric; got {type(values).__name__}") from None
    if not np.all(np.isfinite(x)):
        bad = int(np.count_nonzero(~np.isfinite(x)))
        raise DataError(f"{name} has NaN or infinite entries; remove or impute them first",
                        private_detail=f"{bad} of {x.size} entries")
    return x


def as_integers(values: Any, name: str = "values") -> np.ndarray:
    """Integer data as int64, refusing fractional entries instead of rounding them silently."""
    x = as_array(values, name)
    if not np.all(x == np.rint(x)):
        raise DataError(f"{name} must be integers; found fractional entries",
                        private_detail=f"such as {float(x[x != np.rint(x)][0])!r}")
    if x.size and np.max(np.abs(x)) >= 2.0**62:
        raise DataError(f"{name} must lie within ±2^62")
    return x.astype(np.int64)


def shaped(out: np.ndarray, like: Any) -> Any:
    """Return a scalar for a scalar input, else an array of the input's shape."""
    return out.reshape(np.shape(like)) if np.ndim(like) else out.reshape(()).item()


def check_alpha(alpha: Any) -> float:
    return check_open_unit("alpha", alpha)
