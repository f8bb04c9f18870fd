"""Noise on a float64 vector: bayesdp's secure Laplace and Gaussian against numpy and OpenDP.

numpy's `Generator.laplace` / `normal` (PCG64, floating-point noise that leaks through its low
bits, Mironov 2012) is the speed limit; OpenDP's `make_laplace` / `make_gaussian` (exact, secure)
is the anchor. bayesdp draws from its default OS-seeded CSPRNG. Run with the bench venv:

    .venv-bench/bin/python bench/noise.py [--n 10000000] [--opendp-n 1000000] [--repeats 7]

OpenDP costs tens of µs per value, so it is timed on `--opendp-n` values and scaled linearly to
`--n` (the output says so). Peak memory of the bayesdp releases is measured with tracemalloc
(numpy reports its buffers to it) and the process's peak RSS with getrusage.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import resource
from typing import Any

import numpy as np

import bayesdp
from timing import best_of, paired, peak_bytes

GB = 2**30
TARGET_VS_NUMPY = 3.0
TARGET_VS_OPENDP = 100.0


def opendp_measurements(scale: float) -> dict[str, Any]:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    return {
        "laplace": dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale),
        "gaussian": dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale),
    }


def check_noise(name: str, x: np.ndarray, y: np.ndarray, grid: float | None, std: float) -> str:
    """Standard deviation of the noise against its target; for bayesdp, that outputs are on the grid."""
    noise = np.asarray(y, dtype=np.float64) - x
    msg = f"noise sd {noise.std():.4f} (expected {std:.4f})"
    if grid is not None:
        on_grid = bool(np.all(np.asarray(y) / grid == np.rint(np.asarray(y) / grid)))
        msg += f", all on grid {grid:.3g}: {on_grid}"
        if not on_grid:
            raise SystemExit(f"{name}: outputs off the grid")
    # sd(s/σ) ≈ sqrt((κ - 1)/(4m)) with kurtosis κ <= 6 (Laplace): 6 of those is a gross error.
    if abs(noise.std() / std - 1) > 6 * np.sqrt(5 / (4 * noise.size)):
        raise SystemExit(f"{name}: noise sd {noise.std()} far from {std}")
    return msg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--opendp-n", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    n, n_odp = args.n, args.opendp_n

    print(
        f"bench/noise.py  {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC  "
        f"python {platform.python_version()}  numpy {np.__version__}  {platform.machine()}"
    )
    print(
        f"n = {n:,} float64 values in [0, 100); bayesdp uses its default secure rng (AES-CTR, "
        f"OS-seeded); numpy uses PCG64; OpenDP timed on {n_odp:,} values, scaled x{n / n_odp:g}"
    )

    x = np.random.default_rng(0).uniform(0, 100, n)
    insecure = np.random.default_rng(1)
    mechs = {
        "laplace": bayesdp.Laplace(1.0, sensitivity=1.0),
        "gaussian": bayesdp.Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0),
    }
    numpy_noise = {
        "laplace": lambda b: x + insecure.laplace(0.0, b, n),
        "gaussian": lambda s: x + insecure.normal(0.0, s, n),
    }
    expected_sd = {"laplace": np.sqrt(2.0), "gaussian": 1.0}
    rows = []
    failed = []
    for name, mech in mechs.items():
        scale = mech.scale
        release, insecure_release = (lambda m=mech: m.release(x)), (lambda f=numpy_noise[name], s=scale: f(s))
        print(f"  bayesdp {name}: {check_noise(name, x, release(), mech.grid, expected_sd[name] * scale)}")
        print(f"  numpy {name}: {check_noise(name, x, insecure_release(), None, expected_sd[name] * scale)}")
        peak = peak_bytes(release)
        t_bdp, t_np, ratio = paired(release, insecure_release, args.repeats)
        odp = opendp_measurements(scale)[name]
        part = x[:n_odp]
        t_odp_part, _, y = best_of(lambda o=odp, p=part: o(p), 1)
        print(f"  opendp {name}: {check_noise(name, part, y, None, expected_sd[name] * scale)}")
        del y
        t_odp = t_odp_part * n / n_odp
        rows.append((name, scale, t_bdp, t_np, ratio, t_odp, t_odp_part, peak))
        if ratio > TARGET_VS_NUMPY:
            failed.append(f"{name}: {ratio:.2f}x numpy (target <= {TARGET_VS_NUMPY:g}x)")
        if t_odp / t_bdp < TARGET_VS_OPENDP:
            failed.append(
                f"{name}: {t_odp / t_bdp:.0f}x faster than OpenDP (target >= {TARGET_VS_OPENDP:g}x)"
            )
        if peak >= GB:
            failed.append(f"{name}: peak {peak / GB:.2f} GB (target < 1 GB)")

    print()
    print(
        f"| noise (n = {n:,}) | scale | bayesdp CPU s | numpy CPU s | OpenDP CPU s (scaled from {n_odp:,}) "
        "| bayesdp / numpy (median paired ratio) | OpenDP / bayesdp | bayesdp peak MB |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, scale, t_bdp, t_np, ratio, t_odp, t_odp_part, peak in rows:
        print(
            f"| {name} | {scale:.4g} | {t_bdp:.3f} | {t_np:.3f} | {t_odp:.1f} ({t_odp_part:.1f} measured) "
            f"| {ratio:.2f}x | {t_odp / t_bdp:.0f}x | {peak / 2**20:.0f} |"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    print(
        f"\nprocess peak RSS {rss / 2**20:.0f} MB (input, outputs and OpenDP included); "
        f"times are the best of {args.repeats} alternating rounds (OpenDP: one run); ratios use CPU time"
    )
    if rss >= GB:
        failed.append(f"process peak RSS {rss / GB:.2f} GB (target < 1 GB)")
    for line in failed:
        print(f"TARGET MISSED: {line}")
    if not failed:
        print("all targets met: bayesdp within 3x numpy, >= 100x faster than OpenDP, peak < 1 GB")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
