"""Private grouped release on Spark vs the same non-private Spark aggregation, Tumult Analytics,
and its scaling with the number of rows.

    .venv/bin/python bench/spark.py [--rows 10000000] [--scaling 1000000,10000000,30000000]

1. On the generated events table of `bench/tables.py` (rows/10 users with skewed activity,
   1,000 campaigns; Parquet files cached under out/bench-spark/, never committed), in local mode
   (`--master`, default local[2]): bayesdp releases count, sum, mean and median of revenue per
   campaign (ε=1, ≤5 campaigns and 1 row per campaign per user, revenue in [0, 100]), with
   private partition selection (δ=1e-6) and with the 1,000 campaigns as public keys (δ=0);
   the reference is the same non-private aggregation in Spark (groupBy, count, sum, avg,
   median), measured in the same process; and the floor: that aggregation over rows bounded
   with Spark's native xxhash64 and a window, no noise (what bounding alone costs).
2. Tumult Analytics 0.21 (pins numpy<2 and pyspark 3.5) runs from its own virtual environment
   (`--tumult-python`, default .venv-tumult/bin/python) as a subprocess of this script: the same
   four aggregates with public keys, AddRowsWithID("user_id"), MaxGroupsPerID 5 and
   MaxRowsPerGroupPerID 1, ε=1 split evenly; timed inside that process (its Spark start-up and
   the Parquet schema read excluded, as for bayesdp).
3. Scaling: the public-keys release at each size of `--scaling`, in rows per second.
4. The floor (`--floor`, issue 16 §2): count, sum and mean of revenue in [0, 100] per group, ≤5
   groups and 1 row per group per user, in three key modes (the events table's campaigns with
   private partition selection; `bench/tables.py`'s keyed table with its first 1,000 and first
   100,000 groups as public keys); in alternating rounds, the plain groupBy over the keys, the
   floor (the keys joined by broadcast, pairs by `min_by` of a keyed native `xxhash64`, a
   `row_number` window per user over its pairs, the aggregates) and the release.
5. Skewed units (`--skew`): the floor of 4. (per (user, group) pair, then per user over its
   pairs) on `bench/tables.py`'s `zipf` and `uniform` tables (Zipf(1.6) or uniform users, 2,000
   groups), private keys and the first 1,000 groups as public keys.
6. Bound once (`--bounded`, issue 16 §3): the events table bounded once (≤5 campaigns, 1 row per
   campaign per user, a persisted DataFrame); the first release (count, sum, mean, median) bounds
   it; then, in alternating rounds, the same release, the same with median bounds not asked
   before, and count, sum, mean with the 1,000 campaigns as public keys, against the plain
   groupBy with the same aggregates over the Parquet file.

Every figure reads the Parquet file (nothing cached). The machine may be shared: read ratios.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from timing import best_of

BENCH = Path(__file__).resolve().parent
CACHE = BENCH.parent / "out" / "bench-spark"
CAMPAIGNS = 1000
TARGET_VS_PLAIN = 1.5
BOUNDS = (0.0, 100.0)


def best_time(run: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """Fastest wall time of `runs` runs (Spark works in other processes, so CPU time is not it)."""
    _, wall, out = best_of(run, runs)
    return wall, out


def events_file(rows: int, table: str = "events") -> Path:
    """The events (or keyed) table of bench/tables.py with `rows` rows, generated once and cached."""
    path = CACHE / f"{table}-{rows}.parquet"
    if not path.exists():
        sys.path.insert(0, str(BENCH))
        import tables  # bench/tables.py: one generator for both benchmarks

        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        getattr(tables, table)(tmp, rows)
        tmp.rename(path)
    return path


def session(master: str, memory: str, app: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # this environment's Python on the executors
    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.driver.memory", memory)
             .config("spark.sql.shuffle.partitions", "8")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def plain(spark: Any, path: Path) -> int:
    """The non-private reference: the same four aggregates per campaign, no bounding, no noise."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(path))
    out = df.groupBy("campaign").agg(F.count(F.lit(1)), F.sum("revenue"), F.avg("revenue"),
                                     F.median("revenue")).collect()
    return len(out)


def floor(spark: Any, path: Path) -> int:
    """The plain query over rows bounded with Spark's native xxhash64 (no Python step, no noise,
    no grid): ≤ 5 campaigns per user by a keyed hash, 1 row per campaign. The cost of bounding."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(path))
    hashed = df.select("user_id", "campaign", "revenue",
                       F.xxhash64("user_id", "campaign", "revenue", F.lit(12345)).alias("hr"),
                       F.xxhash64("user_id", "campaign", F.lit(99)).alias("hg"))
    pairs = hashed.groupBy("user_id", "campaign", "hg").agg(F.min_by("revenue", "hr").alias("v"))
    rank = F.row_number().over(Window.partitionBy("user_id").orderBy("hg"))
    kept = pairs.withColumn("r", rank).where("r <= 5")
    out = kept.groupBy("campaign").agg(F.count(F.lit(1)), F.sum("v"), F.avg("v"),
                                       F.median("v")).collect()
    return len(out)


def bounded_floor(spark: Any, path: Path, group: str, keys: int | None) -> int:
    """Count, sum and mean of clipped revenue per group over rows bounded as bayesdp bounds them
    (≤ 5 groups per user by a keyed native xxhash64, 1 row per group by another), the public
    keys joined first: the best non-private Spark plan for the same bounded aggregates."""
    import secrets

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    seed = secrets.randbits(62)
    df = spark.read.parquet(str(path))
    if keys is not None:
        df = df.join(F.broadcast(spark.range(keys).withColumnRenamed("id", group)), group, "left_semi")
    hashed = df.select("user_id", group, F.least(F.greatest("revenue", F.lit(0.0)), F.lit(100.0)).alias("v"),
                       F.xxhash64("user_id", group, "revenue", F.lit(seed)).alias("hr"))
    pairs = hashed.groupBy("user_id", group).agg(F.min_by("v", "hr").alias("v"))
    rank = F.row_number().over(Window.partitionBy("user_id").orderBy(
        F.xxhash64("user_id", group, F.lit(seed + 1))))
    kept = pairs.withColumn("r", rank).where("r <= 5")
    return len(kept.groupBy(group).agg(F.count(F.lit(1)), F.sum("v"), F.avg("v")).collect())


def plain_keys(spark: Any, path: Path, group: str, keys: int | None) -> int:
    """The plain groupBy (count, sum, avg) over the rows in the public keys."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(path))
    if keys is not None:
        df = df.join(F.broadcast(spark.range(keys).withColumnRenamed("id", group)), group, "left_semi")
    return len(df.groupBy(group).agg(F.count(F.lit(1)), F.sum("revenue"), F.avg("revenue")).collect())


def release_basic(spark: Any, path: Path, group: str, keys: int | None) -> Any:
    import bayesdp as bdp

    q = bdp.table(spark.read.parquet(str(path)), "user_id").group_by(
        group, keys=None if keys is None else range(keys)).agg(
        rows=bdp.count(), revenue=bdp.sum("revenue", bounds=BOUNDS),
        avg=bdp.mean("revenue", bounds=BOUNDS))
    return q.release(1.0, 1e-6 if keys is None else 0.0, max_groups_per_unit=5, max_rows_per_group=1)


FLOOR_MODES = (("private keys, 1,000 campaigns", "events", "campaign", None),
               ("1,000 public keys", "keyed", "grp", 1_000),
               ("100,000 public keys", "keyed", "grp", 100_000))
SKEW_MODES = tuple((f"{users} users, {keys}", table, "grp", k)
                   for users, table in (("Zipf", "zipf"), ("uniform", "uniform"))
                   for keys, k in (("private keys", None), ("1,000 public keys", 1_000)))


def floor_modes(spark: Any, rows: int, runs: int, modes: tuple[tuple[str, str, str, int | None], ...]
                = FLOOR_MODES) -> None:
    """The release against the floor and the plain groupBy in each key mode (label, table, group
    column, public keys), alternating rounds in rotating order."""
    import time

    for label, table, group, keys in modes:
        path = events_file(rows, table)
        times: dict[str, list[float]] = {"plain": [], "floor": [], "release": []}
        order = [("plain", plain_keys), ("floor", bounded_floor), ("release", release_basic)]
        for r in range(runs):
            # The order rotates: the JVM's garbage of one measure is collected during the next.
            for name, run in order[r % 3:] + order[:r % 3]:
                t0 = time.perf_counter()
                run(spark, path, group, keys)
                times[name].append(time.perf_counter() - t0)
        t = {n: sorted(v)[len(v) // 2] for n, v in times.items()}
        print(f"floor, {label}, {rows:,} rows (median of {runs} alternating rounds): plain "
              f"{t['plain']:.2f} s, floor {t['floor']:.2f} s = {t['floor'] / t['plain']:.2f}x plain, "
              f"release {t['release']:.2f} s = {t['release'] / t['floor']:.2f}x the floor "
              f"({'meets' if t['release'] <= 1.3 * t['floor'] else 'misses'} 1.3x)", flush=True)


def bound_once(spark: Any, rows: int, runs: int) -> None:
    """Releases on a table bounded once against the plain groupBy (issue 16 §3)."""
    import time

    from pyspark.sql import functions as F

    import bayesdp as bdp

    path = events_file(rows)
    t = bdp.table(spark.read.parquet(str(path)), "user_id").bounded("campaign", max_groups_per_unit=5)

    def agg(median: float | None, keys: Any = None) -> Any:
        aggs = {"rows": bdp.count(), "revenue": bdp.sum("revenue", bounds=BOUNDS),
                "avg": bdp.mean("revenue", bounds=BOUNDS)}
        if median is not None:
            aggs["median"] = bdp.quantile("revenue", 0.5, bounds=(0, median))
        return t.group_by("campaign", keys=keys).agg(**aggs)

    def plain_groupby(median: bool) -> int:
        df = spark.read.parquet(str(path))
        cols = [F.count(F.lit(1)), F.sum("revenue"), F.avg("revenue")]
        return len(df.groupBy("campaign").agg(*cols, *([F.median("revenue")] if median else [])).collect())

    tops = iter(range(101, 101 + runs))  # median bounds not asked before: the grid is new
    t0 = time.perf_counter()
    agg(100).release(1.0, 1e-6)
    first = time.perf_counter() - t0
    measures: dict[str, Callable[[], Any]] = {
        "plain_median": lambda: plain_groupby(True), "median": lambda: agg(100).release(1.0, 1e-6),
        "fresh": lambda: agg(next(tops)).release(1.0, 1e-6), "plain": lambda: plain_groupby(False),
        "public": lambda: agg(None, range(CAMPAIGNS)).release(1.0)}
    times: dict[str, list[float]] = {n: [] for n in measures}
    order = list(measures.items())
    for r in range(runs):
        for name, run in order[r % len(order):] + order[:r % len(order)]:
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    m = {n: sorted(v)[len(v) // 2] for n, v in times.items()}
    print(f"bounded once, {rows:,} rows: first release (bounds) {first:.2f} s; then (median of "
          f"{runs} alternating rounds) with the median, private keys {m['median']:.2f} s = "
          f"{m['median'] / m['plain_median']:.2f}x the plain groupBy ({m['plain_median']:.2f} s; "
          f"target 3x); with median bounds not asked before {m['fresh']:.2f} s = "
          f"{m['fresh'] / m['plain_median']:.2f}x; public keys, no median {m['public']:.2f} s = "
          f"{m['public'] / m['plain']:.2f}x the plain groupBy ({m['plain']:.2f} s; target 1.5x)",
          flush=True)


def release(spark: Any, path: Path, public: bool) -> Any:
    import bayesdp as bdp

    keys = list(range(CAMPAIGNS)) if public else None
    q = bdp.table(spark.read.parquet(str(path)), "user_id").group_by("campaign", keys=keys).agg(
        rows=bdp.count(), revenue=bdp.sum("revenue", bounds=BOUNDS),
        avg=bdp.mean("revenue", bounds=BOUNDS), median=bdp.quantile("revenue", 0.5, bounds=BOUNDS))
    return q.release(1.0, 0.0 if public else 1e-6, max_groups_per_unit=5, max_rows_per_group=1)


def tumult(python: str, path: Path, args: argparse.Namespace) -> dict[str, Any] | None:
    """Run the Tumult half of this script in Tumult's own environment; None if it cannot run."""
    if not Path(python).exists():
        print(f"Tumult: {python} not found (create it: python3 -m venv .venv-tumult && "
              ".venv-tumult/bin/pip install tmlt.analytics==0.21.0); skipped")
        return None
    cmd = [python, str(Path(__file__).resolve()), "--tumult-worker", str(path), "--runs",
           str(args.runs), "--master", args.master, "--memory", args.memory]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.tumult_timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        print(f"Tumult: no answer within {args.tumult_timeout} s; skipped")
        return None
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        print(f"Tumult failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
        return None
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def tumult_worker(path: str, runs: int, master: str, memory: str) -> None:
    """Inside .venv-tumult: the four aggregates per campaign, public keys, ε=1 split evenly."""
    from tmlt.analytics import (
        AddRowsWithID,
        KeySet,
        MaxGroupsPerID,
        MaxRowsPerGroupPerID,
        PureDPBudget,
        QueryBuilder,
        Session,
    )

    spark = session(master, memory, "tumult-bench")
    df = spark.read.parquet(path)
    keys = KeySet.from_dict({"campaign": list(range(CAMPAIGNS))})
    lo, hi = BOUNDS

    def grouped() -> Any:
        return (QueryBuilder("events").enforce(MaxGroupsPerID("campaign", 5))
                .enforce(MaxRowsPerGroupPerID("campaign", 1)).groupby(keys))

    def run() -> int:
        sess = Session.from_dataframe(privacy_budget=PureDPBudget(1.0), source_id="events",
                                      dataframe=df, protected_change=AddRowsWithID("user_id"))
        queries = [grouped().count(), grouped().sum("revenue", lo, hi),
                   grouped().average("revenue", lo, hi), grouped().median("revenue", lo, hi)]
        answers = [sess.evaluate(q, PureDPBudget(0.25)).toPandas() for q in queries]
        return len(answers[0])

    seconds, groups = best_time(run, runs)
    import tmlt.analytics

    print(json.dumps({"seconds": seconds, "groups": groups, "version": tmlt.analytics.__version__,
                      "pyspark": spark.version}))
    spark.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--scaling", default="1000000,10000000,30000000",
                   help="comma-separated row counts for the scaling run ('' to skip)")
    p.add_argument("--runs", type=int, default=2, help="timed runs per figure (the best is kept)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--memory", default="4g", help="spark.driver.memory (local mode: all of Spark)")
    p.add_argument("--tumult-python", default=str(BENCH.parent / ".venv-tumult" / "bin" / "python"))
    p.add_argument("--tumult-timeout", type=float, default=3600.0)
    p.add_argument("--skip-tumult", action="store_true")
    p.add_argument("--tumult-worker", metavar="PARQUET", help=argparse.SUPPRESS)
    p.add_argument("--floor", action="store_true", help="only the release against the floor")
    p.add_argument("--bounded", action="store_true", help="only releases on a table bounded once")
    p.add_argument("--skew", action="store_true", help="only the floor, Zipf and uniform users")
    args = p.parse_args()
    if args.tumult_worker:
        tumult_worker(args.tumult_worker, args.runs, args.master, args.memory)
        return 0
    if args.floor or args.bounded or args.skew:
        spark = session(args.master, args.memory, "bayesdp-bench")
        # Warm-up: every measured formulation once on 1M rows, so none pays the JVM's first run.
        release_basic(spark, events_file(min(args.rows, 1_000_000)), "campaign", None)
        for run in (plain_keys, bounded_floor, release_basic):
            run(spark, events_file(min(args.rows, 1_000_000), "keyed"), "grp", 1_000)
        if args.floor:
            floor_modes(spark, args.rows, args.runs)
        if args.skew:
            floor_modes(spark, args.rows, args.runs, SKEW_MODES)
        if args.bounded:
            bound_once(spark, min(args.rows, 1_000_000), 1)  # warm-up of the bounded table's path
            bound_once(spark, args.rows, args.runs)
        spark.stop()
        return 0

    import pyspark

    sizes = sorted({int(s) for s in args.scaling.split(",") if s.strip()} | {args.rows})
    paths = {n: events_file(n) for n in sizes}
    print(f"bench/spark.py {datetime.date.today()} on {platform.node()} (shared machine: read "
          f"ratios), pyspark {pyspark.__version__}, master {args.master}, driver memory "
          f"{args.memory}", flush=True)
    spark = session(args.master, args.memory, "bayesdp-bench")
    warm = paths[min(sizes)]
    plain(spark, warm)
    release(spark, warm, public=True)

    path = paths[args.rows]
    t_plain, groups = best_time(lambda: plain(spark, path), args.runs)
    t_private, rel = best_time(lambda: release(spark, path, public=False), args.runs)
    t_public, _ = best_time(lambda: release(spark, path, public=True), args.runs)
    print(f"{args.rows:,} rows: non-private Spark groupBy (count, sum, avg, median) {t_plain:.2f} s "
          f"({groups} campaigns)", flush=True)
    for label, t in (("private keys", t_private), ("public keys", t_public)):
        verdict = "meets" if t <= TARGET_VS_PLAIN * t_plain else "misses"
        print(f"  bayesdp release, {label}: {t:.2f} s = {t / t_plain:.2f}x the non-private "
              f"aggregation ({verdict} the {TARGET_VS_PLAIN}x target)", flush=True)
    d = rel.diagnostics
    print(f"  private keys: {len(rel.to_pandas())} campaigns released; kept {d.kept_rows:,} of "
          f"{d.rows:,} rows", flush=True)
    t_floor, _ = best_time(lambda: floor(spark, path), args.runs)
    print(f"  floor: native-hash bounding + the plain aggregates, no DP: {t_floor:.2f} s = "
          f"{t_floor / t_plain:.2f}x the non-private aggregation", flush=True)

    if not args.skip_tumult:
        spark.stop()  # Tumult gets the machine to itself
        res = tumult(args.tumult_python, path, args)
        if res is not None:
            print(f"  Tumult Analytics {res['version']} (pyspark {res['pyspark']}), public keys: "
                  f"{res['seconds']:.2f} s ({res['groups']} campaigns) = "
                  f"{res['seconds'] / t_public:.2f}x bayesdp's public-keys release", flush=True)
        spark = session(args.master, args.memory, "bayesdp-bench")
        release(spark, warm, public=True)

    if len(sizes) > 1:
        print("scaling (public-keys release):", flush=True)
        for n in sizes:
            if n == args.rows:
                t, t0 = t_public, t_plain
            else:
                t, _ = best_time(lambda n=n: release(spark, paths[n], public=True), args.runs)
                t0, _ = best_time(lambda n=n: plain(spark, paths[n]), args.runs)
            print(f"  {n:>11,} rows: {t:7.2f} s, {n / t:12,.0f} rows/s "
                  f"(non-private {n / t0:12,.0f} rows/s)", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
