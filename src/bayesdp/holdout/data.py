"""Holdout inputs (numpy, pandas, Polars, Arrow) and the evaluation of [0,1]-valued queries on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesdp.errors import DataError, InvalidParameter, invalid

Query = Callable[[Any], Any]


def row_count(data: Any, name: str) -> int:
    """Number of records of a numpy array, pandas/Polars frame or series, or Arrow table/array."""
    if isinstance(data, bool | int | float | str | bytes) or data is None:
        raise invalid(name, data, "a numpy array, pandas/Polars DataFrame or Series, or Arrow table")
    if isinstance(data, np.ndarray) and data.ndim == 0:
        raise invalid(name, data, "an array with one record per row, not a scalar")
    try:
        n = len(data)
    except TypeError:
        raise invalid(
            name, type(data).__name__, "a numpy array, pandas/Polars DataFrame or Series, or Arrow table"
        ) from None
    if n < 1:
        raise DataError(f"{name} has no records: a holdout query needs at least one row")
    return int(n)


@dataclass(frozen=True)
class Evaluated:
    """Means of one or more queries on one set, and how many per-record values were clipped."""

    means: np.ndarray
    clipped: int


def evaluate(f: Query, data: Any, n: int, name: str, clip: bool) -> Evaluated:
    """Run a vectorized query f on all records: f(data) gives one value per record, shape (n,) or (n, q)."""
    if not callable(f):
        raise invalid("query", f, "a callable mapping the records to values in [0, 1]")
    try:
        values = np.asarray(_to_numpy(f(data)))
    except (TypeError, ValueError) as exc:
        raise DataError(f"the query's result on {name} is not numeric", private_detail=str(exc)) from None
    if values.ndim not in (1, 2) or values.shape[0] != n:
        raise DataError(
            f"the query returned shape {values.shape} on {name}: it must give one value per record, "
            f"shape ({n},) for one query or ({n}, q) for q queries (records are passed as a batch)"
        )
    if values.dtype == np.bool_:
        return Evaluated(values.mean(axis=0, dtype=np.float64).reshape(-1), 0)
    if not (np.issubdtype(values.dtype, np.number)):
        raise DataError(f"the query's result on {name} has dtype {values.dtype}: it must be numeric")
    if np.issubdtype(values.dtype, np.floating) and not np.isfinite(values).all():
        bad = int(np.count_nonzero(~np.isfinite(values)))
        raise DataError(f"the query gave non-finite values (NaN or inf) on {name}",
                        private_detail=f"{bad} non-finite value(s)")
    clipped = 0
    if values.size and (values.min() < 0 or values.max() > 1):
        outside = int(np.count_nonzero((values < 0) | (values > 1)))
        if not clip:
            raise DataError(
                f"the query gave values outside [0, 1] on {name}: a statistical query maps each "
                "record into [0, 1]; pass clip=True to clip them (the count is reported)",
                private_detail=f"{outside} value(s), min {values.min()!r}, max {values.max()!r}")
        values = np.clip(values, 0.0, 1.0)
        clipped = outside
    return Evaluated(values.mean(axis=0, dtype=np.float64).reshape(-1), clipped)


def _to_numpy(result: Any) -> Any:
    """Polars and Arrow results expose to_numpy(); numpy and pandas convert directly."""
    if hasattr(result, "to_numpy") and not isinstance(result, np.ndarray):
        return result.to_numpy()
    return result


def check_means(name: str, values: Any) -> np.ndarray:
    """Means supplied by a caller: finite and within [0, 1], as a 1-D float array."""
    try:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise invalid(name, values, "a number or array of numbers in [0, 1]") from None
    if arr.size and (not np.isfinite(arr).all() or arr.min() < 0 or arr.max() > 1):
        bad = arr[~(np.isfinite(arr) & (arr >= 0) & (arr <= 1))][0]
        # A holdout mean is private: its value is only the data holder's detail.
        raise InvalidParameter(f"{name} is not allowed: it must be a mean of a [0, 1]-valued "
                               "query, in [0, 1]", private_detail=f"{name}={float(bad)!r}")
    return arr
