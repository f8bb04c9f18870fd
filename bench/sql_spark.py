"""The BigQuery clause on Spark: a release with the per-unit table persisted once for its passes
against the same release computing it again in each pass.

Run:  .venv/bin/python bench/sql_spark.py [--rows 300000] [--runs 3]

A clause whose COUNT(*) learns its bounds (a release of its own first) beside a PERCENTILE_CONT
(a grid: another pass), on a generated table (rows, rows/10 users, 50 campaigns), local[2]
Spark; runs alternated, same seed; prints the medians (wall time) and their ratio.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
import warnings

import numpy as np
import pandas as pd

import bayesdp as bdp
from bayesdp.tables.per_unit import materialized

bsql = importlib.import_module("bayesdp.sql")  # the module (bayesdp.sql is also the function)

QUERY = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, max_groups_contributed = 5, "
         "privacy_unit_column = user_id) campaign, COUNT(*) AS n, "
         "SUM(revenue, contribution_bounds_per_group => (0, 100)) AS rev, "
         "PERCENTILE_CONT(revenue, 0.5, contribution_bounds_per_row => (0, 100)) AS med "
         "FROM events GROUP BY campaign")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    rng = np.random.default_rng(1)
    users = np.floor(args.rows // 10 * rng.random(args.rows) ** 2).astype(np.int64)
    frame = spark.createDataFrame(pd.DataFrame({
        "user_id": users, "campaign": (users * 7919 + np.arange(args.rows)) % 50,
        "revenue": np.round(rng.exponential(30.0, args.rows), 2)})).persist()
    frame.count()
    t = bsql.translate(QUERY, {"events": frame})

    def release(persisted: bool) -> float:
        bsql.materialized = materialized if persisted else (lambda table: table)  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bsql.release_translation(t, rng=bdp.rng_for_tests(1))
        return time.perf_counter() - t0

    release(True)  # warm-up: the JVM's first queries
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.runs):
        for persisted in (False, True):
            times[persisted].append(release(persisted))
    before, after = statistics.median(times[False]), statistics.median(times[True])
    print(f"{args.rows:,} rows, {args.runs} runs each, alternated (wall time, local[2])")
    print(f"per-unit table computed in each pass: median {before:.2f} s {sorted(times[False])}")
    print(f"persisted once per release:          median {after:.2f} s {sorted(times[True])}")
    print(f"ratio persisted / recomputed: {after / before:.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
