"""Pairs on neighbouring tables: whatever row expression an analyst writes, the outcomes on a
table and on the same table with one row added differ only in the DP values.

The expressions are drawn from the grammar `bayesdp.expressions` admits (every function in
`FUNCTIONS`, casts, CASE, IN, LIKE, BETWEEN, COALESCE/NULLIF, date parts, arithmetic), used as
aggregate columns and as filters, and run through four paths: a spec's aggregates and a spec's
filter (the service's `Service.release`, which runs `Query.release`), SQL (the service's SQL,
`bayesdp.sql`) and the holdout's means (`bayesdp.holdout.table_means`, as `HoldoutService.query`
runs them), and SQL joined with a public table (a LEFT JOIN, the public column in an aggregate).
The added row is extreme: huge, tiny, zero, negative, NaN, text that fails a cast,
far dates, nulls. An outcome is the status (the exception's type and public message), the
warnings passed on, the released groups' keys (public here), the columns and the number of rows.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import warnings
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from bayesdp.errors import CuratorWarning
from bayesdp.expressions import DATE_PARTS, FUNCTIONS, TRUNC_UNITS, row_expression
from bayesdp.holdout import table_means
from bayesdp.serve.config import load_config
from bayesdp.serve.service import Service
from bayesdp.serve.state import State

# -- the grammar -------------------------------------------------------------------------------
# Templates by result type: {n} a number, {t} text, {d} a date or timestamp, {b} a condition.

NUMBER_TEMPLATES = [
    "abs({n})", "round({n})", "round({n}, {k})", "floor({n})", "ceil({n})", "sign({n})", "sqrt({n})",
    "cbrt({n})", "ln({n})", "log({n})", "log(2, {n})", "exp({n})", "power({n}, {n})",
    "least({n}, {n})", "greatest({n}, {n})", "length({t})", "year({d})", "quarter({d})",
    "month({d})", "day({d})", "hour({d})", "minute({d})", "extract({part} FROM {d})",
    "date_part('{part}', {d})", "({n} + {n})", "({n} - {n})", "({n} * {n})", "({n} / {n})",
    "({n} % {n})", "(-{n})", "CASE WHEN {b} THEN {n} ELSE {n} END", "CASE WHEN {b} THEN {n} END",
    "COALESCE({n}, {n})", "NULLIF({n}, {n})", "CAST({t} AS {numtype})", "CAST({n} AS {numtype})",
    "CAST({b} AS INT)", "TRY_CAST({t} AS DOUBLE)",
]
TEXT_TEMPLATES = [
    "lower({t})", "upper({t})", "trim({t})", "substring({t}, {n}, {n})", "substring({t}, {n})",
    "left({t}, {n})", "right({t}, {n})", "replace({t}, 'a', 'bb')", "({t} || {t})",
    "CAST({n} AS VARCHAR)", "CAST({d} AS VARCHAR)", "CASE WHEN {b} THEN {t} ELSE {t} END",
]
DATE_TEMPLATES = [
    "CAST({t} AS DATE)", "CAST({t} AS TIMESTAMP)", "date_trunc('{unit}', {d})",
    "date_trunc('{unit}', CAST({d} AS DATE))", "({d} + INTERVAL 1 DAY)", "({d} - INTERVAL 3 YEAR)",
]
CONDITION_TEMPLATES = [
    "({n} > {n})", "({n} >= {n})", "({n} < {n})", "({n} <= {n})", "({n} = {n})", "({n} <> {n})",
    "({t} = {t})", "({d} < {d})", "({n} BETWEEN {n} AND {n})", "({n} IN (0, 1, 2.5))",
    "({t} IN ('a', 'abc', ''))", "({t} LIKE 'a%')", "({t} ILIKE '%B_')", "({t} NOT LIKE '%')",
    "({n} IS NULL)", "({t} IS NOT NULL)", "({n} IS NOT DISTINCT FROM {n})",
    "({n} IS DISTINCT FROM {n})", "starts_with({t}, 'a')", "ends_with({t}, 'c')",
    "contains({t}, 'b')", "isnan({n})", "({b} AND {b})", "({b} OR {b})", "(NOT {b})",
    "CAST({t} AS BOOLEAN)", "({b} IS TRUE)",
]
LEAVES = {
    "n": ["x", "i", "0", "1", "-1", "2.5", "1000", "1e308", "9223372036854775807"],
    "t": ["s", "g", "'abc'", "''", "'2020-01-31'", "'1e400'"],
    "d": ["d", "ts", "DATE '2000-02-29'"],
    "b": ["TRUE", "FALSE", "NULL", "(x > 1)"],
}
TEMPLATES = {"n": NUMBER_TEMPLATES, "t": TEXT_TEMPLATES, "d": DATE_TEMPLATES, "b": CONDITION_TEMPLATES}
FILLERS = {
    "k": ["0", "2", "-2", "400", "-400"],
    "part": sorted(DATE_PARTS),
    "unit": sorted(TRUNC_UNITS),
    "numtype": ["INT", "BIGINT", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT", "DECIMAL(10, 2)"],
}
SLOT = re.compile(r"\{(\w+)\}")


def expression(kind: str, depth: int = 3) -> st.SearchStrategy[str]:
    """A random expression of `kind` ("n", "t", "d" or "b"), nested at most `depth` deep."""
    leaf = st.sampled_from(LEAVES[kind])
    if depth == 0:
        return leaf

    @st.composite
    def built(draw: st.DrawFn) -> str:
        template = draw(st.sampled_from(TEMPLATES[kind]))

        def fill(m: re.Match[str]) -> str:
            slot = m.group(1)
            if slot in FILLERS:
                return draw(st.sampled_from(FILLERS[slot]))
            return draw(expression(slot, depth - 1))
        return SLOT.sub(fill, template)

    return st.one_of(leaf, built())


def _node_types(text: str) -> set[type]:
    return {type(n) for n in sqlglot.parse_one(text, read="duckdb").walk()}


def test_every_admitted_function_is_in_the_grammar():
    """A function added to the checker's list without a template here fails this test."""
    simplest = {slot: values[0] for slot, values in {**LEAVES, **FILLERS}.items()}
    seen: set[type] = set()
    for template in [t for ts in TEMPLATES.values() for t in ts]:
        text = SLOT.sub(lambda m: simplest[m.group(1)], template)
        row_expression(text, COLUMNS)  # every template is admitted
        seen |= _node_types(text)
        if "date_part" in text:
            seen |= _node_types(row_expression(text, COLUMNS).text)  # admitted as EXTRACT
    missing = sorted(FUNCTIONS[f] for f in FUNCTIONS if f not in seen)
    assert not missing, f"functions the checker admits but the grammar never draws: {missing}"


# -- the tables --------------------------------------------------------------------------------

COLUMNS = ["u", "g", "x", "i", "s", "d", "ts"]
_SCHEMA = pa.schema([("u", pa.int64()), ("g", pa.string()), ("x", pa.float64()), ("i", pa.int64()),
                     ("s", pa.string()), ("d", pa.date32()), ("ts", pa.timestamp("us"))])
_D = datetime.date
# Ordinary values only (positive, small, text that casts or not): a value that fails, overflows
# or is infinite comes with an added row.
BASE = [
    {"u": k, "g": "ab"[k % 2], "x": (k + 1) / 4, "i": k + 1, "s": ["abc", "12", "b", "2020-01-31"][k % 4],
     "d": _D(2000 + k, 1 + k % 12, 1 + k), "ts": datetime.datetime(2010, 1, 1 + k, k, 2 * k)}
    for k in range(12)
]
# One row added, by a new unit: each extreme in its own neighbour.
EXTREMES = [
    {"u": 100, "g": "a", "x": 1e308, "i": 2**63 - 1, "s": "9" * 40, "d": _D(9999, 12, 31),
     "ts": datetime.datetime(9999, 12, 31, 23, 59)},
    {"u": 100, "g": "b", "x": -1e308, "i": -(2**63), "s": "-", "d": _D(1, 1, 1),
     "ts": datetime.datetime(1, 1, 1)},
    {"u": 100, "g": "a", "x": 0.0, "i": 0, "s": "0", "d": _D(1970, 1, 1),
     "ts": datetime.datetime(1970, 1, 1)},
    {"u": 100, "g": "b", "x": math.nan, "i": None, "s": "not a number", "d": None, "ts": None},
    {"u": 100, "g": "a", "x": -1.0, "i": -1, "s": "", "d": _D(2020, 2, 29),
     "ts": datetime.datetime(2020, 2, 29)},
    {"u": 100, "g": None, "x": 5e-324, "i": 1, "s": "1e400", "d": _D(2000, 1, 1),
     "ts": datetime.datetime(2000, 1, 1)},
]
# Deadlines are tested on their own (tests/serve/test_serve_timing.py): here a cut-off under the
# test machine's load would be a difference made by the load, not by the added row.
CONFIG = """
state = "state"
timing = {{ pad = false }}
{datasets}
"""
DATASET = """
[datasets.{name}]
source = "{name}.parquet"
privacy_unit = "u"
max_groups_per_unit = 1
budget = {{ epsilon = 1.0 }}
public_tables = {{ p = "p.parquet" }}
[datasets.{name}.columns]
g = {{ domain = ["a", "b"] }}
x = {{ bounds = [0, 1] }}
i = {{ bounds = [-10, 10] }}
s = {{ description = "text" }}
d = {{ description = "a date" }}
ts = {{ description = "a time" }}
"""
# The base table, its neighbours, then the base with every extreme row (each its own unit): no
# outcome may depend on the data, so any two tables must agree, not only neighbours. Names of
# one length: a SQL label is cut at a fixed length.
TABLES = [BASE, *([*BASE, row] for row in EXTREMES),
          [*BASE, *({**row, "u": 100 + k} for k, row in enumerate(EXTREMES))]]
NAMES = [f"tbl{k}" for k in range(len(TABLES))]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Service:
    """One service holding the base table and each neighbour (typed Parquet: the added row
    cannot change a column's type, as a CSV's inferred types could)."""
    root = tmp_path_factory.mktemp("pairs")
    for name, rows in zip(NAMES, TABLES, strict=True):
        pq.write_table(pa.Table.from_pylist(rows, schema=_SCHEMA), root / f"{name}.parquet")
    pq.write_table(pa.table({"g": ["a", "b", "c"], "w": [0.5, -2.0, 1e308]}), root / "p.parquet")
    (root / "service.toml").write_text(CONFIG.format(datasets="".join(DATASET.format(name=n) for n in NAMES)))
    config = load_config(root / "service.toml")
    return Service(config, State(config))


# -- the outcomes ------------------------------------------------------------------------------

def _failure(exc: BaseException) -> tuple[Any, ...]:
    return ("error", type(exc).__name__, getattr(exc, "public_message", str(exc)))


def _released(doc: dict[str, Any]) -> tuple[Any, ...]:
    """All of a release's public answer but its DP values (and the explanation's notes computed
    from them: which intervals span their whole bounds)."""
    shown = {k: v for k, v in doc.items() if k not in ("estimates", "rows", "created", "dataset")}
    shown["explain"] = re.sub(r"\n\d+ of \d+ intervals of [^\n]*", "", shown["explain"])
    shown["shape"] = (len(doc["rows"]), [len(e["value"]) for e in doc["estimates"].values()])
    return ("ok", json.dumps(shown, sort_keys=True, default=str))


def _release(service: Service, name: str, request: dict[str, Any]) -> tuple[Any, ...]:
    try:
        doc, _ = service.release(service.config.datasets[name], request, None)  # type: ignore[arg-type]
    except Exception as exc:
        return _failure(exc)
    return _released(doc)


def _means(service: Service, name: str, queries: list[str]) -> tuple[Any, ...]:
    try:
        checked = [row_expression(q, COLUMNS, role="holdout query") for q in queries]
        out = table_means(service.db.cursor(), [f'"ds_{name}"'], checked)
    except Exception as exc:
        return _failure(exc)
    return ("ok", [len(row) for row in out])


KINDS = {
    "count": {"kind": "count"}, "count_units": {"kind": "count_units"}, "sum": {"kind": "sum"},
    "mean": {"kind": "mean"}, "std": {"kind": "std"}, "quantile": {"kind": "quantile", "q": 0.5},
    "histogram": {"kind": "histogram", "bins": 3}, "share": {"kind": "share"},
    "count_where": {"kind": "count_where"},
}


def _aggregate(kind: str, value: str, condition: str) -> dict[str, Any]:
    """One aggregate of `kind` over the expression `value` (a share over `condition`)."""
    if kind == "share":
        return {**KINDS[kind], "condition": condition}
    if kind == "count_where":
        return {**KINDS[kind], "indicator": value}
    if kind.startswith("count"):
        return KINDS[kind]
    return {**KINDS[kind], "column": value, "bounds": [0, 1]}


def _spec(aggregates: dict[str, Any], where: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    """A spec by the public keys of g (every key released, whatever the data)."""
    return {"spec": {"group_by": ["g"], "keys": ["a", "b"], "epsilon": 1.0, "delta": 1e-6,
                     "where": list(where), "aggregates": aggregates}}


def _sql(name: str, values: list[str], condition: str, every: int = 1, join: str = "") -> dict[str, Any]:
    """BigQuery's clause (bounds for expressions as named arguments), by the public keys of g: a
    SUM of each value, and the other aggregates of the first `every` values; `join` follows FROM."""
    bounded = ", contribution_bounds_per_row => (0, 1))"
    calls = [f"SUM({v}{bounded} AS s{j}" for j, v in enumerate(values)]
    calls += [f"{f}({v}{bounded} AS {f.lower()}{j}" for j, v in enumerate(values[:every])
              for f in ("AVG", "STDDEV", "VARIANCE")]
    # COUNTs with their bounds: bounds learnt from the data are DP values (their own pairs are in
    # tests/sql/test_bigquery_semantics.py), and would differ between any two runs.
    counted = ", contribution_bounds_per_group => (0, 2))"
    calls += [f"PERCENTILE_CONT({v}, 0.5{bounded} AS p{j}, COUNT({v}{counted} AS c{j}"
              for j, v in enumerate(values[:every])]
    return {"sql": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
                   f"privacy_unit_column = u) g, COUNT(*{counted} AS n, {', '.join(calls)} "
                   f"FROM {name}{join} WHERE {condition} GROUP BY g"}


JOINED = " LEFT JOIN p USING (g)"  # the public table p: a weight w per group key g
PATHS: dict[str, Callable[[Service, str, str, str, str], tuple[Any, ...]]] = {
    "spec aggregate": lambda svc, name, kind, v, c: _release(
        svc, name, _spec({"a": _aggregate(kind, v, c)})),
    "spec filter": lambda svc, name, kind, v, c: _release(
        svc, name, _spec({"a": _aggregate(kind, "x", "x > 0.5")}, [c])),
    "sql": lambda svc, name, kind, v, c: _release(svc, name, _sql(name, [v], c)),
    "sql join": lambda svc, name, kind, v, c: _release(svc, name, _sql(
        name, [f"w * ({v})"], f"({c}) OR w > 1", join=JOINED)),
    "holdout": lambda svc, name, kind, v, c: _means(svc, name, [v, c]),
}


def outcome(service: Service, path: str, name: str, kind: str, value: str, condition: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what reaches the analyst is in the answer's "warnings"
        result = PATHS[path](service, name, kind, value, condition)
    return json.loads(json.dumps(result, default=str).replace(name, "T"))  # the name is public


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],  # a failure is reported as drawn: shrinking is slow
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(value=expression("n"), condition=expression("b"), added=st.sampled_from(range(len(EXTREMES))),
       kind=st.sampled_from(sorted(KINDS)))
# An error only a matching row raised; a quantile failing when no row passes the filter.
@example(value="CASE WHEN x >= 1e300 THEN exp(1000) ELSE 0 END", condition="x > 1", added=0, kind="sum")
@example(value="x", condition="x > 1e300", added=0, kind="quantile")
def test_one_added_row_changes_nothing_but_dp_values(service: Service, value: str, condition: str,
                                                      added: int, kind: str) -> None:
    for path in PATHS:
        base = outcome(service, path, NAMES[0], kind, value, condition)
        plus = outcome(service, path, NAMES[added + 1], kind, value, condition)
        assert base == plus, (path, kind, value, condition, EXTREMES[added])


# The functions and operators that fail on some value (each extreme row meets each); the first
# give +inf, -inf, NaN and NULL, and go through every aggregate kind.
FAILING = ["CASE WHEN x >= 1e300 THEN exp(1000) ELSE 0 END", "-exp(x * 1000)", "sqrt(-x)",
           "CAST(s AS INT)", "ln(x)", "ln(i)", "log(x - 1)", "year(CAST(s AS DATE))",
           "i + i", "i * 2", "-i - i", "abs(i - 1)", "x / (x - x)", "i % (i - i)", "power(x, 1000)",
           "exp(x)", "x * x", "CAST(x AS BIGINT)", "floor(x * 1e300)", "round(x, 400)",
           "length(substring(s, i, i))", "length(left(s, i))", "year(d + INTERVAL 1 DAY)",
           "CAST(s AS DOUBLE)", "hour(ts + INTERVAL 1 HOUR)"]
EVERY_KIND = 3


def test_the_failing_functions_give_defined_values(service: Service) -> None:
    """Each failing function, on each path, in one request per path, on the base table and on it
    with every extreme row: a defined value, never an error that only some value causes."""
    conditions = [f"({f}) > 0" for f in FAILING]
    aggregates = {f"sum{j}": _aggregate("sum", f, "") for j, f in enumerate(FAILING)}
    aggregates.update({f"{kind}{j}": _aggregate(kind, f, c) for j, (f, c) in
                       enumerate(zip(FAILING[:EVERY_KIND], conditions, strict=False)) for kind in KINDS})
    spec = _spec(aggregates)
    requests: list[Callable[[str], Any]] = [
        lambda name: _release(service, name, spec),
        lambda name: _release(service, name, _spec({"n": {"kind": "count"}}, conditions)),
        # BigQuery's LEFT reads as a typeof() the checker refuses: the SQL takes the others.
        lambda name: _release(service, name, _sql(name, [f for f in FAILING if "left(" not in f],
                                                  " AND ".join(conditions), EVERY_KIND)),
        # Joined: each failing function times the public weight, on rows with a match or none.
        lambda name: _release(service, name, _sql(name, [f"w * ({f})" for f in FAILING if "left(" not in f],
                                                  " AND ".join(conditions), EVERY_KIND, JOINED)),
        lambda name: _means(service, name, [*FAILING, *conditions]),
    ]
    for request in requests:
        base, plus = (json.loads(json.dumps(request(n), default=str).replace(n, "T"))
                      for n in (NAMES[0], NAMES[-1]))
        assert base[0] == "ok" and base == plus, (base, plus)


@pytest.mark.spark
@pytest.mark.slow
def test_the_failing_functions_give_defined_values_on_spark(spark: Any) -> None:
    """Spark's ANSI mode raises where DuckDB's TRY gives NULL: each failing function, rendered for
    Spark, runs on every extreme row (a value or NULL), and so does a release through the Spark
    engine with the issue's infinite CASE."""
    import bayesdp as bdp
    from bayesdp import rng_for_tests

    schema = ", ".join(f"{c} {t}" for c, t in zip(COLUMNS, ["BIGINT", "STRING", "DOUBLE", "BIGINT", "STRING",
                                                              "DATE", "TIMESTAMP"], strict=True))
    frame = spark.createDataFrame([tuple(r[c] for c in COLUMNS) for r in TABLES[-1]], schema)
    for text in FAILING:
        checked = row_expression(text, COLUMNS)
        values = frame.selectExpr(f"CAST({checked.sql('spark')} AS DOUBLE) AS v").collect()
        assert len(values) == len(TABLES[-1]), text
    query = bdp.table(frame, "u").agg(s=bdp.sum(FAILING[0], bounds=(0, 1)),
                                      q=bdp.quantile(FAILING[1], bounds=(0, 1)))
    with pytest.warns(CuratorWarning, match="were infinite and clipped into the bounds"):
        assert len(query.release(1.0, rng=rng_for_tests(1)).to_pandas()) == 1
