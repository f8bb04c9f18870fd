"""Row-level releases of data already in memory (issue 16 §2b): bayesdp against np.mean and the anchors.

Run with the anchor environment:  .venv-bench/bin/python bench/inmemory.py [--n 1000000] [--repeats 30]

The mean of n Beta(2, 5) values in [0, 1] at ε = 1, one row per person (`privacy_unit=None`):
np.mean; bayesdp's release (value, interval, guarantee) from a pandas frame, an Arrow table and
a mapping of numpy arrays (served by numpy, `tables/engines/arrays.py`) and from a DuckDB
relation of the same frame (the DuckDB engine); diffprivlib's `tools.mean`; OpenDP's clamp →
sized mean → Laplace chain. Then count, sum and mean per group with 10 public keys, numpy
against DuckDB. Each line gives the best wall time of `--repeats` runs and the median of the
per-round CPU-time ratios to np.mean, the two run alternately (bench/timing.py: `paired`);
the machine may be shared, so read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

import bayesdp as bdp
from timing import best_of, paired

TARGET = 10.0  # issue 16 §2b: at most 10x np.mean


def anchors(x: np.ndarray, eps: float) -> dict[str, Callable[[], Any]]:
    out: dict[str, Callable[[], Any]] = {}
    try:
        from diffprivlib import tools

        out["diffprivlib tools.mean"] = lambda: tools.mean(x, epsilon=eps, bounds=(0, 1))
    except ImportError as exc:
        print(f"diffprivlib not importable: {str(exc)[:80]}")
    try:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=len(x)), dp.symmetric_distance()
        chain = dp.binary_search_chain(
            lambda s: space >> dp.t.then_clamp((0.0, 1.0)) >> dp.t.then_mean() >> dp.m.then_laplace(s),
            d_in=2, d_out=eps)
        out["OpenDP clamp, mean, Laplace"] = lambda: chain(x)
    except ImportError as exc:
        print(f"OpenDP not importable: {str(exc)[:80]}")
    return out


def line(name: str, run: Callable[[], Any], base: Callable[[], Any], repeats: int) -> float:
    _, wall, _ = best_of(run, repeats)
    _, _, ratio = paired(run, base, repeats)
    print(f"  {name:<34} {wall * 1e3:8.2f} ms  {ratio:7.1f}x np.mean")
    return ratio


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=30)
    args = p.parse_args()
    n, eps = args.n, 1.0
    x = np.random.default_rng(0).beta(2, 5, size=n)
    frame = pd.DataFrame({"x": x, "g": np.arange(n) % 10})
    mean = bdp.mean("x", bounds=(0, 1))
    sources = {"bayesdp, pandas frame": frame, "bayesdp, Arrow table": pa.Table.from_pandas(frame),
               "bayesdp, numpy arrays": {"x": x, "g": frame["g"].to_numpy()},
               "bayesdp, DuckDB relation (DuckDB)": duckdb.from_df(frame)}
    base = x.mean
    _, wall, _ = best_of(base, args.repeats)
    print(f"mean of {n:,} values, ε={eps}, privacy_unit=None")
    print(f"  {'np.mean':<34} {wall * 1e3:8.2f} ms  {1.0:7.1f}x np.mean")
    ratios = {}
    for name, source in sources.items():
        q = bdp.table(source, None).agg(m=mean)
        ratios[name] = line(name, lambda q=q: q.release(eps), base, args.repeats)
    for name, run in anchors(x, eps).items():
        line(name, run, base, args.repeats)
    print("count, sum and mean per group, 10 public keys")
    for name in ("bayesdp, pandas frame", "bayesdp, DuckDB relation (DuckDB)"):
        q = bdp.table(sources[name], None).group_by("g", keys=list(range(10))).agg(
            n=bdp.count(), s=bdp.sum("x", bounds=(0, 1)), m=mean)
        line(name, lambda q=q: q.release(eps), base, args.repeats)
    fast = [r for k, r in ratios.items() if "DuckDB" not in k]
    print(f"in-memory ungrouped mean: {max(fast):.1f}x np.mean at most (target {TARGET:.0f}x): "
          f"{'met' if max(fast) <= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
