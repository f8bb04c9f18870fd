"""The service over loopback on a 1M-row dataset: preview latency, release overhead against the
same release in process, and holdout queries per second, alone and under 8 concurrent clients.

    .venv/bin/python bench/serve.py [--rows 1000000] [--requests 200]

Starts `bayesdp serve` (uvicorn, one process) on 127.0.0.1 and a free port in a temporary
directory. The in-process release runs on the same data in the same DuckDB setup (a table in
an in-memory database), in this process. The machine is shared: absolute times are noisy; the
overhead is measured in one run, alternating HTTP and in-process releases.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import httpx
import numpy as np
import pandas as pd

import bayesdp as bdp
from bayesdp.serve.config import Budget, load_config
from bayesdp.serve.state import State

CONFIG = """
state = "state"
max_body_bytes = 1_000_000
rate_per_minute = 10000000
[datasets.events]
source = "events.parquet"
privacy_unit = "user"
max_groups_per_unit = 2
max_rows_per_group = 2
budget = { epsilon = 1.0, delta = 1e-6 }
[datasets.events.columns]
shop = { domain = ["a", "b", "c", "d"] }
spend = { bounds = [0, 100] }
[holdouts.model]
train = "train.parquet"
holdout = "holdout.parquet"
threshold = 0.04
sigma = 0.01
budget = 1000000
"""
SPEC = {"group_by": ["shop"], "keys": ["a", "b", "c", "d"], "epsilon": 0.001,
        "aggregates": {"users": {"kind": "count_units"},
                       "spend": {"kind": "mean", "column": "spend", "bounds": [0, 100]}}}


def write(root: Path, rows: int) -> Path:
    rng = np.random.default_rng(0)
    events = pd.DataFrame({"user": rng.integers(0, rows // 5, rows), "shop": rng.choice(list("abcd"), rows),
                           "spend": rng.exponential(20.0, rows)})
    events.to_parquet(root / "events.parquet", index=False)
    events.iloc[: rows // 2, 1:].to_parquet(root / "train.parquet", index=False)
    events.iloc[rows // 2 :, 1:].to_parquet(root / "holdout.parquet", index=False)
    (root / "service.toml").write_text(CONFIG)
    return root / "service.toml"


def start(config: Path) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "bayesdp", "serve", "--config", str(config), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip().removeprefix("URL: ")
    for _ in range(600):
        try:
            httpx.get(url + "health", timeout=1)
            return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("the server did not start")


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def concurrent(fn: Callable[[], object], clients: int, per_client: int) -> tuple[list[float], float]:
    times: list[float] = []
    lock = threading.Lock()

    def work() -> None:
        mine = timed(fn, per_client)
        with lock:
            times.extend(mine)

    t = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return times, time.perf_counter() - t


def ms(times: list[float], q: float) -> str:
    return f"{1000 * float(np.quantile(times, q)):.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bayesdp-bench-serve-"))
    config = write(root, args.rows)
    state = State(load_config(config))
    token = state.add_analyst("bench")
    state.set_budget("bench", "events", Budget(1e6, 1e-6, "basic"))
    state.close()
    process, url = start(config)
    try:
        local_con = duckdb.connect()
        local_con.execute(f"CREATE TABLE events AS SELECT * FROM '{root / 'events.parquet'}'")
        local = (bdp.table(local_con.cursor().table("events"), "user").group_by("shop", keys=list("abcd"))
                 .agg(users=bdp.count_units(), spend=bdp.mean("spend", bounds=(0, 100))))
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
            def preview() -> None:
                http.post("/v1/preview", json={"dataset": "events", "spec": SPEC}).raise_for_status()

            def release() -> None:
                http.post("/v1/releases", json={"dataset": "events", "spec": SPEC}).raise_for_status()

            def holdout() -> None:
                http.post("/v1/holdouts/model/queries", json={"queries": ["spend > 20"]}).raise_for_status()

            timed(preview, 5)
            timed(release, 2)
            health = timed(lambda: http.get("/health").raise_for_status(), args.requests)
            p = timed(preview, args.requests)
            remote, in_process = [], []
            for _ in range(max(5, args.requests // 10)):
                remote += timed(release, 1)
                in_process += timed(lambda: local.release(epsilon=0.001, max_groups_per_unit=2,
                                                          max_rows_per_group=2), 1)
            h = timed(holdout, max(20, args.requests // 4))

            def fresh(fn: Callable[[httpx.Client], object]) -> Callable[[], object]:
                local_client = threading.local()

                def call() -> object:
                    if not hasattr(local_client, "http"):
                        local_client.http = httpx.Client(base_url=url, headers=headers, timeout=120)
                    return fn(local_client.http)
                return call

            body = {"dataset": "events", "spec": SPEC}
            pc, _ = concurrent(fresh(lambda c: c.post("/v1/preview", json=body)), 8,
                               max(5, args.requests // 8))
            rc, _ = concurrent(fresh(lambda c: c.post("/v1/releases", json=body)), 8,
                               max(2, args.requests // 40))
            hc, wall = concurrent(fresh(lambda c: c.post("/v1/holdouts/model/queries",
                                                         json={"queries": ["spend > 20"]})),
                                  8, max(5, args.requests // 16))
    finally:
        process.terminate()
        process.wait(timeout=30)
    overhead = statistics.median(remote) - statistics.median(in_process)
    print(f"rows: {args.rows:,}; shared 2-core machine, loopback; {time.strftime('%Y-%m-%d')}")
    print(f"GET /health (an HTTP round trip, no work): p50 {ms(health, 0.5)}")
    print(f"preview: p50 {ms(p, 0.5)}, p99 {ms(p, 0.99)}; 8 clients: p50 {ms(pc, 0.5)}, p99 {ms(pc, 0.99)}")
    print(f"release over HTTP: p50 {ms(remote, 0.5)}; in process: p50 {ms(in_process, 0.5)}; "
          f"overhead {1000 * overhead:.1f} ms; 8 clients: p50 {ms(rc, 0.5)}, p99 {ms(rc, 0.99)}")
    print(f"holdout query: p50 {ms(h, 0.5)} ({1 / statistics.median(h):.0f}/s one client); 8 clients: "
          f"{len(hc) / wall:.0f}/s, p99 {ms(hc, 0.99)}")


if __name__ == "__main__":
    main()
