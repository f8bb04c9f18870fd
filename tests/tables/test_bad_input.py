"""Bad input: one clear error each, naming what is wrong."""

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp import rng_for_tests
from bayesdp.errors import CuratorWarning, DataError, InvalidParameter


def test_columns_are_checked_with_suggestions(events):
    with pytest.raises(DataError, match="did you mean 'user_id'"):
        bdp.table(events, privacy_unit="userid")
    t = bdp.table(events, privacy_unit="user_id")
    with pytest.raises(DataError, match="did you mean 'campaign'"):
        t.group_by("campain")
    with pytest.raises(DataError, match="not numbers"):
        t.agg(x=bdp.sum("campaign", bounds=(0, 1)))


@pytest.mark.parametrize("bounds", [(1, 1), (2, 1), (0, float("inf")), (float("nan"), 1), None, (1,)])
def test_bad_bounds(bounds):
    with pytest.raises(InvalidParameter, match="bounds"):
        bdp.mean("x", bounds=bounds)


def test_bad_release_parameters(events):
    q = bdp.table(events, "user_id").group_by("campaign").agg(n=bdp.count())
    with pytest.raises(InvalidParameter, match="partition selection needs delta > 0"):
        q.release(epsilon=1.0, max_groups_per_unit=2)
    with pytest.raises(InvalidParameter, match="epsilon"):
        q.release(epsilon=0.0, delta=1e-6, max_groups_per_unit=2)
    with pytest.raises(InvalidParameter, match="noise"):
        q.release(epsilon=1.0, delta=1e-6, max_groups_per_unit=2, noise="cauchy")
    with pytest.raises(InvalidParameter, match="max_groups_per_unit"):
        q.release(epsilon=1.0, delta=1e-6, max_groups_per_unit=0)
    with pytest.raises(InvalidParameter, match="keys"):
        bdp.table(events, "user_id").group_by("campaign", keys=["a", "a"])


def test_bad_data(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        bdp.table(tmp_path / "nope.parquet", "u")
    with pytest.raises(DataError, match="cannot read"):
        bdp.table(tmp_path / "x.xlsx", "u") if (tmp_path / "x.xlsx").touch() is None else None
    with pytest.raises(InvalidParameter, match="'nosuch' at line 1, column 6 is not a column"):
        bdp.table(pd.DataFrame({"u": [1]}), "u").where("nosuch > 1")


def test_public_keys_must_suit_their_column(events):
    # On main, integer keys on a text column failed inside DuckDB at execution.
    with pytest.raises(InvalidParameter, match=r"keys=1 .* a string, like the values of group column"):
        bdp.table(events, "user_id").group_by("campaign", keys=[1, 2])
    with pytest.raises(InvalidParameter, match="an integer"):
        bdp.table(events, "campaign").group_by("user_id", keys=[2.5])
    with pytest.raises(InvalidParameter, match="keys"):
        bdp.table(events, "user_id").group_by("campaign", keys=[b"alpha"])


def test_histogram_bins_are_bounded():
    with pytest.raises(InvalidParameter, match="bins"):
        bdp.histogram("v", bins=1_000_001, bounds=(0, 1))


def test_engine_input_errors_say_what_to_do(tmp_path):
    text = pd.DataFrame({"u": range(3), "x": pd.Series([1.0, "n/a", 2.0], dtype=object)})
    with pytest.raises(DataError, match=r"'x' of s holds VARCHAR values, not numbers: give the "
                                        r"expression CAST\(x AS DOUBLE\) in its place"):
        bdp.table(text, "u").agg(s=bdp.sum("x", bounds=(0, 2)))
    # ... which works: 'n/a' becomes null and is left out.
    out = bdp.table(text, "u").agg(s=bdp.sum("CAST(x AS DOUBLE)", bounds=(0, 2))).release(
        1.0, rng=rng_for_tests(1)).to_pandas()
    assert np.isfinite(out["s"]).all()
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataError, match="is empty"):
        bdp.table(tmp_path / "empty.csv", None)
    (tmp_path / "header.csv").write_text("x,y\n")
    # Decided from the schema (a header alone reads as text), never from whether rows exist.
    with pytest.raises(DataError, match="'x' of s holds VARCHAR values, not numbers"):
        bdp.table(tmp_path / "header.csv", None).agg(s=bdp.sum("x", bounds=(0, 2)))
    (tmp_path / "garbage.csv").write_bytes(bytes(range(256)) * 20)
    with pytest.raises(DataError, match=r"as CSV: .*header row") as garbage:
        bdp.table(tmp_path / "garbage.csv", None)
    assert "Candidates" not in str(garbage.value) and "\n" not in str(garbage.value)


def test_infinite_values_are_clipped_into_the_bounds_and_told_only_to_the_curator():
    df = pd.DataFrame({"u": range(10), "x": [np.inf, -np.inf] + [1.0] * 8})
    with pytest.warns(CuratorWarning, match="2 kept values of 'x' were infinite"):
        r = bdp.table(df, "u").agg(s=bdp.sum("x", bounds=(0, 2))).release(700.0, rng=rng_for_tests(1))
    assert r.to_pandas()["s"].item() == pytest.approx(2 + 0 + 8, abs=0.1)
    assert "2 kept values of 'x' were infinite (clipped into the bounds)." in r.curator_notes()
    assert "infinite" not in " ".join(r.public().curator_notes())


@pytest.mark.parametrize("bad", ["1", b"1", True])
def test_numbers_given_as_text_are_refused(bad):
    q = bdp.table(pd.DataFrame({"u": range(3)}), "u").agg(n=bdp.count())
    with pytest.raises(InvalidParameter, match=r"epsilon=.* \(not text or a boolean\)"):
        q.release(epsilon=bad)
    with pytest.raises(InvalidParameter, match="bounds"):
        bdp.sum("x", bounds=("0", 1))
