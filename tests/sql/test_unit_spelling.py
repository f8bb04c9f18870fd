"""The privacy unit however it is spelled: DuckDB and Spark resolve names without case, quoted or
not, so every check on the unit reads the column a name resolves to, never the text. Each
battery draws its spellings from a fixed seed; every spelling differs in case from the schema's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.errors import InvalidParameter
from bayesdp.expressions import row_expression
from bayesdp.serve.config import load_config
from bayesdp.serve.service import Service
from bayesdp.serve.state import State
from bayesdp.sql import SqlError, translate

UNIT = "state"
META = {"tables": {"panel": {
    "privacy_unit": UNIT, "max_groups_per_unit": 1, "max_rows_per_group": 5, "delta": 1e-6,
    "columns": {"gsp": {"bounds": [0, 100]}, "Region": {"keys": ["west", "east"]}}}}}
BQ = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, max_groups_contributed = 1, "
      "max_rows_per_group = 5, privacy_unit_column = {unit}) ")

# Every place SQL can name a column, each with {u} for the unit; after SELECT (BigQuery's clause
# goes there). A refusal must name the privacy unit and point at the unit's reference.
CONTEXTS = {
    "where": "COUNT(*) FROM panel WHERE {u} = 'CA'",
    "where case": "COUNT(*) FROM panel WHERE CASE WHEN {u} = 'CA' THEN gsp > 1 ELSE FALSE END",
    "where function": "COUNT(*) FROM panel WHERE lower({u}) LIKE 'c%'",
    "where cast": "COUNT(*) FROM panel WHERE CAST({u} AS VARCHAR) = 'CA'",
    "where in": "COUNT(*) FROM panel WHERE {u} IN ('CA', 'NY')",
    "where coalesce": "COUNT(*) FROM panel WHERE COALESCE({u}, 'x') <> 'x' AND gsp > 0",
    "select case": "SUM(CASE WHEN {u} = 'CA' THEN 1 ELSE 0 END) FROM panel",
    "select condition": "AVG({u} = 'CA') FROM panel",
    "select column": "SUM({u}) FROM panel",
    "select count of an expression": "COUNT(NULLIF({u}, 'CA')) FROM panel",
    "group by": "{u}, COUNT(*) FROM panel GROUP BY {u}",
    "group by alias": "{u} AS s, COUNT(*) FROM panel GROUP BY s",
    "group by position": "{u}, COUNT(*) FROM panel GROUP BY 1",
    "having": "Region, COUNT(*) FROM panel GROUP BY Region "
              "HAVING SUM(CASE WHEN {u} = 'CA' THEN 1 ELSE 0 END) > 0",
    "order by": "Region, COUNT(*) FROM panel GROUP BY Region ORDER BY AVG(length({u}) > 2)",
}


@pytest.fixture(scope="module")
def panel() -> pd.DataFrame:
    """40 states (CA among them) over 5 years, in two regions, with a gsp in [0, 120]."""
    rng = np.random.default_rng(25)
    states = np.repeat(["CA", "NY", *[f"S{i:02d}" for i in range(38)]], 5)
    return pd.DataFrame({UNIT: states, "Region": np.where(rng.random(states.size) < 0.5, "west", "east"),
                         "gsp": rng.uniform(0, 120, states.size)})


def spellings(seed: int, n: int, quote: str) -> list[str]:
    """`n` references to the unit column that differ from its name in case: bare, quoted
    (`quote`), or qualified by the table, chosen at random."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    while len(out) < n:
        word = "".join(c.upper() if rng.random() < 0.5 else c for c in UNIT)
        if word == UNIT:
            continue
        quoted = f"{quote}{word}{quote}" if rng.random() < 0.5 else word
        out.append(f"panel.{quoted}" if rng.random() < 0.3 else quoted)
    return out


def _sql(dialect: str, body: str, unit: str = UNIT) -> str:
    return (BQ.format(unit=unit) if dialect == "bigquery" else "SELECT ") + body


def _translate(dialect: str, query: str, panel: pd.DataFrame):
    return translate(query, {"panel": panel}, metadata=META if dialect == "duckdb" else None,
                     epsilon=1.0 if dialect == "duckdb" else None)


@pytest.mark.parametrize("dialect", ["duckdb", "bigquery"])
@pytest.mark.parametrize("context", list(CONTEXTS))
def test_sql_refuses_the_unit_however_spelled(panel, dialect, context):
    quote = '"' if dialect == "duckdb" else "`"
    seed = sorted(CONTEXTS).index(context) + (100 if dialect == "bigquery" else 0)
    for u in spellings(seed, 6, quote):
        query = _sql(dialect, CONTEXTS[context].format(u=u))
        with pytest.raises(SqlError) as info:
            _translate(dialect, query, panel)
        err = info.value
        assert "privacy unit" in err.message, (query, err.message)
        start, end = err.span or (0, 0)
        assert UNIT in query[start:end].lower(), (query, err.message)


def test_refusals_are_the_same_on_neighbouring_tables(panel):
    """A refusal is decided from the schema: one row more (a new state) changes nothing in it."""
    neighbour = pd.concat([panel, pd.DataFrame({UNIT: ["ZZ"], "Region": ["west"], "gsp": [1e9]})],
                          ignore_index=True)
    for context, u in zip(CONTEXTS, spellings(17, len(CONTEXTS), '"'), strict=True):
        query = _sql("duckdb", CONTEXTS[context].format(u=u))
        outcomes = []
        for data in (panel, neighbour):
            with pytest.raises(SqlError) as info:
                _translate("duckdb", query, data)
            outcomes.append((type(info.value), str(info.value), info.value.span))
        assert outcomes[0] == outcomes[1] and "privacy unit" in outcomes[0][1], query


@pytest.mark.parametrize("dialect", ["duckdb", "bigquery"])
def test_sql_reads_other_columns_and_counts_the_unit_however_spelled(panel, dialect):
    """Legitimate uses in another case release exactly what the schema's spelling releases."""
    bounds = ", contribution_bounds_per_group => (0, 100)" if dialect == "bigquery" else ""
    template = ("{r} AS r, COUNT(*) AS n, SUM({g}{b}) AS s, COUNT(DISTINCT {u}) AS units, COUNT({u}) AS c "
                "FROM panel WHERE {g} > 1 AND {r} IN ('west', 'east') GROUP BY {r} "
                "HAVING COUNT(*) > 0 OR {r} = 'west' ORDER BY {r}")
    q = '"' if dialect == "duckdb" else "`"
    canonical = _sql(dialect, template.format(r="Region", g="gsp", u=UNIT, b=bounds))
    want = bdp.sql(canonical, {"panel": panel}, metadata=META if dialect == "duckdb" else None,
                   epsilon=1.0 if dialect == "duckdb" else None, rng=bdp.rng_for_tests(5)).to_pandas()
    for r, g, u in [("REGION", f"{q}GSP{q}", "STATE"), (f"{q}region{q}", "Gsp", f"{q}State{q}"),
                    ("panel.rEgIoN", "panel.GSP", "panel.STATE")]:
        query = _sql(dialect, template.format(r=r, g=g, u=u, b=bounds), unit="STATE")
        meta = {"tables": {"panel": {**META["tables"]["panel"], "privacy_unit": "State",
                                     "columns": {"GSP": {"bounds": [0, 100]},
                                                 "region": {"keys": ["west", "east"]}}}}}
        got = bdp.sql(query, {"panel": panel}, metadata=meta if dialect == "duckdb" else None,
                      epsilon=1.0 if dialect == "duckdb" else None, rng=bdp.rng_for_tests(5)).to_pandas()
        pd.testing.assert_frame_equal(got, want, obj=query)


# A public table keyed by the unit: joined on it, its columns are functions of the unit.
JOINS = {
    "using": "COUNT(*) FROM panel JOIN names USING ({u}) WHERE big = 1",
    "on": "COUNT(*) FROM panel AS p JOIN names AS m ON m.state = p.{u} WHERE m.big = 1",
    "on reversed": "m.big, COUNT(*) FROM panel AS p LEFT JOIN names AS m ON p.{u} = m.state GROUP BY m.big",
    "on and": "COUNT(*) FROM panel AS p JOIN names AS m ON p.Region = m.region AND m.state = p.{u}",
}


@pytest.mark.parametrize("dialect", ["duckdb", "bigquery"])
@pytest.mark.parametrize("join", list(JOINS))
def test_sql_refuses_a_public_table_joined_on_the_unit_however_spelled(panel, dialect, join):
    """The refusal names the unit, points at its reference and is the same on a neighbour."""
    names = pd.DataFrame({UNIT: ["CA", "NY"], "region": ["west", "east"], "big": [1, 0]})
    neighbour = pd.concat([panel, pd.DataFrame({UNIT: ["ZZ"], "Region": ["west"], "gsp": [1e9]})],
                          ignore_index=True)
    meta = {"tables": {**META["tables"], "names": {"public": True}}}
    seed = sorted(JOINS).index(join) + (200 if dialect == "bigquery" else 300)
    for u in spellings(seed, 4, '"' if dialect == "duckdb" else "`"):
        query = _sql(dialect, JOINS[join].format(u=u.removeprefix("panel.")))
        outcomes = []
        for data in (panel, neighbour):
            with pytest.raises(SqlError) as info:
                translate(query, {"panel": data, "names": names}, metadata=meta,
                          epsilon=1.0 if dialect == "duckdb" else None)
            outcomes.append((str(info.value), info.value.span))
        assert outcomes[0] == outcomes[1] and "privacy unit" in outcomes[0][0], (query, outcomes)
        start, end = outcomes[0][1] or (0, 0)
        assert query[start:end].lower().strip('"`').endswith(UNIT), (query, query[start:end])


def test_builder_refuses_grouping_by_the_unit_however_spelled(panel):
    t = bdp.table(panel, UNIT)
    attempts = (lambda n: t.group_by(n), lambda n: t.group_by(["Region", n]),
                lambda n: t.bounded(n, max_groups_per_unit=1))
    for u in spellings(7, 8, ""):
        for attempt in attempts:
            with pytest.raises(InvalidParameter, match="other than the privacy unit"):
                attempt(u.removeprefix("panel."))
    with pytest.raises(InvalidParameter, match="distinct columns"):
        t.group_by(["Region", "REGION"])


def test_builder_resolves_names_as_the_engine_does(panel):
    """The unit, group columns, aggregate columns and filters in another case are the schema's
    columns: the release is the one of the schema's spelling, and the checked expressions name
    the columns they read in the schema's spelling."""
    def release(unit, region, gsp, condition):
        t = bdp.table(panel, unit).where(condition)
        assert t.privacy_unit == UNIT and t.filters[0].columns == {"gsp"}
        return t.group_by(region, keys=["west", "east"]).agg(
            n=bdp.count(), s=bdp.sum(gsp, bounds=(0, 100)), m=bdp.mean(f"{gsp} + 0", bounds=(0, 100))
        ).release(epsilon=1.0, max_groups_per_unit=1, rng=bdp.rng_for_tests(3)).to_pandas()

    want = release(UNIT, "Region", "gsp", "gsp > 1")
    got = release("STATE", "REGION", "GSP", '"Gsp" > 1')
    pd.testing.assert_frame_equal(got, want)
    assert bdp.table(panel, UNIT).where('"STATE" IS NOT NULL').filters[0].columns == {UNIT}


def test_names_that_differ_only_in_case_are_refused():
    """DuckDB keeps both `é` and `É` (it folds ASCII letters only); Spark cannot tell them apart:
    a name that matches both is refused rather than resolved one way here and another there."""
    with pytest.raises(InvalidParameter, match="differ only in case"):
        row_expression("a > 1", ["a", "A"])
    ids = np.arange(10)
    t = bdp.table({"u": ids, "é": ids * 1.0, "É": ids * 2.0}, "u")
    for attempt in (lambda: t.where('"é" > 1'), lambda: t.group_by("É"),
                    lambda: t.agg(s=bdp.sum("é", bounds=(0, 1)))):
        with pytest.raises(InvalidParameter, match="differ only in case"):
            attempt()


SERVICE = """
state = "state"
[datasets.panel]
source = "panel.csv"
privacy_unit = "state"
max_groups_per_unit = 1
max_rows_per_group = 5
budget = { epsilon = 3.0, delta = 1e-6 }
[datasets.panel.columns]
Region = { domain = ["west", "east"] }
gsp = { bounds = [0, 100] }
"""


@pytest.fixture(scope="module")
def service(panel, tmp_path_factory):
    root = tmp_path_factory.mktemp("unit_spelling")
    panel.to_csv(root / "panel.csv", index=False)
    (root / "service.toml").write_text(SERVICE)
    config = load_config(root / "service.toml")
    state = State(config)
    yield Service(config, state), config.datasets["panel"]
    state.close()


def test_service_specs_resolve_names_and_never_reach_the_unit(service):
    svc, ds = service
    agg = {"n": {"kind": "count"}}
    for u in spellings(11, 6, '"'):
        u = u.removeprefix("panel.")
        refused = [{"group_by": u}, {"group_by": ["Region", u]},
                   {"aggregates": {"x": {"kind": "sum", "column": u, "bounds": [0, 1]}}},
                   {"aggregates": {"x": {"kind": "sum", "column": f"CASE WHEN {u} = 'CA' THEN 1 ELSE 0 END",
                                         "bounds": [0, 1]}}},
                   {"aggregates": {"x": {"kind": "share", "condition": f"COALESCE({u}, '') = 'CA'"}}},
                   {"aggregates": {"x": {"kind": "count_where", "indicator": f"{u} = 'CA'"}}},
                   {"aggregates": {"x": {"kind": "count_where", "indicator": u}}},
                   {"where": f"CAST({u} AS VARCHAR) IN ('CA')"}]
        for spec in refused:
            with pytest.raises(InvalidParameter):
                svc.query(ds, {"aggregates": agg, "epsilon": 1.0, **spec})
    # The public columns and the unit's own name in another case are what they name.
    query, spec, _ = svc.query(ds, {
        "privacy_unit": "STATE", "group_by": "REGION", "keys": [["west"], ["east"]], "where": '"GSP" > 1',
        "aggregates": {"s": {"kind": "sum", "column": "GSP", "bounds": [0, 100]}}, "epsilon": 1.0})
    assert spec["privacy_unit"] == UNIT and query.by == ("Region",)
    assert [e.columns for e in query.table.filters] == [{"gsp"}]


def test_service_sql_refuses_the_unit_however_spelled(service):
    svc, ds = service
    for u in spellings(13, 6, '"'):
        for body in (CONTEXTS["where"], CONTEXTS["select case"], CONTEXTS["having"]):
            with pytest.raises(SqlError, match="privacy unit"):
                svc.translation(ds, {"dataset": "panel", "sql": "SELECT " + body.format(u=u), "epsilon": 1.0})
