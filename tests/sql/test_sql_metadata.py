"""The metadata file: the shape of the issue is read; mistakes name the key and the file."""

import pytest

import bayesdp as bdp
from bayesdp.errors import DataError
from bayesdp.sql.metadata import load

ISSUE = """
[tables.events]
privacy_unit = "user_id"
max_groups_per_unit = 5
max_rows_per_group = 1
[tables.events.columns.revenue]
bounds = [0, 100]
[tables.events.columns.campaign]
keys = ["spring", "summer"]      # public keys: every one released, no partition selection
"""


def test_the_issues_shape(tmp_path):
    path = tmp_path / "meta.toml"
    path.write_text(ISSUE)
    meta = load(path)["events"]
    assert meta.privacy_unit == "user_id"
    assert meta.options == {"max_groups_per_unit": 5, "max_rows_per_group": 1}
    assert meta.columns["revenue"].bounds == (0, 100)
    assert meta.columns["campaign"].keys == ("spring", "summer") and meta.columns["campaign"].public


def test_public_keys_release_every_key_even_without_rows(events, tmp_path):
    path = tmp_path / "meta.toml"
    path.write_text(ISSUE.replace('"summer"]', '"summer", "winter"]'))
    release = bdp.sql("SELECT campaign, AVG(revenue) AS m FROM events GROUP BY campaign", {"events": events},
                      metadata=path, epsilon=1.0, rng=bdp.rng_for_tests(2))
    assert list(release.to_pandas()["campaign"]) == ["spring", "summer", "winter"]
    assert release.plan.selection is None


def test_rows_as_units(events):
    meta = {"tables": {"events": {"privacy_unit": False, "columns": {"revenue": {"bounds": [0, 100]}}}}}
    release = bdp.sql("SELECT SUM(revenue) AS s FROM events", {"events": events}, metadata=meta,
                      epsilon=1.0, rng=bdp.rng_for_tests(2))
    assert release.guarantee.unit == "row"


@pytest.mark.parametrize(("text", "words"), [
    ("[tables.events]\nprivacy_units = 'x'", "unknown key(s) ['privacy_units']"),
    ("[tables.events.columns.revenue]\nbound = [0, 1]", "unknown key(s) ['bound']"),
    ("[tables.events.columns.revenue]\nbounds = [0]", "bounds must be [low, high]"),
    ("[tables.events]\nprivacy_unit = 3", "privacy_unit must be a column name"),
    ("[tables.events.columns.campaign]\nkeys = 'spring'", "keys must be a list"),
    ("[other]\nx = 1", "one [tables.NAME] table per table"),
    ("[tables.events\n", "cannot parse the metadata"),
])
def test_mistakes_name_the_key(tmp_path, text, words):
    path = tmp_path / "meta.toml"
    path.write_text(text)
    with pytest.raises(DataError) as info:
        load(path)
    assert words in str(info.value) and "meta.toml" in str(info.value)
