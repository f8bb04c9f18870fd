"""One exception family for bayesdp: every error a user can cause is a BayesdpError.

An error has two parts. `public_message` says what went wrong in terms that reveal nothing
about the private data: it is all an analyst may see (the SQL front end and the service show
only it). `private_detail`, when set, holds the exact data-dependent facts ("null in 3 rows",
a value a cast error echoed, the engine's own text) for the data holder: answering an analyst
with it would be a free, unaccounted query. `str(exc)` is both, for the data holder running
bayesdp in their own process (the CLI prints it).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any


class BayesdpError(Exception):
    """Base class of every error bayesdp raises on purpose.

    `BayesdpError(public_message, private_detail=...)`: the first argument is safe to show
    an analyst; the keyword holds what only the data holder may see.
    """

    def __init__(self, public_message: str = "", *args: Any, private_detail: str | None = None):
        super().__init__(public_message, *args)
        self.public_message = str(public_message)
        self.private_detail = private_detail

    def __str__(self) -> str:
        if self.private_detail is None:
            return self.public_message
        return f"{self.public_message} (private detail, for the data holder only: {self.private_detail})"


class InvalidParameter(BayesdpError, ValueError):
    """A parameter is outside its allowed range; the message names it, its value and the range."""


class DataError(BayesdpError, ValueError):
    """The data cannot be used as given (wrong type, NaN, missing column, ...)."""


class BudgetExceeded(BayesdpError):
    """A spend would exceed the privacy budget; the message says what remains."""


class BudgetExhausted(BayesdpError):
    """A mechanism with an internal budget (sparse vector, reusable holdout) has no answers left."""


class LedgerError(BayesdpError):
    """A ledger file is missing, corrupt, unwritable, stale, or not a bayesdp ledger."""


class DiskFull(LedgerError):
    """The disk holding a ledger or a service's records is full: nothing was written."""


class ResourceError(BayesdpError, MemoryError):
    """The engine ran out of memory or disk; the message says which limit to raise or where to spill."""


class CuratorWarning(UserWarning):
    """An exact, data-dependent fact (not differentially private) shown to the data holder in
    their own process; it must never be forwarded to an analyst."""


def check_keys(keys: Any, allowed: Any, where: str, error: type[BayesdpError] = InvalidParameter) -> None:
    """Refuse keys of a table (a configuration's, a spec's) outside `allowed`, naming them all."""
    unknown = sorted(set(keys) - set(allowed))
    if unknown:
        raise error(f"unknown key(s) {unknown} in {where}; allowed: {list(allowed)}")


def invalid(name: str, value: Any, allowed: str) -> InvalidParameter:
    """Build the standard message: which parameter, what it was, what is allowed."""
    return InvalidParameter(f"{name}={value!r} is not allowed: {name} must be {allowed}")


def check_finite(name: str, value: Any) -> float:
    """`value` as a float; text and booleans are refused, not converted (epsilon="1" is a mistake)."""
    if isinstance(value, str | bytes | bool):
        raise invalid(name, value, "a finite number (not text or a boolean)")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond a float's range
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


def check_writable(name: str, path: Any) -> Path:
    """An output file path whose directory exists and is writable (checked before any budget
    is spent or any file written)."""
    target = Path(path)
    folder = target.parent
    if target.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK) or \
            (target.exists() and not os.access(target, os.W_OK)):
        raise invalid(name, str(path), "a writable file path in an existing directory (checked "
                      "before any budget is spent)")
    return target
