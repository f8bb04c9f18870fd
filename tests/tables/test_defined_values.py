"""A release never fails on a row's value: infinite values clip into the bounds, an empty table
or a filter that keeps nothing answers as any other (pairs: a table where some row
triggers the case, and one where none does, give the same outcome but for the DP values)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp import rng_for_tests
from bayesdp.errors import CuratorWarning

FRAME = pd.DataFrame({"u": range(20), "g": ["a", "b"] * 10, "x": np.arange(20.0)})
INFINITE = "CASE WHEN x >= {v} THEN {sign}exp(1000) ELSE 0 END"
KINDS = {
    "sum": lambda c: bdp.sum(c, bounds=(0, 1)), "mean": lambda c: bdp.mean(c, bounds=(0, 1)),
    "std": lambda c: bdp.std(c, bounds=(0, 1)),
    "quantile": lambda c: bdp.quantile(c, 0.5, bounds=(0, 1)),
    "histogram": lambda c: bdp.histogram(c, bins=[0, 0.5, 1]),
}


def _outcome(release: Any) -> tuple[Any, ...]:
    """Everything but the DP values: an error's type and message, or the warnings an analyst
    would see (not the curator's), the columns and the released keys."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = release()
        except Exception as exc:  # the outcome is what is compared
            return ("error", type(exc).__name__, str(exc))
    # A ResourceWarning is the collector's, for whatever object it finalizes then: not the release's.
    shown = [str(w.message) for w in caught if not issubclass(w.category, CuratorWarning | ResourceWarning)]
    table = r.to_pandas()
    return ("ok", shown, list(table.columns), r.keys.to_dict("list"))


@pytest.mark.parametrize("sign", ["", "-"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("unit", ["u", None])
def test_an_infinite_value_a_matching_row_gives_is_clipped(kind: str, sign: str, unit: str | None) -> None:
    """The issue's attack: the error said whether some row has x >= v, for any ε."""
    def release(v: float) -> Any:
        agg = KINDS[kind](INFINITE.format(v=v, sign=sign))
        return lambda: bdp.table(FRAME, unit).agg(a=agg).release(1.0, rng=rng_for_tests(1))
    matching, none = _outcome(release(19)), _outcome(release(100))
    assert matching[0] == "ok" and matching == none


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_infinite_values_in_memory_give_the_same_outcome(value: float) -> None:
    """Row level, plain columns: the in-memory engine (numpy) clips them as DuckDB does."""
    frame = FRAME.assign(x=FRAME["x"] / 20)
    odd = frame.assign(x=frame["x"].where(frame["u"] != 3, value))
    for kind in ("sum", "mean", "std"):
        agg = KINDS[kind]("x")
        run = [_outcome(lambda f=f, a=agg: bdp.table(f, None).agg(a=a).release(1.0, rng=rng_for_tests(1)))
               for f in (frame, odd)]
        assert run[0][0] == "ok" and run[0] == run[1], kind


def test_sql_answers_whether_or_not_a_row_gives_an_infinite_value() -> None:
    def sql(v: float) -> Any:
        bounded = "contribution_bounds_per_row => (0, 1)"
        text = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
                f"privacy_unit_column = u) g, COUNT(*) AS n, "
                f"SUM({INFINITE.format(v=v, sign='')}, {bounded}) AS s, "
                f"PERCENTILE_CONT(ln(x - {v}), 0.5, {bounded}) AS p FROM t GROUP BY g")
        return lambda: bdp.sql(text, {"t": FRAME}, metadata={"tables": {"t": {"columns": {
            "g": {"keys": ["a", "b"]}}}}}, rng=rng_for_tests(1))
    matching, none = _outcome(sql(19)), _outcome(sql(100))
    assert matching[0] == "ok" and matching == none


def test_a_quantile_by_public_keys_answers_when_a_filter_keeps_no_row() -> None:
    """A filter keeping no row (x > 18.5 with u < 19) and one keeping a row (it raised IndexError)."""
    def release(last: int) -> Any:
        return lambda: bdp.table(FRAME, "u").where(f"u < {last}").where("x > 18.5") \
            .group_by("g", keys=["a", "b"]).agg(a=KINDS["quantile"]("x / 20")) \
            .release(1.0, max_groups_per_unit=1, rng=rng_for_tests(1))
    nothing, one = _outcome(release(19)), _outcome(release(20))
    assert nothing[0] == "ok" and nothing == one


def test_an_empty_table_answers_as_a_table_of_one_row() -> None:
    empty, one = FRAME.head(0), FRAME.head(1)
    aggs = {k: make("x") for k, make in KINDS.items()}
    run = [_outcome(lambda f=f: bdp.table(f, "u").agg(n=bdp.count(), **aggs)
                    .release(1.0, rng=rng_for_tests(1))) for f in (empty, one)]
    assert run[0][0] == "ok" and run[0] == run[1]
