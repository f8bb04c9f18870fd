"""Memory limits: settable from the API and the CLI, the bounded paths spill to disk instead of
failing, and running out is a ResourceError that says what to change."""

import duckdb
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp import rng_for_tests
from bayesdp.cli import main
from bayesdp.errors import InvalidParameter, ResourceError
from bayesdp.tables.engines import connect

ROWS = 2_000_000


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """2M rows, units of 3 rows, 11 campaigns: the bounding windows need more than 64 MB."""
    path = tmp_path_factory.mktemp("memory") / "big.parquet"
    duckdb.sql(f"""COPY (SELECT i // 3 AS user_id, 'c' || (i * 7 % 11) AS campaign,
                   (i * 37 % 1000) / 10.0 AS revenue FROM range({ROWS}) t(i))
                   TO '{path}' (FORMAT parquet)""")
    return path


def _setting(t, name):
    return t.engine.rows(f"SELECT current_setting('{name}')")[0][0]


def test_table_sets_the_memory_limit_and_the_spill_directory(tmp_path, events):
    t = bdp.table(events, "user_id", memory_limit="512MB", temp_directory=tmp_path / "spill")
    assert _setting(t, "memory_limit") == "488.2 MiB"  # 512e6 bytes
    assert _setting(t, "temp_directory") == str(tmp_path / "spill")
    assert _setting(t, "preserve_insertion_order") is False
    assert _setting(bdp.table(events, "user_id", memory_limit=2**30), "memory_limit") == "1.0 GiB"


@pytest.mark.parametrize("limit", ["lots", "-1GB", 0, -5, True, 1.5, "10 parsecs"])
def test_bad_memory_limits(events, limit):
    with pytest.raises(InvalidParameter, match="memory_limit"):
        bdp.table(events, "user_id", memory_limit=limit)


def test_limits_with_a_connection_are_refused(events, tmp_path):
    with pytest.raises(InvalidParameter, match=r"memory_limit=.*set it there"):
        bdp.table(events, "user_id", connection=duckdb.connect(), memory_limit="1GB")
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidParameter, match="temp_directory"):
        bdp.table(events, "user_id", temp_directory=tmp_path / "file")


@pytest.mark.parametrize("grouped", [False, True], ids=["ungrouped", "grouped"])
def test_the_bounded_paths_spill_under_a_memory_limit(big, tmp_path, grouped):
    """Capped at 64 MB (two threads, so the cap per thread does not depend on the machine), the
    one-pass bounding and aggregation runs out of memory without a spill directory and finishes
    with one, releasing exactly what the uncapped run releases."""

    def run(con):
        con.execute("SET threads = 2")
        t = bdp.table(str(big), "user_id", connection=con)
        aggs = {"rows": bdp.count(), "revenue": bdp.sum("revenue", bounds=(0, 100))}
        q = t.group_by("campaign").agg(**aggs) if grouped else t.agg(**aggs)
        return q.release(1.0, 1e-6, max_groups_per_unit=2, max_rows_per_group=2,
                         rng=rng_for_tests(3)).to_pandas()

    with pytest.raises(ResourceError) as info:
        run(connect("64MB", ""))  # no spill directory: the cap binds
    assert "memory_limit=" in info.value.public_message and "temp_directory=" in info.value.public_message
    capped = run(connect("64MB", tmp_path / "spill"))
    pd.testing.assert_frame_equal(capped, run(connect()), rtol=1e-12)


def test_release_command_takes_memory_options(events, tmp_path, capsys):
    data, spec = tmp_path / "events.parquet", tmp_path / "spec.toml"
    events.to_parquet(data)
    spec.write_text('privacy_unit = "user_id"\nepsilon = 1.0\n[aggregates]\nn = { kind = "count" }\n')
    args = ["release", str(data), "--spec", str(spec), "--temp-directory", str(tmp_path / "spill")]
    assert main([*args, "--memory-limit", "256MB"]) == 0
    assert main([*args, "--memory-limit", "lots"]) == 2
    assert "memory_limit='lots' is not allowed" in " ".join(capsys.readouterr().err.split())


@pytest.fixture(scope="module")
def heavy(tmp_path_factory):
    """1M rows, 950,000 of them one unit's (in 50 campaigns), the others 1,000 units'."""
    path = tmp_path_factory.mktemp("memory") / "heavy.parquet"
    duckdb.sql(f"""COPY (SELECT CASE WHEN i < 950000 THEN 0 ELSE 1 + i % 1000 END AS user_id,
                   'c' || (hash(i * 31) % 50) AS campaign, (i * 37 % 1000) / 10.0 AS revenue
                   FROM range({ROWS // 2}) t(i)) TO '{path}' (FORMAT parquet)""")
    return path


@pytest.mark.parametrize("rows", [1, 2])
def test_bounding_memory_does_not_follow_the_largest_unit(heavy, tmp_path, rows):
    """Capped at 32 MB, a release on a table where one unit holds 95% of the rows bounds each
    (unit, campaign) pair, never the unit's rows together (one window partition of 950,000
    rows, which DuckDB cannot spill), and releases what the uncapped run releases."""

    def run(con):
        con.execute("SET threads = 1")  # one thread's buffers: two left 32 MB at its edge under load
        q = bdp.table(str(heavy), "user_id", connection=con).group_by("campaign").agg(
            rows=bdp.count(), revenue=bdp.sum("revenue", bounds=(0, 100)))
        return q.release(1.0, 1e-6, max_groups_per_unit=2, max_rows_per_group=rows,
                         rng=rng_for_tests(5)).to_pandas()

    capped = run(connect("32MB", tmp_path / "spill"))
    pd.testing.assert_frame_equal(capped, run(connect()), rtol=1e-12)
