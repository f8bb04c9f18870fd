"""Data engines behind one small interface (`base.Engine`); DuckDB is the embedded default."""

from bayesdp.tables.engines.base import (
    Bins,
    BoundingRequest,
    Cells,
    Diagnostics,
    Engine,
    ExactAggregates,
    Measure,
)
from bayesdp.tables.engines.duckdb import DuckDBEngine, connect, duckdb_errors

__all__ = [
    "Bins",
    "BoundingRequest",
    "Cells",
    "Diagnostics",
    "DuckDBEngine",
    "Engine",
    "ExactAggregates",
    "Measure",
    "connect",
    "duckdb_errors",
]
