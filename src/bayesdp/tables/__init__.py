"""Private grouped releases from real tables: privacy units, contribution bounding, partition
selection, noise with confidence intervals, on DuckDB (engines behind `engines.base.Engine`)."""

from bayesdp.tables.aggregates import Aggregate
from bayesdp.tables.cdf import CdfRelease
from bayesdp.tables.counts import count, count_units, count_where
from bayesdp.tables.deviations import std
from bayesdp.tables.histograms import histogram
from bayesdp.tables.means import mean, share
from bayesdp.tables.plan import Plan
from bayesdp.tables.quantiles import quantile
from bayesdp.tables.query import CdfQuery, Grouped, Query, Table, table
from bayesdp.tables.release import Release
from bayesdp.tables.sums import sum

__all__ = [
    "Aggregate",
    "CdfQuery",
    "CdfRelease",
    "Grouped",
    "Plan",
    "Query",
    "Release",
    "Table",
    "count",
    "count_units",
    "count_where",
    "histogram",
    "mean",
    "quantile",
    "share",
    "std",
    "sum",
    "table",
]
