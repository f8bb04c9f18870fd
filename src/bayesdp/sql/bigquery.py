"""BigQuery's meaning for BigQuery's clause: per-unit contributions, clamped, and bounds learnt
privately when the query gives none.

In `SELECT WITH DIFFERENTIAL_PRIVACY` (BigQuery, "Differentially private aggregate functions";
ZetaSQL's rewriter) each privacy unit's rows in a group are aggregated first: COUNT counts the
unit's rows (or non-null values), SUM adds them, AVG averages them; that per-unit value is
clamped to `contribution_bounds_per_group` and the release aggregates the clamped values across
units (AVG: the average of the per-unit averages). PERCENTILE_CONT, STDDEV and VARIANCE take up
to 5 of a unit's rows in the group at random (`max_rows_per_group` here), each clamped to
`contribution_bounds_per_row`. `max_groups_contributed` bounds the groups a unit keeps.

Bounds the query does not give are learnt from the data (BigQuery's implicit clamping) by the
approximate bounds of Google's differential privacy library (`ApproxBounds`, cc/algorithms/
approx-bounds.h): a noisy histogram of the values over logarithmic bins (±[2^(i-1), 2^i), i =
1..LOG_BINS, and [-1, 0), [0, 1)), the bounds being the outermost edges of the bins whose noisy
count exceeds a threshold that an empty bin passes with probability at most FALSE_BIN. The
histogram spends half of the aggregate's share of ε, as Google's BoundedSum and BoundedMean give
ApproxBounds half of theirs; it is a release of its own (recorded in the ledger before the
aggregates' release, both labelled), on the same per-unit values, one (unit, group) of each unit
picked at random. When no bin passes, the bounds are (0, 1).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
from sqlglot import exp

from bayesdp import tables
from bayesdp.errors import DataError, check_open_unit, check_positive_int
from bayesdp.expressions import RowExpression, row_expression
from bayesdp.noise import Rng, resolve_rng
from bayesdp.privacy import Guarantee, compose
from bayesdp.tables.aggregates import Aggregate, Clipped, check_bounds
from bayesdp.tables.per_unit import ROWS, UnitCount, UnitMean, UnitSum, fresh_prefix, per_unit
from bayesdp.tables.query import Ledger

# Logarithmic bins on each side of zero: values beyond ±2^LOG_BINS count in the end bins.
LOG_BINS = 40
# The probability that the noise lifts one empty bin over the threshold, for all bins together.
FALSE_BIN = 1e-3
# A learnt aggregate keeps this share of its ε for its value; the rest chooses its bounds.
LEARNT_SHARE = 0.5
EDGES = tuple([-(2.0**i) for i in range(LOG_BINS, -1, -1)] + [0.0] + [2.0**i for i in range(LOG_BINS + 1)])

Kind = Literal["count", "sum", "avg", "percentile", "std"]
_REDUCTION = {"count": "count", "sum": "sum", "avg": "avg"}


@dataclass(frozen=True)
class UnitAggregate:
    """One aggregate of the clause: `kind`, the row expression it reads (None: COUNT(*)), its
    bounds (None: learnt), q for a percentile; `units` for COUNT(DISTINCT unit)."""

    kind: Kind | Literal["units"]
    value: str | None = None
    bounds: tuple[float, float] | None = None
    q: float = 0.5

    @property
    def per_row(self) -> bool:
        return self.kind in ("percentile", "std")


class Refused(DataError):
    """An aggregate of the clause that cannot be computed: `name` is its name in the Query."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


class Make:
    """The aggregates the translator builds in the clause's dialect (the builder's constructors'
    names, so that the translator calls one or the other alike); given bounds are checked here."""

    @staticmethod
    def count(value: str | None = None, bounds: tuple[float, float] | None = None) -> UnitAggregate:
        return UnitAggregate("count", value, _checked(bounds))

    @staticmethod
    def count_units() -> UnitAggregate:
        return UnitAggregate("units")

    @staticmethod
    def sum(value: str, bounds: tuple[float, float] | None) -> UnitAggregate:
        return UnitAggregate("sum", value, _checked(bounds))

    @staticmethod
    def mean(value: str, bounds: tuple[float, float] | None) -> UnitAggregate:
        return UnitAggregate("avg", value, _checked(bounds))

    @staticmethod
    def std(value: str, bounds: tuple[float, float] | None) -> UnitAggregate:
        return UnitAggregate("std", value, _checked(bounds))

    @staticmethod
    def quantile(value: str, q: float, bounds: tuple[float, float] | None) -> UnitAggregate:
        return UnitAggregate("percentile", value, _checked(bounds), check_open_unit("q", q))


def _checked(bounds: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if bounds is None else check_bounds(bounds)


@dataclass(frozen=True)
class Learn:
    """The aggregates whose bounds are learnt: their names and the per-unit table's column each
    reads, the ε share the bounds take, and the rows per unit the per-row values keep."""

    columns: dict[str, str]
    share: float
    max_rows: int

    def epsilon(self, epsilon: float) -> float:
        return epsilon * self.share


def unit_query(table: tables.Table, by: tuple[str, ...], keys: Sequence[tuple[Any, ...]] | None,
               aggregates: Mapping[str, UnitAggregate], max_rows: int | None
               ) -> tuple[tables.Query, Learn | None, int, dict[str, str]]:
    """The builder's Query over the per-unit table (`tables.per_unit`), what its learnt bounds
    need, the rows per unit and group its release keeps (1, or `max_rows` (default 5) when a
    per-row aggregate is asked for), and what the analyst wrote for each per-unit column (its
    name is internal: `written`). Learnt bounds hold a placeholder (0, 1) here."""
    rows = check_positive_int("max_rows_per_group", ROWS if max_rows is None else max_rows)
    rows_cap = rows if any(a.per_row for a in aggregates.values()) else 1
    columns = table.columns
    prefix = fresh_prefix("bdp_v", columns)  # the per-unit columns' names: none of the table's
    values: dict[str, tuple[Any, RowExpression | None]] = {}
    per_row: dict[str, RowExpression] = {}
    built: dict[str, Aggregate] = {}
    learnt: dict[str, str] = {}
    shown: dict[str, str] = {}
    for i, (name, agg) in enumerate(aggregates.items()):
        if agg.kind == "units":
            built[name] = tables.count_units()
            continue
        column = f"{prefix}{i}"
        checked = row_expression(agg.value, columns, role=name) if agg.value is not None else None
        # Checked on the schema: a text value would fail in the engine on some rows only. A
        # column's type is read there; an expression's, from the engine binding it.
        if checked is not None and agg.kind != "count" and \
                not table.engine.is_numeric(agg.value if agg.value in columns else checked):
            raise Refused(name, f"the argument of {name} does not give numbers: CAST it to a number "
                          "or compare it (a true/false expression counts as 1 or 0)")
        if agg.per_row:
            per_row[column] = checked  # type: ignore[assignment]
            shown[column] = _plain(checked)  # type: ignore[arg-type]
        else:
            values[column] = ("rows" if checked is None else _REDUCTION[agg.kind], checked)
            read = "*" if checked is None else _plain(checked)
            shown[column] = f"{agg.kind.upper()}({read}) per {table.privacy_unit}"
        bounds = agg.bounds if agg.bounds is not None else (0.0, 1.0)
        weight = 1.0 if agg.bounds is not None else LEARNT_SHARE
        if agg.bounds is None:
            learnt[name] = column
        built[name] = _aggregate(agg, column, bounds, weight)
    reduced = per_unit(table, by, values, per_row, max_rows=rows_cap)
    grouped = reduced.group_by(by, keys=keys) if by else None
    query = grouped.agg(**built) if grouped is not None else reduced.agg(**built)
    if not learnt:
        return query, None, rows_cap, shown
    # Each aggregate would have 1/W of ε (W: the weights, and partition selection's 1 with
    # private keys): a learnt one gives half of it to its bounds.
    total = len(aggregates) + (1.0 if by and keys is None else 0.0)
    return query, Learn(learnt, (1 - LEARNT_SHARE) * len(learnt) / total, rows_cap), rows_cap, shown


def _plain(e: RowExpression) -> str:
    """A checked expression in the clause's SQL, names quoted only where they must be (as written)."""
    tree = e.tree.copy()
    for name in tree.find_all(exp.Identifier):
        name.set("quoted", exp.to_identifier(name.name).quoted)
    return tree.sql(dialect="bigquery")


def written(aggregate: Aggregate, shown: Mapping[str, str]) -> Aggregate:
    """`aggregate` naming what the analyst wrote (`shown`) in place of a per-unit column's
    internal name, for what they are shown; never released on (its column is no column)."""
    if isinstance(aggregate, Clipped) and aggregate.column in shown:
        return replace(aggregate, column=shown[aggregate.column])
    return aggregate


def as_written(release: tables.Release, shown: Mapping[str, str]) -> tables.Release:
    """`release` with its plan's aggregates `written`: what the analyst is shown of it."""
    steps = {n: replace(s, aggregate=written(s.aggregate, shown)) for n, s in release.plan.steps.items()}
    return replace(release, plan=replace(release.plan, steps=steps))


def _aggregate(agg: UnitAggregate, column: str, bounds: tuple[float, float], weight: float) -> Aggregate:
    if agg.kind == "percentile":
        return replace(tables.quantile(column, agg.q, bounds), weight=weight)
    if agg.kind == "std":
        return replace(tables.std(column, bounds), weight=weight)
    if agg.kind == "avg":
        return UnitMean(column, bounds=tables.mean(column, bounds).bounds, weight=weight)
    checked = tables.sum(column, bounds).bounds
    integral = agg.kind == "count" and all(float(b).is_integer() for b in checked)
    return (UnitCount if integral else UnitSum)(column, bounds=checked, weight=weight)


def _split(learn: Learn, options: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """The bounds' ε and the options of the aggregates' release (ε less the bounds')."""
    epsilon = float(options["epsilon"])
    eps_bounds = learn.epsilon(epsilon)
    return eps_bounds, {**options, "epsilon": epsilon - eps_bounds}


def _bounds_query(query: tables.Query, learn: Learn) -> tables.Query:
    """The bounds' release: a logarithmic histogram of each learnt aggregate's per-unit values."""
    return query.table.agg(**{name: tables.histogram(column, list(EDGES))
                              for name, column in learn.columns.items()})


def learn_bounds(query: tables.Query, learn: Learn, options: dict[str, Any], *, ledger: Ledger | None,
                 rng: Rng | None, label: str) -> tuple[tables.Query, dict[str, Any], Guarantee]:
    """The query with its learnt bounds, the options of its release (ε less the bounds') and
    the bounds' guarantee, after the bounds' own release: the aggregates' release is checked
    (parameters, plan, the engine's binding of its statements) before the bounds spend."""
    eps_bounds, rest = _split(learn, options)
    query.check(**rest)  # every check of the aggregates' release, before the bounds' spend
    gen = resolve_rng(rng)
    with warnings.catch_warnings():  # its dropped rows and noise are the bounds', said below
        warnings.simplefilter("ignore")
        found = _bounds_query(query, learn).release(
            eps_bounds, max_rows_per_group=learn.max_rows, ledger=ledger, rng=gen,
            label=("bounds for " + label)[:500])
    learnt = {}
    for name in learn.columns:
        step = found.plan.steps[name]
        counts = np.asarray(found.estimates[name].value, dtype=float).reshape(-1)
        learnt[name] = approximate_bounds(counts, step.parts["counts"].scale)
    aggregates = {name: replace(cast(Clipped, agg), bounds=learnt[name]) if name in learnt else agg
                  for name, agg in query.aggregates.items()}
    warnings.warn(bounds_warning(learn, options, aggregates), UserWarning, stacklevel=3)
    return replace(query, aggregates=aggregates), rest, found.guarantee


def bounds_warning(learn: Learn, options: Mapping[str, Any], aggregates: Mapping[str, Aggregate]) -> str:
    """What the analyst is told of the bounds learnt for `aggregates` (the release's, learnt
    bounds in place): DP values and public parameters only, so it may be shown to anyone."""
    epsilon = float(options["epsilon"])
    said = ", ".join(f"{n} in [{lo:g}, {hi:g}]" for n in learn.columns
                     for lo, hi in [cast(Clipped, aggregates[n]).bounds])
    return (f"bounds learnt privately (approximate bounds, ε={learn.epsilon(epsilon):.4g} of the query's "
            f"ε={epsilon:g}): {said}; the ledger records both releases, the guarantee is their composition")


# Preview columns that scale with a sum's or count's bounds (its sensitivity, max(|lo|, |hi|)).
_SCALED = ("noise_scale", "half_width", "abs_error", "half_width_max", "abs_error_max")


def preview(query: tables.Query, learn: Learn | None, options: dict[str, Any], *,
            group_size: int | None = None, shown: Mapping[str, str] | None = None
            ) -> tuple[pd.DataFrame, Guarantee]:
    """The expected accuracy of a release and its total guarantee (reads no data, spends nothing):
    `Query.preview` and the plan's guarantee without bounds to learn (`learn` None); per-unit
    columns are described by what the analyst wrote (`shown`, from `unit_query`).

    With learnt bounds the aggregates' release runs at ε less the bounds' share, and their
    accuracy depends on bounds not known before the release: a COUNT's or SUM's noise is
    proportional to max(|lo|, |hi|) of its bounds, so its figures are stated per unit of it
    (`per_bound`); an AVG's, STDDEV's or PERCENTILE_CONT's are unknown (NaN). One row per learnt
    aggregate states the ε its bounds take. `learnt` is True on the rows of learnt aggregates."""
    if learn is None:
        return (_described(query.preview(**options, group_size=group_size), query, shown),
                spends(query, None, options)[0])
    eps_bounds, rest = _split(learn, options)
    df = _described(query.preview(**rest, group_size=group_size), query, shown)
    learnt = df["aggregate"].isin(list(learn.columns))
    linear = learnt & df["aggregate"].map(lambda n: isinstance(query.aggregates[n], UnitSum))
    df["learnt"], df["per_bound"] = learnt, linear
    df.loc[learnt & ~linear, list(_SCALED)] = np.nan
    # Their descriptions name the bounds they will have, not the placeholder's.
    df.loc[learnt, "what"] = df.loc[learnt, "what"].str.replace(
        "bounds=(0, 1)", "bounds learnt at release", regex=False) + np.where(
        linear[learnt], ": figures per unit of max(|low|, |high|) of them", ": accuracy unknown until then")
    bounds = _bounds_query(query, learn).plan(eps_bounds, max_rows_per_group=learn.max_rows)
    rows = pd.DataFrame([{"aggregate": f"{name} (bounds)", "what": f"approximate bounds of {name}: "
                          f"a noisy histogram over {len(EDGES) - 1} logarithmic bins",
                          "epsilon": step.epsilon, "learnt": True, "per_bound": False}
                         for name, step in bounds.steps.items()])
    return pd.concat([df, rows], ignore_index=True), compose(spends(query, learn, options), "basic")


def spends(query: tables.Query, learn: Learn | None, options: dict[str, Any]) -> list[Guarantee]:
    """The guarantees a release of `query` spends, in the order it spends them: the learnt
    bounds' histogram (with `learn`), then the aggregates (their guarantee does not depend on
    the bounds they get). Public: read from the plans alone."""
    plain = {k: v for k, v in options.items() if k != "alpha"}
    if learn is None:
        return [query.plan(**plain).guarantee]
    eps_bounds, rest = _split(learn, plain)
    bounds = _bounds_query(query, learn).plan(eps_bounds, max_rows_per_group=learn.max_rows)
    return [bounds.guarantee, query.plan(**rest).guarantee]


def _described(df: pd.DataFrame, query: tables.Query, shown: Mapping[str, str] | None) -> pd.DataFrame:
    if shown:
        df["what"] = [written(query.aggregates[n], shown).describe() for n in df["aggregate"]]
    return df


def approximate_bounds(counts: np.ndarray, scale: float, false_bin: float = FALSE_BIN) -> tuple[float, float]:
    """The outermost edges of the bins of `EDGES` whose noisy count exceeds scale·ln(B/false_bin)
    (B bins: one-sided Laplace tails, union bound), else (0, 1) (Google DP, ApproxBounds)."""
    threshold = scale * math.log(counts.size / false_bin)
    passed = np.flatnonzero(counts > threshold)
    if not passed.size:
        return 0.0, 1.0
    return EDGES[passed[0]], EDGES[passed[-1] + 1]


__all__ = ["EDGES", "Learn", "Make", "UnitAggregate", "approximate_bounds", "as_written", "bounds_warning",
           "learn_bounds", "preview", "spends", "unit_query", "written"]
