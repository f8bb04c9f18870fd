"""Turning what the caller hands in into a sampler (input, size, rng) -> one output per row."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from bayesdp.errors import DataError, check_positive, invalid
from bayesdp.noise import Rng

Sampler = Callable[[Any, int, Rng], np.ndarray]


class Reachability(Protocol):
    """A sampler whose inverse is known: which outputs it can produce from a given input."""

    @property
    def description(self) -> str: ...

    def reachable(self, values: np.ndarray, loc: float) -> np.ndarray: ...


def as_sampler(mechanism: Any) -> Sampler:
    """A callable (input, size, rng) as is; a mechanism object with `release` runs on np.full(size, input)."""
    release = getattr(mechanism, "release", None)
    if callable(release):

        def sample(x: Any, size: int, rng: Rng) -> np.ndarray:
            if np.ndim(x) != 0:
                raise invalid(
                    "input",
                    x,
                    "a scalar for a mechanism object (each run releases it once); wrap a "
                    "mechanism with vector input in a callable (input, size, rng) -> outputs",
                )
            return np.asarray(release(np.full(size, x), rng=rng))

        return sample
    if callable(mechanism):
        given: Sampler = mechanism
        return given
    raise invalid(
        "mechanism",
        mechanism,
        "a callable (input, size, rng) -> array of outputs, or an object with release(values, rng=...)",
    )


def draw(sampler: Sampler, x: Any, size: int, rng: Rng) -> np.ndarray:
    """`size` outputs on input x as an array of shape (size,) or (size, k)."""
    out = np.asarray(sampler(x, size, rng))
    if out.ndim == 0 or out.shape[0] != size:
        raise DataError(
            f"the mechanism returned shape {out.shape} on input {x!r}; it must return one "
            f"output per run, i.e. an array whose first axis has length size={size}"
        )
    if out.dtype == object:  # e.g. None for a refused answer: numbers with NaN for None
        try:
            out = np.where(out == None, np.nan, out).astype(np.float64)  # noqa: E711
        except (TypeError, ValueError):
            raise DataError(
                "the mechanism's outputs must be numbers (None allowed), booleans or strings"
            ) from None
    if out.ndim > 2:
        out = out.reshape(size, -1)
    if out.ndim == 2 and out.shape[1] == 1:
        out = out[:, 0]
    return out


def declared_grid(mechanism: Any, grid: float | None) -> float | None:
    """The lattice every output promises to lie on: the `grid` argument, else `mechanism.grid`."""
    value = grid if grid is not None else getattr(mechanism, "grid", None)
    return None if value is None else check_positive("grid", value)


def declared_reachability(mechanism: Any, reachable: Reachability | None) -> Reachability | None:
    """The known inverse of the sampler: the `reachable` argument, else `mechanism.reachable`."""
    value = reachable if reachable is not None else getattr(mechanism, "reachable", None)
    if value is not None and not callable(getattr(value, "reachable", None)):
        raise invalid("reachable", value, "an object with reachable(values, input) -> booleans")
    return value
