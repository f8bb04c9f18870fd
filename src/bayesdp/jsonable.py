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


def frame_json(df: pd.DataFrame) -> dict[str, Any]:
    """A table as its column names and rows, each value as `plain` makes it."""
    return {"columns": list(df.columns),
            "rows": [[plain(v) for v in row] for row in df.itertuples(index=False)]}
