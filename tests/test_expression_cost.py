"""The expression checker's cost pass: strings that can grow without bound are refused, every
admitted string stays within its bound, and the cost counts every CASE branch."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot

from bayesdp.errors import InvalidParameter
from bayesdp.expressions import MAX_STRING_CHARS, MAX_STRING_GROWTH, _Cost, row_expression

COLUMNS = ["name", "wage"]


@pytest.mark.parametrize("text", [
    # The nested replace of a timing attack: a million-fold per matching row.
    "CASE WHEN wage >= 5 THEN length("
    + "replace(" * 6 + "name" + ", 'a', 'aaaaaaaaaa')" * 6 + ") ELSE 0 END > 0",
    "replace(replace(name, 'a', 'aaaaa'), 'a', 'aaaaa')",  # 25 times
    " || ".join(["name"] * (MAX_STRING_GROWTH + 1)),  # repeated concatenation
    "replace(name, 'a', name)",  # quadratic in the column's length
    "replace(name, name, 'abcdefghijklmnopq')",  # a pattern that can be one character long
    "'" + "x" * (MAX_STRING_CHARS + 1) + "' || name",
])
def test_strings_that_can_grow_beyond_the_limit_are_refused(text: str) -> None:
    with pytest.raises(InvalidParameter, match="builds a string that can"):
        row_expression(text, COLUMNS)


@pytest.mark.parametrize("text", [
    "replace(" * 4 + "name" + ", 'a', 'aa')" * 4,  # 16 times: the limit
    " || ".join(["name"] * MAX_STRING_GROWTH),
    "replace(name, 'abc', 'x')",
    "upper(name) || CAST(wage AS VARCHAR) || 'z'",
    "CASE WHEN wage > 1 THEN replace(name, 'a', 'aaaa') ELSE lower(name) END",
    "substring(replace(name, 'ab', 'abab'), 2, 3) || right(name, 2)",
])
def test_admitted_strings_stay_within_their_bound(text: str) -> None:
    """Evaluated on values made of the patterns' characters (the worst case for replace)."""
    checked = row_expression(text, COLUMNS)
    bound = _Cost("t").length(sqlglot.parse_one(checked.text, read="duckdb"))
    con = duckdb.connect()
    names = ["a" * 50, "ab" * 40, "", "xyz" * 7]
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES " +
                ", ".join(f"('{n}', {i * 1000})" for i, n in enumerate(names)) + ") v(name, wage)")
    longest = max(len(n) for n in names)
    got = con.execute(f"SELECT max(length(CAST({checked.sql()} AS VARCHAR))) FROM t").fetchone()[0]
    assert bound is not None
    assert got <= bound.growth * longest + bound.chars, (text, got, bound)


def test_the_cost_counts_every_case_branch_whichever_a_row_takes() -> None:
    costly = "length(replace(replace(name, 'a', 'aaaa'), 'b', 'bbbb'))"
    cheap = row_expression("0", COLUMNS).cost
    branch = row_expression(costly, COLUMNS).cost
    both = row_expression(f"CASE WHEN wage >= 5 THEN {costly} ELSE 0 END", COLUMNS).cost
    assert both > branch + cheap
    assert row_expression(f"CASE WHEN wage >= 9 THEN {costly} ELSE 0 END", COLUMNS).cost == both


def test_the_cost_grows_with_the_expression() -> None:
    costs = [row_expression("wage" + " + wage" * k, COLUMNS).cost for k in range(5)]
    assert costs == sorted(costs) and len(set(costs)) == 5
