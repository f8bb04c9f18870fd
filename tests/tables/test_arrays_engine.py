"""The in-memory engine (row level, numpy) computes what the DuckDB engine computes on the same data.

Exact aggregates are compared directly (counts exactly, sums to rounding), releases with the
same seed must agree, and the releases of both engines over independent seeds must not be
told apart by a two-sample Kolmogorov-Smirnov test (false-failure probability 1e-6).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from scipy import stats

import bayesdp as bdp
from bayesdp.errors import CuratorWarning, DataError
from bayesdp.tables.engines.arrays import ArrayEngine
from bayesdp.tables.engines.base import FULL_GRID, BoundingRequest, Cells, Measure
from bayesdp.tables.engines.duckdb import DuckDBEngine


@pytest.fixture
def frame() -> pd.DataFrame:
    """300 rows: values with NaN, out of bounds, integers, booleans; int, text and float keys."""
    rng = np.random.default_rng(16)
    x = rng.normal(0.5, 0.4, 300)
    x[::17] = np.nan
    return pd.DataFrame({
        "x": x, "k": rng.integers(0, 6, 300), "s": rng.choice(["a", "b", "c", None], 300),
        "f": rng.choice([0.5, 1.5, np.nan], 300), "i": rng.integers(-5, 20, 300),
        "b": rng.random(300) < 0.3, "ni": pd.array(rng.integers(0, 9, 300), dtype="Int64"),
    }).assign(ni=lambda d: d["ni"].mask(d.index % 11 == 0))


def engines(source: object) -> tuple[ArrayEngine, DuckDBEngine]:
    fast = bdp.table(source, None).engine
    assert isinstance(fast, ArrayEngine)
    return fast, fast.duckdb


MEASURES = (Measure("x", 0.0, 1.0), Measure("x", -1.0, 0.25), Measure("i", 0.0, 10.0),
            Measure("b", 0.0, 1.0), Measure("ni", 1.0, 5.0))
REQUESTS = {
    "ungrouped": dict(keys=(), public_keys=None),
    "int keys, one absent": dict(keys=("k",), public_keys=((0,), (2,), (5,), (99,))),
    "text keys with None": dict(keys=("s",), public_keys=(("a",), ("c",), (None,), ("zz",))),
    "float keys": dict(keys=("f",), public_keys=((0.5,), (1.5,), (2,))),
    "boolean keys": dict(keys=("b",), public_keys=((True,), (False,))),
    "two columns": dict(keys=("k", "s"), public_keys=((1, "a"), (2, "b"), (3, None), (4, "c"))),
}


def request(keys: tuple[str, ...], public_keys: tuple | None) -> BoundingRequest:
    return BoundingRequest(unit=None, keys=keys, max_groups=1, max_rows=1, seed=7,
                           public_keys=public_keys, measures=MEASURES)


@pytest.mark.parametrize("kind", ["pandas", "arrow", "polars", "numpy"])
@pytest.mark.parametrize("shape", list(REQUESTS))
def test_exact_aggregates_match_duckdb(frame: pd.DataFrame, kind: str, shape: str) -> None:
    columns = {c: frame[c].to_numpy() for c in ("x", "k", "f", "i", "b")}
    columns["s"] = np.array([v if isinstance(v, str) else None for v in frame["s"]], dtype=object)
    source = {"pandas": frame, "arrow": pa.Table.from_pandas(frame, preserve_index=False),
              "polars": pl.from_pandas(frame),
              "numpy": columns | {"ni": frame["ni"].to_numpy(np.float64, na_value=np.nan)}}[kind]
    fast, slow = engines(source)
    req = request(**REQUESTS[shape])
    assert fast._serves(req)
    a, b = fast.aggregate(req), slow.aggregate(req)
    assert len(a.groups) == len(b.groups)
    ia = ib = np.zeros(1, dtype=int)
    if req.keys:
        merged = a.groups.assign(__a=np.arange(len(a.groups))).merge(
            b.groups.assign(__b=np.arange(len(b.groups))), on=list(req.keys), how="outer")
        assert len(merged) == len(a.groups) and merged.notna().all().all()
        ia, ib = merged["__a"].to_numpy(int), merged["__b"].to_numpy(int)
    np.testing.assert_array_equal(a.units[ia], b.units[ib])
    np.testing.assert_array_equal(a.rows[ia], b.rows[ib])
    for m in MEASURES:
        np.testing.assert_allclose(a.moments[m][ia], b.moments[m][ib], rtol=1e-12, atol=1e-9)
    assert a.diagnostics == b.diagnostics


def test_same_seed_same_release_and_columns(frame: pd.DataFrame) -> None:
    aggs = dict(n=bdp.count(), u=bdp.count_units(), s=bdp.sum("x", bounds=(0, 1)),
                m=bdp.mean("x", bounds=(0, 1)), sd=bdp.std("i", bounds=(0, 10)), sh=bdp.share("b"),
                med=bdp.quantile("x", 0.5, bounds=(0, 1)), p9=bdp.quantile("i", 0.9, bounds=(-5, 20)))
    for keys in (None, [0, 3, 99]):
        out = []
        for source in (frame, duckdb.from_df(frame)):
            t = bdp.table(source, None)
            q = t.agg(**aggs) if keys is None else t.group_by("k", keys=keys).agg(**aggs)
            out.append(q.release(1.0, rng=bdp.rng_for_tests(3)))
        assert isinstance(bdp.table(frame, None).engine, ArrayEngine)
        fast, slow = (r.to_pandas() for r in out)
        assert list(fast.columns) == list(slow.columns)
        pd.testing.assert_frame_equal(fast, slow, check_exact=False, rtol=1e-9, atol=1e-9)
        assert out[0].guarantee == out[1].guarantee
        assert out[0].diagnostics == out[1].diagnostics


@pytest.mark.slow
def test_releases_agree_in_distribution(frame: pd.DataFrame) -> None:
    """Two-sample KS test of 150 releases per engine, independent seeds: under equal
    distributions P(p < 1e-6) <= 1e-6, so the test fails wrongly with probability <= 1e-6."""
    fast = bdp.table(frame, None).agg(m=bdp.mean("x", bounds=(0, 1)))
    slow = bdp.table(duckdb.from_df(frame), None).agg(m=bdp.mean("x", bounds=(0, 1)))
    draws = [[q.release(0.5, rng=bdp.rng_for_tests(seed + offset)).to_pandas()["m"][0]
              for seed in range(150)] for q, offset in ((fast, 0), (slow, 10_000))]
    assert stats.ks_2samp(*draws).pvalue > 1e-6


def test_other_shapes_go_to_duckdb(frame: pd.DataFrame) -> None:
    """Filters, expressions, histograms, private keys, a privacy unit, object
    columns and keys of another type are DuckDB's; their releases are DuckDB's, seed for seed."""
    t = bdp.table(frame, None)
    relation = bdp.table(duckdb.from_df(frame), None)
    cases = [
        lambda t: t.where("x > 0").agg(m=bdp.mean("x", bounds=(0, 1))),
        lambda t: t.agg(m=bdp.mean("x * 2", bounds=(0, 2))),
        lambda t: t.agg(h=bdp.histogram("x", [0, 0.5, 1])),
        lambda t: t.group_by("k").agg(n=bdp.count()),
        lambda t: t.group_by("i", keys=[1.0, 2.0]).agg(n=bdp.count()),
    ]
    for case in cases:
        q = case(t)
        plan = q.plan(1.0, 1e-6)
        assert not t.engine._serves(q._request(plan, 0.05, 1))
        got = q.release(1.0, 1e-6, rng=bdp.rng_for_tests(5)).to_pandas()
        want = case(relation).release(1.0, 1e-6, rng=bdp.rng_for_tests(5)).to_pandas()
        pd.testing.assert_frame_equal(got, want)
    assert isinstance(bdp.table(frame, "k").engine, DuckDBEngine)
    twice = pd.DataFrame([[0.25, 0.5]], columns=["x", "x"])  # DuckDB names them x, x_1
    assert isinstance(bdp.table(twice, None).engine, DuckDBEngine)
    assert bdp.table(twice, None).agg(n=bdp.count()).release(1.0).diagnostics.rows == 1
    assert isinstance(bdp.table(frame.assign(o=frame["s"]), None).engine, ArrayEngine)


@pytest.mark.parametrize("data", [
    pd.DataFrame({"x": [1.0, np.inf, 0.5]}),
    pd.DataFrame({"x": pd.Series([], dtype=float)}),
    pd.DataFrame({"x": [np.nan, np.nan]}),
])
def test_same_errors_and_results_at_the_edges(data: pd.DataFrame) -> None:
    """Infinities, an empty table, values all null: the same error or the same release."""
    results = []
    for source in (data, duckdb.from_df(data)):
        q = bdp.table(source, None).agg(m=bdp.mean("x", bounds=(0, 1)), n=bdp.count())
        try:
            results.append(q.release(1.0, rng=bdp.rng_for_tests(1)).to_pandas())
        except DataError as exc:
            results.append((str(exc), exc.private_detail))
    if isinstance(results[0], tuple):
        assert results[0] == results[1]
    else:
        pd.testing.assert_frame_equal(results[0], results[1])


def test_a_mapping_of_arrays_is_a_table() -> None:
    x = np.linspace(0, 1, 101)
    r = bdp.table({"x": x}, None).agg(n=bdp.count()).release(1.0, rng=bdp.rng_for_tests(0))
    assert r.diagnostics.rows == 101
    for bad in ({"x": x, "y": x[:5]}, {"x": x.reshape(1, -1)}, {"x": list(x)}):
        with pytest.raises(DataError, match="mapping source"):
            bdp.table(bad, None)


@pytest.mark.parametrize("kind", ["pandas", "arrow", "polars"])
def test_text_keys_held_by_arrow_match_without_python_strings(
        frame: pd.DataFrame, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow-backed text (pandas' default, Arrow, Polars) is matched by Arrow: no per-row
    Python string is made, and the groups and counts are DuckDB's."""
    text = frame[["s", "x"]].astype({"s": "str"})
    source = {"pandas": text, "arrow": pa.Table.from_pandas(text, preserve_index=False),
              "polars": pl.from_pandas(text)}[kind]
    fast, slow = engines(source)
    req = BoundingRequest(unit=None, keys=("s",), max_groups=1, max_rows=1, seed=7,
                          public_keys=(("a",), ("c",), (None,), ("zz",)), measures=MEASURES[:1])
    want = slow.aggregate(req)
    import bayesdp.tables.engines.arrays as arrays

    def refuse(col: object) -> np.ndarray:
        if len(col) == len(frame):  # the table's column; the public keys may be
            raise AssertionError("text keys turned into Python objects")
        return np.asarray(col)

    monkeypatch.setattr(arrays, "_as_keys", refuse)
    got = fast.aggregate(req)
    assert got.groups["s"].tolist() == want.groups["s"].tolist()
    np.testing.assert_array_equal(got.rows, want.rows)


def typed_frame() -> pd.DataFrame:
    """One column of each type the array engine names without DuckDB."""
    n = 5
    ints = {f"{t}": np.arange(n, dtype=t) for t in
            ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")}
    return pd.DataFrame(ints | {
        "f32": np.ones(n, np.float32), "f64": np.linspace(0, 1, n), "b": np.arange(n) > 2,
        "s": ["a", None, "b", "c", "d"], "ni": pd.array([1, None, 3, 4, 5], dtype="Int64"),
        "nf": pd.array([1.0, None, 3, 4, 5], dtype="Float64"),
        "nb": pd.array([True, None, False, True, True], dtype="boolean"),
        "ai": pd.array([1, 2, 3, 4, 5], dtype="int32[pyarrow]"),
        "ps": pd.array(list("abcde"), dtype="string[python]"),
        "ls": pd.array(list("abcde"), dtype=pd.ArrowDtype(pa.large_string()))})


@pytest.mark.parametrize("kind", ["pandas", "arrow", "polars", "numpy"])
def test_row_level_in_memory_opens_duckdb_only_when_needed(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row-level release the array engine serves opens no DuckDB connection (one costs more
    than the release); the engine's own names and types are DuckDB's."""
    frame = typed_frame()
    source = {"pandas": frame, "arrow": pa.Table.from_pandas(frame, preserve_index=False),
              "polars": pl.from_pandas(frame),
              "numpy": {c: frame[c].to_numpy() for c in ("int8", "uint64", "f32", "f64", "b")}}[kind]
    import bayesdp.tables.query as query

    real = query.connect
    monkeypatch.setattr(query, "connect", lambda *a: pytest.fail("a DuckDB connection was opened"))
    t = bdp.table(source, None)
    r = t.agg(m=bdp.mean("f64", bounds=(0, 1)), n=bdp.count()).release(1.0, rng=bdp.rng_for_tests(0))
    assert r.diagnostics.rows == 5
    monkeypatch.setattr(query, "connect", real)
    assert isinstance(t.engine, ArrayEngine)
    assert t.engine.schema() == t.engine.duckdb.schema()
    assert t.engine.is_numeric("f64") and t.engine.is_numeric("b") and t.engine.is_boolean("b")
    assert kind == "numpy" or not (t.engine.is_numeric("s") or t.engine.is_boolean("ni"))


@pytest.mark.parametrize("keys", [None, ((0,), (2,), (5,), (99,))])
@pytest.mark.parametrize("margin", [3.0, 40.0, 1e4, FULL_GRID])
def test_quantile_grids_match_duckdb(keys: tuple | None, margin: float) -> None:
    """Quantile grid windows (cells, counts, window bounds, values below) are DuckDB's, with
    NaN, infinities, values outside the bounds and values exactly half a cell apart (DuckDB's
    round goes half away from zero)."""
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.normal(0.3, 0.3, 2000), (np.arange(-3, 64) + 0.5) * 2.0**-20,
                        [np.nan, np.inf, -np.inf, 2.0, -1.0]])
    frame = pd.DataFrame({"x": x, "k": rng.integers(0, 6, x.size)})
    fast, slow = engines(frame)
    spec = Cells("x", 0.0, 1.0, 2**20, 0.5, margin)
    req = BoundingRequest(unit=None, keys=() if keys is None else ("k",), max_groups=1, max_rows=1,
                          seed=7, public_keys=keys, measures=(Measure("x", 0.0, 1.0, squares=False),),
                          cells=(spec, replace(spec, q=0.9, lo=0.25, hi=0.75, cells=1000)))
    assert fast._serves(req)
    a, b = fast.aggregate(req), slow.aggregate(req)
    for c in req.cells:
        for field in ("n", "start", "stop", "below", "group", "cell", "count"):
            np.testing.assert_array_equal(getattr(a.cells[c], field), getattr(b.cells[c], field), field)
    assert a.diagnostics == b.diagnostics


@pytest.mark.parametrize("added", [0.5, np.nan, np.inf, -3.0, 1e300])
def test_neighbouring_frames_take_the_same_path(added: float) -> None:
    """Security pair: a frame and the same plus one row (in bounds, null, infinite, outside the
    bounds) release a median and a mean by the same path (numpy, DuckDB never opened: opening
    it would show in the time) with the same columns and groups; only the DP values differ."""
    rng = np.random.default_rng(9)
    base = pd.DataFrame({"x": rng.uniform(0, 1, 500), "k": rng.integers(0, 3, 500)})
    grown = pd.concat([base, pd.DataFrame({"x": [added], "k": [1]})], ignore_index=True)
    out = []
    for frame in (base, grown):
        t = bdp.table(frame, None)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            r = t.group_by("k", keys=[0, 1, 2]).agg(
                p=bdp.quantile("x", 0.5, bounds=(0, 1)), m=bdp.mean("x", bounds=(0, 1))).release(1.0)
        assert "duckdb" not in vars(t.engine)  # the cached DuckDB engine was never opened
        frame_out = r.to_pandas()
        # A ResourceWarning is the collector's, for whatever object it finalizes then (left by
        # another test, or another thread's): not the release's.
        out.append((list(frame_out.columns), frame_out["k"].tolist(),
                    sorted({type(w.message).__name__ for w in seen
                            if not issubclass(w.category, CuratorWarning | ResourceWarning)})))
    assert out[0] == out[1]
