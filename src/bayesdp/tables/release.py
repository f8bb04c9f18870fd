"""The Release: released groups with values and intervals, the guarantee, the plan, diagnostics."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesdp.privacy import Guarantee
from bayesdp.tables.aggregates import triple
from bayesdp.tables.engines.base import Diagnostics
from bayesdp.tables.estimate import Estimate
from bayesdp.tables.plan import Plan

if TYPE_CHECKING:
    import polars
    import pyarrow


@dataclass(frozen=True)
class Release:
    """One private release: one row per released group.

    Each aggregate NAME gives columns NAME, NAME_low, NAME_high (the interval at level 1 - α,
    covering the noise, not the bias of clipping and bounding). Histograms give one column
    triple per bin, NAME[lo, hi). `diagnostics` holds exact counts of dropped rows, clipped
    values and nulls: they are data-dependent and not differentially private, so only
    `curator_notes()` and `bayesdp.report.write_curator_report` show them, never the
    publishable outputs (`to_pandas`, `caveats`, `explain`, `write_release_report`). `label`
    and `dataset` name the release and its table; `created` is when it ran (UTC). A release
    seen by someone other than the data holder (`public()`, or one rebuilt from a service's
    answer) has `diagnostics=None`.
    `derived` describes columns computed from released values (post-processing, e.g. by SQL),
    which have no step in the plan, and `coverages` the level of those whose interval covers
    with another probability than 1 - α (e.g. ≥ 1 - 2α for SUM(a) / COUNT(*), from two
    intervals); `columns` orders the output (default: keys, then aggregates).
    """

    keys: pd.DataFrame
    _: KW_ONLY
    estimates: dict[str, Estimate]
    plan: Plan
    alpha: float
    diagnostics: Diagnostics | None
    public_keys: bool
    derived: dict[str, str] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    coverages: dict[str, float] = field(default_factory=dict)
    label: str | None = None
    dataset: str | None = None
    created: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def guarantee(self) -> Guarantee:
        return self.plan.guarantee

    def to_pandas(self) -> pd.DataFrame:
        cols: dict[str, Any] = {c: self.keys[c].to_numpy() for c in self.keys.columns}
        for name, est in self.estimates.items():
            step = self.plan.steps.get(name) if name not in self.derived else None
            cols.update(step.aggregate.columns(name, est) if step is not None else triple(name, est))
        if self.columns:
            suffixes = ("", "_low", "_high")
            cols = {name + s: cols[name + s] for name in self.columns
                    for s in (("",) if name in self.keys.columns else suffixes)}
        index = pd.RangeIndex(len(self.keys))
        # The float columns as one block: pandas spends about 20 µs on each column it is given
        # one by one, and a histogram has three per bin.
        floats = [c for c, a in cols.items() if isinstance(a, np.ndarray) and a.dtype == np.float64]
        block = pd.DataFrame(np.column_stack([cols[c] for c in floats]) if floats else None,
                             columns=floats, index=index)
        kept = set(floats)
        for i, c in enumerate(cols):  # the others (keys that are not floats) in their places
            if c not in kept:
                block.insert(i, c, cols[c])
        return block

    def describe(self, name: str) -> str:
        """What the released column `name` is: its aggregate, or how it was derived."""
        return self.derived.get(name) or self.plan.steps[name].aggregate.describe()

    def coverage(self, name: str) -> float:
        """The probability that the interval of the released column `name` covers (at least)."""
        return self.coverages.get(name, 1 - self.alpha)

    def coverage_label(self) -> str:
        """The intervals' coverage in words: 1 - α, and each column whose own is less."""
        others = [f"{n} ≥ {c:.0%}" for n, c in self.coverages.items() if c != 1 - self.alpha]
        return f"{1 - self.alpha:.0%} intervals" + (f" ({', '.join(others)})" if others else "")

    def to_arrow(self) -> pyarrow.Table:
        import pyarrow as pa

        return pa.Table.from_pandas(self.to_pandas(), preserve_index=False)

    def to_polars(self) -> polars.DataFrame:
        import polars as pl

        return pl.from_arrow(self.to_arrow())  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self.keys)

    def public(self) -> Release:
        """The same release without its exact diagnostics: what may be shown to an analyst."""
        return replace(self, diagnostics=None)

    def caveats(self) -> list[str]:
        """What the numbers do and do not cover, from public parameters only (publishable)."""
        plan = self.plan
        others = [f"{n}'s at least {c:.0%}" for n, c in self.coverages.items() if c != 1 - self.alpha]
        out = [f"Intervals have {1 - self.alpha:.0%} coverage of the noise per value"
               + (f" ({', '.join(others)}: computed from several intervals)" if others else "")
               + "; they do not cover the bias from clipping and contribution bounding."]
        bounded = [s for s in plan.steps.values() if s.aggregate.reads() is not None]
        out.append(f"Each {plan.unit} counts with at most {plan.max_groups} group(s) and "
                   f"{plan.max_rows} row(s) per group (rows beyond are dropped)"
                   + ("; values are clipped to the stated bounds." if bounded else "."))
        out += self._whole_bounds()
        if self.public_keys:
            out.append("Rows whose key is not among the public keys are left out.")
        elif plan.selection is not None and not len(self):
            out.append(f"No group was released: {selection_needs(plan)}.")
        return out

    def _whole_bounds(self) -> list[str]:
        """A note per aggregate whose intervals span its whole bounds in some groups (from the
        released values only): they say nothing there."""
        out = []
        for name, est in self.estimates.items():
            step = self.plan.steps.get(name) if name not in self.derived else None
            lo, hi = step.aggregate.value_range() if step is not None else (-np.inf, np.inf)
            if not (np.isfinite(lo) and np.isfinite(hi)) or not est.low.size:
                continue
            whole = int(np.count_nonzero((est.low <= lo) & (est.high >= hi)))
            if whole:
                out.append(f"{whole} of {est.low.size} intervals of {name} are the whole bounds "
                           f"[{lo:g}, {hi:g}]: those groups are too small for the noise at this "
                           "epsilon (raise it, bound fewer groups per unit, or group more coarsely).")
        return out

    def curator_notes(self) -> list[str]:
        """Exact, data-dependent counts of what bounding dropped and clipped (not differentially
        private): for the data holder only, never for publication."""
        d = self.diagnostics
        if d is None:
            return ["The exact counts of dropped, clipped and null values are data-dependent "
                    "and not private: only the data holder sees them."]
        out = [f"Bounding kept {d.kept_rows:,} of {d.rows:,} rows "
               f"({d.dropped_by_bounding:,} dropped by the contribution bounds"
               + (f", {d.dropped_by_keys:,} outside the public keys" if self.public_keys else "")
               + (f", {d.dropped_by_filter:,} removed by a filter after bounding"
                  if d.dropped_by_filter else "")
               + ")."]
        clipped = {}
        for spec, n in d.clipped.items():
            lo, hi = (spec.edges[0], spec.edges[-1]) if hasattr(spec, "edges") else (spec.lo, spec.hi)
            clipped[(spec.column, lo, hi)] = n
        for (col, lo, hi), n in clipped.items():
            if n:
                out.append(f"{n:,} kept values of {col!r} were clipped to [{lo:g}, {hi:g}].")
        for col, n in d.nulls.items():
            if n:
                out.append(f"{n:,} kept rows have a null {col!r} (left out of its aggregates).")
        for col, n in d.infinite.items():
            if n:
                out.append(f"{n:,} kept values of {col!r} were infinite (clipped into the bounds).")
        if d.null_units:
            out.append(f"{d.null_units:,} rows have a null privacy unit (they belong to no unit: dropped).")
        return out

    def explain(self, n: int | None = None) -> str:
        """The guarantee in plain words (for n units if given), the plan and the caveats
        (publishable: no exact counts; see `curator_notes`)."""
        parts = [self.guarantee.explain(n), "", "How the budget was spent:", self.plan.describe(),
                 "", *self.caveats()]
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"Release({len(self)} groups, {self.guarantee})"



def selection_needs(plan: Plan) -> str:
    """How many units a group needs for partition selection to release it (public parameters)."""
    assert plan.selection is not None
    half, most = plan.selection.threshold(), plan.selection.threshold(0.95)
    return (f"partition selection releases a group with probability 1/2 when it has about "
            f"{half:,} privacy units (each one {plan.unit}), and 95% at {most:,}")
