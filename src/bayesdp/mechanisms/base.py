"""What every mechanism has: a noise scale, a vectorized release, its guarantee and its accuracy."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from bayesdp.errors import DataError, check_open_unit, check_positive
from bayesdp.noise import Rng
from bayesdp.privacy import Guarantee, Relation


class Mechanism(ABC):
    """A DP mechanism. `release(values)` treats each entry as one query of the stated sensitivity."""

    noise: ClassVar[str]
    _guarantee: Guarantee

    @property
    def guarantee(self) -> Guarantee:
        """The guarantee of one release of one entry (k entries changed by a neighbour compose)."""
        return self._guarantee

    def _pure(self, epsilon: float, relation: Relation, unit: str) -> None:
        """Validate ε and make the guarantee pure ε-DP for the given neighbours."""
        self.epsilon = check_positive("epsilon", epsilon)
        self._guarantee = Guarantee(self.epsilon, 0.0, relation=relation, unit=unit, mechanism=self)

    @abstractmethod
    def release(self, values: Any, rng: Rng | None = None) -> Any:
        """Noisy values, same shape as `values`; `rng` is for tests only (not private)."""

    def __call__(self, values: Any, rng: Rng | None = None) -> Any:
        return self.release(values, rng)


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
