"""Joins: a private table with a public one, two private tables of the same unit; bounding after
the join, the refusals, the neighbour pair, and an audit of a release on a join."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import bayesdp as bdp
from bayesdp import audit
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.tables import Table
from bayesdp.tables.estimate import estimate

RATINGS = pd.DataFrame({"user": [1, 1, 2, 3, 3, 3], "item": [10, 11, 10, 12, 10, 11],
                        "stars": [5, 3, 4, 2, 5, 1]})
ITEMS = pd.DataFrame({"item": [10, 11, 12, 13], "genre": ["drama", "comedy", "drama", "horror"]})
PROFILES = pd.DataFrame({"user": [1, 2, 3, 3], "year": [2020, 2020, 2020, 2021],
                         "age": [30, 40, 50, 51], "item": [10, 10, 11, 11]})


def _rows(t: Table) -> pd.DataFrame:
    frame = t.engine.relation.df()
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def _merged(left: pd.DataFrame, right: pd.DataFrame, **kw) -> pd.DataFrame:
    frame = left.merge(right, **kw)
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


@pytest.mark.parametrize("form", ["pandas", "arrow", "parquet", "csv", "relation"])
def test_join_public_takes_every_form_of_public_table(form, tmp_path):
    if form == "pandas":
        public = ITEMS
    elif form == "arrow":
        public = pa.Table.from_pandas(ITEMS)
    elif form == "relation":
        import duckdb

        public = duckdb.connect().from_df(ITEMS)
    else:
        public = tmp_path / f"items.{form}"
        ITEMS.to_parquet(public) if form == "parquet" else ITEMS.to_csv(public, index=False)
    for how in ("inner", "left"):
        joined = bdp.table(RATINGS, "user").join_public(public, "item", how=how)
        assert joined.columns == ["user", "item", "stars", "genre"]
        expected = _merged(RATINGS, ITEMS, on="item", how=how)
        pd.testing.assert_frame_equal(_rows(joined), expected, check_dtype=False)


def test_bounding_happens_after_the_join():
    # User 9 has one rating of an item listed three times in the public table: with one row per
    # group the joined rows of user 9 still count once.
    listed = pd.DataFrame({"item": [10, 10, 10, 11], "genre": ["drama"] * 4})
    ratings = pd.concat([RATINGS, pd.DataFrame({"user": [9], "item": [10], "stars": [1]})])
    q = bdp.table(ratings, "user").join_public(listed, "item").agg(n=bdp.count())
    plan = q.plan(1.0, max_rows_per_group=1)
    exact = q.table.engine.aggregate(q._request(plan, 0.05, 7))
    assert exact.rows[0] == 4 and exact.units[0] == 4  # users 1, 2, 3 and 9, one row each


def test_public_keys_may_come_from_a_column_of_the_public_table():
    joined = bdp.table(RATINGS, "user").join_public(ITEMS, "item")
    grouped = joined.group_by("genre", keys=ITEMS["genre"])
    assert grouped.keys == (("drama",), ("comedy",), ("horror",))
    assert joined.group_by("genre", keys=pa.Table.from_pandas(ITEMS)["genre"]).keys == grouped.keys


def test_a_row_level_table_joins_only_unique_public_keys():
    twice = pd.concat([ITEMS, ITEMS])
    with pytest.raises(InvalidParameter, match="repeats keys"):
        bdp.table(RATINGS, None).join_public(twice, "item")
    joined = bdp.table(RATINGS, None).join_public(ITEMS, {"item": "item"})
    assert len(_rows(joined)) == len(RATINGS)


def test_unique_public_keys_may_have_null_keys_and_a_repeated_key_is_shown():
    # A null key never matches a row, so rows with one are not repeats; a repeat is named
    # (the public table is public).
    nulls = pd.DataFrame({"item": [10.0, 11.0, 12.0, None, None], "shelf": range(5)})
    joined = bdp.table(RATINGS, None).join_public(nulls, "item")
    assert len(_rows(joined)) == len(RATINGS)
    with pytest.raises(InvalidParameter, match=r"repeats keys of \['item', 'shelf'\] \(such as \(10, 1\)\)"):
        bdp.table(RATINGS.assign(shelf=1), None).join_public(
            pd.DataFrame({"item": [10, 10, 11], "shelf": [1, 1, 1]}), ["item", "shelf"])


def test_private_join_on_the_unit_joins_each_units_own_rows():
    joined = bdp.table(RATINGS, "user").join(bdp.table(PROFILES, "user"), ["user"])
    assert joined.columns == ["user", "item", "stars", "year", "age", "item_right"]
    expected = _merged(RATINGS, PROFILES, on="user", suffixes=("", "_right"))
    pd.testing.assert_frame_equal(_rows(joined), expected[joined.columns], check_dtype=False)


def test_private_join_on_another_key_pairs_the_units_and_truncates():
    # On item alone the units are paired too: user 1's rating of item 10 joins user 1's profile
    # with item 10, never user 2's. max_rows_per_key=1 keeps one of user 3's two item-11 rows.
    joined = bdp.table(RATINGS, "user").join(bdp.table(PROFILES, "user"), "item", max_rows_per_key=1,
                                             rng=bdp.rng_for_tests(1))
    rows = _rows(joined)
    assert rows[["user", "item"]].values.tolist() == [[1, 10], [2, 10], [3, 11]]
    full = bdp.table(RATINGS, "user").join(bdp.table(PROFILES, "user"), "item", max_rows_per_key=2)
    assert len(_rows(full)) == 4


def test_joins_are_refused_with_clear_errors():
    t, p = bdp.table(RATINGS, "user"), bdp.table(PROFILES, "user")
    with pytest.raises(InvalidParameter, match="different privacy units"):
        t.join(bdp.table(PROFILES, "user", unit_name="household"), "user")
    with pytest.raises(InvalidParameter, match="max_rows_per_key is required"):
        t.join(p, "item")
    with pytest.raises(InvalidParameter, match="max_rows_per_key=2 is not allowed"):
        t.join(p, "user", max_rows_per_key=2)
    with pytest.raises(InvalidParameter, match="may only be paired"):
        t.join(p, {"item": "user"})
    with pytest.raises(InvalidParameter, match="without one"):
        bdp.table(RATINGS, None).join(p, "user")
    with pytest.raises(InvalidParameter, match="how='outer' is not allowed"):
        t.join_public(ITEMS, "item", how="outer")
    with pytest.raises(DataError, match="not a column"):
        t.join_public(ITEMS, "genre")
    with pytest.raises(InvalidParameter, match="before where"):
        t.where("stars > 2").join_public(ITEMS, "item")
    with pytest.raises(InvalidParameter, match="public table use join_public"):
        t.join(ITEMS, "item")


def test_neighbours_differ_only_in_the_added_units_joined_rows():
    # Security pair: the same join (same secret seed) on two neighbouring inputs, one user added
    # to both tables: every other user's joined rows are the same.
    extra_r = pd.DataFrame({"user": [7, 7], "item": [10, 11], "stars": [2, 2]})
    extra_p = pd.DataFrame({"user": [7, 7, 7], "year": [2020] * 3, "age": [20] * 3, "item": [10, 10, 11]})
    out = []
    neighbour = (pd.concat([RATINGS, extra_r]), pd.concat([PROFILES, extra_p]))
    for ratings, profiles in ((RATINGS, PROFILES), neighbour):
        joined = bdp.table(ratings, "user").join(bdp.table(profiles, "user"), "item", max_rows_per_key=1,
                                                 rng=bdp.rng_for_tests(5))
        out.append(_rows(joined))
    pd.testing.assert_frame_equal(out[0], out[1][out[1]["user"] != 7].reset_index(drop=True))


def test_join_keys_of_different_kinds_are_refused_from_the_schemas(tmp_path):
    # Security pair: text keys joined to numbers would be cast row by row, so a neighbour whose
    # added row holds 'x' would fail where the other table releases. Both are refused alike,
    # before the ledger is touched.
    ledger = bdp.Ledger(tmp_path / "l.db", budget=bdp.Guarantee(5.0, unit="user"))
    public = pd.DataFrame({"code": [1, 2], "label": ["a", "b"]})
    messages = []
    for codes in (["1", "2"], ["1", "2", "x"]):
        t = bdp.table(pd.DataFrame({"user": range(len(codes)), "code": codes}), "user")
        with pytest.raises(InvalidParameter) as err:
            t.join_public(public, "code").agg(n=bdp.count()).release(
                1.0, max_rows_per_group=1, ledger=ledger)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "'code' (VARCHAR, text) with 'code' (BIGINT, numbers)" in messages[0]
    assert ledger.history() == []
    profiles = bdp.table(PROFILES.assign(item=PROFILES["item"].astype(str)), "user")
    with pytest.raises(InvalidParameter, match="same kind of values"):
        bdp.table(RATINGS, "user").join(profiles, "item", max_rows_per_key=1)
    # Integers join floats (both numbers).
    floats = ITEMS.assign(item=ITEMS["item"].astype(float))
    assert len(_rows(bdp.table(RATINGS, "user").join_public(floats, "item"))) == len(RATINGS)


BASE = pd.DataFrame({"user": [1, 2, 3], "item": [10, 11, 12]})
HEAVY = pd.concat([BASE, pd.DataFrame({"user": [9], "item": [10]})], ignore_index=True)
# Item 10 is listed five times: user 9's one rating becomes five joined rows, two kept.
LISTED = pd.DataFrame({"item": [10] * 5 + [11, 12], "shelf": range(7)})


def _mechanism():
    def run(which: int, size: int, rng: np.random.Generator) -> np.ndarray:
        q = bdp.table((BASE, HEAVY)[which], "user").join_public(LISTED, "item").agg(rows=bdp.count())
        plan = q.plan(1.0, max_rows_per_group=2)
        exact = q.table.engine.aggregate(q._request(plan, 0.05, int(rng.integers(0, 2**62))))
        return estimate(plan.steps["rows"], exact, np.zeros(size, dtype=np.int64), 0.05, rng=rng).value

    return run


def test_a_release_on_a_join_passes_its_audit_and_a_false_claim_fails():
    ok = audit(_mechanism(), 0, 1, epsilon=1.0, samples=100_000, alpha=1e-6, rng=bdp.rng_for_tests(3))
    assert ok.passed, ok
    # The heavy user's five joined rows are bounded to two: ε = 0.5 is refuted (1 - 1e-6).
    bad = audit(_mechanism(), 0, 1, epsilon=0.5, samples=100_000, alpha=1e-6, rng=bdp.rng_for_tests(4))
    assert not bad.passed and bad.epsilon_lower > 0.5


def test_tables_on_one_connection_join_there_with_differently_named_units():
    import duckdb

    con = duckdb.connect()
    other = PROFILES.rename(columns={"user": "uid", "item": "thing"})
    joined = bdp.table(RATINGS, "user", connection=con).join(
        bdp.table(other, "uid", unit_name="user", connection=con), {"user": "uid", "item": "thing"},
        how="left")
    assert joined.columns == ["user", "item", "stars", "year", "age"]
    expected = RATINGS.merge(other, left_on=["user", "item"], right_on=["uid", "thing"], how="left")
    got = _rows(joined)
    assert len(got) == len(expected) and got["age"].notna().sum() == expected["age"].notna().sum()
