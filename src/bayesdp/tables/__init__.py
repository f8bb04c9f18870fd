"""Private grouped releases from real tables: privacy units, contribution bounding, partition
selection, noise with confidence intervals, on DuckDB (engines behind `engines.base.Engine`)."""

from bayesdp.tables.aggregates import (
    Aggregate,
    count,
    count_units,
    histogram,
    mean,
    quantile,
    share,
    std,
    sum,
)
from bayesdp.tables.plan import Plan
from bayesdp.tables.query import Grouped, Query, Table, table
from bayesdp.tables.release import Release

__all__ = [
    "Aggregate",
    "Grouped",
    "Plan",
    "Query",
    "Release",
    "Table",
    "count",
    "count_units",
    "histogram",
    "mean",
    "quantile",
    "share",
    "std",
    "sum",
    "table",
]
