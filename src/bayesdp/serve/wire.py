"""A Release as JSON and back: what the service sends and what the client rebuilds.

The JSON carries the released values and intervals, what the analyst asked (a spec or SQL), the
release options, the derived columns' descriptions, the label and time; the plan (budget split,
mechanisms, guarantee) is rebuilt from its public parameters by the same `make_plan` the release
used. No exact diagnostic is ever part of it.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from bayesdp.jsonable import guarantee_json, rows
from bayesdp.privacy import Guarantee
from bayesdp.tables import Release
from bayesdp.tables.aggregates import Aggregate
from bayesdp.tables.estimate import Estimate
from bayesdp.tables.per_unit import UnitCount, UnitMean, UnitSum
from bayesdp.tables.plan import Plan, make_plan
from bayesdp.tables.spec import aggregate

# A per-unit table's aggregates (BigQuery's clause) are no spec kinds (on rows they would
# understate a unit's influence): the plan names their class, to rebuild their sensitivity.
_PER_UNIT = {c.__name__: c for c in (UnitCount, UnitSum, UnitMean)}


def _array(a: np.ndarray) -> list[Any]:
    """A float array as (nested) lists, NaN and infinities as None, in one pass."""
    a = np.asarray(a, dtype=np.float64)
    out = a.astype(object)
    out[~np.isfinite(a)] = None
    return out.tolist()  # type: ignore[no-any-return]


def guarantee_from_json(g: dict[str, Any]) -> Guarantee:
    return Guarantee(g["epsilon"], delta=g["delta"], relation=g["relation"], unit=g["unit"], rho=g["rho"])


def plan_json(plan: Plan, selection_weight: float) -> dict[str, Any]:
    """The public parameters `make_plan` rebuilds a release's plan from."""
    return {"aggregates": {n: _aggregate_json(s.aggregate) for n, s in plan.steps.items()},
            "epsilon": plan.epsilon, "delta": plan.delta, "noise": plan.noise, "unit": plan.unit,
            "max_groups": plan.max_groups, "max_rows": plan.max_rows,
            "private_keys": plan.selection is not None, "selection_weight": selection_weight}


def plan_from_json(doc: dict[str, Any]) -> Plan:
    aggs = {n: _aggregate(n, item) for n, item in doc["aggregates"].items()}
    return make_plan(aggs, **{k: v for k, v in doc.items() if k != "aggregates"})


def _aggregate_json(agg: Aggregate) -> dict[str, Any]:
    kind = type(agg).__name__
    return {**agg.spec(), "per_unit": kind} if _PER_UNIT.get(kind) is type(agg) else agg.spec()


def _aggregate(name: str, item: dict[str, Any]) -> Aggregate:
    rest = {k: v for k, v in item.items() if k != "per_unit"}
    agg = aggregate(name, rest)
    if "per_unit" not in item:
        return agg
    return _PER_UNIT[item["per_unit"]](**{f.name: getattr(agg, f.name) for f in fields(agg) if f.init})


def release_json(release: Release, request: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """The public part of a release: keys, estimates, the table, plan, guarantee and explanation;
    `request` is what the analyst asked (a spec or SQL), `options` the release options used."""
    public = release.public()
    table = public.to_pandas()
    return {
        "spec": request,
        "options": options,
        "plan": plan_json(public.plan, options.get("selection_weight", 1.0)),
        "alpha": public.alpha,
        "public_keys": public.public_keys,
        "keys": {"columns": list(public.keys.columns),
                 "data": rows(public.keys)},
        "estimates": {n: {"value": _array(e.value), "low": _array(e.low), "high": _array(e.high)}
                      for n, e in public.estimates.items()},
        "derived": dict(public.derived),
        "coverages": dict(public.coverages),
        "output_columns": list(public.columns),
        "label": public.label,
        "dataset": public.dataset,
        "created": public.created.timestamp(),
        "columns": table.columns.tolist(),
        "rows": rows(table),
        "guarantee": guarantee_json(public.guarantee),
        "explain": public.explain(),
    }


def release_from_json(doc: dict[str, Any]) -> Release:
    """Rebuild the Release (without diagnostics) from `release_json`'s output."""
    keys = pd.DataFrame(doc["keys"]["data"], columns=doc["keys"]["columns"])
    if not keys.columns.size:
        keys = pd.DataFrame(index=pd.RangeIndex(len(doc["rows"])))
    estimates = {n: Estimate(*(np.array(e[k], dtype=np.float64) for k in ("value", "low", "high")))
                 for n, e in doc["estimates"].items()}
    return Release(keys, estimates=estimates, plan=plan_from_json(doc["plan"]), alpha=float(doc["alpha"]),
                   diagnostics=None, public_keys=bool(doc["public_keys"]), derived=dict(doc["derived"]),
                   coverages=dict(doc["coverages"]), columns=tuple(doc["output_columns"]),
                   label=doc["label"], dataset=doc["dataset"],
                   created=datetime.fromtimestamp(doc["created"], UTC))
