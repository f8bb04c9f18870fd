"""Range counts and quantiles from one release: a hierarchical histogram (`Table.cdf`).

The bins' counts and those of every node of a b-ary tree above them are released with discrete
noise (`aggregate.Cdf`), made consistent by least squares (`tree`), and answer any range and
every quantile with intervals (`release.CdfRelease`). A range's error grows like log(bins)^1.5
rather than √(width) as when summing a flat histogram's bins (Qardaji, Yang & Li 2013).
"""

from bayesdp.tables.cdf.aggregate import BRANCHING, Cdf, cdf
from bayesdp.tables.cdf.release import CdfRelease

__all__ = ["BRANCHING", "Cdf", "CdfRelease", "cdf"]
