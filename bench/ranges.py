"""Range queries from one hierarchical CDF vs summing a flat histogram, and joins vs plain SQL.

Run:  PYTHONPATH=src .venv/bin/python bench/ranges.py [--releases 20] [--rows 1000000]
      [--rounds 5] [--only ranges|joins]

1. Ranges: 100,000 values (normal, mean 50, sd 15) in 4,096 bins over [0, 100] at ε = 1. Each
   run releases `Table.cdf` (b = 16) and a flat `histogram` at the same ε, and answers 200 ranges
   per width (start at random) from each: the flat release's bins are clamped at 0, so the raw
   noisy bins (the same discrete Laplace noise, unclamped: unbiased) are summed too. Prints, by
   width in bins, the RMS error of each over all releases and ranges, the ratios, and the tree's
   mean interval half-width; plus the time of one release of each.
2. Joins: `--rows` ratings (default 1,000,000) of 200,000 users on 10,000 items, a public
   catalogue of the items (20 genres) and a private profile per user. In alternating rounds:
   the release of count and mean stars per genre (public keys, ≤ 20 genres and 5 rows per genre
   per user) on `join_public`, then on `join_public` + `join` with the profiles (and the mean
   age), against the plain DuckDB SQL of the same joins and aggregates on the same frames, and
   the same release on a frame joined beforehand (what the release costs without the join).
Prints ratios measured in one run; the machine may be shared, so read ratios, not seconds.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import bayesdp as bdp

WIDTHS = (1, 4, 16, 64, 256, 1024, 2048, 4096)
BINS = 4096


def ranges(releases: int) -> None:
    values = np.random.default_rng(1).normal(50.0, 15.0, 100_000)
    t = bdp.table({"v": values}, None)
    edges = np.linspace(0, 100, BINS + 1)
    exact = np.concatenate([[0], np.cumsum(np.histogram(np.clip(values, 0, 100), edges)[0])])
    gen = np.random.default_rng(2)
    starts = {w: gen.integers(0, BINS - w + 1, size=200) for w in WIDTHS}
    tree_sq = dict.fromkeys(WIDTHS, 0.0)
    flat_sq = dict.fromkeys(WIDTHS, 0.0)
    raw_sq = dict.fromkeys(WIDTHS, 0.0)
    counts = np.diff(exact)
    half = dict.fromkeys(WIDTHS, 0.0)
    times: dict[str, list[float]] = {"tree": [], "flat": []}
    for _ in range(releases):
        t0 = time.perf_counter()
        tree = t.cdf("v", bounds=(0, 100), bins=BINS).release(1.0)
        times["tree"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        flat = t.agg(h=bdp.histogram("v", BINS, (0, 100))).release(1.0)
        times["flat"].append(time.perf_counter() - t0)
        tree_cum = np.concatenate([[0.0], np.cumsum(tree.estimates["cdf"].value[0])])
        flat_cum = np.concatenate([[0.0], np.cumsum(flat.estimates["h"].value[0])])
        noise = flat.plan.steps["h"].parts["counts"].mechanism
        raw_cum = np.concatenate([[0.0], np.cumsum(noise.release(counts))])
        for w, s in starts.items():
            truth = exact[s + w] - exact[s]
            tree_sq[w] += float(np.sum((tree_cum[s + w] - tree_cum[s] - truth) ** 2))
            flat_sq[w] += float(np.sum((flat_cum[s + w] - flat_cum[s] - truth) ** 2))
            raw_sq[w] += float(np.sum((raw_cum[s + w] - raw_cum[s] - truth) ** 2))
            _, low, high = tree.range(edges[s[0]], edges[s[0] + w])
            half[w] += (high - low) / 2
    n = releases * 200
    print(f"ranges: 100,000 values, {BINS:,} bins, ε = 1, {releases} releases x 200 ranges per width")
    print("| width (bins) | tree RMS error | flat, released | flat, raw | released / tree "
          "| raw / tree | tree 95% half-width |")
    print("|---|---|---|---|---|---|---|")
    for w in WIDTHS:
        rt, rf, rr = (math.sqrt(x[w] / n) for x in (tree_sq, flat_sq, raw_sq))
        print(f"| {w:,} | {rt:.1f} | {rf:.1f} | {rr:.1f} | {rf / rt:.2f} | {rr / rt:.2f} "
              f"| {half[w] / releases:.1f} |")
    print(f"one release: tree {np.median(times['tree']) * 1e3:.0f} ms, "
          f"flat {np.median(times['flat']) * 1e3:.0f} ms (medians)")


def joins(rows: int, rounds: int) -> None:
    import duckdb
    import pandas as pd

    gen = np.random.default_rng(3)
    ratings = pd.DataFrame({"user": gen.integers(0, 200_000, rows), "item": gen.integers(0, 10_000, rows),
                            "stars": gen.integers(1, 6, rows)})
    items = pd.DataFrame({"item": np.arange(10_000), "genre": [f"g{i % 20}" for i in range(10_000)]})
    profiles = pd.DataFrame({"user": np.arange(200_000), "age": gen.integers(18, 90, 200_000)})
    genres = [f"g{i}" for i in range(20)]
    con = duckdb.connect()
    plain = {
        "public": "SELECT genre, count(*), avg(stars) FROM ratings JOIN items USING (item) GROUP BY genre",
        "public + private": "SELECT genre, count(*), avg(stars), avg(age) FROM ratings JOIN items "
                            "USING (item) JOIN profiles USING (user) GROUP BY genre",
    }

    joined = {"public": ratings.merge(items, on="item")}
    joined["public + private"] = joined["public"].merge(profiles, on="user")

    def release(kind: str, pre: bool = False) -> None:
        """The release on the joined table; `pre`: on the frame joined beforehand by pandas."""
        aggs = {"n": bdp.count(), "stars": bdp.mean("stars", (1, 5))}
        if kind != "public":
            aggs["age"] = bdp.mean("age", (18, 90))
        if pre:
            t = bdp.table(joined[kind], "user")
        else:
            t = bdp.table(ratings, "user").join_public(items, "item")
            if kind != "public":
                t = t.join(bdp.table(profiles, "user"), "user")
        t.group_by("genre", keys=genres).agg(**aggs).release(1.0, max_groups_per_unit=20,
                                                              max_rows_per_group=5)

    con.register("ratings", ratings)
    con.register("items", items)
    con.register("profiles", profiles)
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for kind, sql in plain.items():
            for who, run in (("plain SQL", lambda sql=sql: con.sql(sql).fetchall()),
                             ("bayesdp", lambda kind=kind: release(kind)),
                             ("pre-joined", lambda kind=kind: release(kind, True))):
                t0 = time.perf_counter()
                run()
                times.setdefault((kind, who), []).append(time.perf_counter() - t0)
    print(f"joins: {rows:,} ratings, 200,000 users, 10,000 items in 20 genres; {rounds} rounds, medians")
    print("| join | plain SQL | bayesdp release | ratio | release on the frame pre-joined by pandas |")
    print("|---|---|---|---|---|")
    for kind in plain:
        a, b, c = (float(np.median(times[(kind, w)])) for w in ("plain SQL", "bayesdp", "pre-joined"))
        print(f"| {kind} | {a * 1e3:.0f} ms | {b * 1e3:.0f} ms | {b / a:.1f} | {c * 1e3:.0f} ms |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--releases", type=int, default=20)
    ap.add_argument("--only", choices=("ranges", "joins"))
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.only in (None, "ranges"):
        ranges(args.releases)
    if args.only in (None, "joins"):
        joins(args.rows, args.rounds)


if __name__ == "__main__":
    main()
