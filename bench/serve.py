"""The service over loopback on a 1M-row dataset: preview latency, release overhead against the
same release in process, and holdout queries per second, alone and under 8 concurrent clients;
under load, release throughput and /health latency with 16 and 64 clients releasing at once; and
the latency the deadlines cost (`padding`: the same requests of each shape to a second server
with `timing = { pad = false }`, in alternate passes: the ratio of the p50s is the deadline over the
typical time; with the share of requests cut off at their deadline, and a CASE whose costly
branch every row or no row takes).

    .venv/bin/python bench/serve.py [--rows 1000000] [--requests 200] [--seconds 15]
                                    [--only preview,release,holdout,load,padding]
                                    [--timing "margin = 1.5, lanes = 1"]

Starts `bayesdp serve` (uvicorn, one process) on 127.0.0.1 and a free port in a temporary
directory. The in-process release runs on the same data in the same DuckDB setup (a table in
an in-memory database), in this process. The machine is shared: absolute times are noisy; the
overhead is measured in one run, alternating HTTP and in-process releases, as the median of the
differences between each HTTP release and the in-process one that follows it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np
import pandas as pd

import bayesdp as bdp
from bayesdp.errors import CuratorWarning
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


def write(root: Path, rows: int, timing: str) -> Path:
    rng = np.random.default_rng(0)
    events = pd.DataFrame({"user": rng.integers(0, rows // 5, rows), "shop": rng.choice(list("abcd"), rows),
                           "spend": rng.exponential(20.0, rows)})
    events.to_parquet(root / "events.parquet", index=False)
    events.iloc[: rows // 2, 1:].to_parquet(root / "train.parquet", index=False)
    events.iloc[rows // 2 :, 1:].to_parquet(root / "holdout.parquet", index=False)
    line = f"timing = {{ {timing} }}\n" if timing else ""
    (root / "service.toml").write_text(CONFIG.replace('state = "state"\n', 'state = "state"\n' + line))
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


def under_load(url: str, headers: dict[str, str], body: dict[str, Any], clients: int,
               seconds: float) -> str:
    """`clients` clients releasing back to back for `seconds`, /health probed every 0.1 s meanwhile:
    releases per second, refusals for a full queue (503), and the /health latency."""
    counts = {201: 0, 503: 0, "deadline": 0}
    health: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
            while time.monotonic() < stop:
                r = http.post("/v1/releases", json=body)
                status = "deadline" if cut_off(r) else r.status_code
                if status not in counts:
                    r.raise_for_status()
                with lock:
                    counts[status] += 1

    def probe() -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            while time.monotonic() < stop:
                health.extend(timed(lambda: http.get("/health").raise_for_status(), 1))
                time.sleep(0.1)

    httpx.post(url + "v1/releases", json=body, headers=headers, timeout=120)  # times a new shape
    stop = time.monotonic() + seconds
    t = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)] + [threading.Thread(target=probe)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    return (f"{clients} clients: {counts[201] / wall:.1f} releases/s, {counts[503]} answered 503 (full), "
            f"{counts['deadline']} cut off at their deadline; "
            f"/health p50 {ms(health, 0.5)}, p99 {ms(health, 0.99)}, max {ms(health, 1.0)}")


def cut_off(r: httpx.Response) -> bool:
    """Whether the service answered that the request passed its deadline (503 `deadline`)."""
    return r.status_code == 503 and r.json()["error"]["code"] == "deadline"


def holdout_body(i: int) -> dict[str, list[str]]:
    """A different expression each time, as an analyst's adaptive queries are (nothing is reused)."""
    return {"queries": [f"spend > {i % 97 + 0.5}"]}


PRIVATE = {**{k: v for k, v in SPEC.items() if k != "keys"}, "delta": 1e-9}
UNGROUPED = {"epsilon": 0.001, "aggregates": {"n": {"kind": "count"},
                                              "s": {"kind": "sum", "column": "spend", "bounds": [0, 100]}}}
SQL = "SELECT shop, COUNT(*) AS n, AVG(spend) AS spend FROM events GROUP BY shop"

# Every row takes the costly branch (a string grown 16-fold, the checker's limit) or none does.
COSTLY = ("CASE WHEN spend >= {v} THEN length(replace(replace(replace(replace(CAST(spend AS VARCHAR), "
          "'1', '11'), '2', '22'), '3', '33'), '4', '44')) ELSE 0 END")


PASSES = 2  # passes of every shape on each server (`padding`), alternated
QUIET = 4.0  # seconds before each pass: more than the load probe's three rounds at one a second


def padding(root: Path, config: Path, padded_url: str, headers: dict[str, str], n: int) -> None:
    """p50 latency with deadlines (the running server) and without (a second one): `PASSES`
    passes on each, alternated, `n` requests of each shape a pass."""
    unpadded = root / "unpadded.toml"
    text = "".join(x for x in config.read_text().splitlines(keepends=True) if not x.startswith("timing ="))
    unpadded.write_text(text.replace('state = "state"', 'state = "state-unpadded"\ntiming = { pad = false }'))
    state = State(load_config(unpadded))
    token = state.add_analyst("bench")
    state.set_budget("bench", "events", Budget(1e6, 1e-6, "basic"))
    state.close()
    process, url = start(unpadded)
    try:
        padded_http = httpx.Client(base_url=padded_url, headers=headers, timeout=120)
        plain_http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
        bodies: dict[str, tuple[str, Callable[[int], Any]]] = {
            "release, public keys": ("/v1/releases", lambda i: {"dataset": "events", "spec": SPEC}),
            "release, private keys": ("/v1/releases", lambda i: {"dataset": "events", "spec": PRIVATE}),
            "release, count and sum, no grouping": ("/v1/releases", lambda i: {"dataset": "events",
                                                                               "spec": UNGROUPED}),
            "release, a filter": ("/v1/releases", lambda i: {"dataset": "events", "spec": {
                **SPEC, "where": [f"spend > {i % 97 + 0.5}"]}}),
            "SQL": ("/v1/releases", lambda i: {"dataset": "events", "epsilon": 0.001, "sql": SQL}),
            "holdout": ("/v1/holdouts/model/queries", holdout_body),
            "CASE, every row costly": ("/v1/releases", lambda i: case_body(0)),
            "CASE, no row costly": ("/v1/releases", lambda i: case_body(1e9)),
        }
        times: dict[tuple[str, bool], list[float]] = {(name, pad): [] for name in bodies
                                                      for pad in (True, False)}
        cut = padded_total = 0
        # Passes, unpadded then padded, repeated: the padded server's load probe (every second,
        # over its last three rounds) must not see the other server's work, which a client of
        # one server alone would not run beside its requests.
        for pad, http in [(False, plain_http), (True, padded_http)] * PASSES:
            time.sleep(QUIET)
            for name, (path, body) in bodies.items():
                for i in range(n + 2):
                    t = time.perf_counter()
                    r = http.post(path, json=body(i))
                    took = time.perf_counter() - t
                    if pad and cut_off(r):
                        cut += 1
                    else:
                        r.raise_for_status()
                    if i >= 2:  # the first of a shape measures it on synthetic rows
                        times[name, pad].append(took)
                        padded_total += pad
        medians = {key: statistics.median(ts) for key, ts in times.items()}
        for name in bodies:
            print(f"{name}: p50 {ms(times[name, False], 0.5)} without deadlines, "
                  f"{ms(times[name, True], 0.5)} with (x{medians[name, True] / medians[name, False]:.2f})")
        print(f"cut off at their deadline: {cut} of {padded_total} padded requests")
        gap = medians["CASE, every row costly", False] - medians["CASE, no row costly", False]
        headroom = medians["CASE, no row costly", True] - medians["CASE, no row costly", False]
        print(f"CASE branches: every row costly minus none, without deadlines {1000 * gap:.1f} ms; "
              f"the padding absorbs {1000 * headroom:.1f} ms (deadline minus typical time)")
    finally:
        process.terminate()
        process.wait(timeout=30)


def case_body(v: float) -> dict[str, Any]:
    return {"dataset": "events", "spec": {**SPEC, "aggregates": {
        "x": {"kind": "sum", "column": COSTLY.format(v=v), "bounds": [0, 100]}}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each load run")
    parser.add_argument("--timing", default="",
                        help="the service's [timing] table, e.g. 'margin = 1.5, lanes = 1'")
    parser.add_argument("--only", default="preview,release,holdout,load,padding",
                        help="comma-separated parts to run (default: all)")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    warnings.simplefilter("ignore", CuratorWarning)  # the in-process release's exact counts
    print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; rows: {args.rows:,}; load average "
          f"{os.getloadavg()[0]:.1f} at the start; shared 2-core machine, loopback")
    root = Path(tempfile.mkdtemp(prefix="bayesdp-bench-serve-"))
    config = write(root, args.rows, args.timing)
    state = State(load_config(config))
    token = state.add_analyst("bench")
    state.set_budget("bench", "events", Budget(1e6, 1e-6, "basic"))
    state.close()
    process, url = start(config)
    headers = {"Authorization": f"Bearer {token}"}
    counter = itertools.count()

    def per_thread(fn: Callable[[httpx.Client], object]) -> Callable[[], object]:
        """`fn` with one kept-alive connection per client thread."""
        local_client = threading.local()

        def call() -> object:
            if not hasattr(local_client, "http"):
                local_client.http = httpx.Client(base_url=url, headers=headers, timeout=120)
            return fn(local_client.http)
        return call

    def post(path: str, body: Callable[[], Any]) -> Callable[[], object]:
        return per_thread(lambda c: c.post(path, json=body()).raise_for_status())

    preview = post("/v1/preview", lambda: {"dataset": "events", "spec": SPEC})
    release = post("/v1/releases", lambda: {"dataset": "events", "spec": SPEC})
    holdout = post("/v1/holdouts/model/queries", lambda: holdout_body(next(counter)))
    n = args.requests
    try:
        health = timed(per_thread(lambda c: c.get("/health").raise_for_status()), n)
        print(f"GET /health (an HTTP round trip, no work): p50 {ms(health, 0.5)}")
        if "preview" in parts:
            timed(preview, 5)
            p = timed(preview, n)
            pc, _ = concurrent(preview, 8, max(5, n // 8))
            print(f"preview: p50 {ms(p, 0.5)}, p99 {ms(p, 0.99)}; 8 clients: p50 {ms(pc, 0.5)}, "
                  f"p99 {ms(pc, 0.99)}")
        if "release" in parts:
            local_con = duckdb.connect()
            local_con.execute(f"CREATE TABLE events AS SELECT * FROM '{root / 'events.parquet'}'")
            local = (bdp.table(local_con.cursor().table("events"), "user")
                     .group_by("shop", keys=list("abcd"))
                     .agg(users=bdp.count_units(), spend=bdp.mean("spend", bounds=(0, 100))))
            timed(release, 2)
            remote, in_process = [], []
            for _ in range(max(5, n // 10)):  # alternated, so both see the same load
                remote += timed(release, 1)
                in_process += timed(lambda: local.release(epsilon=0.001, max_groups_per_unit=2,
                                                          max_rows_per_group=2), 1)
            rc, _ = concurrent(release, 8, max(2, n // 40))
            # Each HTTP release against the in-process one run right after it, under the same load.
            overhead = statistics.median(r - i for r, i in zip(remote, in_process, strict=True))
            print(f"release over HTTP: p50 {ms(remote, 0.5)}; in process: p50 {ms(in_process, 0.5)}; "
                  f"overhead (median of paired differences) {1000 * overhead:.1f} ms; 8 clients: "
                  f"p50 {ms(rc, 0.5)}, p99 {ms(rc, 0.99)}")
        if "holdout" in parts:
            timed(holdout, 20)
            h, wall1 = concurrent(holdout, 1, max(20, n))
            hc, wall8 = concurrent(holdout, 8, max(5, n // 8 * 2))
            print(f"holdout query: one client p50 {ms(h, 0.5)}, p99 {ms(h, 0.99)}, {len(h) / wall1:.0f}/s; "
                  f"8 clients: p50 {ms(hc, 0.5)}, p99 {ms(hc, 0.99)}, {len(hc) / wall8:.0f}/s")
        if "load" in parts:
            for clients in (16, 64):
                print("under load:", under_load(url, headers, {"dataset": "events", "spec": SPEC}, clients,
                                                args.seconds))
        if "padding" in parts:
            padding(root, config, url, headers, max(10, n // 10))
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
