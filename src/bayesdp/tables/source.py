"""Turning user input (a path, a data frame, an Arrow table, a DuckDB relation) into an engine."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb

from bayesdp.errors import DataError
from bayesdp.expressions import resolve_column
from bayesdp.tables.engines.duckdb import DuckDBEngine, connect, duckdb_errors

_READERS = {".csv": "read_csv", ".tsv": "read_csv", ".txt": "read_csv", ".parquet": "read_parquet",
            ".pq": "read_parquet", ".json": "read_json_auto", ".ndjson": "read_json_auto",
            ".jsonl": "read_json_auto"}


def _reader(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    for s in reversed(suffixes):
        if s in _READERS:
            return _READERS[s]
    raise DataError(f"cannot read {str(path)!r}: use a .csv, .tsv, .parquet or .json file "
                    f"(optionally compressed), a data frame, an Arrow table or a DuckDB relation")


def engine_for(source: Any, connection: duckdb.DuckDBPyConnection | None = None) -> DuckDBEngine:
    """A DuckDB engine over `source`; files are scanned lazily (larger than memory works)."""
    if isinstance(source, duckdb.DuckDBPyRelation):
        return DuckDBEngine(source)
    con = connection or connect()
    if isinstance(source, str | Path):
        path = Path(source).expanduser()
        if not path.exists():
            raise DataError(f"file {str(path)!r} does not exist")
        reader = _reader(path)
        if path.is_file() and path.stat().st_size == 0:
            raise DataError(f"file {str(path)!r} is empty (0 bytes): there is nothing to release")
        literal = "'" + str(path).replace("'", "''") + "'"
        try:
            rel = con.sql(f"SELECT * FROM {reader}({literal})")
            rel.columns  # noqa: B018 (binding the scan reads the header and fails on bad files)
        except duckdb.Error as exc:  # DuckDB's text may quote a line of the file: private
            raise DataError(_unreadable(path, reader, exc),
                            private_detail=str(exc).split("\n", 1)[0]) from None
        return DuckDBEngine(rel)
    if isinstance(source, Mapping):
        return DuckDBEngine(con.from_arrow(_arrow_of_arrays(source)))
    module = type(source).__module__.split(".")[0]
    with duckdb_errors(f"cannot read the {module} input"):
        if module == "pandas":
            return DuckDBEngine(con.from_df(source))
        if module == "polars":
            return DuckDBEngine(con.from_arrow(source.to_arrow()))
        if module == "pyarrow":
            return DuckDBEngine(con.from_arrow(source))
    raise DataError(f"cannot read a {type(source).__name__}: give a file path, a pandas or Polars "
                    "data frame, an Arrow table, a mapping of column names to 1-D numpy arrays or "
                    "a DuckDB relation")


def _arrow_of_arrays(columns: Mapping[Any, Any]) -> Any:
    """An Arrow table of named 1-D numpy arrays of one length (numbers are not copied)."""
    import numpy as np
    import pyarrow as pa

    for name, values in columns.items():
        if not isinstance(name, str) or not isinstance(values, np.ndarray) or values.ndim != 1:
            raise DataError(f"column {name!r}: a mapping source holds column names (strings) "
                            "and 1-D numpy arrays")
    if len({len(v) for v in columns.values()}) > 1:
        raise DataError("the columns of a mapping source differ in length: "
                        f"{ {k: len(v) for k, v in columns.items()} }")
    try:
        return pa.table(dict(columns))
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise DataError(f"cannot read the mapping source as columns: {exc}") from None


def _unreadable(path: Path, reader: str, exc: duckdb.Error) -> str:
    """What to do about a file DuckDB cannot read (its sniffer's search space is no help)."""
    kind = {"read_csv": "CSV", "read_parquet": "Parquet", "read_json_auto": "JSON"}[reader]
    sniffed = "sniff" in str(exc).lower() or "dialect" in str(exc).lower()
    why = ": no consistent delimiter, quoting or columns were found" if sniffed else ""
    hint = " text with a header row (or convert it to Parquet)" if kind == "CSV" else ""
    return f"cannot read {str(path)!r} as {kind}{why}. Check that the file is {kind}{hint}"


def check_column(name: str, columns: list[str], role: str) -> str:
    """The column `name` names, spelled as in the schema (found as the engines find it, without
    case: `resolve_column`), else a DataError suggesting the closest names."""
    if not isinstance(name, str):
        raise DataError(f"{role} must be a column name (a string); got {name!r}")
    found = resolve_column(name, columns, role)
    if found is not None:
        return found
    close = difflib.get_close_matches(name, columns, n=3, cutoff=0.5)
    suggestion = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    shown = ", ".join(repr(c) for c in columns[:20]) + (" ..." if len(columns) > 20 else "")
    raise DataError(f"{role}: {name!r} is not a column of the table{suggestion} (columns: {shown})")
