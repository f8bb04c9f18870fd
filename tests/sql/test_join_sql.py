"""JOIN in DP SQL: with tables the metadata marks public or of the same unit, the same release as
the builder's joins; everything else refused with the construct shown."""

import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.sql import SqlError

RATINGS = pd.DataFrame({"user": [1, 1, 2, 3, 3, 3, 4], "item": [10, 11, 10, 12, 10, 11, 13],
                        "stars": [5, 3, 4, 2, 5, 1, 4]})
ITEMS = pd.DataFrame({"item": [10, 11, 12, 13], "genre": ["drama", "comedy", "drama", "horror"],
                      "stars": [1, 2, 3, 4]})
PROFILES = pd.DataFrame({"user": [1, 2, 3, 4], "age": [30, 40, 50, 60]})
META = {"tables": {
    "ratings": {"privacy_unit": "user", "max_groups_per_unit": 3, "max_rows_per_group": 2,
                "columns": {"stars": {"bounds": [1, 5]}}},
    "items": {"public": True, "columns": {"genre": {"keys": ["drama", "comedy", "horror"]},
                                          "stars": {"bounds": [1, 4]}}},
    "profiles": {"privacy_unit": "user", "columns": {"age": {"bounds": [0, 100]}}},
}}
SOURCES = {"ratings": RATINGS, "items": ITEMS, "profiles": PROFILES}
GENRES = ["drama", "comedy", "horror"]


def _builder() -> pd.DataFrame:
    t = bdp.table(RATINGS, "user").join_public(ITEMS, "item").join(bdp.table(PROFILES, "user"), "user")
    q = t.group_by("genre", keys=GENRES).agg(n=bdp.count(), stars=bdp.mean("stars", (1, 5)),
                                             catalogue=bdp.mean("stars_right", (1, 4)),
                                             age=bdp.mean("age", (0, 100)))
    return q.release(1.0, max_groups_per_unit=3, max_rows_per_group=2, rng=bdp.rng_for_tests(4)).to_pandas()


def test_plain_sql_joins_a_public_table_and_a_table_of_the_same_unit():
    got = bdp.sql("SELECT i.genre, COUNT(*) AS n, AVG(r.stars) AS stars, "
                  "AVG(i.stars) AS catalogue, AVG(p.age) AS age "
                  "FROM ratings AS r JOIN items AS i ON r.item = i.item "
                  "JOIN profiles AS p USING (user) GROUP BY i.genre",
                  SOURCES, metadata=META, epsilon=1.0, rng=bdp.rng_for_tests(4)).to_pandas()
    pd.testing.assert_frame_equal(got, _builder())


def test_bigquery_clause_joins_a_public_table():
    """The clause counts each user's joined rows per genre, clamped to (0, 1) (BigQuery's meaning):
    drama 3 (user 3's two dramas count once), comedy 2, horror 1. At ε = 600 and α = 1e-8 each
    interval covers (false failure <= 3e-8) and the noise is far below 0.5."""
    got = bdp.sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 600, alpha = 1e-8, "
                  "privacy_unit_column = user, max_groups_contributed = 3) genre, "
                  "COUNT(*, contribution_bounds_per_group => (0, 1)) AS n "
                  "FROM ratings LEFT JOIN items ON ratings.item = items.item GROUP BY genre",
                  {"ratings": RATINGS, "items": ITEMS},
                  metadata={"tables": {"items": META["tables"]["items"]}}, rng=bdp.rng_for_tests(2))
    joined = RATINGS.merge(ITEMS, on="item", how="left")
    want = joined.groupby(["genre", "user"]).size().clip(0, 1).groupby("genre").sum()
    assert want.to_dict() == {"drama": 3, "comedy": 2, "horror": 1}
    out = got.to_pandas().set_index("genre")
    for genre, n in want.items():
        assert out.loc[genre, "n_low"] <= n <= out.loc[genre, "n_high"]
        assert abs(out.loc[genre, "n"] - n) < 0.5


@pytest.mark.parametrize(("query", "words", "caret"), [
    ("SELECT COUNT(*) FROM ratings JOIN other ON ratings.user = other.user", "not one of the tables",
     "other"),
    ("SELECT COUNT(*) FROM ratings JOIN plain ON ratings.item = plain.item", "neither public", "plain"),
    ("SELECT COUNT(*) FROM ratings RIGHT JOIN items ON ratings.item = items.item", "RIGHT JOIN", "items"),
    ("SELECT COUNT(*) FROM ratings JOIN items ON ratings.item < items.item", "equalities", "ratings.item"),
    ("SELECT COUNT(*) FROM ratings JOIN items ON TRUE", "equalities", "items ON TRUE"),
    ("SELECT COUNT(*) FROM ratings CROSS JOIN items", "CROSS JOIN", "items"),
    ("SELECT COUNT(*) FROM ratings JOIN profiles ON ratings.item = profiles.age", "max_rows_per_key",
     "profiles"),
    ("SELECT COUNT(*) FROM ratings LEFT JOIN items AS i ON ratings.item = i.item WHERE i.item > 3",
     "LEFT JOIN", "i.item > 3"),
])
def test_joins_refused_point_at_the_construct(query, words, caret):
    sources = {**SOURCES, "plain": ITEMS}
    with pytest.raises(SqlError, match=words) as info:
        bdp.sql(query, sources, metadata=META, epsilon=1.0)
    text, marks = str(info.value).splitlines()[-2:]
    assert text[marks.index("^"):].startswith(caret)


def test_metadata_max_rows_per_key_serves_joins_off_the_unit_and_is_ignored_on_it():
    meta = {"tables": {**META["tables"], "profiles": {**META["tables"]["profiles"], "max_rows_per_key": 1}}}
    got = bdp.sql("SELECT COUNT(*) AS n, AVG(p.age) AS age FROM ratings AS r JOIN profiles AS p "
                  "USING (user)", SOURCES, metadata=meta, epsilon=1.0, rng=bdp.rng_for_tests(5))
    want = bdp.table(RATINGS, "user").join(bdp.table(PROFILES, "user"), "user").agg(
        n=bdp.count(), age=bdp.mean("age", (0, 100))).release(
        1.0, max_groups_per_unit=3, max_rows_per_group=2, rng=bdp.rng_for_tests(5))
    pd.testing.assert_frame_equal(got.to_pandas(), want.to_pandas())
    off = bdp.sql("SELECT COUNT(*) AS n FROM ratings AS r JOIN profiles AS p ON r.item = p.age",
                  SOURCES, metadata=meta, epsilon=1.0)
    assert list(off.to_pandas().columns) == ["n", "n_low", "n_high"]


def test_metadata_max_rows_per_key_caps_a_public_tables_rows_per_join_key():
    """A public table with more rows on a join key than its max_rows_per_key is refused from
    the public table alone (a row with that key would join them all); within it, it joins."""
    query = "SELECT COUNT(*) AS n FROM ratings JOIN items USING (item)"
    doubled = pd.concat([ITEMS, ITEMS.head(1)], ignore_index=True)
    for most, items, refused in ((1, ITEMS, False), (1, doubled, True), (2, doubled, False)):
        meta = {"tables": {**META["tables"], "items": {**META["tables"]["items"], "max_rows_per_key": most}}}
        if refused:
            with pytest.raises(SqlError, match=r"more than 1 row\(s\) with the join key \(10,\)"):
                bdp.sql(query, {**SOURCES, "items": items}, metadata=meta, epsilon=1.0)
        else:
            bdp.sql(query, {**SOURCES, "items": items}, metadata=meta, epsilon=1.0)
