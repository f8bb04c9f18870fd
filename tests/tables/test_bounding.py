"""Contribution bounding in the DuckDB engine: hard caps, uniformly random choice, counts."""

import duckdb
import numpy as np
import pandas as pd
from scipy import stats

from bayesdp.tables.engines import BoundingRequest, Cells, DuckDBEngine, Measure

HEAVY = 10_000


def _engine(df: pd.DataFrame) -> DuckDBEngine:
    return DuckDBEngine(duckdb.connect().from_df(df))


def _heavy_rows() -> pd.DataFrame:
    """Unit 0 has 10,000 rows in group 'a' (values 0..9999); units 1..50 have one row of value 0."""
    heavy = pd.DataFrame({"u": 0, "g": "a", "v": np.arange(HEAVY, dtype=float)})
    light = pd.DataFrame({"u": np.arange(1, 51), "g": "a", "v": 0.0})
    return pd.concat([heavy, light], ignore_index=True)


def test_heavy_unit_contributes_at_most_the_bounds():
    eng = _engine(_heavy_rows())
    meas = Measure("v", 0.0, 100.0)
    req = BoundingRequest(unit="u", keys=("g",), max_groups=1, max_rows=3, seed=12345, measures=(meas,))
    out = eng.aggregate(req)
    assert out.units.tolist() == [51]
    assert out.rows.tolist() == [53]
    n, s, _ = out.moments[meas][0]
    assert n == 53 and s <= 3 * 100.0
    d = out.diagnostics
    assert (d.rows, d.kept_rows, d.dropped_by_bounding) == (HEAVY + 50, 53, HEAVY - 3)


def test_rows_are_chosen_uniformly_not_first():
    # 200 units, each with 1,000 rows (values 0..999) in its own group: 200 independent choices.
    units, rows = 200, 1000
    df = pd.DataFrame({"u": np.repeat(np.arange(units), rows), "v": np.tile(np.arange(rows), units)})
    df["g"] = df["u"]
    meas = Measure("v", 0.0, float(rows))
    out = _engine(df).aggregate(BoundingRequest("u", ("g",), 1, 1, 2**100 + 17, measures=(meas,)))
    kept = out.moments[meas][:, 1]
    assert out.rows.tolist() == [1] * units
    # Uniform on 0..999 (sd 288.7): a 5.3-sigma band on the mean of 200 draws fails w.p. < 1e-7.
    assert abs(kept.mean() - (rows - 1) / 2) < 5.3 * 288.7 / np.sqrt(units)
    # First-k would always keep 0; each third is missed entirely w.p. (2/3)^200 < 1e-35.
    assert kept.max() > 2 * rows / 3 and kept.min() < rows / 3


def test_groups_are_chosen_uniformly_and_capped():
    units, groups = 200, 40
    df = pd.DataFrame({"u": np.repeat(np.arange(units), groups), "g": np.tile(np.arange(groups), units)})
    out = _engine(df).aggregate(BoundingRequest("u", ("g",), 5, 1, 2**90 + 5))
    assert out.units.sum() == 5 * units and out.rows.sum() == 5 * units
    # Each group is kept by Binomial(200, 5/40) units; the 1e-9 quantiles, union over 40 groups,
    # bound the false-failure probability by 8e-8.
    assert out.units.max() <= stats.binom.ppf(1 - 1e-9, units, 5 / groups)
    assert out.units.min() >= stats.binom.ppf(1e-9, units, 5 / groups)


def test_public_keys_drop_and_count_other_rows():
    df = pd.DataFrame({"u": [1, 2, 3, 4], "g": ["a", "b", "c", None], "v": [1.0, None, 3.0, 4.0]})
    eng = _engine(df)
    meas = Measure("v", 0.0, 2.0)
    out = eng.aggregate(BoundingRequest("u", ("g",), 1, 1, 99, public_keys=(("a",), ("b",)),
                                        measures=(meas,)))
    assert out.groups["g"].tolist() == ["a", "b"]
    d = out.diagnostics
    assert d.dropped_by_keys == 2 and d.nulls == {"v": 1} and d.clipped[meas] == 0
    full = eng.aggregate(BoundingRequest("u", ("g",), 1, 1, 99, measures=(meas,)))
    assert full.groups["g"].isna().sum() == 1 and full.diagnostics.clipped[meas] == 2


def test_null_units_are_counted():
    df = pd.DataFrame({"u": [1.0, None, None], "v": [1.0, 2.0, 3.0]})
    out = _engine(df).aggregate(BoundingRequest("u", (), 1, 1, 5))
    assert out.diagnostics.null_units == 2 and out.units.tolist() == [1]


def test_a_row_with_a_null_unit_outside_the_keys_is_counted_once():
    df = pd.DataFrame({"u": [1.0, None, 2.0], "g": ["a", "z", "z"], "v": [1.0, 1.0, 1.0]})
    out = _engine(df).aggregate(BoundingRequest("u", ("g",), 1, 1, 5, public_keys=(("a",),)))
    d = out.diagnostics
    assert (d.rows, d.null_units, d.dropped_by_keys, d.dropped_by_bounding, d.kept_rows) == (3, 1, 1, 0, 1)


def test_public_keys_diagnostics_are_exact_whatever_bounding_keeps():
    """Units with groups inside and outside the keys, more groups and rows than the bounds, and
    null units: each diagnostic is its exact count, in one pass and with a grid to read."""
    groups = ["a", "z", "b", "c"]  # z is not a key
    units = np.arange(40)
    # Unit u has 3 rows in each of its first u % 4 + 1 groups: whichever groups bounding picks,
    # it keeps min(its groups among the keys, 2) x min(3, 2) rows.
    df = pd.DataFrame([(u, g, float(u % 7)) for u in units for g in groups[:u % 4 + 1]
                       for _ in range(3)] + [(None, "a", 1.0)] * 5 + [(None, "z", 1.0)] * 2,
                      columns=["u", "g", "v"])
    in_keys = np.array([sum(g != "z" for g in groups[:u % 4 + 1]) for u in units])
    entered = int(3 * in_keys.sum())
    kept = int((2 * np.minimum(in_keys, 2)).sum())
    outside = int((df["u"].notna() & (df["g"] == "z")).sum())
    meas = Measure("v", 0.0, 10.0)
    eng = _engine(df)
    for extra in ({}, {"cells": (Cells("v", 0.0, 10.0, 100),)}):
        req = BoundingRequest("u", ("g",), 2, 2, 2**70 + 3, public_keys=(("a",), ("b",), ("c",)),
                              measures=(meas,), **extra)
        d = eng.aggregate(req).diagnostics
        assert (d.rows, d.null_units, d.dropped_by_keys, d.dropped_by_bounding, d.kept_rows) == \
            (len(df), 7, outside, entered - kept, kept)
