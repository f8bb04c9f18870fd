"""A Release as JSON and back: what the service sends and what the client rebuilds.

The JSON carries the released values and intervals, the spec and the release options; the
plan (budget split, mechanisms, guarantee) is rebuilt from those public parameters by the same
`make_plan` the release used. No exact diagnostic is ever part of it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from bayesdp.commands.release import aggregate
from bayesdp.privacy import Guarantee
from bayesdp.tables import Release
from bayesdp.tables.estimate import Estimate
from bayesdp.tables.plan import Plan, make_plan


def plain(x: Any) -> Any:
    """A JSON-safe Python value: numpy scalars unwrapped, NaN and infinities as None."""
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _array(a: np.ndarray) -> list[Any]:
    return [plain(v) if np.ndim(v) == 0 else _array(v) for v in np.asarray(a, dtype=np.float64)]


def guarantee_json(g: Guarantee) -> dict[str, Any]:
    return {"epsilon": g.epsilon, "delta": g.delta, "rho": g.rho, "relation": g.relation,
            "unit": g.unit, "text": str(g)}


def plan_for(spec: dict[str, Any], options: dict[str, Any], unit: str) -> Plan:
    """The plan of a release from its spec and options (public parameters only)."""
    aggs = {n: aggregate(n, item) for n, item in spec["aggregates"].items()}
    grouped = bool(spec.get("group_by"))
    return make_plan(aggs, epsilon=options["epsilon"], delta=options.get("delta", 0.0),
                     noise=options.get("noise", "laplace"), unit=unit,
                     max_groups=options.get("max_groups_per_unit", 1) if grouped else 1,
                     max_rows=options.get("max_rows_per_group", 1),
                     private_keys=grouped and spec.get("keys") is None,
                     selection_weight=options.get("selection_weight", 1.0))


def release_json(release: Release, spec: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """The public part of a release: keys, estimates, the table, guarantee and explanation."""
    public = release.public()
    table = public.to_pandas()
    return {
        "spec": spec,
        "options": options,
        "alpha": public.alpha,
        "public_keys": public.public_keys,
        "keys": {"columns": list(public.keys.columns),
                 "data": [[plain(v) for v in row] for row in public.keys.itertuples(index=False)]},
        "estimates": {n: {"value": _array(e.value), "low": _array(e.low), "high": _array(e.high)}
                      for n, e in public.estimates.items()},
        "columns": list(table.columns),
        "rows": [[plain(v) for v in row] for row in table.itertuples(index=False)],
        "guarantee": guarantee_json(public.guarantee),
        "explain": public.explain(),
    }


def release_from_json(doc: dict[str, Any]) -> Release:
    """Rebuild the Release (without diagnostics) from `release_json`'s output."""
    spec, options = doc["spec"], doc["options"]
    plan = plan_for(spec, options, doc["guarantee"]["unit"])
    keys = pd.DataFrame(doc["keys"]["data"], columns=doc["keys"]["columns"])
    if not keys.columns.size:
        keys = pd.DataFrame(index=pd.RangeIndex(len(doc["rows"])))
    estimates = {n: Estimate(*(np.array(e[k], dtype=np.float64) for k in ("value", "low", "high")))
                 for n, e in doc["estimates"].items()}
    return Release(keys, estimates=estimates, plan=plan, alpha=float(doc["alpha"]), diagnostics=None,
                   public_keys=bool(doc["public_keys"]))
