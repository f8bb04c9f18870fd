"""Audit a bayesdp Laplace with 10^7 runs per input, against the same procedure in numpy alone.

bayesdp: `bayesdp.audit(bayesdp.Laplace(1), 0, 1, epsilon=1, samples=N)` (selection N/10 runs
per input over all its event families, then N fresh runs per input; exact discrete-Laplace noise
on the grid from the CSPRNG). Baseline: the same recipe written directly in numpy and scipy
(float `Generator.laplace` on PCG64, threshold and interval events between 64 quantile cuts,
Clopper–Pearson bounds), i.e. the cheapest way to run this audit at all. Run:

    .venv/bin/python bench/audit.py [--samples 10000000] [--repeats 1]

Prints the wall time, runs per second (both inputs, selection and test) and the ratio. The
machine is shared, so absolute times are noisy; the ratio is measured in one process.
"""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import time

import numpy as np
from scipy.stats import beta

import bayesdp

TARGET_SECONDS = 30.0
CHUNK = 1_000_000
CUTS = 64


def numpy_audit(samples: int, alpha: float, rng: np.random.Generator) -> float:
    """ε lower bound by the semantics-audit.md §2.4 recipe, numpy + scipy only (float Laplace)."""
    selection = samples // 10
    x0, x1 = rng.laplace(0.0, 1.0, selection), rng.laplace(1.0, 1.0, selection)
    half = selection // 2
    cuts = np.quantile(np.concatenate([x0[:half], x1[:half]]), np.linspace(0, 1, CUTS + 1))
    edges = np.concatenate([[-np.inf], cuts, [np.inf]])
    le0 = np.searchsorted(np.sort(x0[half:]), edges, side="right")
    le1 = np.searchsorted(np.sort(x1[half:]), edges, side="right")
    i, k = np.triu_indices(edges.size, 1)
    c0, c1 = le0[k] - le0[i], le1[k] - le1[i]
    n = selection - half

    def bound(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
        lo = np.where(a > 0, beta.ppf(alpha / 2, np.maximum(a, 1), m - a + 1), 0.0)
        up = np.where(b < m, beta.ppf(1 - alpha / 2, b + 1, np.maximum(m - b, 1)), 1.0)
        with np.errstate(divide="ignore"):
            return np.log(lo) - np.log(up)

    fwd, bwd = bound(c0, c1, n), bound(c1, c0, n)
    swap = bwd.max() > fwd.max()
    m = int(np.argmax(bwd if swap else fwd))
    lo_edge, hi_edge = edges[i[m]], edges[k[m]]
    locs = (1.0, 0.0) if swap else (0.0, 1.0)
    hits = []
    for loc in locs:
        h = 0
        for start in range(0, samples, CHUNK):
            y = rng.laplace(loc, 1.0, min(CHUNK, samples - start))
            h += int(np.count_nonzero((y > lo_edge) & (y <= hi_edge)))
        hits.append(h)
    return float(bound(np.array([hits[0]]), np.array([hits[1]]), samples)[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args()
    n = args.samples
    runs = 2 * (n + n // 10)  # both inputs, selection and test
    mech = bayesdp.Laplace(1.0)

    best_bdp, best_np = math.inf, math.inf
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = bayesdp.audit(mech, 0.0, 1.0, epsilon=1.0, samples=n, alpha=args.alpha)
        best_bdp = min(best_bdp, time.perf_counter() - start)
        start = time.perf_counter()
        eps_np = numpy_audit(n, args.alpha, np.random.default_rng())
        best_np = min(best_np, time.perf_counter() - start)

    print(f"# bench/audit.py  {datetime.date.today()}  {platform.processor() or platform.machine()}"
          f"  (shared machine, best of {args.repeats})")
    print(f"samples per input (test): {n:,}; runs drawn in total: {runs:,}")
    print(f"bayesdp.audit(Laplace(1))    {best_bdp:7.2f} s  {runs / best_bdp:12,.0f} runs/s  "
          f"ε_LB = {result.epsilon_lower:.4f} ({'passed' if result.passed else 'FAILED'})")
    print(f"numpy-only recipe            {best_np:7.2f} s  {runs / best_np:12,.0f} runs/s  "
          f"ε_LB = {eps_np:.4f}")
    print(f"ratio bayesdp / numpy: {best_bdp / best_np:.2f}x; target: bayesdp under "
          f"{TARGET_SECONDS:g} s -> {'met' if best_bdp < TARGET_SECONDS else 'MISSED'}")
    print(f"witness: {result.event}")
    return 0 if best_bdp < TARGET_SECONDS and result.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
