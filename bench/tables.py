"""Private grouped release on DuckDB vs the plain GROUP BY, PipelineDP, and the accuracy anchors.

Run with the anchor environment:  .venv-bench/bin/python bench/tables.py [--rows 10000000]

1. Speed: a generated events table (default 10M rows, 1M users with skewed activity, 1,000
   campaigns; written to a temporary Parquet file, never committed). bayesdp releases count,
   sum, mean and median of revenue per campaign with private partition selection (ε=1,
   δ=1e-6, ≤5 campaigns and 1 row per campaign per user); baselines measured in the same
   process: the same non-private GROUP BY in DuckDB, and PipelineDP's LocalBackend
   (COUNT/SUM/MEAN/PERCENTILE(50), same bounds) on a prefix of the rows, scaled linearly;
   and the floor: the plain query over rows bounded by DuckDB's window functions alone.
2. Accuracy, no grouping: the mean of 1M Beta(2,5) values in [0,1] at ε = 0.1 and 1 (MAE over
   seeds vs the textbook 1/(nε)), and the median of 1M values in [0,100] at ε=1 (vs
   diffprivlib's tools.quantile and PyDP's Median, time vs np.median).
3. Public keys: count, sum and mean per group on a generated table (default 2M rows, 200,000
   users, groups 0..199,999), ≤5 groups and 1 row per group per user, with the first 1,000 and
   the first 100,000 groups as public keys, against the plain GROUP BY over the same keys.
4. The floor (`--floor`, issue 16 §2): on `--rows` rows, count, sum and mean (revenue clipped to
   [0, 100]) per group, ≤5 groups and 1 row per group per user, in three key modes (the events
   table's 1,000 campaigns with private partition selection; the keyed table of 3. with its first
   1,000 and first 100,000 groups as public keys); in alternating rounds, the plain GROUP BY, the
   floor (the best non-private SQL giving the same bounded aggregates: the keys semi-joined, one
   window sort per user keyed by a secret-seeded hash, then the aggregates) and the release.
5. Bound once (`--bounded`, issue 16 §3): the events table bounded once (≤5 campaigns, 1 row per
   campaign per user); the first release (count, sum, mean, median) bounds it; then, in
   alternating rounds, releases on it against the plain GROUP BY with the same aggregates: with
   the median and private keys (the median's grid is counted once per column and bounds, so
   also with bounds not asked before), and without it with the 1,000 campaigns as public keys.
6. Skewed units (`--skew`): count, sum and mean of revenue in [0, 100] per group, ≤5 groups and
   1 row per group per user, on `zipf()` (Zipf(1.6) users, 2,000 groups), `uniform()` (rows/10
   users, 2,000 groups) and, at 1M rows, the events table; private keys (partition selection)
   and the first 1,000 groups as public keys; in alternating rounds, the per-pair floor (the keys
   semi-joined, each (user, group) pair to its row of smallest keyed hash by `arg_min`, a
   `row_number` per user over its pairs by another keyed hash, the aggregates) and the release.
   `--skew-memory` releases a table whose largest user holds 20M rows under memory_limit="1GB".
Prints ratios measured in one run; the machine may be shared, so read ratios, not seconds.
"""

from __future__ import annotations

import argparse
import resource
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

import bayesdp as bdp


def timed(f: Callable[[], Any], runs: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def events(path: Path, rows: int) -> None:
    users = max(rows // 10, 1)
    duckdb.sql(f"""COPY (SELECT user_id,
        ((user_id * 7919 + floor(pow(random(), 3) * 20)::BIGINT) % 1000) AS campaign,
        round(least(exp(random() * 2.5 + random() * 2.5) - 1, 1000), 2) AS revenue
        FROM (SELECT floor({users} * pow(random(), 2))::BIGINT AS user_id FROM range({rows})))
        TO '{path}' (FORMAT parquet)""")


def speed(rows: int, runs: int, pdp_rows: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.parquet"
        events(path, rows)
        plain_sql = (f"SELECT campaign, count(*), sum(revenue), avg(revenue), median(revenue) "
                     f"FROM '{path}' GROUP BY campaign")
        con = duckdb.connect()
        t_plain, _ = timed(lambda: con.sql(plain_sql).fetchall(), runs)
        q = bdp.table(path, "user_id").group_by("campaign").agg(
            rows=bdp.count(), revenue=bdp.sum("revenue", bounds=(0, 100)),
            avg=bdp.mean("revenue", bounds=(0, 100)),
            median=bdp.quantile("revenue", 0.5, bounds=(0, 100)))
        t_bdp, rel = timed(lambda: q.release(1.0, 1e-6, max_groups_per_unit=5,
                                             max_rows_per_group=1), runs)
        basic = bdp.table(path, "user_id").group_by("campaign").agg(
            rows=bdp.count(), revenue=bdp.sum("revenue", bounds=(0, 100)),
            avg=bdp.mean("revenue", bounds=(0, 100)))
        plain_basic = plain_sql.replace(", median(revenue)", "")
        t_plain_basic, _ = timed(lambda: con.sql(plain_basic).fetchall(), runs)
        t_basic, _ = timed(lambda: basic.release(1.0, 1e-6, max_groups_per_unit=5,
                                                 max_rows_per_group=1), runs)
        print(f"without the median: plain {t_plain_basic:.3f} s; bayesdp {t_basic:.3f} s = "
              f"{t_basic / t_plain_basic:.2f}x plain")
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        print(f"events: {rows:,} rows; plain DuckDB GROUP BY {t_plain:.3f} s; bayesdp release "
              f"{t_bdp:.3f} s = {t_bdp / t_plain:.2f}x plain; {len(rel)} campaigns released; "
              f"kept {rel.diagnostics.kept_rows:,} rows; peak RSS {peak_gb:.2f} GB")
        # The floor: the same bounding, in DuckDB alone (native hashes, no noise, no grid),
        # followed by the plain query's aggregates with the exact median.
        floor_sql = bounded_sql(f"'{path}'", "campaign", "count(*), sum(v), avg(v), median(v)")
        t_floor, _ = timed(lambda: con.sql(floor_sql).fetchall(), runs)
        print(f"floor: bounding + the plain aggregates, no DP {t_floor:.3f} s = "
              f"{t_floor / t_plain:.2f}x plain")
        t_pdp = pipeline_dp_time(path, pdp_rows)
        if t_pdp is not None:
            per_row = t_pdp / pdp_rows
            print(f"PipelineDP LocalBackend: {t_pdp:.2f} s on the first {pdp_rows:,} rows "
                  f"({pdp_rows / t_pdp:,.0f} rows/s), extrapolated {per_row * rows:.1f} s for "
                  f"{rows:,}: bayesdp is {per_row * rows / t_bdp:.0f}x faster")


def keyed(path: Path, rows: int) -> None:
    """rows/10 users with 10 rows each, in groups 0..rows/10 - 1 at random, revenue in [0, 100)."""
    users = max(rows // 10, 1)
    duckdb.sql(f"""COPY (SELECT i % {users} AS user_id, hash(i) % {users} AS grp,
        (hash(i * 7) % 10000) / 100.0 AS revenue FROM range({rows}) t(i))
        TO '{path}' (FORMAT parquet)""")


def public_keys(rows: int, runs: int, modes: tuple[int, ...] = (1_000, 100_000)) -> None:
    """Releases with public keys (issue: rows outside the keys once cost an IN list per row)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "keyed.parquet"
        keyed(path, rows)
        con = duckdb.connect()
        for k in modes:
            plain_sql = (f"SELECT grp, count(*), sum(revenue), avg(revenue) FROM '{path}' "
                         f"WHERE grp < {k} GROUP BY grp")
            t_plain, _ = timed(lambda sql=plain_sql: con.sql(sql).fetchall(), runs)
            q = bdp.table(path, "user_id").group_by("grp", keys=list(range(k))).agg(
                rows=bdp.count(), revenue=bdp.sum("revenue", bounds=(0, 100)),
                avg=bdp.mean("revenue", bounds=(0, 100)))
            t_bdp, rel = timed(lambda q=q: q.release(1.0, max_groups_per_unit=5,
                                                     max_rows_per_group=1), runs)
            print(f"public keys: {k:,} keys, {rows:,} rows; plain GROUP BY {t_plain:.3f} s; bayesdp "
                  f"release {t_bdp:.3f} s = {t_bdp / t_plain:.1f}x plain; {len(rel):,} groups, "
                  f"{rel.diagnostics.dropped_by_keys:,} rows outside the keys")


def bounded_sql(source: str, group: str, aggregates: str, where: str = "TRUE") -> str:
    """`aggregates` of `v` (revenue clipped to [0, 100]) per `group` over the rows of `source`
    where `where` holds, bounded as bayesdp bounds them (≤ 5 groups per user chosen by a
    hash keyed by a fresh secret, 1 row per group by another) with DuckDB's own hashes and one
    window sort per user: the cost of bounding alone, no noise, no diagnostics."""
    seed = secrets.randbits(63)
    group_hash = f"hash(user_id, {group}, {seed})"
    by = f"PARTITION BY user_id ORDER BY {group_hash}"
    row = f"hash(user_id, {group}, revenue, {seed + 1})"
    return (f"SELECT {group}, {aggregates} FROM (SELECT {group}, least(greatest(revenue, 0), 100)"
            f" AS v FROM {source} WHERE {where} QUALIFY dense_rank() OVER ({by}) <= 5 AND"
            f" row_number() OVER ({by}, {row}) - rank() OVER ({by}) < 1) GROUP BY {group}")


def alternating(runs: int, **measures: Callable[[], Any]) -> dict[str, float]:
    """Median wall time of each measure over `runs` rounds that run them in turn, so that a
    change of load on the shared machine reaches every measure alike."""
    times: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(runs):
        for name, run in measures.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def floor(rows: int, runs: int) -> None:
    """The release against the floor and the plain GROUP BY, three key modes (issue 16 §2)."""
    with tempfile.TemporaryDirectory() as tmp:
        ev, kt = Path(tmp) / "events.parquet", Path(tmp) / "keyed.parquet"
        events(ev, rows)
        keyed(kt, rows)
        for label, path, group, k in (("private keys, 1,000 campaigns", ev, "campaign", None),
                                      ("1,000 public keys", kt, "grp", 1_000),
                                      ("100,000 public keys", kt, "grp", 100_000)):
            con = duckdb.connect(config={"preserve_insertion_order": False})
            where = "TRUE"
            if k is not None:
                con.sql(f"CREATE TABLE public_keys AS SELECT range AS k FROM range({k})")
                where = f"{group} IN (SELECT k FROM public_keys)"
            plain_sql = (f"SELECT {group}, count(*), sum(revenue), avg(revenue) FROM '{path}' "
                         f"WHERE {where} GROUP BY {group}")
            q = bdp.table(path, "user_id").group_by(group, keys=None if k is None else range(k)).agg(
                rows=bdp.count(), revenue=bdp.sum("revenue", bounds=(0, 100)),
                avg=bdp.mean("revenue", bounds=(0, 100)))
            t = alternating(
                runs, plain=lambda c=con, s=plain_sql: c.sql(s).fetchall(),
                floor=lambda c=con, g=group, w=where, p=path: c.sql(bounded_sql(
                    f"'{p}'", g, "count(*), sum(v), avg(v)", w)).fetchall(),
                release=lambda q=q, k=k: q.release(1.0, 1e-6 if k is None else 0.0,
                                                   max_groups_per_unit=5, max_rows_per_group=1))
            print(f"floor, {label}, {rows:,} rows (median of {runs} alternating rounds): plain "
                  f"{t['plain']:.3f} s, floor {t['floor']:.3f} s = {t['floor'] / t['plain']:.1f}x "
                  f"plain, release {t['release']:.3f} s = {t['release'] / t['floor']:.2f}x the floor"
                  f" ({'meets' if t['release'] <= 1.3 * t['floor'] else 'misses'} 1.3x)", flush=True)


def zipf(path: Path, rows: int) -> None:
    """Users of Zipf(1.6) activity (user k >= 1 with probability about k^-1.6: the largest holds a
    third of the rows), 2,000 groups at random, revenue in [0, 120)."""
    duckdb.sql(f"""COPY (SELECT least(floor(pow(1 - random(), -1 / 0.6)), 1e15)::BIGINT AS user_id,
        hash(i * 31) % 2000 AS grp, round(random() * 120, 2) AS revenue FROM range({rows}) t(i))
        TO '{path}' (FORMAT parquet)""")


def uniform(path: Path, rows: int) -> None:
    """rows/10 users of uniform activity, 2,000 groups at random, revenue in [0, 120)."""
    duckdb.sql(f"""COPY (SELECT hash(i) % {max(rows // 10, 1)} AS user_id, hash(i * 31) % 2000 AS grp,
        round(random() * 120, 2) AS revenue FROM range({rows}) t(i)) TO '{path}' (FORMAT parquet)""")


def pair_sql(source: str, group: str, aggregates: str, where: str = "TRUE") -> str:
    """`aggregates` of `v` (revenue clipped to [0, 100]) per `group`, bounded per (user, group)
    pair: each pair's row of smallest keyed hash (`arg_min`), then each user's 5 pairs of
    smallest keyed group hash (`row_number` over the user's pairs). The per-pair floor."""
    seed = secrets.randbits(63)
    return (f"SELECT {group}, {aggregates} FROM (SELECT {group}, v, row_number() OVER (PARTITION BY"
            f" user_id ORDER BY hash(user_id, {group}, {seed})) AS r FROM (SELECT user_id, {group},"
            f" arg_min(least(greatest(revenue, 0), 100), hash(user_id, {group}, revenue, {seed + 1}))"
            f" AS v FROM {source} WHERE {where} GROUP BY user_id, {group})) WHERE r <= 5 GROUP BY {group}")


def skew(rows: int, runs: int) -> None:
    """The release against the per-pair floor, uniform and Zipf users, private and public keys."""
    with tempfile.TemporaryDirectory() as tmp:
        tables = [("Zipf users", zipf, "grp"), ("uniform users", uniform, "grp")]
        if rows <= 1_000_000:
            tables.append(("the events table", events, "campaign"))
        for label, make, group in tables:
            path = Path(tmp) / f"{make.__name__}.parquet"
            make(path, rows)
            con = duckdb.connect(config={"preserve_insertion_order": False})
            top = con.sql(f"SELECT max(n) FROM (SELECT count(*) AS n FROM '{path}' GROUP BY user_id)")
            largest = top.fetchall()[0][0]
            con.sql("CREATE TABLE public_keys AS SELECT range AS k FROM range(1000)")
            for k in (None, 1_000):
                where = "TRUE" if k is None else f"{group} IN (SELECT k FROM public_keys)"
                q = bdp.table(path, "user_id").group_by(group, keys=None if k is None else range(k)).agg(
                    rows=bdp.count(), revenue=bdp.sum("revenue", bounds=(0, 100)),
                    avg=bdp.mean("revenue", bounds=(0, 100)))
                t = alternating(
                    runs, floor=lambda c=con, g=group, w=where, p=path: c.sql(pair_sql(
                        f"'{p}'", g, "count(*), sum(v), avg(v)", w)).fetchall(),
                    release=lambda q=q, k=k: q.release(1.0, 1e-6 if k is None else 0.0,
                                                       max_groups_per_unit=5, max_rows_per_group=1))
                keys = "private keys" if k is None else "1,000 public keys"
                print(f"skew, {label} (largest {largest:,} rows), {keys}, {rows:,} rows (median of "
                      f"{runs} alternating rounds): per-pair floor {t['floor']:.3f} s, release "
                      f"{t['release']:.3f} s = {t['release'] / t['floor']:.2f}x the floor "
                      f"({'meets' if t['release'] <= 1.3 * t['floor'] else 'misses'} 1.3x)", flush=True)


def skew_memory() -> None:
    """A release (the 2,000 groups as public keys) on a table whose largest user holds 20M rows
    (and 1M rows of Zipf users) under memory_limit="1GB": its time and the process's peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "heavy.parquet"
        duckdb.sql(f"""COPY (SELECT CASE WHEN i < 20000000 THEN 0 ELSE
            least(floor(pow(1 - random(), -1 / 0.6)), 1e15)::BIGINT END AS user_id,
            hash(i * 31) % 2000 AS grp, round(random() * 120, 2) AS revenue FROM range(21000000) t(i))
            TO '{path}' (FORMAT parquet)""")
        q = bdp.table(path, "user_id", memory_limit="1GB", temp_directory=Path(tmp) / "spill") \
            .group_by("grp", keys=range(2000)).agg(rows=bdp.count(),
                                                   revenue=bdp.sum("revenue", bounds=(0, 100)))
        t0 = time.perf_counter()
        rel = q.release(1.0, max_groups_per_unit=5, max_rows_per_group=1)
        took = time.perf_counter() - t0
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        print(f"skew memory: 21M rows, the largest user 20M, memory_limit='1GB': release {took:.2f} s, "
              f"{len(rel)} groups, kept {rel.diagnostics.kept_rows:,} rows; peak RSS {peak_gb:.2f} GB",
              flush=True)


def pipeline_dp_time(path: Path, n: int) -> float | None:
    try:
        import pipeline_dp
    except ImportError as exc:
        print(f"PipelineDP not importable ({exc}); skipped")
        return None
    df = duckdb.sql(f"SELECT * FROM '{path}' LIMIT {n}").df()
    data = list(df.itertuples(index=False))
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=1e-6)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    m = pipeline_dp.Metrics
    params = pipeline_dp.AggregateParams(
        metrics=[m.COUNT, m.SUM, m.MEAN, m.PERCENTILE(50)], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=5, max_contributions_per_partition=1, min_value=0, max_value=100)
    ext = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r.user_id,
                                     partition_extractor=lambda r: r.campaign,
                                     value_extractor=lambda r: r.revenue)
    t0 = time.perf_counter()
    res = engine.aggregate(data, params, ext)
    acc.compute_budgets()
    out = list(res)
    took = time.perf_counter() - t0
    print(f"PipelineDP released {len(out)} campaigns")
    return took


def mean_accuracy(seeds: int) -> None:
    n = 1_000_000
    x = np.random.default_rng(0).beta(2, 5, size=n)
    truth = x.mean()
    df = pd.DataFrame({"id": np.arange(n), "x": x})
    q = bdp.table(df, None).agg(m=bdp.mean("x", bounds=(0, 1)))  # a row is a person
    t_np, _ = timed(x.mean, 5)
    for eps in (0.1, 1.0):
        ideal = 1 / (n * eps)
        errs, times = [], []
        for s in range(seeds):
            t0 = time.perf_counter()
            v = q.release(eps, rng=bdp.rng_for_tests(s)).to_pandas().loc[0, "m"]
            times.append(time.perf_counter() - t0)
            errs.append(abs(v - truth))
        line = (f"mean eps={eps}: bayesdp MAE {np.mean(errs):.3g} = {np.mean(errs) / ideal:.2f}x "
                f"1/(n eps), {statistics.median(times) / t_np:.0f}x np.mean")
        for name, f in anchors_mean(x, eps).items():
            e, t = [], []
            for s in range(seeds):
                t0 = time.perf_counter()
                e.append(abs(f(s) - truth))
                t.append(time.perf_counter() - t0)
            line += f"; {name} {np.mean(e) / ideal:.2f}x ideal, {statistics.median(t) / t_np:.0f}x np.mean"
        print(line)


def anchors_mean(x: np.ndarray, eps: float) -> dict[str, Callable[[int], float]]:
    out: dict[str, Callable[[int], float]] = {}
    try:
        from diffprivlib import tools

        out["diffprivlib"] = lambda s: float(tools.mean(x, epsilon=eps, bounds=(0, 1), random_state=s))
    except ImportError as exc:
        print(f"diffprivlib not importable: {str(exc)[:80]}")
    try:
        from pydp.algorithms.laplacian import BoundedMean

        out["pydp"] = lambda s: float(BoundedMean(epsilon=eps, lower_bound=0, upper_bound=1,
                                                  dtype="float").quick_result(x.tolist()))
    except ImportError as exc:
        print(f"PyDP not importable: {exc}")
    return out


def median_accuracy(seeds: int) -> None:
    n = 1_000_000
    x = np.minimum(np.random.default_rng(1).lognormal(3.0, 1.0, size=n), 100.0)
    truth = float(np.median(x))
    df = pd.DataFrame({"id": np.arange(n), "x": x})
    q = bdp.table(df, None).agg(p=bdp.quantile("x", 0.5, bounds=(0, 100)))  # a row is a person
    t_np, _ = timed(lambda: np.median(x), 5)
    errs, times = [], []
    for s in range(seeds):
        t0 = time.perf_counter()
        r = q.release(1.0, rng=bdp.rng_for_tests(s)).to_pandas().iloc[0]
        times.append(time.perf_counter() - t0)
        errs.append(abs(r["p"] - truth))
    line = (f"median eps=1 (true {truth:.3f}): bayesdp median abs error {np.median(errs):.2g}, "
            f"{statistics.median(times) / t_np:.0f}x np.median")
    try:
        from diffprivlib import tools

        t0 = time.perf_counter()
        e = [abs(tools.quantile(x, 0.5, epsilon=1, bounds=(0, 100), random_state=s) - truth)
             for s in range(seeds)]
        t = (time.perf_counter() - t0) / seeds
        line += f"; diffprivlib {np.median(e):.2g} in {t / t_np:.0f}x np.median"
    except ImportError as exc:
        line += f"; diffprivlib not importable ({str(exc)[:60]})"
    try:
        from pydp.algorithms.laplacian import Median

        t0 = time.perf_counter()
        e = [abs(Median(epsilon=1, lower_bound=0, upper_bound=100, dtype="float")
                 .quick_result(x.tolist()) - truth) for _ in range(seeds)]
        t = (time.perf_counter() - t0) / seeds
        line += f"; PyDP Median {np.median(e):.2g} in {t / t_np:.0f}x np.median"
    except ImportError as exc:
        line += f"; PyDP not importable ({exc})"
    print(line)


def bound_once(rows: int, runs: int) -> None:
    """Releases on a table bounded once against the plain GROUP BY (issue 16 §3)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.parquet"
        events(path, rows)
        con = duckdb.connect(config={"preserve_insertion_order": False})
        t = bdp.table(path, "user_id").bounded("campaign", max_groups_per_unit=5)
        median = t.group_by("campaign").agg(
            rows=bdp.count(), revenue=bdp.sum("revenue", bounds=(0, 100)),
            avg=bdp.mean("revenue", bounds=(0, 100)),
            median=bdp.quantile("revenue", 0.5, bounds=(0, 100)))
        public = t.group_by("campaign", keys=range(1000)).agg(
            rows=bdp.count(), revenue=bdp.sum("revenue", bounds=(0, 100)),
            avg=bdp.mean("revenue", bounds=(0, 100)))
        # The same median on bounds not asked before: its grid is counted in the release.
        tops = iter(range(101, 101 + runs))

        def fresh() -> Any:
            return t.group_by("campaign").agg(
                rows=bdp.count(), revenue=bdp.sum("revenue", bounds=(0, 100)),
                avg=bdp.mean("revenue", bounds=(0, 100)),
                median=bdp.quantile("revenue", 0.5, bounds=(0, next(tops)))).release(1.0, 1e-6)

        t0 = time.perf_counter()
        median.release(1.0, 1e-6)
        first = time.perf_counter() - t0
        plain = f"SELECT campaign, count(*), sum(revenue), avg(revenue){{}} FROM '{path}' GROUP BY campaign"
        t = alternating(runs, plain_median=lambda: con.sql(plain.format(", median(revenue)")).fetchall(),
                        median=lambda: median.release(1.0, 1e-6), fresh=fresh,
                        plain=lambda: con.sql(plain.format("")).fetchall(),
                        public=lambda: public.release(1.0))
        print(f"bounded once, {rows:,} rows: first release (bounds) {first:.3f} s; then (median of "
              f"{runs} alternating rounds) with the median, private keys {t['median']:.3f} s = "
              f"{t['median'] / t['plain_median']:.2f}x the plain GROUP BY ({t['plain_median']:.3f} s;"
              f" target 3x; {t['fresh'] / t['plain_median']:.2f}x with bounds not asked before);"
              f" public keys, no median {t['public']:.3f} s = "
              f"{t['public'] / t['plain']:.2f}x the plain GROUP BY ({t['plain']:.3f} s; target 1.5x)",
              flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--pipeline-dp-rows", type=int, default=200_000)
    p.add_argument("--seeds", type=int, default=50)
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--skip-accuracy", action="store_true")
    p.add_argument("--skip-mean", action="store_true", help="accuracy: the median only")
    p.add_argument("--median-seeds", type=int, default=20)
    p.add_argument("--keys-rows", type=int, default=2_000_000)
    p.add_argument("--skip-keys", action="store_true")
    p.add_argument("--floor", action="store_true", help="only the release against the floor")
    p.add_argument("--bounded", action="store_true", help="only releases on a table bounded once")
    p.add_argument("--skew", action="store_true", help="only the per-pair floor, skewed units")
    p.add_argument("--skew-memory", action="store_true", help="only a 20M-row user under 1GB")
    args = p.parse_args()
    if args.skew or args.skew_memory:
        if args.skew:
            skew(args.rows, args.runs)
        if args.skew_memory:
            skew_memory()
        return
    if args.floor or args.bounded:
        if args.floor:
            floor(args.rows, args.runs)
        if args.bounded:
            bound_once(args.rows, args.runs)
        return
    if not args.skip_speed:
        speed(args.rows, args.runs, args.pipeline_dp_rows)
    if not args.skip_keys:
        public_keys(args.keys_rows, args.runs)
    if not args.skip_accuracy:
        if not args.skip_mean:
            mean_accuracy(args.seeds)
        median_accuracy(args.median_seeds)


if __name__ == "__main__":
    main()
