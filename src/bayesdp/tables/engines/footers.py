"""A Spark source's rows and null units from its Parquet footers, without a Spark job.

With public keys the release counts the source's rows and units before the keys drop most of
them. DuckDB reads such counts from the files' metadata; Spark scans the unit column in a job of
its own (0.36 s of a 2.5 s release at 10M rows and 1,000 keys). When the source is a bare scan of
Parquet files, the counts are in the footers: each file's `num_rows` and each row group's
`null_count` of the unit's column (Apache Parquet format, FileMetaData and Statistics).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


def footer_counts(frame: Any, unit: str | None) -> tuple[int, int] | None:
    """(rows, rows whose `unit` is not null; `unit` None: every row) of a Spark DataFrame that is
    a bare scan of Parquet files, read from their footers; None when the frame is anything else
    (filtered, joined, another format, Spark Connect), a row group lacks the unit's null count,
    or a file cannot be opened from here: the caller then counts with a query."""
    try:
        plan = frame._jdf.queryExecution().analyzed()
        if plan.nodeName() != "LogicalRelation":
            return None
        relation = plan.relation()
        if relation.fileFormat().getClass().getSimpleName() != "ParquetFileFormat":
            return None
        partitions = {f.name() for f in _fields(relation.partitionSchema())}
        ignores = relation.options().get("ignorecorruptfiles")
        if unit in partitions or _true(frame.sparkSession.conf.get("spark.sql.files.ignoreCorruptFiles",
                                                                    "false")) or \
                (ignores.isDefined() and _true(ignores.get())):
            return None  # a skipped file's rows would still be in its footer
        files = list(frame.inputFiles())
    except Exception:  # not a JVM-backed DataFrame, or a plan of another shape
        return None
    rows = units = 0
    for uri in files:
        try:
            fs, path = pafs.FileSystem.from_uri(uri)
            with fs.open_input_file(path) as f:
                meta = pq.read_metadata(f)
        except (OSError, ValueError, pa.ArrowException):
            return None
        rows += meta.num_rows
        if unit is None:
            continue
        nulls = _nulls(meta, unit)
        if nulls is None:
            return None
        units += meta.num_rows - nulls
    return rows, rows if unit is None else units


def _nulls(meta: pq.FileMetaData, column: str) -> int | None:
    """Nulls of the top-level `column` in one file, from its row groups' statistics (a required
    column has none)."""
    found = [i for i in range(meta.num_columns) if meta.schema.column(i).path == column]
    if len(found) != 1 or meta.schema.column(found[0]).max_repetition_level:
        return None  # absent (its rows read as null), nested or repeated
    i = found[0]
    if meta.schema.column(i).max_definition_level == 0:
        return 0
    total = 0
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(i).statistics
        if stats is None or not stats.has_null_count:
            return None
        total += stats.null_count
    return total


def _fields(schema: Any) -> list[Any]:
    return [schema.apply(i) for i in range(schema.length())]


def _true(text: str | None) -> bool:
    return str(text).strip().lower() == "true"
