"""Engine errors are bayesdp errors whose public message reveals nothing about the data, and a
release spends its budget before any failure that can depend on the data."""

import duckdb
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp import Guarantee, Ledger, rng_for_tests
from bayesdp.errors import CuratorWarning, DataError, ResourceError
from bayesdp.tables.engines import duckdb_errors


@pytest.fixture
def texts() -> pd.DataFrame:
    return pd.DataFrame({"u": [1, 2, 3], "g": ["secret-a", "secret-b", "secret-c"], "v": [1.0, 2.0, 3.0]})


def _ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "budget.db", budget=Guarantee(1000.0, unit="u"))


def test_schema_errors_cost_nothing(texts, tmp_path):
    """An error that depends only on the schema is raised before the spend."""
    led = _ledger(tmp_path)
    q = bdp.table(texts, "u").where("g + 1 > 0").agg(n=bdp.count())
    with pytest.raises(DataError, match="DuckDB rejected the query"):
        q.release(1.0, ledger=led, rng=rng_for_tests(1))
    assert led.history() == []


def test_rows_with_a_null_unit_are_dropped_and_counted_only_for_the_curator(tmp_path):
    led = _ledger(tmp_path)
    frame = pd.DataFrame({"u": [1.0, None, None, 4.0], "v": [1.0, 2.0, 3.0, 4.0]})
    with pytest.warns(CuratorWarning, match="2 rows with a null privacy_unit 'u' were dropped"):
        r = bdp.table(frame, "u").agg(n=bdp.count()).release(700.0, ledger=led, rng=rng_for_tests(1))
    assert r.to_pandas()["n"].item() == pytest.approx(2, abs=0.1)
    assert "2 rows have a null privacy unit (they belong to no unit: dropped)." in r.curator_notes()
    assert len(led.history()) == 1


def test_a_file_the_parser_rejects_keeps_its_lines_private(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"u": 1, "name": "private-name"\n')
    with pytest.raises(DataError) as info:
        bdp.table(path, "u")
    assert "cannot read" in info.value.public_message
    assert "private-name" not in info.value.public_message


def test_out_of_memory_is_a_resource_error_with_advice():
    con = duckdb.connect(config={"memory_limit": "8MB", "threads": 1, "temp_directory": ""})
    with pytest.raises(ResourceError) as info, duckdb_errors():
        con.sql("SELECT list(range) FROM range(10000000)").fetchall()
    assert "memory_limit" in info.value.public_message
    assert "temp_directory" in info.value.public_message
    assert "Out of Memory" in info.value.private_detail


def test_spark_errors_keep_their_text_private_and_name_memory():
    pytest.importorskip("pyspark")
    from bayesdp.tables.engines.spark import _data_error

    cast = _data_error(RuntimeError("[CAST_INVALID_INPUT] The value 'secret-a' cannot be cast"))
    assert type(cast) is DataError and "secret" not in cast.public_message
    assert "secret-a" in cast.private_detail
    oom = _data_error(RuntimeError("Job aborted: java.lang.OutOfMemoryError: Java heap space"))
    assert isinstance(oom, ResourceError) and "spark.executor.memory" in oom.public_message


def test_a_value_the_reader_cannot_convert_is_wrapped_and_paid_for(tmp_path):
    """DuckDB infers a CSV's types from a sample of its first rows; a later row that does not
    fit fails only when the release reads it, with an error quoting the row. That failure
    depends on the data: it comes after the spend, and its text stays private."""
    path = tmp_path / "late.csv"
    rows = "\n".join(f"{i},{i % 7}" for i in range(50_000))
    path.write_text(f"u,v\n{rows}\n50000,secret-text\n")
    led = _ledger(tmp_path)
    q = bdp.table(path, "u").agg(s=bdp.sum("v", bounds=(0, 10)))
    with pytest.raises(DataError) as info:
        q.release(1.0, ledger=led, rng=rng_for_tests(1))
    assert "secret" not in info.value.public_message
    assert "secret-text" in info.value.private_detail
    assert len(led.history()) == 1
