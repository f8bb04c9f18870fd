"""One exception family for bayesdp: every error a user can cause is a BayesdpError."""

from __future__ import annotations

import math
from typing import Any


class BayesdpError(Exception):
    """Base class of every error bayesdp raises on purpose."""


class InvalidParameter(BayesdpError, ValueError):
    """A parameter is outside its allowed range; the message names it, its value and the range."""


class DataError(BayesdpError, ValueError):
    """The data cannot be used as given (wrong type, NaN, missing column, ...)."""


class BudgetExceeded(BayesdpError):
    """A spend would exceed the privacy budget; the message says what remains."""


class BudgetExhausted(BayesdpError):
    """A mechanism with an internal budget (sparse vector, reusable holdout) has no answers left."""


class LedgerError(BayesdpError):
    """A ledger file is missing, corrupt, or not a bayesdp ledger."""


def invalid(name: str, value: Any, allowed: str) -> InvalidParameter:
    """Build the standard message: which parameter, what it was, what is allowed."""
    return InvalidParameter(f"{name}={value!r} is not allowed: {name} must be {allowed}")


def check_finite(name: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise invalid(name, value, "a finite number") from None
    if not math.isfinite(x):
        raise invalid(name, value, "a finite number")
    return x


def check_positive(name: str, value: Any) -> float:
    x = check_finite(name, value)
    if x <= 0:
        raise invalid(name, value, "a finite number > 0")
    return x


def check_nonnegative(name: str, value: Any) -> float:
    x = check_finite(name, value)
    if x < 0:
        raise invalid(name, value, "a finite number >= 0")
    return x


def check_open_unit(name: str, value: Any) -> float:
    """A probability strictly between 0 and 1."""
    x = check_finite(name, value)
    if not 0 < x < 1:
        raise invalid(name, value, "in the open interval (0, 1)")
    return x


def check_delta(name: str, value: Any) -> float:
    x = check_finite(name, value)
    if not 0 <= x < 1:
        raise invalid(name, value, "in [0, 1)")
    return x


def check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool | str):
        raise invalid(name, value, "a positive integer")
    try:
        as_int = int(value)
    except (TypeError, ValueError, OverflowError):
        raise invalid(name, value, "a positive integer") from None
    if as_int != value or as_int < 1:
        raise invalid(name, value, "a positive integer")
    return as_int
