"""The SELECT list, HAVING, ORDER BY and LIMIT applied to released values: post-processing,
which costs no privacy (Dwork 2006; Wasserman & Zhou 2010, Lemma 2.6).

A derived value carries an interval by interval arithmetic over its inputs' intervals (Moore
1966, Interval Analysis, Ch. 2): +, -, ×, ÷ and unary minus are exact interval operations, ROUND
and ABS map an interval through a monotone (ABS: piecewise monotone) function, VARIANCE squares a
released standard deviation (monotone on [0, ∞)). When a value combines k released aggregates,
its interval holds the derived exact value whenever all k intervals hold theirs: with
probability at least 1 - k·α (union bound). A divisor whose interval contains 0 gives the
interval (-∞, ∞). HAVING and ORDER BY read the released values (never the intervals), LIMIT and
OFFSET count the rows that remain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import numpy as np
import pandas as pd
from sqlglot import exp

from bayesdp.expressions import resolve_column
from bayesdp.sql.translate import Translation, _aggregate_calls, _is_call
from bayesdp.tables import Release
from bayesdp.tables.estimate import Estimate

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    exp.GT: np.greater, exp.GTE: np.greater_equal, exp.LT: np.less, exp.LTE: np.less_equal,
    exp.EQ: np.equal, exp.NEQ: np.not_equal}


def rehearse(t: Translation) -> None:
    """Post-process one made-up row before anything is spent: a query whose SELECT list, HAVING
    or ORDER BY would be refused fails before its release, not after the budget is gone."""
    engine = t.query.table.engine
    keys = pd.DataFrame({c: [0.0] if engine.is_numeric(c) else ["a"] for c in t.query.by},
                        index=pd.RangeIndex(1))
    one = Estimate(np.ones(1), np.ones(1), np.ones(1))
    _apply(t, keys, dict.fromkeys(t.query.aggregates, one), 0.05)


def finish(t: Translation, release: Release) -> Release:
    """The release the query asks for: its SELECT list, then HAVING, ORDER BY, OFFSET and LIMIT."""
    frame, values, derived, coverages = _apply(t, release.keys, release.estimates, release.alpha)
    return replace(release, keys=frame, estimates=values, derived=derived, coverages=coverages,
                   columns=tuple(o.name for o in t.outputs))


def _apply(t: Translation, released_keys: pd.DataFrame, estimates: dict[str, Estimate], alpha: float
           ) -> tuple[pd.DataFrame, dict[str, Estimate], dict[str, str], dict[str, float]]:
    ev = _Evaluator(t, released_keys, estimates)
    keys: dict[str, np.ndarray] = {}
    values: dict[str, Estimate] = {}
    derived: dict[str, str] = {}
    coverages: dict[str, float] = {}
    for out in t.outputs:
        if out.key is not None:
            keys[out.name] = released_keys[out.key].to_numpy()
            continue
        values[out.name] = ev.value(out.node)
        if t.aggregates.get(out.node) != out.name or out.node in t.squared or not _is_call(out.node):
            k = len(set(_aggregate_calls(out.node)))
            coverages[out.name] = 1 - k * alpha
            derived[out.name] = (f"{t.call(out.node)}, computed from released values; its interval "
                                 f"covers with probability ≥ {1 - k * alpha:.0%}")
    ev.outputs = {**{n: Estimate(v, v, v) for n, v in keys.items()}, **values}
    rows = np.arange(ev.n)
    if t.having is not None:
        rows = rows[np.asarray(ev.condition(t.having), dtype=bool)]
    for ordered in reversed(t.order):
        by = ev.sort_key(ordered.this)[rows]
        nulls: Literal["first", "last"] = "first" if ordered.args.get("nulls_first") else "last"
        try:
            ranked = pd.Series(by).sort_values(ascending=not ordered.args.get("desc"), kind="stable",
                                               na_position=nulls)
        except TypeError:
            raise t.refuse("ORDER BY needs values of one type", ordered) from None
        rows = rows[ranked.index.to_numpy()]
    rows = rows[t.offset:] if t.limit is None else rows[t.offset:t.offset + t.limit]
    frame = pd.DataFrame({n: v[rows] for n, v in keys.items()}, index=pd.RangeIndex(len(rows)))
    kept = {n: Estimate(e.value[rows], e.low[rows], e.high[rows]) for n, e in values.items()}
    return frame, kept, derived, coverages


class _Evaluator:
    def __init__(self, t: Translation, keys: pd.DataFrame, estimates: dict[str, Estimate]) -> None:
        self.t, self.keys, self.estimates, self.n = t, keys, estimates, len(keys)
        self.outputs: dict[str, Estimate] = {}

    def refuse(self, what: str, node: exp.Expr) -> Exception:
        return self.t.refuse(f"{what} on released values is not supported (supported: + - * /, ROUND, "
                      "ABS, comparisons, AND, OR, NOT, IS NULL, IN)", node)

    def const(self, value: Any) -> Estimate:
        v = np.full(self.n, value, dtype=object if isinstance(value, str) else np.float64)
        return Estimate(v, v, v)

    def value(self, node: exp.Expr) -> Estimate:
        """A released value with its interval."""
        if _is_call(node):
            est = self.estimates[self.t.aggregates[node]]
            if node in self.t.squared:  # a standard deviation is ≥ 0: squaring is monotone
                return Estimate(est.value ** 2, est.low ** 2, est.high ** 2)
            return est
        if isinstance(node, exp.Paren):
            return self.value(node.this)
        if isinstance(node, exp.Column):
            return self.column(node)
        if isinstance(node, exp.Literal):
            return self.const(node.this if node.is_string else float(node.this))
        if isinstance(node, exp.Null):
            return self.const(np.nan)
        if isinstance(node, exp.Neg):
            a = self.value(node.this)
            return Estimate(-a.value, -a.high, -a.low)
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
            try:
                return self.arithmetic(node)
            except (TypeError, ValueError, np.exceptions.DTypePromotionError):
                raise self.t.refuse("arithmetic needs numbers on both sides", node) from None
        if isinstance(node, exp.Round):
            a = self.value(node.this)
            d = node.args.get("decimals")
            digits = int(d.this) if isinstance(d, exp.Literal) and not d.is_string else 0
            if d is not None and not isinstance(d, exp.Literal):
                raise self.refuse("ROUND with non-literal digits", node)
            return Estimate(*(np.round(x.astype(np.float64), digits) for x in (a.value, a.low, a.high)))
        if isinstance(node, exp.Abs):
            a = self.value(node.this)
            straddle = (a.low <= 0) & (a.high >= 0)
            low = np.where(straddle, 0.0, np.minimum(np.abs(a.low), np.abs(a.high)))
            return Estimate(np.abs(a.value), low, np.maximum(np.abs(a.low), np.abs(a.high)))
        raise self.refuse(type(node).__name__.upper(), node)

    def column(self, node: exp.Column) -> Estimate:
        if node.name in self.outputs and not node.table:
            return self.outputs[node.name]
        key = resolve_column(node.name, list(self.keys.columns), "a group key")  # as GROUP BY resolved it
        if key is not None:
            v = self.keys[key].to_numpy()
            return Estimate(v, v, v)
        raise self.t.refuse(f"{node.name!r} is neither a group key nor a name in the SELECT list", node)

    def arithmetic(self, node: exp.Expr) -> Estimate:
        """Interval arithmetic (Moore 1966, Ch. 2)."""
        a, b = self.value(node.this), self.value(node.expression)
        with np.errstate(divide="ignore", invalid="ignore"):
            if isinstance(node, exp.Add):
                return Estimate(a.value + b.value, a.low + b.low, a.high + b.high)
            if isinstance(node, exp.Sub):
                return Estimate(a.value - b.value, a.low - b.high, a.high - b.low)
            if isinstance(node, exp.Mul):
                ends = np.stack([a.low * b.low, a.low * b.high, a.high * b.low, a.high * b.high])
                return Estimate(a.value * b.value, ends.min(axis=0), ends.max(axis=0))
            value = np.where(b.value == 0, np.nan, a.value / np.where(b.value == 0, 1.0, b.value))
            ends = np.stack([a.low / b.low, a.low / b.high, a.high / b.low, a.high / b.high])
            zero = (b.low <= 0) & (b.high >= 0)
            return Estimate(value, np.where(zero, -np.inf, ends.min(axis=0)),
                            np.where(zero, np.inf, ends.max(axis=0)))

    def condition(self, node: exp.Expr) -> np.ndarray:
        """A HAVING condition on the released values."""
        if isinstance(node, exp.Paren):
            return self.condition(node.this)
        if isinstance(node, exp.And):
            return np.asarray(self.condition(node.this) & self.condition(node.expression))
        if isinstance(node, exp.Or):
            return np.asarray(self.condition(node.this) | self.condition(node.expression))
        if isinstance(node, exp.Not):
            return np.asarray(~self.condition(node.this))
        if isinstance(node, exp.Boolean):
            return np.full(self.n, bool(node.this))
        if type(node) in _COMPARE:
            a, b = self.value(node.this).value, self.value(node.expression).value
            try:
                return np.asarray(_COMPARE[type(node)](a, b), dtype=bool)
            except (TypeError, ValueError, np.exceptions.DTypePromotionError):
                raise self.t.refuse("the two sides cannot be compared (a number and text?)", node) from None
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return np.asarray(pd.isna(self.value(node.this).value), dtype=bool)
        if isinstance(node, exp.In) and not node.args.get("query"):
            a = self.value(node.this).value
            hits = [np.asarray(a == self.value(v).value, dtype=bool) for v in node.expressions]
            return np.asarray(np.logical_or.reduce([*hits, np.zeros(self.n, dtype=bool)]), dtype=bool)
        raise self.refuse(type(node).__name__.upper(), node)

    def sort_key(self, node: exp.Expr) -> np.ndarray:
        if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
            position = int(node.this)
            if not 1 <= position <= len(self.t.outputs):
                raise self.t.refuse(f"ORDER BY {position} is not a position in the SELECT list", node)
            return np.asarray(self.outputs[self.t.outputs[position - 1].name].value)
        return self.value(node).value
