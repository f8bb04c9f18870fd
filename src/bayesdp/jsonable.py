"""JSON values of what the library releases, shared by the command line and the service."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from bayesdp.privacy import Guarantee


def plain(x: Any) -> Any:
    """A JSON-safe Python value: numpy scalars unwrapped, NaN and infinities as None."""
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def guarantee_json(g: Guarantee) -> dict[str, Any]:
    return {"epsilon": g.epsilon, "delta": g.delta, "rho": g.rho, "relation": g.relation,
            "unit": g.unit, "text": str(g)}


def rows(df: pd.DataFrame) -> list[list[Any]]:
    """A table's rows as lists, each value as `plain` makes it, converted block by block
    (itertuples reads a frame of more than 254 columns column by column: 6 s for a 10,000-bin
    histogram's 30,000)."""
    return [[plain(v) for v in row] for row in df.to_numpy(dtype=object).tolist()]


def frame_json(df: pd.DataFrame) -> dict[str, Any]:
    """A table as its column names and rows (`rows`)."""
    return {"columns": list(df.columns), "rows": rows(df)}
